// Quantized linear, q4gsw, q8 and the K-quants (ops/quant/quant.h has the layouts; linear_q.h
// the routes): y[m, n] = sum_k x[m, k] * value(n, k) + bias[n].
//! use rope_turn
//! use xq_row
//! use graph_symbols
//! use linear_q_kquant_rows
//! use linear_q_matrix
//! use linear_q_gemv_m
//! use iq4_grid
struct Params {
  m: u32,
  n: u32,
  k: u32,
  gs: u32,
  has_bias: u32,
  x_row: u32,  // the row of x the gemv reads (the output head reads the last token's)
  eps: f32,    // of the fused RMS norm
  y_off: u32,  // this weight's first column of y (bias, residual): several weights share y
  ld: u32,     // y's and the residual's row length
  pos_sym: u32,  // the symbol block's index of pos (gemv_rope)
  n_ctx: u32,  // positions per cache head (gemv_rope)
  kslice: u32,  // gemm: the K values per workgroup z (split K; k where it is not split)
}

override BITS: u32 = 4u;  // 2: q2k, 3: q3k, 4: q4gsw / q4k / q4_1, 5: q5k / q5_0 / q5_1, 6: q6k, 8: q8
// q unsigned, value = scale * q - min per group (q4k, q5k, q4_1, q5_0, q5_1): the gemm
// subtracts min * sum(x) per group instead of making q signed.
override AFFINE: bool = false;
// Where a group's factors are: 0 an f16 scale per group in `sc` (q4gsw, q8, q5_0, iq4_nl, q6k's d),
// 1 the K-quant regions (q4k, q5k), 2 an f16 (d, m) pair per group of 32 (q4_1, q5_1),
// 3 iq4_xs's block headers (d and the 6-bit sub-block scales).
override SCALES: u32 = 0u;
// iq4_xs, iq4_nl: each nibble indexes the non-linear grid iq4_f (quant.h's kIq4Values) instead
// of being the integer itself; the weights are then signed, with no min.
override NL: bool = false;
// (iq4_grid.wgsl's iq4_f, loaded by the entry points that read it: gv_rows, small_m, gemm.)
fn nl_grid_load(lid: u32, wg: u32) {
  if (NL) { iq4_grid_load(lid, wg); }
}

@group(0) @binding(0) var<storage, read> x4: array<vec4<f32>>;   // [M, K]
@group(0) @binding(1) var<storage, read> qw4: array<vec4<u32>>;  // the weight words, 4 at a time
@group(0) @binding(2) var<storage, read> sc: array<u32>;         // f16 scales [N, K/gs], pairs
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;    // [M, N]
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> xq: array<u32>;   // int8 x [M, K/4] (gemm route)
@group(0) @binding(7) var<storage, read_write> xs: array<f32>;   // x scales [M, K/gs]
@group(0) @binding(8) var<storage, read> qw: array<u32>;         // the weight words

fn scale_at(i: u32) -> f32 {
  let h = unpack2x16float(sc[i >> 1u]);
  return select(h.x, h.y, (i & 1u) == 1u);
}

fn finish(v: f32, n: u32) -> f32 {
  if (p.has_bias != 0u) { return v + bias[p.y_off + n]; }
  return v;
}

// Output (m, n) of the small_m and gemm routes, with the residual when RES.
fn finish_mn(v: f32, m: u32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[m * p.ld + p.y_off + n]; }
  return o;
}

fn q8_vals(w: u32) -> vec4<f32> { return vec4<f32>(unpack4xI8(w)); }

// ---- q4k / q5k scales (quant.h): per 256-value block one word (d, dmin) in region A, four
// words (eight 6-bit scales, eight mins, a byte each) in region B.
fn kq_region_b() -> u32 { return ((p.n * (p.k / 256u) + 3u) / 4u) * 4u; }

// Sub-block g (32 values) of row r: (d * scale, dmin * min), both exact in f32.
fn kq_affine(r: u32, g: u32) -> vec2<f32> {
  let b = r * (p.k / 256u) + g / 8u;
  let dm = unpack2x16float(sc[b]);
  let j = g % 8u;
  let w = kq_region_b() + 4u * b + j / 4u;
  let sh = 8u * (j % 4u);
  return vec2<f32>(dm.x * f32((sc[w] >> sh) & 0xFFu), dm.y * f32((sc[w + 2u] >> sh) & 0xFFu));
}

// u32 words per weight row: the nibbles, plus the fifth bits (k / 32 words rounded up to a
// multiple of 4, quant.h); q6k's blocks.
fn q_row_words() -> u32 {
  if (BITS == 5u) { return p.k / 8u + (p.k / 32u + 3u) / 4u * 4u; }
  if (BITS == 6u) { return p.k / 256u * Q6K_WORDS; }
  if (BITS <= 3u) { return p.k / 256u * q23_block_words(); }
  return p.k / select(8u, 4u, BITS == 8u);
}

// q5k / q5_0 / q5_1 values 0..3 of nibble word w with their fifth bits in bits 0..3 of hb, as f32
// 1 + q / 32 (the q4_mant trick one bit lower): q = 32 * (v - 1).
fn q5_mant(w: u32, hb: u32) -> vec4<f32> {
  let lo = (vec4<u32>(w) << vec4<u32>(18u, 14u, 10u, 6u)) & vec4<u32>(0x3C0000u);
  let hi = (vec4<u32>(hb) << vec4<u32>(22u, 21u, 20u, 19u)) & vec4<u32>(0x400000u);
  return bitcast<vec4<f32>>(lo | hi | vec4<u32>(0x3F800000u));
}

// Nibbles 0..3 of w as f32 1 + (q + 8) / 16, built by placing each nibble in the top of the
// mantissa of 1.0: a shift and one and-or per value, no int-to-float conversion (a quarter-rate
// instruction on NVIDIA, which capped the GEMV near a third of the memory bandwidth).
// q = 16 * (v - 1.5), so dot(q, x) = 16 * (dot(v, x) - 1.5 * sum(x)).
fn q4_mant(w: u32) -> vec4<f32> {
  let v = (vec4<u32>(w) << vec4<u32>(19u, 15u, 11u, 7u)) & vec4<u32>(0x780000u);
  return bitcast<vec4<f32>>(v | vec4<u32>(0x3F800000u));
}

// ---- GEMV (m = 1 .. kLinearQGemvMaxRows: a workgroup per tile and row of x, gv_set) -----
// 128 threads: 4 row sets of 32 lanes along K. A row set computes 4 rows: each lane reads one
// vec4<u32> per row per step (32 q4, 16 q8 or 64 q2k / q3k values, inside one block) and its x values from
// the workgroup's staged copy (gv_stage), reused for the 4 rows. Lanes are reduced with subgroup shuffles (SG lanes at a time), then through
// workgroup memory where the subgroup is narrower than 32. Accumulators are named scalars, not
// arrays: an array indexed in a loop would live in local memory.
//
// Fused variants (override constants and entry points; linear_q.h lists them):
//   NORM        x is RMS-normalized (norm weight nw, eps): each row set sums x^2 over its
//               lanes along with the dots, so the norm costs no dispatch and no pass of its own
//   gemv        y = acc (+ bias) (+ res when RES)
//   gemv_swiglu rows come in (gate, up) pairs, 16-row blocks interleaved in the weight; y has
//               N/2 columns: y = silu(gate) * up
//   gemv_argmax also writes each workgroup's (largest value, its lowest index) to `part`
override SG: u32 = 1u;        // lanes per subgroup used by the shuffles (1: workgroup memory)
override NORM: bool = false;
override RES: bool = false;

// Lanes along K per row set: 32 (one subgroup), or 64 where few rows leave the GPU short of
// warps (two subgroups per set, reduced through workgroup memory).
override GV_TK: u32 = 32u;
// Row sets per workgroup: 4, or 8 for gemv_swiglu_xq's node (16 outputs: one xq block).
override GV_SETS: u32 = 4u;
override GV_WG: u32 = GV_SETS * GV_TK;
const GV_ROWS: u32 = 16u;  // weight rows per workgroup at 4 sets (gemv_argmax's partials)

@group(0) @binding(9) var<storage, read> res: array<f32>;      // [M, N] residual (RES)
@group(0) @binding(10) var<storage, read> nw4: array<vec4<f32>>;  // [K] norm weight (NORM)
@group(0) @binding(11) var<storage, read_write> part: array<u32>;  // argmax partials

var<workgroup> gv_red: array<vec4<f32>, GV_WG>;
var<workgroup> gv_sum: array<f32, GV_WG>;

fn sg_sum(v: f32) -> f32 {
  var s = v;
  if (SG > 16u) { s += sg_xor(s, 16u); }
  if (SG > 8u) { s += sg_xor(s, 8u); }
  if (SG > 4u) { s += sg_xor(s, 4u); }
  if (SG > 2u) { s += sg_xor(s, 2u); }
  if (SG > 1u) { s += sg_xor(s, 1u); }
  return s;
}

// Sum of the 32 lanes of each row set, valid in lane 0 of the set; NORM: times 1 / rms of the
// row, from the threads' gv_ss summed over the workgroup (which staged x together).
fn gv_reduce(a: vec4<f32>, lid: u32) -> vec4<f32> { return gv_reduce_ss(a, gv_ss.x, lid); }

// gv_reduce for a row of x whose sum of squares (NORM) this thread holds a share `own` of.
fn gv_reduce_ss(a: vec4<f32>, own: f32, lid: u32) -> vec4<f32> {
  var r = vec4<f32>(sg_sum(a.x), sg_sum(a.y), sg_sum(a.z), sg_sum(a.w));
  var ss = 0.0;
  if (NORM) {
    let part = sg_sum(own);
    if (lid % SG == 0u) { gv_sum[lid / SG] = part; }
    workgroupBarrier();
    for (var i = 0u; i < GV_WG / SG; i++) { ss += gv_sum[i]; }
    workgroupBarrier();
  }
  if (SG < GV_TK) {
    gv_red[lid] = r;
    workgroupBarrier();
    if (lid % GV_TK == 0u) {
      for (var i = SG; i < GV_TK; i += SG) { r += gv_red[lid + i]; }
    }
  }
  if (NORM) { r *= inverseSqrt(ss / f32(p.k) + p.eps); }
  return r;
}

fn q4_dot(w: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  return dot(q4_mant(w), xa) + dot(q4_mant(w >> 16u), xb);
}

// The fifth-bit formats: word w's 8 values with their fifth bits in the low byte of hb.
fn q5_dot(w: u32, hb: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  return dot(q5_mant(w, hb), xa) + dot(q5_mant(w >> 16u, hb >> 4u), xb);
}

// One row's 32-value chunk (q4 / q5): dot(v, x) of the mantissa-built values, vec4 word w,
// the fifth bits hw (BITS 5).
fn gv_chunk(w: vec4<u32>, hw: u32, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>, x4_: vec4<f32>,
            x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
  if (BITS == 5u) {
    return q5_dot(w.x, hw, x0, x1) + q5_dot(w.y, hw >> 8u, x2, x3) + q5_dot(w.z, hw >> 16u, x4_, x5) +
           q5_dot(w.w, hw >> 24u, x6, x7);
  }
  if (NL) { return nl_dot(w.x, x0, x1) + nl_dot(w.y, x2, x3) + nl_dot(w.z, x4_, x5) + nl_dot(w.w, x6, x7); }
  return q4_dot(w.x, x0, x1) + q4_dot(w.y, x2, x3) + q4_dot(w.z, x4_, x5) + q4_dot(w.w, x6, x7);
}

// The dot products of x's row `xrow` with weight rows r.x..r.w (clamped in bounds), summed over
// this lane's share of K. Turn by turn the workgroup stages the next 32 chunks of x (NORM: times
// the norm weight) in workgroup memory with coalesced loads, once for its 4 row sets: read
// straight from global memory each lane's 8 vec4 sit 128 bytes apart, so the x loads, not the
// weights, filled the load units. A chunk's vec4s sit GV_XSTRIDE apart (one pad) so the 8 lanes
// of a quarter-warp hit distinct banks. NORM: gv_ss gets the thread's share of sum(x^2) over
// what it staged (component q for the workgroup's row q of x); gv_reduce totals it over the
// workgroup.
const GV_XSTRIDE: u32 = 9u;  // vec4 slots per staged chunk (8 for q4, 4 for q8, + 1 pad)
// Rows of x per workgroup: 1, or 2 or 4 in the gemv_multi route (linear_q.h), where int8 rows
// of x are staged side by side (3 * GV_TK slots each, gv_stage_i8) and every lane's unpacked
// weight chunk serves them all (gv_rows_multi).
override GV_XR: u32 = 1u;
// [GV_TK chunks][GV_XSTRIDE], twice over for 4 rows of x (linear_q.cpp gemv_workgroup_bytes mirrors it)
var<workgroup> gv_x: array<vec4<f32>, GV_TK * GV_XSTRIDE * ((GV_XR + 2u) / 3u)>;
var<private> gv_ss: vec4<f32>;

// q2k / q3k lanes take 64-value chunks, staged in two halves h of 32 (gv_xh() = 2): staged
// chunk j of turn `it` is then x's 32-value chunk 2 (it * GV_TK + j) + h.
fn gv_xh() -> u32 { return select(1u, 2u, BITS <= 3u); }

fn gv_stage(xo: u32, it: u32, per: u32, h: u32, lid: u32) {
  // per: vec4 per chunk (8 q4, 4 q8); the turn covers GV_TK * per vec4 of x.
  let k4 = p.k / 4u;
  for (var j = lid; j < GV_TK * per; j += GV_WG) {
    let gi = ((it * GV_TK + j / per) * gv_xh() + h) * per + j % per;
    var v = vec4<f32>(0.0);
    if (gi < k4) {
      v = x4[xo + gi];
      if (NORM) {
        gv_ss.x += dot(v, v);
        v *= nw4[gi];
      }
    }
    gv_x[(j / per) * GV_XSTRIDE + j % per] = v;
  }
}

// Row r's affine factors at element k0: (scale, min) with value = scale * q - min, q the stored
// integer (q4gsw: the nibble, min = 8 * scale; q5_0: 16 * scale; q8: min 0; q4_1 / q5_1:
// value = d * q + m, so min = -m).
fn gv_affine(r: u32, k0: u32) -> vec2<f32> {
  if (SCALES == 1u) { return kq_affine(r, k0 / 32u); }
  if (SCALES == 2u) {
    let dm = unpack2x16float(sc[r * (p.k / 32u) + k0 / 32u]);
    return vec2<f32>(dm.x, -dm.y);
  }
  if (SCALES == 3u) {
    let b = r * (p.k / 256u) + k0 / 256u;
    let j = (k0 / 32u) % 8u;
    let w0 = sc[2u * b];
    let ls = ((sc[2u * b + 1u] >> (4u * j)) & 15u) | (((w0 >> (16u + 2u * j)) & 3u) << 4u);
    return vec2<f32>(unpack2x16float(w0).x * f32(i32(ls) - 32), 0.0);
  }
  let s = scale_at(r * (p.k / p.gs) + k0 / p.gs);
  return vec2<f32>(s, s * select(select(0.0, 16.0, BITS == 5u), 8.0, BITS == 4u && !NL));
}

// iq4_xs: the grid values of nibbles 0..3 of w.
fn nl_vals(w: u32) -> vec4<f32> {
  return vec4<f32>(iq4_f[w & 15u], iq4_f[(w >> 4u) & 15u], iq4_f[(w >> 8u) & 15u], iq4_f[(w >> 12u) & 15u]);
}

// iq4_xs: the grid's int8 byte of each byte (a nibble index) of v.
fn nl_bytes(v: u32) -> u32 {
  var o = 0u;
  for (var i = 0u; i < 4u; i++) {
    let q = (v >> (8u * i)) & 15u;
    o |= (bitcast<u32>(i32(iq4_f[q])) & 0xFFu) << (8u * i);
  }
  return o;
}

fn nl_dot(w: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 { return dot(nl_vals(w), xa) + dot(nl_vals(w >> 16u), xb); }

// BITS 5: the fifth-bit word of row r's chunk c.
fn gv_hi(r: u32, c: u32) -> u32 {
  if (BITS != 5u) { return 0u; }
  let i = r * q_row_words() + p.k / 8u + c;
  return qw4[i >> 2u][i & 3u];
}

fn gv_rows(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let vals = select(32u, 16u, BITS == 8u);
  let per = vals / 4u;
  let nvec = p.k / vals;
  let rs = q_row_words() / 4u;  // vec4 per weight row
  let xo = xrow * (p.k / 4u);
  let turns = (nvec + GV_TK - 1u) / GV_TK;  // the same for every thread: barriers stay uniform
  // q = qs * (v - 1) from the mantissa-built v (q4: 16, q5: 32).
  let qs = select(16.0, 32.0, BITS == 5u);
  var a0 = 0.0;
  var a1 = 0.0;
  var a2 = 0.0;
  var a3 = 0.0;
  nl_grid_load(lid, GV_WG);  // read after the first turn's barrier (turns >= 1)
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nvec - 1u);  // lanes past the end compute on a valid chunk, dropped below
    let live = it * GV_TK + t < nvec;
    // The weights first: their loads stay in flight through the staging and the barrier.
    let f0 = gv_affine(r.x, c * vals);
    let f1 = gv_affine(r.y, c * vals);
    let f2 = gv_affine(r.z, c * vals);
    let f3 = gv_affine(r.w, c * vals);
    let w0 = qw4[r.x * rs + c];
    let w1 = qw4[r.y * rs + c];
    let w2 = qw4[r.z * rs + c];
    let w3 = qw4[r.w * rs + c];
    let h0 = gv_hi(r.x, c);
    let h1 = gv_hi(r.y, c);
    let h2 = gv_hi(r.z, c);
    let h3 = gv_hi(r.w, c);
    gv_stage(xo, it, per, 0u, lid);
    workgroupBarrier();
    let xb = t * GV_XSTRIDE;
    let x0 = gv_x[xb];
    let x1 = gv_x[xb + 1u];
    let x2 = gv_x[xb + 2u];
    let x3 = gv_x[xb + 3u];
    if (BITS == 4u || BITS == 5u) {
      let x4_ = gv_x[xb + 4u];
      let x5 = gv_x[xb + 5u];
      let x6 = gv_x[xb + 6u];
      let x7 = gv_x[xb + 7u];
      if (NL) {  // iq4_xs, iq4_nl: the grid values times the (sub-)block's scale, no min
        let d0 = gv_chunk(w0, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d1 = gv_chunk(w1, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d2 = gv_chunk(w2, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d3 = gv_chunk(w3, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        if (live) {
          a0 = fma(d0, f0.x, a0);
          a1 = fma(d1, f1.x, a1);
          a2 = fma(d2, f2.x, a2);
          a3 = fma(d3, f3.x, a3);
        }
        workgroupBarrier();
        continue;
      }
      // dot(q, x) = qs * (dot(v, x) - sum(x)); value = scale * q - min: the sum taken out once
      // for the four rows.
      let sx = dot(x0 + x1 + x2 + x3 + x4_ + x5 + x6 + x7, vec4<f32>(1.0));
      let d0 = gv_chunk(w0, h0, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d1 = gv_chunk(w1, h1, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d2 = gv_chunk(w2, h2, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d3 = gv_chunk(w3, h3, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      if (live) {
        a0 += fma(d0, qs * f0.x, -f0.y * sx);
        a1 += fma(d1, qs * f1.x, -f1.y * sx);
        a2 += fma(d2, qs * f2.x, -f2.y * sx);
        a3 += fma(d3, qs * f3.x, -f3.y * sx);
      }
    } else {
      let d0 = dot(q8_vals(w0.x), x0) + dot(q8_vals(w0.y), x1) + dot(q8_vals(w0.z), x2) + dot(q8_vals(w0.w), x3);
      let d1 = dot(q8_vals(w1.x), x0) + dot(q8_vals(w1.y), x1) + dot(q8_vals(w1.z), x2) + dot(q8_vals(w1.w), x3);
      let d2 = dot(q8_vals(w2.x), x0) + dot(q8_vals(w2.y), x1) + dot(q8_vals(w2.z), x2) + dot(q8_vals(w2.w), x3);
      let d3 = dot(q8_vals(w3.x), x0) + dot(q8_vals(w3.y), x1) + dot(q8_vals(w3.z), x2) + dot(q8_vals(w3.w), x3);
      if (live) {
        a0 = fma(d0, f0.x, a0);
        a1 = fma(d1, f1.x, a1);
        a2 = fma(d2, f2.x, a2);
        a3 = fma(d3, f3.x, a3);
      }
    }
    workgroupBarrier();  // before the next turn overwrites gv_x
  }
  return vec4<f32>(a0, a1, a2, a3);
}

// ---- int8 activations (XI8) ---------------------------------------------------------------
// The gemv's f32 decode costs about three ALU instructions per weight value (place the nibble,
// mask, multiply-add), enough to make a Q4 gemv on an H200 ALU-bound at half the memory
// bandwidth. With XI8 the workgroup quantizes each turn's x to int8 while staging it (one
// scale per 32 values, as quantize_act does for the gemm) and the rows take dot4I8Packed on
// their unpacked bytes: two logic ops and two packed dots per 8 q4 values. Needs subgroups of
// 4 or more lanes (the 4 threads staging a chunk share its absmax by shuffles).
override XI8: bool = false;
// ---- x quantized ahead (one row of x, the decode step's gemv) ------------------------------
// A gemv whose output another gemv reads next can write that output as int8 blocks too
// (gemv_xq, gemv_swiglu_xq), so the consumer's workgroups read their chunks of x straight from
// memory (XQ_IN) instead of each staging and quantizing x before its first dot product: that
// staging took 16-26% of the H200 decode gemvs (docs/perf/2026-12-04.md, "Decode gemvs read x quantized ahead"). The block is the producer
// workgroup's 16 outputs, one scale each; the row's layout is xq_row.wgsl's. XQ_NORM quantizes
// the outputs times the consumer's norm weight (bound as nw4), else as they are. The consumer
// binds the xq row as x4 (bitcast); its NORM takes the sums of squares.
override XQ_IN: bool = false;
override XQ_NORM: bool = false;

var<workgroup> gv_qv: array<f32, 16>;  // the block's values (times the norm weight)
var<workgroup> gv_qss: array<f32, 8>;  // each row set's sum of squares

// XQ_IN: chunk c of the xq row (words in this format's order; s = (scale0, sum0, scale1, sum1)
// of its two blocks); NORM: row set 0's live lanes take the blocks' sums of squares.
fn gv_xq_chunk(c: u32, live: bool, lid: u32) -> XChunk {
  let wb = select(0u, p.k / 16u, BITS == 4u || BITS == 5u);  // vec4 index of the words
  let x = XChunk(bitcast<vec4<u32>>(x4[wb + 2u * c]), bitcast<vec4<u32>>(x4[wb + 2u * c + 1u]), x4[p.k / 8u + c]);
  if (NORM && live && lid < GV_TK) {
    let ss = x4[5u * p.k / 32u + c / 2u];
    gv_ss.x += select(ss.x + ss.y, ss.z + ss.w, (c % 2u) == 1u);
  }
  return x;
}

// The workgroup's 16 outputs as xq block `blk` of a row of `width` values. `v`: lane 0 of
// each row set holds `per` of them (at per * set ..), their norm weights from column `col` (a
// multiple of 4 when per is 4). Every thread of the workgroup calls it (a barrier inside).
fn gv_put_xq(v: vec4<f32>, per: u32, col: u32, blk: u32, width: u32, lid: u32) {
  let rs = lid / GV_TK;  // the row set
  if (lid % GV_TK == 0u) {
    var u = v;
    if (XQ_NORM) { u *= nw4[col / 4u]; }
    var ss = 0.0;
    for (var i = 0u; i < per; i++) {
      gv_qv[per * rs + i] = u[i];
      ss += v[i] * v[i];
    }
    gv_qss[rs] = ss;
  }
  workgroupBarrier();
  if (lid >= 8u) { return; }
  var amax = 0.0;
  for (var i = 0u; i < 16u; i++) { amax = max(amax, abs(gv_qv[i])); }
  let inv = xq_inv(amax);
  let at = xq_values(lid);  // thread lid < 8 writes the block's word lid
  part[xq_word_at(lid, blk, width)] = xq_pack(vec4<f32>(gv_qv[at.x], gv_qv[at.y], gv_qv[at.z], gv_qv[at.w]), inv);
  if (lid == 0u) {
    var hs = 0;
    for (var i = 0u; i < 16u; i++) { hs += i32(round(gv_qv[i] * inv)); }
    var tot = 0.0;
    for (var i = 0u; i < GV_SETS; i++) { tot += gv_qss[i]; }
    part[xq_scale_at(blk, width)] = bitcast<u32>(amax / 127.0);
    part[xq_scale_at(blk, width) + 1u] = bitcast<u32>(f32(hs));
    part[xq_squares_at(blk, width)] = bitcast<u32>(tot);
  }
}

// Turn `it`'s 32-value chunk j from threads 4j .. 4j + 3, 8 values each, into gv_x's slots
// 3j, 3j + 1 (8 int8 quadruples, bitcast: gv_x is f32) and 3j + 2 = (scale, sum of the first 16
// int8 values, sum of the last 16, 0); the 3-vec4 stride keeps a quarter-warp's vec4 reads
// on distinct banks. q4/q5 words hold values 0, 2, 4, 6 then 1, 3, 5, 7 of each 8, the order
// their nibbles unpack in; q2k, q3k, q6k and q8 words are in natural order. h: gv_stage's;
// q: the workgroup's row of x (its slots start at 3 GV_TK q).
fn gv_stage_i8(xo: u32, it: u32, h: u32, lid: u32, q: u32) {
  let j = lid / 4u;
  let e = lid % 4u;
  let gi = ((it * GV_TK + j) * gv_xh() + h) * 8u + 2u * e;  // vec4 index in the row; K is a multiple of 32
  var a = vec4<f32>(0.0);
  var b = vec4<f32>(0.0);
  if (gi < p.k / 4u) {
    a = x4[xo + gi];
    b = x4[xo + gi + 1u];
    if (NORM) {
      gv_ss[q] += dot(a, a) + dot(b, b);
      a *= nw4[gi];
      b *= nw4[gi + 1u];
    }
  }
  let ma = max(abs(a), abs(b));
  var amax = max(max(ma.x, ma.y), max(ma.z, ma.w));
  amax = max(amax, sg_xor(amax, 1u));
  amax = max(amax, sg_xor(amax, 2u));
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  let qa = vec4<i32>(round(a * inv));
  let qb = vec4<i32>(round(b * inv));
  var w0 = pack4xI8(qa);
  var w1 = pack4xI8(qb);
  if (BITS == 4u || BITS == 5u) {
    w0 = pack4xI8(vec4<i32>(qa.x, qa.z, qb.x, qb.z));
    w1 = pack4xI8(vec4<i32>(qa.y, qa.w, qb.y, qb.w));
  }
  var hs = f32(qa.x + qa.y + qa.z + qa.w + qb.x + qb.y + qb.z + qb.w);
  hs += sg_xor(hs, 1u);  // threads 4j, 4j + 1: values 0..15; 4j + 2, 4j + 3: 16..31
  let other = sg_xor(hs, 2u);
  let o = 3u * (GV_TK * q + j);
  gv_x[o + e / 2u][2u * (e % 2u)] = bitcast<f32>(w0);
  gv_x[o + e / 2u][2u * (e % 2u) + 1u] = bitcast<f32>(w1);
  if (e == 0u) { gv_x[o + 2u] = vec4<f32>(amax / 127.0, hs, other, 0.0); }
}

// The staged chunk t: its 8 int8 words and (scale, half sums).
struct XChunk {
  a: vec4<u32>,
  b: vec4<u32>,
  s: vec4<f32>,
}

fn gv_xchunk(t: u32, q: u32) -> XChunk {
  let o = 3u * (GV_TK * q + t);
  return XChunk(bitcast<vec4<u32>>(gv_x[o]), bitcast<vec4<u32>>(gv_x[o + 1u]), gv_x[o + 2u]);
}

// q4 nibble word w (values 8i .. 8i + 7 of a chunk) against staged words xe (values 0, 2, 4, 6)
// and xo (1, 3, 5, 7); q5: with the fifth bits of the 8 values in bits 0..7 of hb.
fn i4_dot(w: u32, hb: u32, xe: u32, xo: u32) -> i32 {
  if (NL) {  // iq4_xs, iq4_nl: the grid's int8 values of the nibbles
    let g = iq4_bytes(w);
    return dot4I8Packed(g.x, xe) + dot4I8Packed(g.y, xo);
  }
  var lo = w & 0x0F0F0F0Fu;
  var hi = (w >> 4u) & 0x0F0F0F0Fu;
  if (BITS == 5u) {
    lo |= spread5(hb & 0x55u);
    hi |= spread5((hb >> 1u) & 0x55u);
  }
  return dot4I8Packed(lo, xe) + dot4I8Packed(hi, xo);
}

// One row's 32-value chunk: the integer dot of its stored q (unsigned nibbles, q8 signed) with
// the chunk's int8 x. q4 / q5: w is the chunk's vec4 of nibble words, hw its fifth bits;
// q8: w and w2 its two vec4s of int8 quadruples.
fn i8_chunk(w: vec4<u32>, w2: vec4<u32>, hw: u32, x: XChunk) -> i32 {
  if (BITS == 8u) {
    return dot4I8Packed(w.x, x.a.x) + dot4I8Packed(w.y, x.a.y) + dot4I8Packed(w.z, x.a.z) + dot4I8Packed(w.w, x.a.w) +
           dot4I8Packed(w2.x, x.b.x) + dot4I8Packed(w2.y, x.b.y) + dot4I8Packed(w2.z, x.b.z) +
           dot4I8Packed(w2.w, x.b.w);
  }
  return i4_dot(w.x, hw, x.a.x, x.a.y) + i4_dot(w.y, hw >> 8u, x.a.z, x.a.w) + i4_dot(w.z, hw >> 16u, x.b.x, x.b.y) +
         i4_dot(w.w, hw >> 24u, x.b.z, x.b.w);
}

// i8_chunk's two halves (values 0..15, 16..31), for x quantized in blocks of 16 (XQ_IN).
fn i8_halves(w: vec4<u32>, w2: vec4<u32>, hw: u32, x: XChunk) -> vec2<i32> {
  if (BITS == 8u) {
    return vec2<i32>(dot4I8Packed(w.x, x.a.x) + dot4I8Packed(w.y, x.a.y) + dot4I8Packed(w.z, x.a.z) +
                         dot4I8Packed(w.w, x.a.w),
                     dot4I8Packed(w2.x, x.b.x) + dot4I8Packed(w2.y, x.b.y) + dot4I8Packed(w2.z, x.b.z) +
                         dot4I8Packed(w2.w, x.b.w));
  }
  return vec2<i32>(i4_dot(w.x, hw, x.a.x, x.a.y) + i4_dot(w.y, hw >> 8u, x.a.z, x.a.w),
                   i4_dot(w.z, hw >> 16u, x.b.x, x.b.y) + i4_dot(w.w, hw >> 24u, x.b.z, x.b.w));
}

// gv_rows with int8 x: every format but q6k (gv_rows_q6k_i8) and q2k / q3k (gv_rows_q23_i8).
// value = scale * q - min, so a chunk adds xs * (scale * dot(q, qx) - min * sum(qx)); iq4_xs
// and iq4_nl: q the grid's value, no min.
fn gv_rows_i8(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  if (NL) {
    iq4_pair_load(lid, GV_WG);
    workgroupBarrier();
  }
  let nchunks = p.k / 32u;
  let rs = q_row_words() / 4u;
  let per = select(1u, 2u, BITS == 8u);  // vec4 of weight words per row and chunk
  let xo = xrow * (p.k / 4u);
  let turns = (nchunks + GV_TK - 1u) / GV_TK;
  var a = vec4<f32>(0.0);
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    let f0 = gv_affine(r.x, c * 32u);
    let f1 = gv_affine(r.y, c * 32u);
    let f2 = gv_affine(r.z, c * 32u);
    let f3 = gv_affine(r.w, c * 32u);
    let w0 = qw4[r.x * rs + per * c];
    let w1 = qw4[r.y * rs + per * c];
    let w2 = qw4[r.z * rs + per * c];
    let w3 = qw4[r.w * rs + per * c];
    var v0 = vec4<u32>(0u);
    var v1 = vec4<u32>(0u);
    var v2 = vec4<u32>(0u);
    var v3 = vec4<u32>(0u);
    if (BITS == 8u) {
      v0 = qw4[r.x * rs + per * c + 1u];
      v1 = qw4[r.y * rs + per * c + 1u];
      v2 = qw4[r.z * rs + per * c + 1u];
      v3 = qw4[r.w * rs + per * c + 1u];
    }
    let h0 = gv_hi(r.x, c);
    let h1 = gv_hi(r.y, c);
    let h2 = gv_hi(r.z, c);
    let h3 = gv_hi(r.w, c);
    if (XQ_IN) {  // x quantized ahead: two blocks of 16 per chunk, a scale each
      let xq = gv_xq_chunk(c, live, lid);
      let p0 = i8_halves(w0, v0, h0, xq);
      let p1 = i8_halves(w1, v1, h1, xq);
      let p2 = i8_halves(w2, v2, h2, xq);
      let p3 = i8_halves(w3, v3, h3, xq);
      let sh = fma(xq.s.x, xq.s.y, xq.s.z * xq.s.w);  // the sum of x's int8 values times their scales
      let dq = vec4<f32>(fma(fma(xq.s.x, f32(p0.x), xq.s.z * f32(p0.y)), f0.x, -f0.y * sh),
                         fma(fma(xq.s.x, f32(p1.x), xq.s.z * f32(p1.y)), f1.x, -f1.y * sh),
                         fma(fma(xq.s.x, f32(p2.x), xq.s.z * f32(p2.y)), f2.x, -f2.y * sh),
                         fma(fma(xq.s.x, f32(p3.x), xq.s.z * f32(p3.y)), f3.x, -f3.y * sh));
      if (live) { a += dq; }
      continue;
    }
    gv_stage_i8(xo, it, 0u, lid, 0u);
    workgroupBarrier();
    let x = gv_xchunk(t, 0u);
    let qs = x.s.y + x.s.z;
    let d = vec4<f32>(fma(f32(i8_chunk(w0, v0, h0, x)), f0.x, -f0.y * qs),
                      fma(f32(i8_chunk(w1, v1, h1, x)), f1.x, -f1.y * qs),
                      fma(f32(i8_chunk(w2, v2, h2, x)), f2.x, -f2.y * qs),
                      fma(f32(i8_chunk(w3, v3, h3, x)), f3.x, -f3.y * qs));
    if (live) { a = fma(d, vec4<f32>(x.s.x), a); }
    workgroupBarrier();  // before the next turn overwrites gv_x
  }
  return a;
}

// The dots of weight rows r.x..r.w with GV_XR rows of x (m0 + q of x's live rows from xbase;
// past the last, its copy), summed over this lane's share of K: gv_rows_i8 with the turn's
// chunk of each row unpacked to int8 bytes once (GmRow, linear_q_gemv_m.wgsl) for all the rows
// of x, which the workgroup quantizes and stages side by side. Formats gemv_m_takes, with XI8.
struct GvAcc {
  a0: vec4<f32>,
  a1: vec4<f32>,
  a2: vec4<f32>,
  a3: vec4<f32>,
}

fn gv_xdots(w0: GmRow, w1: GmRow, w2: GmRow, w3: GmRow, x: XChunk) -> vec4<f32> {
  let hs = x.s.yz;
  return vec4<f32>(gm_dot(w0, x.a, x.b, hs), gm_dot(w1, x.a, x.b, hs), gm_dot(w2, x.a, x.b, hs),
                   gm_dot(w3, x.a, x.b, hs)) * x.s.x;
}

fn gv_rows_multi(r: vec4<u32>, m0: u32, xbase: u32, t: u32, lid: u32) -> GvAcc {
  let nchunks = p.k / 32u;
  let turns = (nchunks + GV_TK - 1u) / GV_TK;
  let k4 = p.k / 4u;
  let last = p.m - 1u;
  var acc = GvAcc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    let w0 = gm_row(r.x, c);
    let w1 = gm_row(r.y, c);
    let w2 = gm_row(r.z, c);
    let w3 = gm_row(r.w, c);
    gv_stage_i8((xbase + m0) * k4, it, 0u, lid, 0u);
    gv_stage_i8((xbase + min(m0 + 1u, last)) * k4, it, 0u, lid, 1u);
    if (GV_XR > 2u) {
      gv_stage_i8((xbase + min(m0 + 2u, last)) * k4, it, 0u, lid, 2u);
      gv_stage_i8((xbase + min(m0 + 3u, last)) * k4, it, 0u, lid, 3u);
    }
    workgroupBarrier();
    if (live) {
      acc.a0 += gv_xdots(w0, w1, w2, w3, gv_xchunk(t, 0u));
      acc.a1 += gv_xdots(w0, w1, w2, w3, gv_xchunk(t, 1u));
      if (GV_XR > 2u) {
        acc.a2 += gv_xdots(w0, w1, w2, w3, gv_xchunk(t, 2u));
        acc.a3 += gv_xdots(w0, w1, w2, w3, gv_xchunk(t, 3u));
      }
    }
    workgroupBarrier();  // before the next turn overwrites gv_x
  }
  return acc;
}

// The workgroup's GV_XR rows of x (from m0) against weight rows r, reduced over the row sets'
// lanes (valid in lane 0 of each set): gv_rows_multi, or one row's gv_dots.
fn gv_run(r: vec4<u32>, m0: u32, xbase: u32, lid: u32) -> GvAcc {
  let t = lid % GV_TK;
  if (GV_XR == 1u) {
    let a = gv_reduce(gv_dots(r, xbase + m0, t, lid), lid);
    return GvAcc(a, a, a, a);
  }
  var acc = gv_rows_multi(r, m0, xbase, t, lid);
  acc.a0 = gv_reduce_ss(acc.a0, gv_ss.x, lid);
  workgroupBarrier();  // gv_reduce's workgroup slots, reused row after row
  acc.a1 = gv_reduce_ss(acc.a1, gv_ss.y, lid);
  if (GV_XR > 2u) {
    workgroupBarrier();
    acc.a2 = gv_reduce_ss(acc.a2, gv_ss.z, lid);
    workgroupBarrier();
    acc.a3 = gv_reduce_ss(acc.a3, gv_ss.w, lid);
  }
  return acc;
}

fn gv_pick(acc: GvAcc, q: u32) -> vec4<f32> {
  return select(select(select(acc.a0, acc.a1, q == 1u), acc.a2, q == 2u), acc.a3, q == 3u);
}

// The row set's dots for whichever weight format BITS names (q6k, q2k/q3k: linear_q_kquant_rows.wgsl).
fn gv_dots(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  if (XI8 && BITS <= 3u) { return gv_rows_q23_i8(r, xrow, t, lid); }
  if (BITS <= 3u) { return gv_rows_q23(r, xrow, t, lid); }
  if (XI8 && BITS == 6u) { return gv_rows_q6k_i8(r, xrow, t, lid); }
  if (XI8) { return gv_rows_i8(r, xrow, t, lid); }
  if (BITS == 6u) { return gv_rows_q6k(r, xrow, t, lid); }
  return gv_rows(r, xrow, t, lid);
}

// Several rows of x (p.m of them, 1 .. kLinearQGemvMaxRows): a workgroup per (tile of weight
// rows, GV_XR rows of x), the workgroups of a tile adjacent in dispatch order, so they run
// together (the tile's weights can come from L2 for all but the first).
fn gv_wg(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
fn gv_groups() -> u32 { return (p.m + GV_XR - 1u) / GV_XR; }
fn gv_m0(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return (gv_wg(wid, nwg) % gv_groups()) * GV_XR; }

fn gv_set(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (gv_wg(wid, nwg) / gv_groups()) * GV_SETS + lid / GV_TK;
}

fn gv_clamp(r: vec4<u32>) -> vec4<u32> { return min(r, vec4<u32>(p.n - 1u)); }

fn gv_finish(v: f32, m: u32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[m * p.ld + p.y_off + n]; }
  return o;
}

// The gemv's outputs: y, and row 0's 4 in lane 0 of each row set (gemv_xq's).
fn gemv_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec4<f32> {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let m0 = gv_m0(wid, nwg);
  let acc = gv_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), m0, p.x_row, lid);
  var out = vec4<f32>(0.0);
  if (lid % GV_TK == 0u) {
    for (var q = 0u; q < GV_XR; q++) {
      let m = m0 + q;
      let a = gv_pick(acc, q);
      for (var r = 0u; r < 4u; r++) {
        if (m < p.m && n0 + r < p.n) {
          let o = gv_finish(a[r], m, n0 + r);
          y[m * p.ld + p.y_off + n0 + r] = o;
          out[r] = o;
        }
      }
    }
  }
  return out;
}

@compute @workgroup_size(GV_WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  _ = gemv_body(wid, nwg, lid);
}

// gemv, and with one row of x (uniform) its outputs also as xq block n0 / 16 (N a multiple of 16).
@compute @workgroup_size(GV_WG)
fn gemv_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let out = gemv_body(wid, nwg, lid);
  if (p.m == 1u) { gv_put_xq(out, 4u, gv_set(wid, nwg, lid) * 4u, gv_wg(wid, nwg), p.n, lid); }
}

// Row of gate j in a weight whose (gate, up) rows are interleaved in blocks of 16; up is 16 on.
fn swiglu_gate_row(j: u32) -> u32 { return (j / 16u) * 32u + j % 16u; }

fn silu(g: f32) -> f32 { return g / (1.0 + exp(-g)); }

// gemv_swiglu's outputs: y, and row 0's 2 in lane 0 of each row set (gemv_swiglu_xq's).
fn swiglu_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec4<f32> {
  let j0 = gv_set(wid, nwg, lid) * 2u;
  let m0 = gv_m0(wid, nwg);
  let g0 = swiglu_gate_row(j0);
  let g1 = swiglu_gate_row(j0 + 1u);
  let rows = vec4<u32>(g0, g0 + 16u, g1, g1 + 16u);
  let acc = gv_run(gv_clamp(rows), m0, p.x_row, lid);
  let half = p.n / 2u;
  var out = vec4<f32>(0.0);
  if (lid % GV_TK == 0u) {
    for (var q = 0u; q < GV_XR; q++) {
      let m = m0 + q;
      let a = gv_pick(acc, q);
      let o = vec2<f32>(silu(finish(a.x, rows.x)) * finish(a.y, rows.y), silu(finish(a.z, rows.z)) * finish(a.w, rows.w));
      if (m < p.m && j0 < half) { y[m * half + j0] = o.x; }
      if (m < p.m && j0 + 1u < half) { y[m * half + j0 + 1u] = o.y; }
      if (q == 0u) { out = vec4<f32>(o, 0.0, 0.0); }
    }
  }
  return out;
}

@compute @workgroup_size(GV_WG)
fn gemv_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  _ = swiglu_body(wid, nwg, lid);
}

// gemv_swiglu at 8 row sets, and with one row of x (uniform) the workgroup's 16 outputs also as
// xq block j0 / 16.
@compute @workgroup_size(GV_WG)
fn gemv_swiglu_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let out = swiglu_body(wid, nwg, lid);
  if (p.m == 1u) { gv_put_xq(out, 2u, gv_set(wid, nwg, lid) * 2u, gv_wg(wid, nwg), p.n / 2u, lid); }
}

// The sampling family's order key (sampling.wgsl): unsigned order = float order, NaN as -inf,
// -0 as +0, so sampling's argmax_final can finish the partials written here.
fn gv_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

var<workgroup> gv_best: array<vec2<u32>, GV_SETS>;

@compute @workgroup_size(GV_WG)
fn gemv_argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let rows = vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u);
  let acc = gv_reduce(gv_dots(gv_clamp(rows), p.x_row, lid % GV_TK, lid), lid);
  if (lid % GV_TK == 0u) {
    var best = vec2<u32>(0u, 0xffffffffu);  // the sentinel: worse than any logit
    for (var r = 0u; r < 4u; r++) {
      let n = n0 + r;
      if (n < p.n) {
        let v = gv_finish(acc[r], 0u, n);
        y[p.y_off + n] = v;
        let key = gv_key(v);
        if (key > best.x || best.y == 0xffffffffu) { best = vec2<u32>(key, p.y_off + n); }
      }
    }
    gv_best[lid / GV_TK] = best;
  }
  workgroupBarrier();
  if (lid == 0u) {
    // Sets hold ascending rows, so keeping the first strict maximum keeps the lowest index.
    var best = gv_best[0];
    for (var s = 1u; s < GV_SETS; s++) {
      let b = gv_best[s];
      if (b.y != 0xffffffffu && (b.x > best.x || best.y == 0xffffffffu)) { best = b; }
    }
    // p.m is 1: the output head's one row. A weight split by rows: this part's partials follow
    // the earlier parts' (their rows are whole workgroups of GV_ROWS).
    let wg = p.y_off / GV_ROWS + gv_wg(wid, nwg);
    part[2u * wg] = best.x;
    part[2u * wg + 1u] = best.y;
  }
}
// ---- gemv_rope: the q|k|v projection with RoPE and the KV-cache write in its epilogue ----
// The weight's rows are q heads, then k heads, then v heads (several weights: each kernel its
// columns from y_off). Lane 0 of a row set holds 4 consecutive columns of one head, i.e. two
// rotation pairs (2j, 2j + 1) of the normal layout: it turns the q and k ones (rope_turn.wgsl)
// and writes q to y [m, q columns], k and v to the caches [n_kv_heads, n_ctx, head_dim] at
// pos + m for x's row m (pos from the graph's symbol block). Neox pairs (j, j + n_rot / 2) span
// row sets: their gemv writes q|k|v, then rope_qkv.
override ROPE_HD: u32 = 64u;      // head_dim, a multiple of 4
override ROPE_NROT: u32 = 64u;    // rotated dims per head, a multiple of 4
override ROPE_Q: u32 = 0u;        // q columns (n_heads * head_dim)
override ROPE_KV: u32 = 0u;       // k columns, and v columns (n_kv_heads * head_dim)
override ROPE_F16: bool = false;  // the caches hold f16 pairs

@group(0) @binding(12) var<storage, read> rope_freqs: array<u32>;  // [n_rot / 2][hi, lo]
@group(0) @binding(13) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(14) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(15) var<uniform> symbols: Symbols;

// Pair (e, e + 1) of a head turned at `pos`; past n_rot it passes through.
fn rope_pair(v: vec2<f32>, e: u32, pos: u32) -> vec2<f32> {
  if (e >= ROPE_NROT) { return v; }
  return rope_turn(v.x, v.y, pos, rope_freqs[e], rope_freqs[e + 1u]);  // pair e / 2's (hi, lo)
}

// Columns col..col + 3 of k (or v) into the cache row of their head at `pos`.
fn rope_store(to_k: bool, col: u32, v: vec4<f32>, pos: u32) {
  let at = ((col / ROPE_HD) * p.n_ctx + pos) * ROPE_HD + col % ROPE_HD;  // element index
  var w = bitcast<vec4<u32>>(v);
  var words = 4u;
  var o = at;
  if (ROPE_F16) {
    w = vec4<u32>(pack2x16float(v.xy), pack2x16float(v.zw), 0u, 0u);
    words = 2u;
    o = at / 2u;
  }
  for (var i = 0u; i < words; i++) {
    if (to_k) { k_cache[o + i] = w[i]; } else { v_cache[o + i] = w[i]; }
  }
}

@compute @workgroup_size(GV_WG)
fn gemv_rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let m0 = gv_m0(wid, nwg);  // the tokens at pos + m0 ..
  let acc = gv_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), m0, 0u, lid);
  if (lid % GV_TK != 0u || n0 >= p.n) { return; }
  for (var q = 0u; q < GV_XR; q++) {
    if (m0 + q < p.m) { rope_out(gv_pick(acc, q), n0, m0 + q); }
  }
}

// Weight rows n0..n0 + 3 of x's row m (the token at pos + m): turned, to y or the caches.
fn rope_out(a: vec4<f32>, n0: u32, m: u32) {
  let c = p.y_off + n0;  // the q|k|v column of row n0 (weights have whole heads: n0 + 3 < p.n)
  let pos = symbol(p.pos_sym) + m;
  var v = vec4<f32>(finish(a.x, n0), finish(a.y, n0 + 1u), finish(a.z, n0 + 2u), finish(a.w, n0 + 3u));
  if (c < ROPE_Q + ROPE_KV) {
    let e = c % ROPE_HD;
    v = vec4<f32>(rope_pair(v.xy, e, pos), rope_pair(v.zw, e + 2u, pos));
  }
  if (c < ROPE_Q) {
    for (var i = 0u; i < 4u; i++) { y[m * ROPE_Q + c + i] = v[i]; }
    return;
  }
  let kv = c - ROPE_Q;
  rope_store(kv < ROPE_KV, kv % ROPE_KV, v, pos);
}
