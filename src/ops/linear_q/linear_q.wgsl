// Quantized linear, q4gsw and q8 weights (ops/quant/quant.h has the layouts; linear_q.h the
// routes): y[m, n] = sum_k x[m, k] * q(n, k) * scale(n, k / gs) + bias[n].
struct Params {
  m: u32,
  n: u32,
  k: u32,
  gs: u32,
  has_bias: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

override BITS: u32 = 4u;  // 4: q4gsw, 8: q8
override TK: u32 = 64u;   // gemv: threads along K per set of rows (a power of two <= 256)

@group(0) @binding(0) var<storage, read> x4: array<vec4<f32>>;   // [M, K]
@group(0) @binding(1) var<storage, read> qw4: array<vec4<u32>>;  // the weight words, 4 at a time
@group(0) @binding(2) var<storage, read> sc: array<u32>;         // f16 scales [N, K/gs], pairs
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;    // [M, N]
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read_write> xq: array<u32>;   // int8 x [M, K/4] (gemm route)
@group(0) @binding(7) var<storage, read_write> xs: array<f32>;   // x scales [M, K/gs]
@group(0) @binding(8) var<storage, read> qw: array<u32>;         // the weight words

fn scale_at(i: u32) -> f32 {
  let h = unpack2x16float(sc[i >> 1u]);
  return select(h.x, h.y, (i & 1u) == 1u);
}

fn finish(v: f32, n: u32) -> f32 {
  if (p.has_bias != 0u) { return v + bias[n]; }
  return v;
}

fn q8_vals(w: u32) -> vec4<f32> { return vec4<f32>(unpack4xI8(w)); }

// Nibbles 0..3 of w as f32 1 + (q + 8) / 16, built by placing each nibble in the top of the
// mantissa of 1.0: a shift and one and-or per value, no int-to-float conversion (a quarter-rate
// instruction on NVIDIA, which capped the GEMV near a third of the memory bandwidth).
// q = 16 * (v - 1.5), so dot(q, x) = 16 * (dot(v, x) - 1.5 * sum(x)).
fn q4_mant(w: u32) -> vec4<f32> {
  let v = (vec4<u32>(w) << vec4<u32>(19u, 15u, 11u, 7u)) & vec4<u32>(0x780000u);
  return bitcast<vec4<f32>>(v | vec4<u32>(0x3F800000u));
}

// ---- GEMV (m = 1) -----------------------------------------------------------------------
// 256 threads: TK along K times 256/TK row sets of RPT rows. A thread reads one vec4<u32> per
// row per step (32 q4 or 16 q8 values, inside one group) and reuses its x values for RPT rows.
// q4 values come from q4_mant; its offset is taken out once per step for all RPT rows.
const WG: u32 = 256u;
const RPT: u32 = 4u;
var<workgroup> red: array<f32, 1024>;  // [RPT][WG]

@compute @workgroup_size(WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = lid % TK;
  let n0 = (wid.x + wid.y * nwg.x) * (RPT * (WG / TK)) + (lid / TK) * RPT;
  let vals = select(32u, 16u, BITS == 8u);
  let nvec = p.k / vals;
  let groups = p.k / p.gs;
  var rows: array<u32, RPT>;
  for (var r = 0u; r < RPT; r++) { rows[r] = min(n0 + r, p.n - 1u); }  // loads stay in bounds
  var acc: array<f32, RPT>;
  for (var c = t; c < nvec; c += TK) {
    let k0 = c * vals;
    let g = k0 / p.gs;
    if (BITS == 4u) {
      var xv: array<vec4<f32>, 8>;
      var xsum = vec4<f32>(0.0);
      for (var i = 0u; i < 8u; i++) {
        xv[i] = x4[k0 / 4u + i];
        xsum += xv[i];
      }
      let off = 1.5 * dot(xsum, vec4<f32>(1.0));
      for (var r = 0u; r < RPT; r++) {
        let wv = qw4[rows[r] * nvec + c];
        var d = dot(q4_mant(wv.x), xv[0]) + dot(q4_mant(wv.x >> 16u), xv[1]);
        d += dot(q4_mant(wv.y), xv[2]) + dot(q4_mant(wv.y >> 16u), xv[3]);
        d += dot(q4_mant(wv.z), xv[4]) + dot(q4_mant(wv.z >> 16u), xv[5]);
        d += dot(q4_mant(wv.w), xv[6]) + dot(q4_mant(wv.w >> 16u), xv[7]);
        acc[r] = fma(d - off, 16.0 * scale_at(rows[r] * groups + g), acc[r]);
      }
    } else {
      var xv: array<vec4<f32>, 4>;
      for (var i = 0u; i < 4u; i++) { xv[i] = x4[k0 / 4u + i]; }
      for (var r = 0u; r < RPT; r++) {
        let wv = qw4[rows[r] * nvec + c];
        var d = dot(q8_vals(wv.x), xv[0]) + dot(q8_vals(wv.y), xv[1]);
        d += dot(q8_vals(wv.z), xv[2]) + dot(q8_vals(wv.w), xv[3]);
        acc[r] = fma(d, scale_at(rows[r] * groups + g), acc[r]);
      }
    }
  }
  for (var r = 0u; r < RPT; r++) { red[r * WG + lid] = acc[r]; }
  workgroupBarrier();
  for (var s = TK / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      for (var r = 0u; r < RPT; r++) { red[r * WG + lid] += red[r * WG + lid + s]; }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    for (var r = 0u; r < RPT; r++) {
      let n = n0 + r;
      if (n < p.n) { y[n] = finish(red[r * WG + lid], n); }
    }
  }
}

// ---- small M (2..7 rows) ----------------------------------------------------------------
// 256 threads: 32 along K times 8 row sets of RPT rows; one weight word per row per step,
// applied to every live row of x.
const MMAX: u32 = 7u;
const SK: u32 = 32u;
var<workgroup> red_s: array<f32, 7168>;  // [RPT * MMAX][WG]

@compute @workgroup_size(WG)
fn small_m(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let t = lid % SK;
  let n0 = (wid.x + wid.y * nwg.x) * (RPT * (WG / SK)) + (lid / SK) * RPT;
  let per = select(8u, 4u, BITS == 8u);  // values per word
  let wpr = p.k / per;
  let groups = p.k / p.gs;
  let k4 = p.k / 4u;
  var rows: array<u32, RPT>;
  for (var r = 0u; r < RPT; r++) { rows[r] = min(n0 + r, p.n - 1u); }
  var acc: array<f32, 28>;  // [RPT][MMAX]
  for (var w = t; w < wpr; w += SK) {
    let k0 = w * per;
    let g = k0 / p.gs;
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        if (BITS == 4u) {
          xa[m] = x4[m * k4 + k0 / 4u];
          xb[m] = x4[m * k4 + k0 / 4u + 1u];
          xsum[m] = 1.5 * dot(xa[m] + xb[m], vec4<f32>(1.0));
        } else {
          xa[m] = x4[m * k4 + k0 / 4u];
        }
      }
    }
    for (var r = 0u; r < RPT; r++) {
      let word = qw[rows[r] * wpr + w];
      let s = scale_at(rows[r] * groups + g);
      if (BITS == 4u) {
        let lo = q4_mant(word);
        let hi = q4_mant(word >> 16u);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) {
            acc[r * MMAX + m] = fma(dot(lo, xa[m]) + dot(hi, xb[m]) - xsum[m], 16.0 * s, acc[r * MMAX + m]);
          }
        }
      } else {
        let v = q8_vals(word);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) { acc[r * MMAX + m] = fma(dot(v, xa[m]), s, acc[r * MMAX + m]); }
        }
      }
    }
  }
  for (var i = 0u; i < RPT * MMAX; i++) { red_s[i * WG + lid] = acc[i]; }
  workgroupBarrier();
  for (var s = SK / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      for (var i = 0u; i < RPT * MMAX; i++) { red_s[i * WG + lid] += red_s[i * WG + lid + s]; }
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    for (var r = 0u; r < RPT; r++) {
      let n = n0 + r;
      if (n >= p.n) { continue; }
      for (var m = 0u; m < p.m; m++) { y[m * p.n + n] = finish(red_s[(r * MMAX + m) * WG + lid], n); }
    }
  }
}

// ---- int8 activations (gemm route, first kernel) ----------------------------------------
// One thread per (row m, group g): scale = absmax / 127, q = round(x * 127 / absmax).
// For q4 weights each 8 values are stored as two words, k = 0, 2, 4, 6 then 1, 3, 5, 7, the
// order in which the gemm unpacks the weight nibbles.
@compute @workgroup_size(64)
fn quantize_act(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lid;
  let groups = p.k / p.gs;
  if (i >= p.m * groups) { return; }
  let m = i / groups;
  let g = i % groups;
  let base = (m * p.k + g * p.gs) / 4u;  // vec4 index into x, and word index into xq
  var amax = 0.0;
  for (var j = 0u; j < p.gs / 4u; j++) {
    let v = abs(x4[base + j]);
    amax = max(amax, max(max(v.x, v.y), max(v.z, v.w)));
  }
  xs[i] = amax / 127.0;
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  if (BITS == 4u) {
    for (var j = 0u; j < p.gs / 8u; j++) {
      let a = x4[base + 2u * j] * inv;
      let b = x4[base + 2u * j + 1u] * inv;
      xq[base + 2u * j] = pack4xI8(vec4<i32>(round(vec4<f32>(a.x, a.z, b.x, b.z))));
      xq[base + 2u * j + 1u] = pack4xI8(vec4<i32>(round(vec4<f32>(a.y, a.w, b.y, b.w))));
    }
  } else {
    for (var j = 0u; j < p.gs / 4u; j++) {
      xq[base + j] = pack4xI8(vec4<i32>(round(x4[base + j] * inv)));
    }
  }
}

// ---- int8 x int4/int8 GEMM (gemm route, second kernel) -----------------------------------
// 64 x 128 outputs per workgroup, 4 x 8 per thread (rows tm + 16i, columns tn + 16j), K in
// steps of 32. Integer sums per group, then one f32 multiply-add by both scales.
const BM: u32 = 64u;
const BN: u32 = 128u;
var<workgroup> as_: array<u32, 512>;   // [8 words][BM]
var<workgroup> bs_: array<u32, 1024>;  // [8 words][BN], signed int8 quadruples
var<workgroup> sx: array<f32, BM>;
var<workgroup> sw: array<f32, BN>;

// Stored nibbles (q + 8, one per byte) to signed bytes q: flip bit 3, then sign-extend it.
fn q4_to_i8(v: u32) -> u32 {
  let t = v ^ 0x08080808u;
  return t | ((t & 0x08080808u) * 0x1Eu);
}

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * BM;
  let n0 = wid.x * BN;
  let tn = lid % 16u;
  let tm = lid / 16u;
  let groups = p.k / p.gs;
  let k4 = p.k / 4u;
  let k8 = p.k / 8u;
  var acci: array<array<i32, 8>, 4>;
  var accf: array<array<f32, 8>, 4>;
  for (var k0 = 0u; k0 < p.k; k0 += 32u) {
    let g = k0 / p.gs;
    for (var e = 0u; e < 2u; e++) {
      let idx = lid + WG * e;
      let mm = idx / 8u;
      let kw = idx % 8u;
      var v = 0u;
      if (m0 + mm < p.m) { v = xq[(m0 + mm) * k4 + k0 / 4u + kw]; }
      as_[kw * BM + mm] = v;
    }
    if (BITS == 4u) {
      for (var e = 0u; e < 2u; e++) {
        let idx = lid + WG * e;
        let nn = idx / 4u;
        let w = idx % 4u;
        var v = 0x88888888u;  // zeros
        if (n0 + nn < p.n) { v = qw[(n0 + nn) * k8 + k0 / 8u + w]; }
        bs_[(2u * w) * BN + nn] = q4_to_i8(v & 0x0F0F0F0Fu);
        bs_[(2u * w + 1u) * BN + nn] = q4_to_i8((v >> 4u) & 0x0F0F0F0Fu);
      }
    } else {
      for (var e = 0u; e < 4u; e++) {
        let idx = lid + WG * e;
        let nn = idx / 8u;
        let w = idx % 8u;
        var v = 0u;
        if (n0 + nn < p.n) { v = qw[(n0 + nn) * k4 + k0 / 4u + w]; }
        bs_[w * BN + nn] = v;
      }
    }
    if (lid < BM) {
      var s = 0.0;
      if (m0 + lid < p.m) { s = xs[(m0 + lid) * groups + g]; }
      sx[lid] = s;
    } else if (lid < BM + BN) {
      let nn = lid - BM;
      var s = 0.0;
      if (n0 + nn < p.n) { s = scale_at((n0 + nn) * groups + g); }
      sw[nn] = s;
    }
    workgroupBarrier();
    for (var kw = 0u; kw < 8u; kw++) {
      var a: array<u32, 4>;
      var b: array<u32, 8>;
      for (var i = 0u; i < 4u; i++) { a[i] = as_[kw * BM + tm + 16u * i]; }
      for (var j = 0u; j < 8u; j++) { b[j] = bs_[kw * BN + tn + 16u * j]; }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 8u; j++) { acci[i][j] += dot4I8Packed(a[i], b[j]); }
      }
    }
    if ((k0 + 32u) % p.gs == 0u) {
      for (var i = 0u; i < 4u; i++) {
        let s = sx[tm + 16u * i];
        for (var j = 0u; j < 8u; j++) {
          accf[i][j] = fma(f32(acci[i][j]), s * sw[tn + 16u * j], accf[i][j]);
          acci[i][j] = 0;
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + tm + 16u * i;
    if (m >= p.m) { continue; }
    for (var j = 0u; j < 8u; j++) {
      let n = n0 + tn + 16u * j;
      if (n < p.n) { y[m * p.n + n] = finish(accf[i][j], n); }
    }
  }
}
