// Device-layer self test (tests/gpu): y[i] = SCALE * (a * x[i] + b) + OFFSET for i < n.
// SCALE and OFFSET are override constants so the pipeline cache test has keys that differ
// only in a constant; the uniform block mirrors SelftestParams in tests/gpu/selftest.h.

override SCALE: f32 = 1.0;
override OFFSET: f32 = 0.0;

struct Params {
  n: u32,
  a: f32,
  b: f32,
  pad: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.n) {
    return;
  }
  y[i] = SCALE * (params.a * x[i] + params.b) + OFFSET;
}
