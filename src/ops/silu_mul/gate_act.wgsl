// The gated FFN's activation of the gate (a part: silu_mul and linear_q's swiglu epilogues):
// SiLU, or where GELU is set the tanh approximation of GELU (GeGLU: Gemma).
override GELU: bool = false;

fn gate_act(g: f32) -> f32 {
  if (GELU) {
    // The tanh argument clamped where tanh is +-1 in f32 already (an exp-based tanh overflows
    // to NaN past ~44).
    let t = tanh(clamp(0.7978845608 * (g + 0.044715 * g * g * g), -10.0, 10.0));
    return 0.5 * g * (1.0 + t);
  }
  // 1 / (1 + e^-g): e^-g overflows to inf for g < -88, giving the right limit 0 (not NaN).
  return g / (1.0 + exp(-g));
}
