// Quantized linear, q4gsw, q8 and the K-quants (ops/quant/quant.h has the layouts; linear_q.h
// the routes): y[m, n] = sum_k x[m, k] * value(n, k) + bias[n].
//! use rope_turn
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
  pos: u32,    // the token's position (gemv_rope)
  n_ctx: u32,  // positions per cache head (gemv_rope)
  pad0: u32,
}

override BITS: u32 = 4u;  // 2: q2k, 3: q3k, 4: q4gsw / q4k / q4_1, 5: q5k / q5_0 / q5_1, 6: q6k, 8: q8
// q unsigned, value = scale * q - min per group (q4k, q5k, q4_1, q5_0, q5_1): the gemm
// subtracts min * sum(x) per group instead of making q signed.
override AFFINE: bool = false;
// Where a group's factors are: 0 an f16 scale per group in `sc` (q4gsw, q8, q5_0, q6k's d),
// 1 the K-quant regions (q4k, q5k), 2 an f16 (d, m) pair per group of 32 (q4_1, q5_1),
// 3 iq4_xs's block headers (d and the 6-bit sub-block scales).
override SCALES: u32 = 0u;
// iq4_xs: each nibble indexes the non-linear grid iq4_f (quant.h's kIq4Values) instead of
// being the integer itself; the weights are then signed, with no min.
override NL: bool = false;
var<private> iq4_f: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                                     1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

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

// ---- GEMV (m = 1) -----------------------------------------------------------------------
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
const GV_SETS: u32 = 4u;
override GV_WG: u32 = GV_SETS * GV_TK;
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
// what it staged; gv_reduce totals it over the workgroup.
const GV_XSTRIDE: u32 = 9u;  // vec4 slots per staged chunk (8 for q4, 4 for q8, + 1 pad)
var<workgroup> gv_x: array<vec4<f32>, GV_TK * GV_XSTRIDE>;  // [GV_TK chunks][GV_XSTRIDE]
var<private> gv_ss: f32;

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
        gv_ss += dot(v, v);
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
  return vec2<f32>(s, s * select(select(0.0, 16.0, BITS == 5u), 8.0, BITS == 4u));
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
      if (NL) {  // iq4_xs: the grid values times the sub-block's scale, no min
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

// Turn `it`'s 32-value chunk j from threads 4j .. 4j + 3, 8 values each, into gv_x's slots
// 3j, 3j + 1 (8 int8 quadruples, bitcast: gv_x is f32) and 3j + 2 = (scale, sum of the first 16
// int8 values, sum of the last 16, 0); the 3-vec4 stride keeps a quarter-warp's vec4 reads
// on distinct banks. q4/q5 words hold values 0, 2, 4, 6 then 1, 3, 5, 7 of each 8, the order
// their nibbles unpack in; q2k, q3k, q6k and q8 words are in natural order. h: gv_stage's.
fn gv_stage_i8(xo: u32, it: u32, h: u32, lid: u32) {
  let j = lid / 4u;
  let e = lid % 4u;
  let gi = ((it * GV_TK + j) * gv_xh() + h) * 8u + 2u * e;  // vec4 index in the row; K is a multiple of 32
  var a = vec4<f32>(0.0);
  var b = vec4<f32>(0.0);
  if (gi < p.k / 4u) {
    a = x4[xo + gi];
    b = x4[xo + gi + 1u];
    if (NORM) {
      gv_ss += dot(a, a) + dot(b, b);
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
  gv_x[3u * j + e / 2u][2u * (e % 2u)] = bitcast<f32>(w0);
  gv_x[3u * j + e / 2u][2u * (e % 2u) + 1u] = bitcast<f32>(w1);
  if (e == 0u) { gv_x[3u * j + 2u] = vec4<f32>(amax / 127.0, hs, other, 0.0); }
}

// The staged chunk t: its 8 int8 words and (scale, half sums).
struct XChunk {
  a: vec4<u32>,
  b: vec4<u32>,
  s: vec4<f32>,
}

fn gv_xchunk(t: u32) -> XChunk {
  return XChunk(bitcast<vec4<u32>>(gv_x[3u * t]), bitcast<vec4<u32>>(gv_x[3u * t + 1u]), gv_x[3u * t + 2u]);
}

// q4 nibble word w (values 8i .. 8i + 7 of a chunk) against staged words xe (values 0, 2, 4, 6)
// and xo (1, 3, 5, 7); q5: with the fifth bits of the 8 values in bits 0..7 of hb.
fn i4_dot(w: u32, hb: u32, xe: u32, xo: u32) -> i32 {
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

// gv_rows with int8 x: every format but q6k (gv_rows_q6k_i8), q2k / q3k (gv_rows_q23_i8) and
// iq4_xs (no XI8).
// value = scale * q - min, so a chunk adds xs * (scale * dot(q, qx) - min * sum(qx)).
fn gv_rows_i8(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
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
    gv_stage_i8(xo, it, 0u, lid);
    workgroupBarrier();
    let x = gv_xchunk(t);
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
    gv_stage(xo, it, 8u, 0u, lid);  // x staged like q4's 32-value chunks
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

// gv_rows_q6k with int8 x (XI8): the chunk's 6-bit q as bytes (natural order, as the gemm
// builds them), dot4I8Packed per 4 values; (q - 32) comes out as 32 times the half's int8 sum.
fn q6k_bytes(ql: u32, qh: u32, t: u32) -> u32 {
  return ((ql >> (4u * (t / 2u))) & 0x0F0F0F0Fu) | (((qh >> (2u * t)) & 0x03030303u) << 4u);
}

// One row's chunk of q6k words, loaded before the turn's staging so the loads overlap it.
struct Q6Row {
  ql0: vec4<u32>,
  ql1: vec4<u32>,
  qh0: vec4<u32>,
  qh1: vec4<u32>,
  sw: u32,  // the word holding the chunk's two int8 scales
  d: f32,
}

// Chunk c of row r (block c / 8, half h = (c / 4) % 2, quarter t = c % 4).
fn q6k_load(r: u32, c: u32) -> Q6Row {
  let blk = r * (p.k / 256u) + c / 8u;
  let base4 = blk * (Q6K_WORDS / 4u);
  let h = (c / 4u) % 2u;
  let t = c % 4u;
  return Q6Row(qw4[base4 + 4u * h + 2u * (t % 2u)], qw4[base4 + 4u * h + 2u * (t % 2u) + 1u],
               qw4[base4 + 8u + 2u * h], qw4[base4 + 8u + 2u * h + 1u], qw4[base4 + 12u][(8u * h + 2u * t) / 4u],
               scale_at(blk));
}

fn q6k_row_i8(o: Q6Row, t: u32, x: XChunk) -> f32 {
  let s = vec4<f32>(unpack4xI8(o.sw));
  let hi = (t % 2u) == 1u;  // the scale pair's place in its word: bytes 0, 1 or 2, 3
  let s0 = select(s.x, s.z, hi);
  let s1 = select(s.y, s.w, hi);
  let i0 = dot4I8Packed(q6k_bytes(o.ql0.x, o.qh0.x, t), x.a.x) + dot4I8Packed(q6k_bytes(o.ql0.y, o.qh0.y, t), x.a.y) +
           dot4I8Packed(q6k_bytes(o.ql0.z, o.qh0.z, t), x.a.z) + dot4I8Packed(q6k_bytes(o.ql0.w, o.qh0.w, t), x.a.w);
  let i1 = dot4I8Packed(q6k_bytes(o.ql1.x, o.qh1.x, t), x.b.x) + dot4I8Packed(q6k_bytes(o.ql1.y, o.qh1.y, t), x.b.y) +
           dot4I8Packed(q6k_bytes(o.ql1.z, o.qh1.z, t), x.b.z) + dot4I8Packed(q6k_bytes(o.ql1.w, o.qh1.w, t), x.b.w);
  return o.d * (s0 * fma(-32.0, x.s.y, f32(i0)) + s1 * fma(-32.0, x.s.z, f32(i1)));
}

fn gv_rows_q6k_i8(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let nchunks = p.k / 32u;
  let xo = xrow * (p.k / 4u);
  let turns = (nchunks + GV_TK - 1u) / GV_TK;
  var a = vec4<f32>(0.0);
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    let o0 = q6k_load(r.x, c);
    let o1 = q6k_load(r.y, c);
    let o2 = q6k_load(r.z, c);
    let o3 = q6k_load(r.w, c);
    gv_stage_i8(xo, it, 0u, lid);
    workgroupBarrier();
    let x = gv_xchunk(t);
    let tt = c % 4u;
    let v = vec4<f32>(q6k_row_i8(o0, tt, x), q6k_row_i8(o1, tt, x), q6k_row_i8(o2, tt, x), q6k_row_i8(o3, tt, x));
    if (live) { a = fma(v, vec4<f32>(x.s.x), a); }
    workgroupBarrier();
  }
  return a;
}

// ---- q2k / q3k: GGUF Q2_K / Q3_K blocks, repacked to 2-bit planes (quant.h) ---------------
// Per 256 values: q2k 20 words = 16 plane words | 4 words of (scale | min << 4) bytes, (d, dmin)
// per block in `sc`; q3k 28 words = 16 plane words | 8 third-bit words | 4 words of int8 scales,
// d an f16 in `sc`. Plane word w holds values 16w + 4s + b in bits 8b + 2s, so
// (w >> 2s) & 0x03030303 is values 16w + 4s .. 16w + 4s + 3 as bytes (natural order), and a vec4
// of plane words is 64 consecutive values: in the gemv a lane takes a 64-value chunk per turn,
// one vec4 per row, while the workgroup stages x in two halves of 32 (gv_stage's h).
//   q2k  value = d * scale * q - dmin * min,  q3k  value = d * scale * (q - 4),  per 16 values.
fn q23_block_words() -> u32 { return select(20u, 28u, BITS == 3u); }

// What a row's 64-value chunk needs, loaded before the turn's staging.
struct Q23Row {
  q: vec4<u32>,   // the 4 plane words
  hb: vec2<u32>,  // q3k: the chunk's 2 third-bit words
  sub: u32,       // the 4 sub-blocks' scale bytes
  d: vec2<f32>,   // (d, dmin); q3k (d, 0)
}

// Chunk c of row r: block c / 4, quarter u = c % 4 (q3k's block is 7 vec4: planes, third bits,
// scales; q2k's 5: planes, scale bytes).
fn q23_load(r: u32, c: u32) -> Q23Row {
  let blk = r * (p.k / 256u) + c / 4u;
  let u = c % 4u;
  let base4 = blk * (q23_block_words() / 4u);
  let q = qw4[base4 + u];
  if (BITS == 3u) {
    let hv = qw4[base4 + 4u + u / 2u];
    return Q23Row(q, select(hv.xy, hv.zw, (u % 2u) == 1u), qw4[base4 + 6u][u], vec2<f32>(scale_at(blk), 0.0));
  }
  return Q23Row(q, vec2<u32>(0u), qw4[base4 + 4u][u], unpack2x16float(sc[blk]));
}

// Plane s of the chunk's plane word wi: 4 values' q as bytes (q3k: with the third bit).
fn q23_bytes(o: Q23Row, wi: u32, s: u32) -> u32 {
  var b = (o.q[wi] >> (2u * s)) & 0x03030303u;
  if (BITS == 3u) { b |= ((o.hb[wi / 2u] >> (4u * (wi % 2u) + s)) & 0x01010101u) << 2u; }
  return b;
}

// Bytes b's 4 values as f32 1 + q / 4 (q2k) or 1 + q / 8 (q3k), placed in the mantissa of 1.0
// (q4_mant's trick): q = 4 (v - 1) or 8 (v - 1).
fn q23_vals(b: u32) -> vec4<f32> {
  let sh = select(21u, 20u, BITS == 3u);
  let v = vec4<u32>(b << sh, b << (sh - 8u), b << (sh - 16u), b >> (24u - sh)) &
          vec4<u32>(select(0x600000u, 0x700000u, BITS == 3u));
  return bitcast<vec4<f32>>(v | vec4<u32>(0x3F800000u));
}

// Sub-block wi of the chunk (plane word wi, 16 values) against x values xa..xd (4 each) summing
// to sx: q2k d sc 4 (dot(v, x) - sx) - dmin m sx; q3k d sc (8 dot(v, x) - 12 sx).
fn q23_sub(o: Q23Row, wi: u32, xa: vec4<f32>, xb: vec4<f32>, xc: vec4<f32>, xd: vec4<f32>, sx: f32) -> f32 {
  let dv = dot(q23_vals(q23_bytes(o, wi, 0u)), xa) + dot(q23_vals(q23_bytes(o, wi, 1u)), xb) +
           dot(q23_vals(q23_bytes(o, wi, 2u)), xc) + dot(q23_vals(q23_bytes(o, wi, 3u)), xd);
  let sb = o.sub >> (8u * wi);
  if (BITS == 3u) { return o.d.x * f32(bitcast<i32>(sb << 24u) >> 24u) * fma(8.0, dv, -12.0 * sx); }
  return o.d.x * f32(sb & 15u) * 4.0 * (dv - sx) - o.d.y * f32((sb >> 4u) & 15u) * sx;
}

fn gv_rows_q23(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let nchunks = p.k / 64u;
  let xo = xrow * (p.k / 4u);
  let turns = (nchunks + GV_TK - 1u) / GV_TK;  // uniform, as in gv_rows
  var a = vec4<f32>(0.0);
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    let o0 = q23_load(r.x, c);
    let o1 = q23_load(r.y, c);
    let o2 = q23_load(r.z, c);
    let o3 = q23_load(r.w, c);
    for (var h = 0u; h < 2u; h++) {  // values 32h .. 32h + 31 of the chunk: plane words 2h, 2h + 1
      gv_stage(xo, it, 8u, h, lid);
      workgroupBarrier();
      let xb = t * GV_XSTRIDE;
      let x0 = gv_x[xb];
      let x1 = gv_x[xb + 1u];
      let x2 = gv_x[xb + 2u];
      let x3 = gv_x[xb + 3u];
      let x4_ = gv_x[xb + 4u];
      let x5 = gv_x[xb + 5u];
      let x6 = gv_x[xb + 6u];
      let x7 = gv_x[xb + 7u];
      let s0 = dot(x0 + x1 + x2 + x3, vec4<f32>(1.0));
      let s1 = dot(x4_ + x5 + x6 + x7, vec4<f32>(1.0));
      let w = 2u * h;
      let v = vec4<f32>(
          q23_sub(o0, w, x0, x1, x2, x3, s0) + q23_sub(o0, w + 1u, x4_, x5, x6, x7, s1),
          q23_sub(o1, w, x0, x1, x2, x3, s0) + q23_sub(o1, w + 1u, x4_, x5, x6, x7, s1),
          q23_sub(o2, w, x0, x1, x2, x3, s0) + q23_sub(o2, w + 1u, x4_, x5, x6, x7, s1),
          q23_sub(o3, w, x0, x1, x2, x3, s0) + q23_sub(o3, w + 1u, x4_, x5, x6, x7, s1));
      if (live) { a += v; }
      workgroupBarrier();
    }
  }
  return a;
}

// XI8: sub-block wi against 16 int8 x (xw) whose int sum is hs, in units of the x scale:
// q2k d sc dot(q, qx) - dmin m hs; q3k d sc (dot(q, qx) - 4 hs).
fn q23_sub_i8(o: Q23Row, wi: u32, xw: vec4<u32>, hs: f32) -> f32 {
  let id = f32(dot4I8Packed(q23_bytes(o, wi, 0u), xw.x) + dot4I8Packed(q23_bytes(o, wi, 1u), xw.y) +
               dot4I8Packed(q23_bytes(o, wi, 2u), xw.z) + dot4I8Packed(q23_bytes(o, wi, 3u), xw.w));
  let sb = o.sub >> (8u * wi);
  if (BITS == 3u) { return o.d.x * f32(bitcast<i32>(sb << 24u) >> 24u) * fma(-4.0, hs, id); }
  return o.d.x * f32(sb & 15u) * id - o.d.y * f32((sb >> 4u) & 15u) * hs;
}

fn gv_rows_q23_i8(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let nchunks = p.k / 64u;
  let xo = xrow * (p.k / 4u);
  let turns = (nchunks + GV_TK - 1u) / GV_TK;
  var a = vec4<f32>(0.0);
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nchunks - 1u);
    let live = it * GV_TK + t < nchunks;
    let o0 = q23_load(r.x, c);
    let o1 = q23_load(r.y, c);
    let o2 = q23_load(r.z, c);
    let o3 = q23_load(r.w, c);
    for (var h = 0u; h < 2u; h++) {
      gv_stage_i8(xo, it, h, lid);
      workgroupBarrier();
      let x = gv_xchunk(t);
      let w = 2u * h;
      let v = vec4<f32>(q23_sub_i8(o0, w, x.a, x.s.y) + q23_sub_i8(o0, w + 1u, x.b, x.s.z),
                        q23_sub_i8(o1, w, x.a, x.s.y) + q23_sub_i8(o1, w + 1u, x.b, x.s.z),
                        q23_sub_i8(o2, w, x.a, x.s.y) + q23_sub_i8(o2, w + 1u, x.b, x.s.z),
                        q23_sub_i8(o3, w, x.a, x.s.y) + q23_sub_i8(o3, w + 1u, x.b, x.s.z));
      if (live) { a = fma(v, vec4<f32>(x.s.x), a); }
      workgroupBarrier();
    }
  }
  return a;
}

// The row set's dots for whichever weight format BITS names.
fn gv_dots(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  if (XI8 && BITS <= 3u) { return gv_rows_q23_i8(r, xrow, t, lid); }
  if (BITS <= 3u) { return gv_rows_q23(r, xrow, t, lid); }
  if (XI8 && BITS == 6u) { return gv_rows_q6k_i8(r, xrow, t, lid); }
  if (XI8) { return gv_rows_i8(r, xrow, t, lid); }
  if (BITS == 6u) { return gv_rows_q6k(r, xrow, t, lid); }
  return gv_rows(r, xrow, t, lid);
}

fn gv_set(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * GV_SETS + lid / GV_TK;
}

fn gv_clamp(r: vec4<u32>) -> vec4<u32> { return min(r, vec4<u32>(p.n - 1u)); }

fn gv_finish(v: f32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[p.y_off + n]; }
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
      if (n0 + r < p.n) { y[p.y_off + n0 + r] = gv_finish(acc[r], n0 + r); }
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
// ---- gemv_rope: the q|k|v projection with RoPE and the KV-cache write in its epilogue ----
// The weight's rows are q heads, then k heads, then v heads (several weights: each kernel its
// columns from y_off). Lane 0 of a row set holds 4 consecutive columns of one head, i.e. two
// rotation pairs (2j, 2j + 1) of the normal layout: it turns the q and k ones (rope_turn.wgsl)
// and writes q to y [1, q columns], k and v to the caches [n_kv_heads, n_ctx, head_dim] at
// p.pos. Neox pairs (j, j + n_rot / 2) span row sets: their gemv writes q|k|v, then rope_qkv.
override ROPE_HD: u32 = 64u;      // head_dim, a multiple of 4
override ROPE_NROT: u32 = 64u;    // rotated dims per head, a multiple of 4
override ROPE_Q: u32 = 0u;        // q columns (n_heads * head_dim)
override ROPE_KV: u32 = 0u;       // k columns, and v columns (n_kv_heads * head_dim)
override ROPE_F16: bool = false;  // the caches hold f16 pairs

@group(0) @binding(12) var<storage, read> rope_freqs: array<u32>;  // [n_rot / 2][hi, lo]
@group(0) @binding(13) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(14) var<storage, read_write> v_cache: array<u32>;

// Pair (e, e + 1) of a head turned at p.pos; past n_rot it passes through.
fn rope_pair(v: vec2<f32>, e: u32) -> vec2<f32> {
  if (e >= ROPE_NROT) { return v; }
  return rope_turn(v.x, v.y, p.pos, rope_freqs[e], rope_freqs[e + 1u]);  // pair e / 2's (hi, lo)
}

// Columns col..col + 3 of k (or v) into the cache row of their head at p.pos.
fn rope_store(to_k: bool, col: u32, v: vec4<f32>) {
  let at = ((col / ROPE_HD) * p.n_ctx + p.pos) * ROPE_HD + col % ROPE_HD;  // element index
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
  let rows = vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u);
  let acc = gv_reduce(gv_dots(gv_clamp(rows), 0u, lid % GV_TK, lid), lid);
  if (lid % GV_TK != 0u || n0 >= p.n) { return; }
  let c = p.y_off + n0;  // the q|k|v column of row n0 (weights have whole heads: n0 + 3 < p.n)
  var v = vec4<f32>(finish(acc.x, n0), finish(acc.y, n0 + 1u), finish(acc.z, n0 + 2u), finish(acc.w, n0 + 3u));
  if (c < ROPE_Q + ROPE_KV) {
    let e = c % ROPE_HD;
    v = vec4<f32>(rope_pair(v.xy, e), rope_pair(v.zw, e + 2u));
  }
  if (c < ROPE_Q) {
    for (var i = 0u; i < 4u; i++) { y[c + i] = v[i]; }
    return;
  }
  let kv = c - ROPE_Q;
  rope_store(kv < ROPE_KV, kv % ROPE_KV, v);
}

// ---- small M (2..7 rows) ----------------------------------------------------------------
// 256 threads: 32 along K times 8 row sets of RPT rows; one weight word per row per step,
// applied to every live row of x (f32 activations; q6k has no small_m: its gemm serves).
const WG: u32 = 256u;
const RPT: u32 = 4u;
const MMAX: u32 = 7u;
const SK: u32 = 32u;
// The lanes along K are summed by subgroup shuffles, then (where a subgroup is narrower than
// SK) the SK / SG partials of each lane group through red_s, RCH accumulators at a time:
// red_s is [RCH][WG / SG] words (7 KiB without subgroups, one word with SG >= SK), so the
// kernel fits WebGPU's default 16 KiB of workgroup storage.
const RCH: u32 = 7u;
override SM_RED: u32 = 1792u;  // RCH * WG / SG, or 1 when SG >= SK
var<workgroup> red_s: array<f32, SM_RED>;

@compute @workgroup_size(WG)
fn small_m(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let t = lid % SK;
  let n0 = (wid.x + wid.y * nwg.x) * (RPT * (WG / SK)) + (lid / SK) * RPT;
  let per = select(8u, 4u, BITS == 8u);  // values per word
  let wpr = select(p.k / per, 0u, BITS <= 3u);  // q2k / q3k: their own loop below
  let rw = q_row_words();
  let k4 = p.k / 4u;
  let qs = select(16.0, 32.0, BITS == 5u);  // q = qs * (v - 1), as in the gemv
  var rows: array<u32, RPT>;
  for (var r = 0u; r < RPT; r++) { rows[r] = min(n0 + r, p.n - 1u); }
  var acc: array<f32, 28>;  // [RPT][MMAX]
  // q2k / q3k: one plane word (16 values, one sub-block) per row and step, its scale byte and
  // (q3k) third bits beside it, the gemv's q23_sub on each live row of x.
  for (var g = select(p.k, t, BITS <= 3u); g < p.k / 16u; g += SK) {
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xc: array<vec4<f32>, MMAX>;
    var xd: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        let xi = m * k4 + 4u * g;
        xa[m] = x4[xi];
        xb[m] = x4[xi + 1u];
        xc[m] = x4[xi + 2u];
        xd[m] = x4[xi + 3u];
        xsum[m] = dot(xa[m] + xb[m] + xc[m] + xd[m], vec4<f32>(1.0));
      }
    }
    let pw = g % 16u;  // the plane word in its block
    for (var r = 0u; r < RPT; r++) {
      let rb = rows[r] * rw + (g / 16u) * q23_block_words();
      let blk = rows[r] * (p.k / 256u) + g / 16u;
      let sb = qw[rb + select(16u, 24u, BITS == 3u) + pw / 4u] >> (8u * (pw % 4u));
      var o = Q23Row(vec4<u32>(qw[rb + pw], 0u, 0u, 0u), vec2<u32>(0u), sb, vec2<f32>(0.0));
      if (BITS == 3u) {
        o.hb.x = qw[rb + 16u + pw / 2u] >> (4u * (pw % 2u));
        o.d = vec2<f32>(scale_at(blk), 0.0);
      } else {
        o.d = unpack2x16float(sc[blk]);
      }
      for (var m = 0u; m < MMAX; m++) {
        if (m < p.m) { acc[r * MMAX + m] += q23_sub(o, 0u, xa[m], xb[m], xc[m], xd[m], xsum[m]); }
      }
    }
  }
  for (var w = t; w < wpr; w += SK) {
    let k0 = w * per;
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        xa[m] = x4[m * k4 + k0 / 4u];
        if (BITS != 8u) {
          xb[m] = x4[m * k4 + k0 / 4u + 1u];
          xsum[m] = dot(xa[m] + xb[m], vec4<f32>(1.0));
        }
      }
    }
    for (var r = 0u; r < RPT; r++) {
      let word = qw[rows[r] * rw + w];
      let f = gv_affine(rows[r], k0);
      if (BITS == 8u) {
        let v = q8_vals(word);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) { acc[r * MMAX + m] = fma(dot(v, xa[m]), f.x, acc[r * MMAX + m]); }
        }
      } else {
        var lo: vec4<f32>;
        var hi: vec4<f32>;
        if (NL) {
          lo = nl_vals(word);
          hi = nl_vals(word >> 16u);
          for (var m = 0u; m < MMAX; m++) {
            if (m < p.m) { acc[r * MMAX + m] = fma(dot(lo, xa[m]) + dot(hi, xb[m]), f.x, acc[r * MMAX + m]); }
          }
          continue;
        }
        if (BITS == 5u) {
          let hb = qw[rows[r] * rw + p.k / 8u + w / 4u] >> (8u * (w % 4u));
          lo = q5_mant(word, hb);
          hi = q5_mant(word >> 16u, hb >> 4u);
        } else {
          lo = q4_mant(word);
          hi = q4_mant(word >> 16u);
        }
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) {
            let d = dot(lo, xa[m]) + dot(hi, xb[m]) - xsum[m];
            acc[r * MMAX + m] += fma(d, qs * f.x, -f.y * xsum[m]);
          }
        }
      }
    }
  }
  for (var i = 0u; i < RPT * MMAX; i++) { acc[i] = sg_sum(acc[i]); }
  if (SG < SK) {
    let width = WG / SG;  // partials held by lanes t % SG == 0, lane group g's at g * SK / SG
    for (var c0 = 0u; c0 < RPT * MMAX; c0 += RCH) {
      if (t % SG == 0u) {
        for (var j = 0u; j < RCH && c0 + j < RPT * MMAX; j++) { red_s[j * width + lid / SG] = acc[c0 + j]; }
      }
      workgroupBarrier();
      if (t == 0u) {
        for (var j = 0u; j < RCH && c0 + j < RPT * MMAX; j++) {
          var sum = 0.0;
          for (var q = 0u; q < SK / SG; q++) { sum += red_s[j * width + lid / SG + q]; }
          acc[c0 + j] = sum;
        }
      }
      workgroupBarrier();
    }
  }
  if (t == 0u) {
    for (var r = 0u; r < RPT; r++) {
      let n = n0 + r;
      if (n >= p.n) { continue; }
      for (var m = 0u; m < p.m; m++) { y[m * p.ld + p.y_off + n] = finish_mn(acc[r * MMAX + m], m, n); }
    }
  }
}

// ---- int8 activations (gemm route, first kernel) ----------------------------------------
// One thread per (row m, group g): scale = absmax / 127, q = round(x * 127 / absmax).
// For q4/q5 weights each 8 values are stored as two words, k = 0, 2, 4, 6 then 1, 3, 5, 7, the
// order in which the gemm unpacks the weight nibbles. The K-quants use groups of 32 (gs).
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
  if (BITS == 4u || BITS == 5u) {
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

// ---- int8 x int4/int5/int6/int8 GEMM (gemm route, second kernel) -------------------------
// 64 x 128 outputs per workgroup, 4 x 8 per thread (rows tm + 16i, columns tn + 16j), K in
// steps of 32. Integer sums per group, then one f32 multiply-add by both scales. The K-quants
// flush every 32 values: the AFFINE formats (unsigned q, value = a q - b) subtract b times the integer sum
// of the activations; q6k (q - 32 signed, an int8 scale per 16 values) and q3k (q - 4 signed,
// likewise) weight the two halves' integer sums by their scales before the flush by d; q2k
// weights them by its 4-bit scales and takes dmin * min * sum(x) off each half.
const BM: u32 = 64u;
const BN: u32 = 128u;
var<workgroup> as_: array<u32, 512>;   // [8 words][BM]
var<workgroup> bs_: array<u32, 1024>;  // [8 words][BN], signed int8 quadruples
var<workgroup> sx: array<f32, BM>;
var<workgroup> sw: array<f32, BN>;
var<workgroup> smin: array<f32, BN>;   // AFFINE: the group's min; q2k: dmin
var<workgroup> sk6: array<u32, BN>;    // q6k, q3k, q2k: the two sub-block scales of the step, bytes 0 and 1

// Stored nibbles (q + 8, one per byte) to signed bytes q: flip bit 3, then sign-extend it.
fn q4_to_i8(v: u32) -> u32 {
  let t = v ^ 0x08080808u;
  return t | ((t & 0x08080808u) * 0x1Eu);
}

// Bits 0, 2, 4, 6 of e to bit 4 of bytes 0..3 (q5k's fifth bits beside the nibble bytes).
fn spread5(e: u32) -> u32 {
  return ((e & 1u) << 4u) | ((e & 4u) << 10u) | ((e & 16u) << 16u) | ((e & 64u) << 22u);
}

// q3k's bytes q in 0..7 to signed bytes q - 4: flip bit 2, then sign-extend it.
fn q3_to_i8(v: u32) -> u32 {
  let t = v ^ 0x04040404u;
  return t | ((t & 0x04040404u) * 0x3Eu);
}

// Bytes q in 0..63 to signed bytes q - 32: flip bit 5, then sign-extend it.
fn q6_to_i8(v: u32) -> u32 {
  let t = v ^ 0x20202020u;
  return t | ((t & 0x20202020u) * 6u);
}

// The B tile (the weight) of step k0: 8 words of int8 quadruples per column.
fn gemm_load_b(n0: u32, k0: u32, lid: u32) {
  let rw = q_row_words();
  if (BITS == 4u || BITS == 5u) {
    for (var e = 0u; e < 2u; e++) {
      let idx = lid + WG * e;
      let nn = idx / 4u;
      let w = idx % 4u;
      var v = select(0x88888888u, 0u, AFFINE);  // zeros
      var hb = 0u;
      if (n0 + nn < p.n) {
        v = qw[(n0 + nn) * rw + k0 / 8u + w];
        if (BITS == 5u) { hb = qw[(n0 + nn) * rw + p.k / 8u + k0 / 32u] >> (8u * w); }
      }
      var lo = v & 0x0F0F0F0Fu;
      var hi = (v >> 4u) & 0x0F0F0F0Fu;
      if (NL) {
        lo = nl_bytes(lo);
        hi = nl_bytes(hi);
      } else if (!AFFINE) {
        lo = q4_to_i8(lo);
        hi = q4_to_i8(hi);
      }
      if (BITS == 5u) {
        lo |= spread5(hb & 0x55u);
        hi |= spread5((hb >> 1u) & 0x55u);
      }
      bs_[(2u * w) * BN + nn] = lo;
      bs_[(2u * w + 1u) * BN + nn] = hi;
    }
  } else if (BITS == 6u) {
    // Chunk c of the row: block c / 8, half h, quarter t (quant.h's Q6K, as in the gemv).
    let c = k0 / 32u;
    let h = (c / 4u) % 2u;
    let t = c % 4u;
    for (var e = 0u; e < 4u; e++) {
      let idx = lid + WG * e;
      let nn = idx / 8u;
      let w = idx % 8u;
      var v = 0u;
      if (n0 + nn < p.n) {
        let base = (n0 + nn) * rw + (c / 8u) * Q6K_WORDS;
        let ql = qw[base + 16u * h + 8u * (t % 2u) + w];
        let qh = qw[base + 32u + 8u * h + w];
        v = q6_to_i8(((ql >> (4u * (t / 2u))) & 0x0F0F0F0Fu) | (((qh >> (2u * t)) & 0x03030303u) << 4u));
      }
      bs_[w * BN + nn] = v;
    }
  } else if (BITS <= 3u) {
    // The step's 32 values are plane words wq, wq + 1 of block k0 / 256; word w of the step is
    // plane w % 4 of word wq + w / 4 (values 4w .. 4w + 3). q3k: signed q - 4 (q6k-like).
    let blk = k0 / 256u;
    let wq = (k0 % 256u) / 16u;
    for (var e = 0u; e < 4u; e++) {
      let idx = lid + WG * e;
      let nn = idx / 8u;
      let w = idx % 8u;
      var v = 0u;
      if (n0 + nn < p.n) {
        let base = (n0 + nn) * rw + blk * q23_block_words();
        let pw = wq + w / 4u;
        let s = w % 4u;
        v = (qw[base + pw] >> (2u * s)) & 0x03030303u;
        if (BITS == 3u) { v = q3_to_i8(v | (((qw[base + 16u + pw / 2u] >> (4u * (pw % 2u) + s)) & 0x01010101u) << 2u)); }
      }
      bs_[w * BN + nn] = v;
    }
  } else {
    for (var e = 0u; e < 4u; e++) {
      let idx = lid + WG * e;
      let nn = idx / 8u;
      let w = idx % 8u;
      var v = 0u;
      if (n0 + nn < p.n) { v = qw[(n0 + nn) * rw + k0 / 4u + w]; }
      bs_[w * BN + nn] = v;
    }
  }
}

// Column nn's scales for step k0 (threads BM .. BM + BN).
fn gemm_load_scales(n: u32, nn: u32, k0: u32) {
  var s = 0.0;
  var mn = 0.0;
  var k6 = 0u;
  if (n < p.n) {
    if (BITS == 6u) {
      let c = k0 / 32u;
      s = scale_at(n * (p.k / 256u) + c / 8u);
      let j = 8u * ((c / 4u) % 2u) + 2u * (c % 4u);  // the scale of the chunk's first 16 values
      k6 = qw[n * q_row_words() + (c / 8u) * Q6K_WORDS + 48u + j / 4u] >> (8u * (j % 4u));
    } else if (BITS <= 3u) {
      // The step's two sub-blocks' scale bytes (q2k scale | min << 4, q3k int8) in bytes 0, 1.
      let blk = n * (p.k / 256u) + k0 / 256u;
      let j = (k0 % 256u) / 16u;
      k6 = qw[n * q_row_words() + (k0 / 256u) * q23_block_words() + select(16u, 24u, BITS == 3u) + j / 4u] >>
           (8u * (j % 4u));
      if (BITS == 3u) {
        s = scale_at(blk);
      } else {
        let dm = unpack2x16float(sc[blk]);
        s = dm.x;
        mn = dm.y;
      }
    } else {
      let f = gv_affine(n, k0);
      s = f.x;
      mn = f.y;
    }
  }
  sw[nn] = s;
  smin[nn] = mn;
  sk6[nn] = k6;
}

// Word kw of the step: the thread's 4 x 8 integer dots (AFFINE: and its rows' activation sums).
fn gemm_word(kw: u32, tm: u32, tn: u32, acc: ptr<function, array<array<i32, 8>, 4>>,
             xsum: ptr<function, array<i32, 4>>) {
  var a: array<u32, 4>;
  var b: array<u32, 8>;
  for (var i = 0u; i < 4u; i++) { a[i] = as_[kw * BM + tm + 16u * i]; }
  for (var j = 0u; j < 8u; j++) { b[j] = bs_[kw * BN + tn + 16u * j]; }
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 8u; j++) { (*acc)[i][j] += dot4I8Packed(a[i], b[j]); }
    if (AFFINE || BITS == 2u) { (*xsum)[i] += dot4I8Packed(a[i], 0x01010101u); }
  }
}

fn i8_at(w: u32, byte: u32) -> i32 { return (bitcast<i32>(w << (24u - 8u * byte))) >> 24u; }

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let tn = lid % 16u;
  let tm = lid / 16u;
  let groups = p.k / p.gs;
  let k4 = p.k / 4u;
  var acci: array<array<i32, 8>, 4>;
  var accf: array<array<f32, 8>, 4>;
  var xsum: array<i32, 4>;  // AFFINE: the activations' integer sums of the group
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
    gemm_load_b(n0, k0, lid);
    if (lid < BM) {
      var s = 0.0;
      if (m0 + lid < p.m) { s = xs[(m0 + lid) * groups + g]; }
      sx[lid] = s;
    } else if (lid < BM + BN) {
      gemm_load_scales(n0 + lid - BM, lid - BM, k0);
    }
    workgroupBarrier();
    if (BITS == 6u || BITS <= 3u) {
      // Two halves of 16 values, each weighted by its column's int8 scale (q2k: its 4-bit
      // scale, and its 4-bit min times the half's activation sums xh, taken off in f32).
      // (part is zeroed explicitly: a declaration inside the loop was not re-zeroed on lavapipe.)
      var part: array<array<i32, 8>, 4>;
      var xh: array<i32, 4>;
      for (var hf = 0u; hf < 2u; hf++) {
        for (var i = 0u; i < 4u; i++) {
          for (var j = 0u; j < 8u; j++) { part[i][j] = 0; }
          xh[i] = 0;
        }
        for (var kw = 4u * hf; kw < 4u * hf + 4u; kw++) { gemm_word(kw, tm, tn, &part, &xh); }
        for (var j = 0u; j < 8u; j++) {
          let sk = sk6[tn + 16u * j];
          let s6 = select(i8_at(sk, hf), i32((sk >> (8u * hf)) & 15u), BITS == 2u);
          for (var i = 0u; i < 4u; i++) { acci[i][j] += part[i][j] * s6; }
          if (BITS == 2u) {
            let mn = f32((sk >> (8u * hf + 4u)) & 15u) * smin[tn + 16u * j];
            for (var i = 0u; i < 4u; i++) { accf[i][j] -= sx[tm + 16u * i] * mn * f32(xh[i]); }
          }
        }
      }
    } else {
      for (var kw = 0u; kw < 8u; kw++) { gemm_word(kw, tm, tn, &acci, &xsum); }
    }
    if ((k0 + 32u) % p.gs == 0u) {
      for (var i = 0u; i < 4u; i++) {
        let s = sx[tm + 16u * i];
        for (var j = 0u; j < 8u; j++) {
          let n = tn + 16u * j;
          if (AFFINE) {
            accf[i][j] += s * fma(f32(acci[i][j]), sw[n], -f32(xsum[i]) * smin[n]);
          } else {
            accf[i][j] = fma(f32(acci[i][j]), s * sw[n], accf[i][j]);
          }
          acci[i][j] = 0;
        }
        xsum[i] = 0;
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + tm + 16u * i;
    if (m >= p.m) { continue; }
    for (var j = 0u; j < 8u; j++) {
      let n = n0 + tn + 16u * j;
      if (n < p.n) { y[m * p.ld + p.y_off + n] = finish_mn(accf[i][j], m, n); }
    }
  }
}
