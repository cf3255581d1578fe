// Quantized linear, q4gsw and q8 weights (ops/quant/quant.h has the layouts; linear_q.h the
// routes): y[m, n] = sum_k x[m, k] * q(n, k) * scale(n, k / gs) + bias[n].
struct Params {
  m: u32,
  n: u32,
  k: u32,
  gs: u32,
  has_bias: u32,
  x_row: u32,  // the row of x the gemv reads (the output head reads the last token's)
  eps: f32,    // of the fused RMS norm
  pad0: u32,
}

override BITS: u32 = 4u;  // 4: q4gsw, 8: q8, 6: q6k (gemv only)
override TK: u32 = 64u;   // gemv: threads along K per set of rows (a power of two <= 256)

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
  if (p.has_bias != 0u) { return v + bias[n]; }
  return v;
}

// Output (m, n) of the small_m and gemm routes, with the residual when RES.
fn finish_mn(v: f32, m: u32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[m * p.n + n]; }
  return o;
}

fn q8_vals(w: u32) -> vec4<f32> { return vec4<f32>(unpack4xI8(w)); }

// Nibbles 0..3 of w as f32 1 + (q + 8) / 16, built by placing each nibble in the top of the
// mantissa of 1.0: a shift and one and-or per value, no int-to-float conversion (a quarter-rate
// instruction on NVIDIA, which capped the GEMV near a third of the memory bandwidth).
// q = 16 * (v - 1.5), so dot(q, x) = 16 * (dot(v, x) - 1.5 * sum(x)).
fn q4_mant(w: u32) -> vec4<f32> {
  let v = (vec4<u32>(w) << vec4<u32>(19u, 15u, 11u, 7u)) & vec4<u32>(0x780000u);
  return bitcast<vec4<f32>>(v | vec4<u32>(0x3F800000u));
}

// ---- GEMV (m = 1) -----------------------------------------------------------------------
// 128 threads: 4 row sets of 32 lanes along K. A row set computes 4 rows: each lane reads one
// vec4<u32> per row per step (32 q4 or 16 q8 values, inside one group) and its x values from
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

const GV_TK: u32 = 32u;
const GV_SETS: u32 = 4u;
const GV_WG: u32 = 128u;
const GV_ROWS: u32 = 16u;  // GV_SETS * 4

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
fn gv_reduce(a: vec4<f32>, lid: u32) -> vec4<f32> {
  var r = vec4<f32>(sg_sum(a.x), sg_sum(a.y), sg_sum(a.z), sg_sum(a.w));
  var ss = 0.0;
  if (NORM) {
    let part = sg_sum(gv_ss);
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

// The dot products of x's row `xrow` with weight rows r.x..r.w (clamped in bounds), summed over
// this lane's share of K. Turn by turn the workgroup stages the next 32 chunks of x (NORM: times
// the norm weight) in workgroup memory with coalesced loads, once for its 4 row sets: read
// straight from global memory each lane's 8 vec4 sit 128 bytes apart, so the x loads, not the
// weights, filled the load units. A chunk's vec4s sit GV_XSTRIDE apart (one pad) so the 8 lanes
// of a quarter-warp hit distinct banks. NORM: gv_ss gets the thread's share of sum(x^2) over
// what it staged; gv_reduce totals it over the workgroup.
const GV_XSTRIDE: u32 = 9u;  // vec4 slots per staged chunk (8 for q4, 4 for q8, + 1 pad)
var<workgroup> gv_x: array<vec4<f32>, 288>;  // [32 chunks][GV_XSTRIDE]
var<private> gv_ss: f32;

fn gv_stage(xo: u32, it: u32, per: u32, lid: u32) {
  // per: vec4 per chunk (8 q4, 4 q8); the turn covers 32 * per vec4 of x.
  let k4 = p.k / 4u;
  for (var j = lid; j < 32u * per; j += GV_WG) {
    let gi = it * 32u * per + j;
    var v = vec4<f32>(0.0);
    if (gi < k4) {
      v = x4[xo + gi];
      if (NORM) {
        gv_ss += dot(v, v);
        v *= nw4[gi];
      }
    }
    gv_x[(j / per) * GV_XSTRIDE + j % per] = v;
  }
}

fn gv_rows(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let vals = select(32u, 16u, BITS == 8u);
  let per = vals / 4u;
  let nvec = p.k / vals;
  let groups = p.k / p.gs;
  let xo = xrow * (p.k / 4u);
  let turns = (nvec + GV_TK - 1u) / GV_TK;  // the same for every thread: barriers stay uniform
  var a0 = 0.0;
  var a1 = 0.0;
  var a2 = 0.0;
  var a3 = 0.0;
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nvec - 1u);  // lanes past the end compute on a valid chunk, dropped below
    let live = it * GV_TK + t < nvec;
    // The weights first: their loads stay in flight through the staging and the barrier.
    let g = (c * vals) / p.gs;
    let s = vec4<f32>(scale_at(r.x * groups + g), scale_at(r.y * groups + g), scale_at(r.z * groups + g),
                      scale_at(r.w * groups + g));
    let w0 = qw4[r.x * nvec + c];
    let w1 = qw4[r.y * nvec + c];
    let w2 = qw4[r.z * nvec + c];
    let w3 = qw4[r.w * nvec + c];
    gv_stage(xo, it, per, lid);
    workgroupBarrier();
    let xb = t * GV_XSTRIDE;
    let x0 = gv_x[xb];
    let x1 = gv_x[xb + 1u];
    let x2 = gv_x[xb + 2u];
    let x3 = gv_x[xb + 3u];
    if (BITS == 4u) {
      let x4_ = gv_x[xb + 4u];
      let x5 = gv_x[xb + 5u];
      let x6 = gv_x[xb + 6u];
      let x7 = gv_x[xb + 7u];
      // q = 16 * (v - 1.5): take the offset out once for the four rows.
      let off = 1.5 * dot(x0 + x1 + x2 + x3 + x4_ + x5 + x6 + x7, vec4<f32>(1.0));
      let d0 = q4_dot(w0.x, x0, x1) + q4_dot(w0.y, x2, x3) + q4_dot(w0.z, x4_, x5) + q4_dot(w0.w, x6, x7);
      let d1 = q4_dot(w1.x, x0, x1) + q4_dot(w1.y, x2, x3) + q4_dot(w1.z, x4_, x5) + q4_dot(w1.w, x6, x7);
      let d2 = q4_dot(w2.x, x0, x1) + q4_dot(w2.y, x2, x3) + q4_dot(w2.z, x4_, x5) + q4_dot(w2.w, x6, x7);
      let d3 = q4_dot(w3.x, x0, x1) + q4_dot(w3.y, x2, x3) + q4_dot(w3.z, x4_, x5) + q4_dot(w3.w, x6, x7);
      if (live) {
        a0 = fma(d0 - off, 16.0 * s.x, a0);
        a1 = fma(d1 - off, 16.0 * s.y, a1);
        a2 = fma(d2 - off, 16.0 * s.z, a2);
        a3 = fma(d3 - off, 16.0 * s.w, a3);
      }
    } else {
      let d0 = dot(q8_vals(w0.x), x0) + dot(q8_vals(w0.y), x1) + dot(q8_vals(w0.z), x2) + dot(q8_vals(w0.w), x3);
      let d1 = dot(q8_vals(w1.x), x0) + dot(q8_vals(w1.y), x1) + dot(q8_vals(w1.z), x2) + dot(q8_vals(w1.w), x3);
      let d2 = dot(q8_vals(w2.x), x0) + dot(q8_vals(w2.y), x1) + dot(q8_vals(w2.z), x2) + dot(q8_vals(w2.w), x3);
      let d3 = dot(q8_vals(w3.x), x0) + dot(q8_vals(w3.y), x1) + dot(q8_vals(w3.z), x2) + dot(q8_vals(w3.w), x3);
      if (live) {
        a0 = fma(d0, s.x, a0);
        a1 = fma(d1, s.y, a1);
        a2 = fma(d2, s.z, a2);
        a3 = fma(d3, s.w, a3);
      }
    }
    workgroupBarrier();  // before the next turn overwrites gv_x
  }
  return vec4<f32>(a0, a1, a2, a3);
}

// ---- q6k: GGUF Q6_K blocks, repacked to words (quant.h): per 256 values 52 words,
// ql[32] | qh[16] | scales[4] (16 int8), with d as an f16 in `sc` (one per block).
// A lane's chunk is 32 values: block b = c / 8, half h = (c / 4) % 2, t = c % 4; value l of
// the chunk (l = 0..31, element 128 h + 32 t + l of the block) is
//   q = (ql[64 h + 32 (t % 2) + l] >> (4 (t / 2))) & 15 | ((qh[32 h + l] >> (2 t)) & 3) << 4,
//   value = d * scales[8 h + 2 t + l / 16] * (q - 32).
// Built as v = 1 + q / 64 in the mantissa (no int-to-float): sum (q - 32) x = 64 sum v x - 96 sum x.
const Q6K_WORDS: u32 = 52u;

fn q6k_vals(ql: u32, qh: u32, t: u32) -> vec4<f32> {
  let b = ((ql >> (4u * (t / 2u))) & 0x0F0F0F0Fu) | (((qh >> (2u * t)) & 0x03030303u) << 4u);
  let v = (vec4<u32>(b << 17u, b << 9u, b << 1u, b >> 7u)) & vec4<u32>(0x7E0000u);
  return bitcast<vec4<f32>>(v | vec4<u32>(0x3F800000u));
}

// One row's chunk: d * (s0 * dot of values 0..15 + s1 * dot of 16..31), x sums given.
fn q6k_row(base4: u32, h: u32, t: u32, xa: array<vec4<f32>, 8>, sx0: f32, sx1: f32, d: f32) -> f32 {
  let ql0 = qw4[base4 + 4u * h + 2u * (t % 2u)];
  let ql1 = qw4[base4 + 4u * h + 2u * (t % 2u) + 1u];
  let qh0 = qw4[base4 + 8u + 2u * h];
  let qh1 = qw4[base4 + 8u + 2u * h + 1u];
  let scw = qw4[base4 + 12u];  // the 16 scales
  let sw = scw[(8u * h + 2u * t) / 4u];
  let s = vec4<f32>(unpack4xI8(sw));
  let si = (2u * t) % 4u;
  let s0 = select(s.x, s.z, si == 2u);
  let s1 = select(s.y, s.w, si == 2u);
  let d0 = dot(q6k_vals(ql0.x, qh0.x, t), xa[0]) + dot(q6k_vals(ql0.y, qh0.y, t), xa[1]) +
           dot(q6k_vals(ql0.z, qh0.z, t), xa[2]) + dot(q6k_vals(ql0.w, qh0.w, t), xa[3]);
  let d1 = dot(q6k_vals(ql1.x, qh1.x, t), xa[4]) + dot(q6k_vals(ql1.y, qh1.y, t), xa[5]) +
           dot(q6k_vals(ql1.z, qh1.z, t), xa[6]) + dot(q6k_vals(ql1.w, qh1.w, t), xa[7]);
  return d * (s0 * (64.0 * d0 - 96.0 * sx0) + s1 * (64.0 * d1 - 96.0 * sx1));
}

fn gv_rows_q6k(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let nchunks = p.k / 32u;
  let blocks = p.k / 256u;
  let xo = xrow * (p.k / 4u);
  let turns = (nchunks + GV_TK - 1u) / GV_TK;  // uniform, as in gv_rows
  let bw = Q6K_WORDS / 4u;  // vec4 per block
  var a = vec4<f32>(0.0);
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    gv_stage(xo, it, 8u, lid);  // x staged like q4's 32-value chunks
    workgroupBarrier();
    let xb = t * GV_XSTRIDE;
    var xa: array<vec4<f32>, 8>;  // indexed by constants only: stays in registers
    xa[0] = gv_x[xb];
    xa[1] = gv_x[xb + 1u];
    xa[2] = gv_x[xb + 2u];
    xa[3] = gv_x[xb + 3u];
    xa[4] = gv_x[xb + 4u];
    xa[5] = gv_x[xb + 5u];
    xa[6] = gv_x[xb + 6u];
    xa[7] = gv_x[xb + 7u];
    let b = c / 8u;
    let h = (c / 4u) % 2u;
    let tt = c % 4u;
    let sx0 = dot(xa[0] + xa[1] + xa[2] + xa[3], vec4<f32>(1.0));
    let sx1 = dot(xa[4] + xa[5] + xa[6] + xa[7], vec4<f32>(1.0));
    let v = vec4<f32>(q6k_row((r.x * blocks + b) * bw, h, tt, xa, sx0, sx1, scale_at(r.x * blocks + b)),
                      q6k_row((r.y * blocks + b) * bw, h, tt, xa, sx0, sx1, scale_at(r.y * blocks + b)),
                      q6k_row((r.z * blocks + b) * bw, h, tt, xa, sx0, sx1, scale_at(r.z * blocks + b)),
                      q6k_row((r.w * blocks + b) * bw, h, tt, xa, sx0, sx1, scale_at(r.w * blocks + b)));
    if (live) { a += v; }
    workgroupBarrier();
  }
  return a;
}

// The row set's dots for whichever weight format BITS names.
fn gv_dots(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  if (BITS == 6u) { return gv_rows_q6k(r, xrow, t, lid); }
  return gv_rows(r, xrow, t, lid);
}

fn gv_set(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * GV_SETS + lid / GV_TK;
}

fn gv_clamp(r: vec4<u32>) -> vec4<u32> { return min(r, vec4<u32>(p.n - 1u)); }

fn gv_finish(v: f32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[n]; }
  return o;
}

@compute @workgroup_size(GV_WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let rows = vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u);
  let acc = gv_reduce(gv_dots(gv_clamp(rows), p.x_row, lid % GV_TK, lid), lid);
  if (lid % GV_TK == 0u) {
    for (var r = 0u; r < 4u; r++) {
      if (n0 + r < p.n) { y[n0 + r] = gv_finish(acc[r], n0 + r); }
    }
  }
}

// Row of gate j in a weight whose (gate, up) rows are interleaved in blocks of 16; up is 16 on.
fn swiglu_gate_row(j: u32) -> u32 { return (j / 16u) * 32u + j % 16u; }

fn silu(g: f32) -> f32 { return g / (1.0 + exp(-g)); }

@compute @workgroup_size(GV_WG)
fn gemv_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let j0 = gv_set(wid, nwg, lid) * 2u;
  let g0 = swiglu_gate_row(j0);
  let g1 = swiglu_gate_row(j0 + 1u);
  let rows = vec4<u32>(g0, g0 + 16u, g1, g1 + 16u);
  let acc = gv_reduce(gv_dots(gv_clamp(rows), p.x_row, lid % GV_TK, lid), lid);
  if (lid % GV_TK == 0u) {
    let half = p.n / 2u;
    if (j0 < half) { y[j0] = silu(finish(acc.x, rows.x)) * finish(acc.y, rows.y); }
    if (j0 + 1u < half) { y[j0 + 1u] = silu(finish(acc.z, rows.z)) * finish(acc.w, rows.w); }
  }
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
        let v = gv_finish(acc[r], n);
        y[n] = v;
        let key = gv_key(v);
        if (key > best.x || best.y == 0xffffffffu) { best = vec2<u32>(key, n); }
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
    let wg = wid.x + wid.y * nwg.x;
    part[2u * wg] = best.x;
    part[2u * wg + 1u] = best.y;
  }
}
// ---- small M (2..7 rows) ----------------------------------------------------------------
// 256 threads: 32 along K times 8 row sets of RPT rows; one weight word per row per step,
// applied to every live row of x.
const WG: u32 = 256u;
const RPT: u32 = 4u;
const MMAX: u32 = 7u;
const SK: u32 = 32u;
var<workgroup> red_s: array<f32, 7168>;  // [RPT * MMAX][WG]

@compute @workgroup_size(WG)
fn small_m(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let t = lid % SK;
  let n0 = (wid.x + wid.y * nwg.x) * (RPT * (WG / SK)) + (lid / SK) * RPT;
  let per = select(8u, 4u, BITS == 8u);  // values per word
  let wpr = p.k / per;
  let groups = p.k / p.gs;
  let k4 = p.k / 4u;
  var rows: array<u32, RPT>;
  for (var r = 0u; r < RPT; r++) { rows[r] = min(n0 + r, p.n - 1u); }
  var acc: array<f32, 28>;  // [RPT][MMAX]
  for (var w = t; w < wpr; w += SK) {
    let k0 = w * per;
    let g = k0 / p.gs;
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        if (BITS == 4u) {
          xa[m] = x4[m * k4 + k0 / 4u];
          xb[m] = x4[m * k4 + k0 / 4u + 1u];
          xsum[m] = 1.5 * dot(xa[m] + xb[m], vec4<f32>(1.0));
        } else {
          xa[m] = x4[m * k4 + k0 / 4u];
        }
      }
    }
    for (var r = 0u; r < RPT; r++) {
      let word = qw[rows[r] * wpr + w];
      let s = scale_at(rows[r] * groups + g);
      if (BITS == 4u) {
        let lo = q4_mant(word);
        let hi = q4_mant(word >> 16u);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) {
            acc[r * MMAX + m] = fma(dot(lo, xa[m]) + dot(hi, xb[m]) - xsum[m], 16.0 * s, acc[r * MMAX + m]);
          }
        }
      } else {
        let v = q8_vals(word);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) { acc[r * MMAX + m] = fma(dot(v, xa[m]), s, acc[r * MMAX + m]); }
        }
      }
    }
  }
  for (var i = 0u; i < RPT * MMAX; i++) { red_s[i * WG + lid] = acc[i]; }
  workgroupBarrier();
  for (var s = SK / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      for (var i = 0u; i < RPT * MMAX; i++) { red_s[i * WG + lid] += red_s[i * WG + lid + s]; }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    for (var r = 0u; r < RPT; r++) {
      let n = n0 + r;
      if (n >= p.n) { continue; }
      for (var m = 0u; m < p.m; m++) { y[m * p.n + n] = finish_mn(red_s[(r * MMAX + m) * WG + lid], m, n); }
    }
  }
}

// ---- int8 activations (gemm route, first kernel) ----------------------------------------
// One thread per (row m, group g): scale = absmax / 127, q = round(x * 127 / absmax).
// For q4 weights each 8 values are stored as two words, k = 0, 2, 4, 6 then 1, 3, 5, 7, the
// order in which the gemm unpacks the weight nibbles.
@compute @workgroup_size(64)
fn quantize_act(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lid;
  let groups = p.k / p.gs;
  if (i >= p.m * groups) { return; }
  let m = i / groups;
  let g = i % groups;
  let base = (m * p.k + g * p.gs) / 4u;  // vec4 index into x, and word index into xq
  var amax = 0.0;
  for (var j = 0u; j < p.gs / 4u; j++) {
    let v = abs(x4[base + j]);
    amax = max(amax, max(max(v.x, v.y), max(v.z, v.w)));
  }
  xs[i] = amax / 127.0;
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  if (BITS == 4u) {
    for (var j = 0u; j < p.gs / 8u; j++) {
      let a = x4[base + 2u * j] * inv;
      let b = x4[base + 2u * j + 1u] * inv;
      xq[base + 2u * j] = pack4xI8(vec4<i32>(round(vec4<f32>(a.x, a.z, b.x, b.z))));
      xq[base + 2u * j + 1u] = pack4xI8(vec4<i32>(round(vec4<f32>(a.y, a.w, b.y, b.w))));
    }
  } else {
    for (var j = 0u; j < p.gs / 4u; j++) {
      xq[base + j] = pack4xI8(vec4<i32>(round(x4[base + j] * inv)));
    }
  }
}

// ---- int8 x int4/int8 GEMM (gemm route, second kernel) -----------------------------------
// 64 x 128 outputs per workgroup, 4 x 8 per thread (rows tm + 16i, columns tn + 16j), K in
// steps of 32. Integer sums per group, then one f32 multiply-add by both scales.
const BM: u32 = 64u;
const BN: u32 = 128u;
var<workgroup> as_: array<u32, 512>;   // [8 words][BM]
var<workgroup> bs_: array<u32, 1024>;  // [8 words][BN], signed int8 quadruples
var<workgroup> sx: array<f32, BM>;
var<workgroup> sw: array<f32, BN>;

// Stored nibbles (q + 8, one per byte) to signed bytes q: flip bit 3, then sign-extend it.
fn q4_to_i8(v: u32) -> u32 {
  let t = v ^ 0x08080808u;
  return t | ((t & 0x08080808u) * 0x1Eu);
}

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let tn = lid % 16u;
  let tm = lid / 16u;
  let groups = p.k / p.gs;
  let k4 = p.k / 4u;
  let k8 = p.k / 8u;
  var acci: array<array<i32, 8>, 4>;
  var accf: array<array<f32, 8>, 4>;
  for (var k0 = 0u; k0 < p.k; k0 += 32u) {
    let g = k0 / p.gs;
    for (var e = 0u; e < 2u; e++) {
      let idx = lid + WG * e;
      let mm = idx / 8u;
      let kw = idx % 8u;
      var v = 0u;
      if (m0 + mm < p.m) { v = xq[(m0 + mm) * k4 + k0 / 4u + kw]; }
      as_[kw * BM + mm] = v;
    }
    if (BITS == 4u) {
      for (var e = 0u; e < 2u; e++) {
        let idx = lid + WG * e;
        let nn = idx / 4u;
        let w = idx % 4u;
        var v = 0x88888888u;  // zeros
        if (n0 + nn < p.n) { v = qw[(n0 + nn) * k8 + k0 / 8u + w]; }
        bs_[(2u * w) * BN + nn] = q4_to_i8(v & 0x0F0F0F0Fu);
        bs_[(2u * w + 1u) * BN + nn] = q4_to_i8((v >> 4u) & 0x0F0F0F0Fu);
      }
    } else {
      for (var e = 0u; e < 4u; e++) {
        let idx = lid + WG * e;
        let nn = idx / 8u;
        let w = idx % 8u;
        var v = 0u;
        if (n0 + nn < p.n) { v = qw[(n0 + nn) * k4 + k0 / 4u + w]; }
        bs_[w * BN + nn] = v;
      }
    }
    if (lid < BM) {
      var s = 0.0;
      if (m0 + lid < p.m) { s = xs[(m0 + lid) * groups + g]; }
      sx[lid] = s;
    } else if (lid < BM + BN) {
      let nn = lid - BM;
      var s = 0.0;
      if (n0 + nn < p.n) { s = scale_at((n0 + nn) * groups + g); }
      sw[nn] = s;
    }
    workgroupBarrier();
    for (var kw = 0u; kw < 8u; kw++) {
      var a: array<u32, 4>;
      var b: array<u32, 8>;
      for (var i = 0u; i < 4u; i++) { a[i] = as_[kw * BM + tm + 16u * i]; }
      for (var j = 0u; j < 8u; j++) { b[j] = bs_[kw * BN + tn + 16u * j]; }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 8u; j++) { acci[i][j] += dot4I8Packed(a[i], b[j]); }
      }
    }
    if ((k0 + 32u) % p.gs == 0u) {
      for (var i = 0u; i < 4u; i++) {
        let s = sx[tm + 16u * i];
        for (var j = 0u; j < 8u; j++) {
          accf[i][j] = fma(f32(acci[i][j]), s * sw[tn + 16u * j], accf[i][j]);
          acci[i][j] = 0;
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + tm + 16u * i;
    if (m >= p.m) { continue; }
    for (var j = 0u; j < 8u; j++) {
      let n = n0 + tn + 16u * j;
      if (n < p.n) { y[m * p.n + n] = finish_mn(accf[i][j], m, n); }
    }
  }
}
