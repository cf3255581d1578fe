// Elementwise binary ops over flat f32 arrays; b broadcasts by index modulo its length.
struct Params {
  n: u32,
  b_n: u32,
  value: f32,  // the unary ops' constant
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 256u;

fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.x + wid.y * nwg.x) * WG + lid;
}

@compute @workgroup_size(WG)
fn add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = a[i] + b[i % p.b_n];
}

@compute @workgroup_size(WG)
fn mul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = a[i] * b[i % p.b_n];
}

@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = a[i] * p.value;
}

// value * tanh(x / value); the argument clamped where tanh is +-1 in f32 already (an exp-based
// tanh overflows to NaN for large ones).
@compute @workgroup_size(WG)
fn softcap(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let i = flat_index(wid, nwg, lid);
  if (i >= p.n) { return; }
  out[i] = p.value * tanh(clamp(a[i] / p.value, -10.0, 10.0));
}
