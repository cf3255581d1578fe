// A part (gpu/pipeline.h `//! use`): the order key moe_route ranks router logits by, shared by
// moe.wgsl's moe_route and linear_q's routed gate|up (linear_q_gemv_entries.wgsl rt_route).
// Unsigned order = float order, NaN as -inf (sampling's argmax key). Every key is > 0, so the
// key 0 pads a last word of keys past E and never ranks ahead of an expert.
fn moe_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
