// linear_q's gemm route on matrix cores (linear_q.h, gemm_takes_mma): y = x w^T for every
// weight format through subgroup matrices, f16 x f16 -> f32, 16 x 16 x 16 per multiply-add.
// A workgroup (WG = 256 threads: 8 subgroups of 32) makes a BM x BN (64 x 128) tile of y. Per
// K step of 32, the x tile goes to workgroup memory as f16, and the weight tile is decoded there
// to f16 values (q * scale - min, with the K-quants' sub-block scales: gemm_qwords and
// gemm_col_scale, the int8 gemm's own decoding), so the f32 sums need no per-group factors.
// Subgroup s owns rows 32 (s / 4) and columns 32 (s % 4) of the tile: 2 x 2 result matrices.
// The next step's words are loaded before this step's multiplies, as in the int8 gemm.
enable f16;
enable chromium_experimental_subgroup_matrix;
// Each subgroup loads and stores its own matrices (offsets from lid / MMA_SG): uniform within a
// subgroup, which the WGSL analysis cannot see (it asks for workgroup uniformity).
diagnostic(off, chromium.subgroup_matrix_uniformity);
//! use linear_q

const MMA_BK: u32 = 32u;
const MMA_SG: u32 = 32u;  // lanes per subgroup: the route needs a subgroup size of 32
const MMA_T: u32 = 16u;   // the matrices' M = N = K
var<workgroup> mma_a: array<f16, BM * MMA_BK>;                  // x tile [BM][32], row-major
var<workgroup> mma_b: array<f16, BN * MMA_BK>;                  // weight tile [BN][32]: K x N, column-major
var<workgroup> mma_c: array<f32, (WG / MMA_SG) * MMA_T * MMA_T>;  // one 16 x 16 result per subgroup

struct MmaStep {
  xa: array<vec4<f32>, 2>,    // the thread's two vec4 of the x tile
  bw: array<u32, 8>,          // its weight words, raw (gemm_fetch_b's (lo, hi) per load)
  cs: array<ColScale, 4>,     // the factors of each load's column
}

fn mma_fetch(m0: u32, n0: u32, k0: u32, lid: u32) -> MmaStep {
  var st: MmaStep;
  for (var e = 0u; e < 2u; e++) {
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

// The value of integer q at position kk (0..31) of the step in a column with factors c.
fn mma_value(q: i32, kk: u32, c: ColScale) -> f16 {
  let hf = kk / 16u;  // the half: q6k, q3k and q2k scale each 16 values
  var v = f32(q) * c.s;
  if (BITS == 6u || BITS == 3u) {
    v *= f32(i8_at(c.k6, hf));
  } else if (BITS == 2u) {
    v = v * f32((c.k6 >> (8u * hf)) & 15u) - c.mn * f32((c.k6 >> (8u * hf + 4u)) & 15u);
  } else if (AFFINE) {
    v -= c.mn;
  }
  return f16(v);
}

fn mma_store(st: MmaStep, n0: u32, k0: u32, lid: u32) {
  for (var e = 0u; e < 2u; e++) {
    let idx = lid + WG * e;
    let at = (idx / 8u) * MMA_BK + 4u * (idx % 8u);
    for (var j = 0u; j < 4u; j++) { mma_a[at + j] = f16(st.xa[e][j]); }
  }
  let loads = select(4u, 2u, BITS == 4u || BITS == 5u);
  for (var e = 0u; e < loads; e++) {
    let nn = b_column(lid, e);
    let w = b_word(lid, e);
    let live = n0 + nn < p.n;
    let q = gemm_qwords(st.bw[2u * e], st.bw[2u * e + 1u], live, w, k0);
    let c = st.cs[e];
    let col = nn * MMA_BK;
    for (var b = 0u; b < 4u; b++) {
      if (BITS == 4u || BITS == 5u) {
        let kk = 8u * w + 2u * b;
        mma_b[col + kk] = select(f16(0.0), mma_value(i8_at(q.x, b), kk, c), live);
        mma_b[col + kk + 1u] = select(f16(0.0), mma_value(i8_at(q.y, b), kk + 1u, c), live);
      } else {
        let kk = 4u * w + b;
        mma_b[col + kk] = select(f16(0.0), mma_value(i8_at(q.x, b), kk, c), live);
      }
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

@compute @workgroup_size(WG)
fn gemm_mma(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let sg = lid / MMA_SG;
  let sm = (sg / 4u) * 32u;  // the subgroup's rows and columns in the tile
  let sn = (sg % 4u) * 32u;
  var c00 = subgroup_matrix_result<f32, 16, 16>();
  var c01 = subgroup_matrix_result<f32, 16, 16>();
  var c10 = subgroup_matrix_result<f32, 16, 16>();
  var c11 = subgroup_matrix_result<f32, 16, 16>();
  nl_grid_load(lid, WG);
  if (NL) { workgroupBarrier(); }
  var st = mma_fetch(m0, n0, 0u, lid);
  for (var k0 = 0u; k0 < p.k; k0 += MMA_BK) {
    mma_store(st, n0, k0, lid);
    workgroupBarrier();
    if (k0 + MMA_BK < p.k) { st = mma_fetch(m0, n0, k0 + MMA_BK, lid); }
    for (var kk = 0u; kk < MMA_BK; kk += MMA_T) {
      let a0 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&mma_a, sm * MMA_BK + kk, false, MMA_BK);
      let a1 = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&mma_a, (sm + 16u) * MMA_BK + kk, false, MMA_BK);
      let b0 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&mma_b, sn * MMA_BK + kk, true, MMA_BK);
      let b1 = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&mma_b, (sn + 16u) * MMA_BK + kk, true, MMA_BK);
      c00 = subgroupMatrixMultiplyAccumulate(a0, b0, c00);
      c01 = subgroupMatrixMultiplyAccumulate(a0, b1, c01);
      c10 = subgroupMatrixMultiplyAccumulate(a1, b0, c10);
      c11 = subgroupMatrixMultiplyAccumulate(a1, b1, c11);
    }
    workgroupBarrier();
  }
  let at = sg * MMA_T * MMA_T;
  subgroupMatrixStore(&mma_c, at, c00, false, MMA_T);
  workgroupBarrier();
  mma_emit(m0 + sm, n0 + sn, sg, lid);
  workgroupBarrier();
  subgroupMatrixStore(&mma_c, at, c01, false, MMA_T);
  workgroupBarrier();
  mma_emit(m0 + sm, n0 + sn + 16u, sg, lid);
  workgroupBarrier();
  subgroupMatrixStore(&mma_c, at, c10, false, MMA_T);
  workgroupBarrier();
  mma_emit(m0 + sm + 16u, n0 + sn, sg, lid);
  workgroupBarrier();
  subgroupMatrixStore(&mma_c, at, c11, false, MMA_T);
  workgroupBarrier();
  mma_emit(m0 + sm + 16u, n0 + sn + 16u, sg, lid);
}
