// linear with f32 or f16 weights: y[m, n] = sum_k x[m, k] * w[n, k] + bias[n].
// The weight is bound as u32 words: f32 bit patterns, or (override F16) [N, K] in f16 pairs
// (K even, so rows are whole words; element i is half i % 2 of word i / 2).
override F16: bool = false;

struct Params {
  m: u32,
  n: u32,         // this weight's rows
  k: u32,
  has_bias: u32,
  y_off: u32,     // the weight's first column of y (and of bias): a weight split by rows
  ld: u32,        // y's row length
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

fn w_at(i: u32) -> f32 {
  if (F16) {
    let h = unpack2x16float(w[i >> 1u]);
    return select(h.x, h.y, (i & 1u) == 1u);
  }
  return bitcast<f32>(w[i]);
}

// GEMV (m = 1): a workgroup per ROWS outputs, its threads split K and reduce in memory.
const GEMV_WG: u32 = 256u;
var<workgroup> partial: array<f32, GEMV_WG>;

@compute @workgroup_size(GEMV_WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let base = (wid.x + wid.y * nwg.x) * ROWS;
  // Each group of 64 threads owns one output row.
  let r = lid / 64u;
  let t = lid % 64u;
  let n = base + r;
  var acc = 0.0;
  if (n < p.n) {
    let row = n * p.k;
    if (F16) {  // a word (two values of K) per step
      for (var j = t; j < p.k / 2u; j += 64u) {
        let wv = unpack2x16float(w[row / 2u + j]);
        acc = fma(x[2u * j], wv.x, fma(x[2u * j + 1u], wv.y, acc));
      }
    } else {
      for (var k = t; k < p.k; k += 64u) {
        acc += x[k] * bitcast<f32>(w[row + k]);
      }
    }
  }
  partial[lid] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { partial[lid] += partial[lid + s]; }
    workgroupBarrier();
  }
  if (t == 0u && n < p.n) {
    var v = partial[lid];
    if (p.has_bias != 0u) { v += bias[p.y_off + n]; }
    y[p.y_off + n] = v;
  }
}

// Tiled GEMM: 64x64 outputs per workgroup, 4x4 per thread, K in steps of 16.
const BK: u32 = 16u;
var<workgroup> xs: array<f32, 1024>;  // [TILE m][BK]
var<workgroup> ws: array<f32, 1024>;  // [TILE n][BK]

@compute @workgroup_size(16, 16)
fn tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * TILE;
  let n0 = wid.x * TILE;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = 0u; k0 < p.k; k0 += BK) {
    // 256 threads load 64x16 of x and of w: 4 values each.
    for (var i = 0u; i < 4u; i++) {
      let e = lid * 4u + i;
      let r = e / BK;
      let c = e % BK;
      let gm = m0 + r;
      let gn = n0 + r;
      let gk = k0 + c;
      var xv = 0.0;
      if (gm < p.m && gk < p.k) { xv = x[gm * p.k + gk]; }
      var wv = 0.0;
      if (gn < p.n && gk < p.k) { wv = w_at(gn * p.k + gk); }
      xs[e] = xv;
      ws[e] = wv;
    }
    workgroupBarrier();
    for (var c = 0u; c < BK; c++) {
      var xv: array<f32, 4>;
      var wv: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        xv[i] = xs[(lid3.y * 4u + i) * BK + c];
        wv[i] = ws[(lid3.x * 4u + i) * BK + c];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
          acc[i][j] = fma(xv[i], wv[j], acc[i][j]);
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let gm = m0 + lid3.y * 4u + i;
    if (gm >= p.m) { continue; }
    for (var j = 0u; j < 4u; j++) {
      let gn = n0 + lid3.x * 4u + j;
      if (gn >= p.n) { continue; }
      var v = acc[i][j];
      if (p.has_bias != 0u) { v += bias[p.y_off + gn]; }
      y[gm * p.ld + p.y_off + gn] = v;
    }
  }
}
