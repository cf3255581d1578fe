// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the gemv's int8 activations (XI8), x
// quantized ahead (XQ_IN, and gv_put_xq for the xq outputs) and the several-rows loop (GV_XR),
// with gv_dots, which picks the row loop of a format. Bindings and overrides are linear_q.wgsl's and linear_q_gemv.wgsl's.
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
