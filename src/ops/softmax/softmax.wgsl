// Row softmax: a workgroup per row of [rows, n]; max, then sum of exp(x - max), then write.
struct Params {
  rows: u32,
  n: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;

fn reduce_max(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn reduce_sum(lid: u32, v: f32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) { return; }  // uniform per workgroup
  let base = row * p.n;
  var m = -3.4e38;
  for (var i = lid; i < p.n; i += WG) { m = max(m, x[base + i]); }
  m = reduce_max(lid, m);
  var s = 0.0;
  for (var i = lid; i < p.n; i += WG) { s += exp(x[base + i] - m); }
  let inv = 1.0 / reduce_sum(lid, s);
  for (var i = lid; i < p.n; i += WG) { y[base + i] = exp(x[base + i] - m) * inv; }
}
