// Sigmoid-gated add: out = x + sigmoid(h · w) * y; one workgroup per row reduces h · w (NORM:
// h RMS-normalized with weight nw first, its squares summed in the same reduction).
override NORM: bool = false;

struct Params {
  n_rows: u32,
  n: u32,
  k: u32,
  eps: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> nw: array<f32>;  // NORM: [k]

var<workgroup> red: array<vec2<f32>, WG>;  // (h · w, h · h)
var<workgroup> red_total: f32;

@compute @workgroup_size(WG)
fn gated_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.n_rows) { return; }  // uniform per workgroup
  var acc = vec2<f32>(0.0);
  for (var i = lid; i < p.k; i += WG) {
    let v = h[row * p.k + i];
    acc += vec2<f32>(v * select(w[i], w[i] * nw[i], NORM), v * v);
  }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    red_total = red[0].x;
    if (NORM) { red_total *= inverseSqrt(red[0].y / f32(p.k) + p.eps); }
  }
  // 1 / (1 + e^-z): e^-z overflows to inf for z < -88, giving the right limit 0 (not NaN).
  let gate = 1.0 / (1.0 + exp(-workgroupUniformLoad(&red_total)));
  for (var i = lid; i < p.n; i += WG) {
    let j = row * p.n + i;
    out[j] = x[j] + gate * y[j];
  }
}
