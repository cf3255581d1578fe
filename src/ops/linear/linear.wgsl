// linear with f32 or f16 weights: y[m, n] = sum_k x[m, k] * w[n, k] + bias[n].
// The weight is bound as u32 words: f32 bit patterns, or (override F16) [N, K] in f16 pairs
// (K even, so rows are whole words; element i is half i % 2 of word i / 2).
override F16: bool = false;
override NORM: bool = false;  // gemv_vec4 RMS-normalizes x (eps from the params)

struct Params {
  m: u32,
  n: u32,         // this weight's rows
  k: u32,
  has_bias: u32,
  y_off: u32,     // the weight's first column of y (and of bias): a weight split by rows
  ld: u32,        // y's row length
  eps: f32,       // NORM
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> nw4: array<vec4<f32>>;  // gemv_vec4, NORM: [K] the norm weight
@group(0) @binding(6) var<storage, read> x4: array<vec4<f32>>;   // gemv_vec4: x as vec4s
@group(0) @binding(7) var<storage, read> w4: array<vec4<u32>>;   // gemv_vec4: w as vec4 words

fn w_at(i: u32) -> f32 {
  if (F16) {
    let h = unpack2x16float(w[i >> 1u]);
    return select(h.x, h.y, (i & 1u) == 1u);
  }
  return bitcast<f32>(w[i]);
}

// GEMV (m = 1): a workgroup per ROWS outputs, 64 threads a row; they split K and reduce in
// memory. gemv_vec4 (K a multiple of a vec4 word's values: 4 f32, 8 f16): each thread issues
// GV_UNROLL vec4 loads of its row before it sums any, coalesced across the 64, so a row of 2,048
// values is one round of memory latency instead of 32. NORM: x is RMS-normalized with weight
// nw4; the threads sum x^2 beside the dot and the row's sum is scaled once, so the norm costs no
// dispatch of its own.
const GEMV_WG: u32 = 256u;
const GV_UNROLL: u32 = 8u;
var<workgroup> partial: array<vec2<f32>, GEMV_WG>;

// Sums each row's 64 partials (dot, sum of x^2) and writes the row's output.
fn gemv_finish(acc: vec2<f32>, n: u32, lid: u32, norm: bool) {
  let t = lid % 64u;
  partial[lid] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { partial[lid] += partial[lid + s]; }
    workgroupBarrier();
  }
  if (t == 0u && n < p.n) {
    var v = partial[lid].x;
    if (norm) { v *= inverseSqrt(partial[lid].y / f32(p.k) + p.eps); }
    if (p.has_bias != 0u) { v += bias[p.y_off + n]; }
    y[p.y_off + n] = v;
  }
}

@compute @workgroup_size(GEMV_WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let n = (wid.x + wid.y * nwg.x) * ROWS + lid / 64u;
  let t = lid % 64u;
  var acc = 0.0;
  if (n < p.n) {
    let row = n * p.k;
    if (F16) {  // a word (two values of K) per step
      for (var j = t; j < p.k / 2u; j += 64u) {
        let wv = unpack2x16float(w[row / 2u + j]);
        acc = fma(x[2u * j], wv.x, fma(x[2u * j + 1u], wv.y, acc));
      }
    } else {
      for (var k = t; k < p.k; k += 64u) { acc += x[k] * bitcast<f32>(w[row + k]); }
    }
  }
  gemv_finish(vec2<f32>(acc, 0.0), n, lid, false);
}

// (x . w, x . x) over vec4 word j of a row (x times nw under NORM in the dot).
fn word_dot(wv: vec4<u32>, j: u32) -> vec2<f32> {
  if (F16) {
    let xa = x4[2u * j];
    let xb = x4[2u * j + 1u];
    var na = xa;
    var nb = xb;
    if (NORM) {
      na *= nw4[2u * j];
      nb *= nw4[2u * j + 1u];
    }
    let wa = vec4<f32>(unpack2x16float(wv.x), unpack2x16float(wv.y));
    let wb = vec4<f32>(unpack2x16float(wv.z), unpack2x16float(wv.w));
    return vec2<f32>(dot(na, wa) + dot(nb, wb), dot(xa, xa) + dot(xb, xb));
  }
  let xa = x4[j];
  var na = xa;
  if (NORM) { na *= nw4[j]; }
  return vec2<f32>(dot(na, bitcast<vec4<f32>>(wv)), dot(xa, xa));
}

@compute @workgroup_size(GEMV_WG)
fn gemv_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let n = (wid.x + wid.y * nwg.x) * ROWS + lid / 64u;
  let t = lid % 64u;
  var acc = vec2<f32>(0.0);
  if (n < p.n) {
    let kw = p.k / select(4u, 8u, F16);
    let row = n * kw;
    for (var c = 0u; c < kw; c += 64u * GV_UNROLL) {
      var wv: array<vec4<u32>, GV_UNROLL>;
      for (var i = 0u; i < GV_UNROLL; i++) { wv[i] = w4[row + min(c + t + 64u * i, kw - 1u)]; }
      for (var i = 0u; i < GV_UNROLL; i++) {
        let j = c + t + 64u * i;
        if (j < kw) { acc += word_dot(wv[i], j); }
      }
    }
  }
  gemv_finish(acc, n, lid, NORM);
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
