// Quantized linear, q4gsw, q8 and the K-quants (ops/quant/quant.h has the layouts; linear_q.h
// the routes): y[m, n] = sum_k x[m, k] * value(n, k) + bias[n].
//! use rope_turn
//! use xq_row
//! use graph_symbols
//! use kv_rows
//! use moe_key
//! use linear_q_kquant_rows
//! use linear_q_matrix
//! use linear_q_gemv_m
//! use gate_act
//! use iq4_grid
//! use linear_q_gemv
//! use linear_q_gemv_i8
//! use linear_q_gemv_entries
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
  ex_n: u32,    // gemv_experts: rows per expert (n is all experts' rows)
  ex_xdiv: u32,  // gemv_experts: pairs per row of x (the slots per token; 1: a row of x per pair)
  ex_e: u32,     // gemv_experts_swiglu_route: the router's experts
  ex_norm: u32,  // gemv_experts_swiglu_route: 1 the chosen weights sum to 1 (moe_route's norm)
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
