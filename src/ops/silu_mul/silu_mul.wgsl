// SwiGLU: out = silu(gate) * up, a thread per output element; GELU: gelu_tanh(gate) * up (GeGLU).
struct Params {
  n_tokens: u32,
  ff: u32,
  fused: u32,
  _pad0: u32,
}

@group(0) @binding(0) var<storage, read> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;  // fused: the same buffer as gate
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 256u;
override GELU: bool = false;

@compute @workgroup_size(WG)
fn silu_mul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n_tokens * p.ff) { return; }
  var gi = i;
  var ui = i;
  if (p.fused == 1u) {
    let row = i / p.ff;
    gi = i + row * p.ff;  // row * 2ff + col
    ui = gi + p.ff;
  } else if (p.fused == 2u) {  // gate and up interleaved in blocks of 16 columns
    let row = i / p.ff;
    let c = i % p.ff;
    gi = row * 2u * p.ff + (c / 16u) * 32u + c % 16u;
    ui = gi + 16u;
  }
  let g = gate[gi];
  if (GELU) {
    // The tanh approximation; its argument clamped where tanh is +-1 in f32 already (an
    // exp-based tanh overflows to NaN past ~44).
    let t = tanh(clamp(0.7978845608 * (g + 0.044715 * g * g * g), -10.0, 10.0));
    out[i] = 0.5 * g * (1.0 + t) * up[ui];
    return;
  }
  // 1 / (1 + e^-g): e^-g overflows to inf for g < -88, giving the right limit 0 (not NaN).
  let sig = 1.0 / (1.0 + exp(-g));
  out[i] = g * sig * up[ui];
}
