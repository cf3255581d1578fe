// RMS norm: one workgroup per row of row_size elements, y = x * inverseSqrt(mean(x^2) + eps) * w;
// rms_norm_res adds res (a residual stream the norm's output joins: Gemma's post-norms).
struct Params {
  n_rows: u32,
  row_size: u32,
  eps: f32,
  _pad0: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read> res: array<f32>;  // rms_norm_res: shaped as x

var<workgroup> red: array<f32, WG>;
var<workgroup> red_total: f32;

// Sum over the workgroup; every thread gets the total (uniform).
fn workgroup_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) { red_total = red[0]; }
  return workgroupUniformLoad(&red_total);
}

fn workgroup_max(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { red_total = red[0]; }
  return workgroupUniformLoad(&red_total);
}

// 1 / rms of the row at `base` (n values), in every thread.
fn row_inverse_rms(base: u32, n: u32, lid: u32) -> f32 {
  var ssq = 0.0;
  var amax = 0.0;
  for (var i = lid; i < n; i += WG) {
    let v = x[base + i];
    ssq += v * v;
    amax = max(amax, abs(v));
  }
  let total = workgroup_sum(ssq, lid);
  // 0x7f7fffff: the largest finite f32; a sum past it overflowed somewhere.
  if (total <= bitcast<f32>(0x7f7fffffu)) { return inverseSqrt(total / f32(n) + p.eps); }
  // |x| this large makes eps negligible: rms = amax * sqrt(mean((x / amax)^2)).
  let m = workgroup_max(amax, lid);
  let s = 1.0 / m;
  var ssq2 = 0.0;
  for (var i = lid; i < n; i += WG) {
    let v = x[base + i] * s;
    ssq2 += v * v;
  }
  let t2 = workgroup_sum(ssq2, lid);
  return s * inverseSqrt(t2 / f32(n));
}

@compute @workgroup_size(WG)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.n_rows) { return; }  // uniform per workgroup
  let base = row * p.row_size;
  let inv = row_inverse_rms(base, p.row_size, lid);
  for (var i = lid; i < p.row_size; i += WG) { y[base + i] = x[base + i] * inv * w[i]; }
}

@compute @workgroup_size(WG)
fn rms_norm_res(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.n_rows) { return; }  // uniform per workgroup
  let base = row * p.row_size;
  let inv = row_inverse_rms(base, p.row_size, lid);
  for (var i = lid; i < p.row_size; i += WG) { y[base + i] = res[base + i] + x[base + i] * inv * w[i]; }
}
