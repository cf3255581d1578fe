// SwiGLU: out = silu(gate) * up, a thread per output element; GELU: gelu_tanh(gate) * up (GeGLU).
//! use gate_act
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
  out[i] = gate_act(gate[gi]) * up[ui];
}
