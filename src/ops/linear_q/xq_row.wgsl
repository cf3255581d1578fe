// A part (gpu/pipeline.h, `//! use xq_row`): an xq row, one row of activations quantized ahead in
// int8 blocks of 16 values by the kernel that produces it, for the gemv that reads it next
// (linear_q.h LinearQDesc::xq_out / xq_in; the producers: linear_q.wgsl's gemv_xq and
// gemv_swiglu_xq, attention.wgsl's decode kernels with XQ). A row of K values, u32 words
// (linear_q.h linear_q_xq_words):
//   [0, K/4)            the int8 values, natural order (q6k, q8 consumers)
//   [K/4, K/2)          the same, q4 order: per 8 values 0, 2, 4, 6 then 1, 3, 5, 7 (q4 / q5)
//   [K/2, K/2 + K/8)    per block b: its scale, then the sum of its 16 int8 values (f32)
//   [5K/8, 5K/8 + K/16) per block: the sum of squares of its f32 values, before any norm weight
//                       the producer multiplied in (an RMS-norm consumer's)
// A block's 8 value words: word e < 4 is natural word e (values 4e .. 4e + 3), word 4 + w is
// q4-order word w (values 0, 2, 4, 6 or 1, 3, 5, 7 of 8-group w / 2, as w is even or odd).

// The block's values that its word e holds.
fn xq_values(e: u32) -> vec4<u32> {
  let w = e % 4u;
  if (e < 4u) { return vec4<u32>(4u * w) + vec4<u32>(0u, 1u, 2u, 3u); }
  return vec4<u32>(8u * (w / 2u) + w % 2u) + vec4<u32>(0u, 2u, 4u, 6u);
}

// The row's word index of block blk's word e, in a row of `width` values.
fn xq_word_at(e: u32, blk: u32, width: u32) -> u32 { return select(0u, width / 4u, e >= 4u) + 4u * blk + e % 4u; }

// The word of block blk's scale (its int8 sum is the next) and of its sum of squares.
fn xq_scale_at(blk: u32, width: u32) -> u32 { return width / 2u + 2u * blk; }
fn xq_squares_at(blk: u32, width: u32) -> u32 { return 5u * width / 8u + blk; }

// 127 / the block's largest magnitude (0 for a block of zeros): a value's int8 is round(v * inv).
fn xq_inv(amax: f32) -> f32 { return select(0.0, 127.0 / amax, amax > 0.0); }

// Four of a block's values as one word of int8s.
fn xq_pack(v: vec4<f32>, inv: f32) -> u32 { return pack4xI8(vec4<i32>(round(v * inv))); }
