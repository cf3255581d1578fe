// linear_q's gemm route on matrix cores (linear_q.h, gemm_takes_mma): y = x w^T for every
// weight format through subgroup matrices, f16 x f16 -> f32, 16 x 16 x 16 per multiply-add.
// A workgroup (WG = 256 threads: 8 subgroups of 32) makes a MMA_BM x BN (64 or 128 x 128) tile
// of y. Per K step of 64 (two halves of 32, each loaded and decoded as the int8 gemm's step),
// the x tile goes to workgroup memory as f16, and the weight tile is decoded there to f16 values (q * scale - min, with the K-quants' sub-block scales: gemm_qwords
// and gemm_col_scale, the int8 gemm's own decoding), so the f32 sums need no per-group factors.
// Subgroup s owns rows MMA_BM / 2 * (s / 4) and columns 32 (s % 4) of the tile: MMA_BM / 32 x 2
// result matrices. The next step's words are loaded before this step's multiplies, as in the
// int8 gemm: 64 values a step keep twice the loads in flight per barrier. The tiles' rows are
// MMA_LD values apart (64 + 8: the pad spreads the rows that a matrix load reads together over
// the memory banks).
enable f16;
enable chromium_experimental_subgroup_matrix;
// Each subgroup loads and stores its own matrices (offsets from lid / MMA_SG): uniform within a
// subgroup, which the WGSL analysis cannot see (it asks for workgroup uniformity).
diagnostic(off, chromium.subgroup_matrix_uniformity);
//! use linear_q

override MMA_BM: u32 = 64u;  // rows of y per workgroup: 64 or 128 (linear_q.cpp gemm_mma_bm)
const MMA_BK: u32 = 64u;     // K values per step: two halves of 32
const MMA_T: u32 = 16u;      // the matrices' M = N = K
var<workgroup> mma_a: array<f16, MMA_MAX_BM * MMA_LD>;  // x tile [MMA_BM][64], row-major
var<workgroup> mma_b: array<f16, BN * MMA_LD>;          // weight tile [BN][64]: K x N, column-major
var<workgroup> mma_c: array<f32, (WG / MMA_SG) * MMA_T * MMA_T>;  // one 16 x 16 result per subgroup

struct MmaStep {
  xa: array<vec4<f32>, 4>,    // the thread's vec4s of the x tile (MMA_BM / 32 of them)
  bw: array<u32, 8>,          // its weight words, raw (gemm_fetch_b's (lo, hi) per load)
  cs: array<ColScale, 4>,     // the factors of each load's column
}

fn mma_fetch(m0: u32, n0: u32, k0: u32, lid: u32) -> MmaStep {
  var st: MmaStep;
  for (var e = 0u; e < MMA_BM / 32u; e++) {
    let idx = lid + WG * e;  // row idx / 8, vec4 idx % 8 of the step's 32 values
    st.xa[e] = vec4<f32>(0.0);
    if (m0 + idx / 8u < p.m) { st.xa[e] = x4[(m0 + idx / 8u) * (p.k / 4u) + k0 / 4u + idx % 8u]; }
  }
  let loads = select(4u, 2u, BITS == 4u || BITS == 5u);
  for (var e = 0u; e < loads; e++) {
    let b = gemm_fetch_b(n0, k0, lid, e);
    st.bw[2u * e] = b.x;
    st.bw[2u * e + 1u] = b.y;
    let n = n0 + b_column(lid, e);
    st.cs[e] = ColScale(0.0, 0.0, 0u);
    if (n < p.n) { st.cs[e] = gemm_col_scale(n, k0); }
  }
  return st;
}

// A half step of zeros (past K): x and the factors zero, so every value it stores is zero.
fn mma_zero() -> MmaStep {
  var st: MmaStep;
  for (var e = 0u; e < 4u; e++) {
    st.xa[e] = vec4<f32>(0.0);
    st.cs[e] = ColScale(0.0, 0.0, 0u);
  }
  for (var e = 0u; e < 8u; e++) { st.bw[e] = 0u; }
  return st;
}

// The factors (a, b) of a column's values in half hf of the step: value = q * a - b.
fn mma_factors(c: ColScale, hf: u32) -> vec2<f32> {
  if (BITS == 6u || BITS == 3u) { return vec2<f32>(c.s * f32(i8_at(c.k6, hf)), 0.0); }
  if (BITS == 2u) {
    return vec2<f32>(c.s * f32((c.k6 >> (8u * hf)) & 15u), c.mn * f32((c.k6 >> (8u * hf + 4u)) & 15u));
  }
  if (AFFINE) { return vec2<f32>(c.s, c.mn); }
  return vec2<f32>(c.s, 0.0);
}

// Bytes 0 and 2 of the int8 word q (gemm_qwords: signed, or unsigned for AFFINE and q2k) as
// exact f32 values: each byte, made unsigned, goes into the mantissa of the f16 1024.0.
fn mma_bytes02(q: u32) -> vec2<f32> {
  let sgn = !(AFFINE || BITS == 2u);
  let u = select(q, q ^ 0x80808080u, sgn);
  return unpack2x16float((u & 0x00FF00FFu) | 0x64006400u) - select(1024.0, 1152.0, sgn);
}

// Four values of a column: the int8 word q times the factors f, at positions at + 0, at + d,
// at + 2 d, at + 3 d of mma_b (bytes 0, 1, 2, 3 of q).
fn mma_put4(q: u32, f: vec2<f32>, at: u32, d: u32) {
  let v02 = vec2<f16>(fma(mma_bytes02(q), vec2<f32>(f.x), vec2<f32>(-f.y)));
  let v13 = vec2<f16>(fma(mma_bytes02(q >> 8u), vec2<f32>(f.x), vec2<f32>(-f.y)));
  mma_b[at] = v02.x;
  mma_b[at + d] = v13.x;
  mma_b[at + 2u * d] = v02.y;
  mma_b[at + 3u * d] = v13.y;
}

// Half h of the step's tiles: the 32 K values from k (st fetched at k).
fn mma_store(st: MmaStep, k: u32, h: u32, lid: u32) {
  for (var e = 0u; e < MMA_BM / 32u; e++) {
    let idx = lid + WG * e;
    let at = (idx / 8u) * MMA_LD + 32u * h + 4u * (idx % 8u);
    let xh = vec4<f16>(st.xa[e]);
    mma_a[at] = xh.x;
    mma_a[at + 1u] = xh.y;
    mma_a[at + 2u] = xh.z;
    mma_a[at + 3u] = xh.w;
  }
  let loads = select(4u, 2u, BITS == 4u || BITS == 5u);
  for (var e = 0u; e < loads; e++) {
    let nn = b_column(lid, e);
    let w = b_word(lid, e);
    // Past the last row the factors are zero, and so are the values.
    let q = gemm_qwords(st.bw[2u * e], st.bw[2u * e + 1u], true, w, k);
    let col = nn * MMA_LD + 32u * h;
    if (BITS == 4u || BITS == 5u) {
      // q.x's bytes are values 8w + 0, 2, 4, 6 of the step; q.y's 8w + 1, 3, 5, 7.
      let f = mma_factors(st.cs[e], w / 2u);
      mma_put4(q.x, f, col + 8u * w, 2u);
      mma_put4(q.y, f, col + 8u * w + 1u, 2u);
    } else {
      mma_put4(q.x, mma_factors(st.cs[e], w / 4u), col + 4u * w, 1u);
    }
  }
}

// Writes the result matrix subgroup sg left in mma_c: rows m.., columns n.. of y.
fn mma_emit(m: u32, n: u32, sg: u32, lid: u32) {
  let lane = lid % MMA_SG;
  for (var i = 0u; i < MMA_T * MMA_T / MMA_SG; i++) {
    let e = lane + MMA_SG * i;
    let mm = m + e / MMA_T;
    let nn = n + e % MMA_T;
    if (mm < p.m && nn < p.n) { y[mm * p.ld + p.y_off + nn] = finish_mn(mma_c[sg * MMA_T * MMA_T + e], mm, nn); }
  }
}

// Result matrix c of the subgroup sg (rows m.., columns n.. of y) through mma_c.
fn mma_out(c: subgroup_matrix_result<f32, 16, 16>, m: u32, n: u32, sg: u32, lid: u32) {
  subgroupMatrixStore(&mma_c, sg * MMA_T * MMA_T, c, false, MMA_T);
  workgroupBarrier();
  mma_emit(m, n, sg, lid);
  workgroupBarrier();
}

fn mma_left(row: u32, kk: u32) -> subgroup_matrix_left<f16, 16, 16> {
  return subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&mma_a, row * MMA_LD + kk, false, MMA_LD);
}

@compute @workgroup_size(WG)
fn gemm_mma(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * MMA_BM;
  let n0 = wid.x * BN;
  let sg = lid / MMA_SG;
  let sm = (sg / 4u) * (MMA_BM / 2u);  // the subgroup's rows and columns in the tile
  let sn = (sg % 4u) * 32u;
  let wide = MMA_BM == 128u;  // 4 x 2 result matrices a subgroup, else 2 x 2
  var c00 = subgroup_matrix_result<f32, 16, 16>();
  var c01 = subgroup_matrix_result<f32, 16, 16>();
  var c10 = subgroup_matrix_result<f32, 16, 16>();
  var c11 = subgroup_matrix_result<f32, 16, 16>();
  var c20 = subgroup_matrix_result<f32, 16, 16>();
  var c21 = subgroup_matrix_result<f32, 16, 16>();
  var c30 = subgroup_matrix_result<f32, 16, 16>();
  var c31 = subgroup_matrix_result<f32, 16, 16>();
  nl_grid_load(lid, WG);
  if (NL) { workgroupBarrier(); }
  // K is a multiple of 32 (every format's group or block): a last step of 32 stores zeros in
  // its second half (st1 stays zero past K).
  var st0 = mma_fetch(m0, n0, 0u, lid);
  var st1 = mma_zero();
  if (32u < p.k) { st1 = mma_fetch(m0, n0, 32u, lid); }
  for (var k0 = 0u; k0 < p.k; k0 += MMA_BK) {
    mma_store(st0, k0, 0u, lid);
    mma_store(st1, k0 + 32u, 1u, lid);
    workgroupBarrier();
    if (k0 + MMA_BK < p.k) { st0 = mma_fetch(m0, n0, k0 + MMA_BK, lid); }
    if (k0 + MMA_BK + 32u < p.k) { st1 = mma_fetch(m0, n0, k0 + MMA_BK + 32u, lid); } else { st1 = mma_zero(); }
    for (var kk = 0u; kk < MMA_BK; kk += MMA_T) {
      let b0 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&mma_b, sn * MMA_LD + kk, true, MMA_LD);
      let b1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&mma_b, (sn + 16u) * MMA_LD + kk, true, MMA_LD);
      let a0 = mma_left(sm, kk);
      c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
      c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
      let a1 = mma_left(sm + 16u, kk);
      c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
      c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
      if (wide) {
        let a2 = mma_left(sm + 32u, kk);
        c20 = subgroupMatrixMultiplyAccumulate(a2, b0, c20);
        c21 = subgroupMatrixMultiplyAccumulate(a2, b1, c21);
        let a3 = mma_left(sm + 48u, kk);
        c30 = subgroupMatrixMultiplyAccumulate(a3, b0, c30);
        c31 = subgroupMatrixMultiplyAccumulate(a3, b1, c31);
      }
    }
    workgroupBarrier();
  }
  mma_out(c00, m0 + sm, n0 + sn, sg, lid);
  mma_out(c01, m0 + sm, n0 + sn + 16u, sg, lid);
  mma_out(c10, m0 + sm + 16u, n0 + sn, sg, lid);
  mma_out(c11, m0 + sm + 16u, n0 + sn + 16u, sg, lid);
  if (wide) {
    mma_out(c20, m0 + sm + 32u, n0 + sn, sg, lid);
    mma_out(c21, m0 + sm + 32u, n0 + sn + 16u, sg, lid);
    mma_out(c30, m0 + sm + 48u, n0 + sn, sg, lid);
    mma_out(c31, m0 + sm + 48u, n0 + sn + 16u, sg, lid);
  }
}
