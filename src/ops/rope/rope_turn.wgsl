// A part (gpu/pipeline.h, `//! use rope_turn`): RoPE's rotation of one pair, shared by
// rope.wgsl and linear_q.wgsl's gemv_rope. The angle comes from the pair's entry in the 0.64
// fixed-point turns-per-position table (rope.h): (position * turns) mod 1 in exact integer
// arithmetic, then centred to [-1/2, 1/2) turn before sin/cos.

// The 64-bit product a * b as (lo, hi).
fn mul_wide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// (x0, x1) turned at `position` by the pair whose table entry is (turns_hi, turns_lo).
fn rope_turn(x0: f32, x1: f32, position: u32, turns_hi: u32, turns_lo: u32) -> vec2<f32> {
  // (pos * turns) mod 1 as a 64-bit fraction; only its top 32 bits (and a little of the low
  // word) matter for an f32 angle.
  let lo = mul_wide(position, turns_lo);
  let hi = position * turns_hi + lo.y;  // wraps mod 2^32: whole turns drop out
  // Signed: [-1/2, 1/2) turn. 2 pi / 2^32 = 1.4629180792671596e-9.
  let angle = f32(bitcast<i32>(hi)) * 1.4629180792671596e-9 + f32(lo.x) * 3.406121e-19;
  let c = cos(angle);
  let s = sin(angle);
  return vec2<f32>(x0 * c - x1 * s, x0 * s + x1 * c);
}
