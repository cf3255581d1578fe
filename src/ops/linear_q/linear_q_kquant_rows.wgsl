// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the gemv's row-set dot products for the
// K-quants that keep their own block layouts, q6k and q2k / q3k (f32 and int8 activations).
// Bindings, overrides and the staging helpers are linear_q.wgsl's.
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

// The chunk's value times x's scales: xs = (scale0, sum0, scale1, sum1) of its two halves.
fn q6k_row_i8(o: Q6Row, t: u32, x: XChunk, xs: vec4<f32>) -> f32 {
  let s = vec4<f32>(unpack4xI8(o.sw));
  let hi = (t % 2u) == 1u;  // the scale pair's place in its word: bytes 0, 1 or 2, 3
  let s0 = select(s.x, s.z, hi);
  let s1 = select(s.y, s.w, hi);
  let i0 = dot4I8Packed(q6k_bytes(o.ql0.x, o.qh0.x, t), x.a.x) + dot4I8Packed(q6k_bytes(o.ql0.y, o.qh0.y, t), x.a.y) +
           dot4I8Packed(q6k_bytes(o.ql0.z, o.qh0.z, t), x.a.z) + dot4I8Packed(q6k_bytes(o.ql0.w, o.qh0.w, t), x.a.w);
  let i1 = dot4I8Packed(q6k_bytes(o.ql1.x, o.qh1.x, t), x.b.x) + dot4I8Packed(q6k_bytes(o.ql1.y, o.qh1.y, t), x.b.y) +
           dot4I8Packed(q6k_bytes(o.ql1.z, o.qh1.z, t), x.b.z) + dot4I8Packed(q6k_bytes(o.ql1.w, o.qh1.w, t), x.b.w);
  return o.d * (s0 * xs.x * fma(-32.0, xs.y, f32(i0)) + s1 * xs.z * fma(-32.0, xs.w, f32(i1)));
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
    var x: XChunk;
    var xs: vec4<f32>;
    if (XQ_IN) {  // x quantized ahead: a scale per half
      x = gv_xq_chunk(c, live, lid);
      xs = x.s;
    } else {
      gv_stage_i8(xo, it, 0u, lid, 0u);
      workgroupBarrier();
      x = gv_xchunk(t, 0u);
      xs = vec4<f32>(x.s.x, x.s.y, x.s.x, x.s.z);
    }
    let tt = c % 4u;
    let v = vec4<f32>(q6k_row_i8(o0, tt, x, xs), q6k_row_i8(o1, tt, x, xs), q6k_row_i8(o2, tt, x, xs),
                      q6k_row_i8(o3, tt, x, xs));
    if (live) { a += v; }
    if (!XQ_IN) { workgroupBarrier(); }  // before the next turn overwrites gv_x
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
      gv_stage_i8(xo, it, h, lid, 0u);
      workgroupBarrier();
      let x = gv_xchunk(t, 0u);
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
