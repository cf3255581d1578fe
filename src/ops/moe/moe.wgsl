// Mixture-of-experts routing and combining (moe.h): moe_route picks each token's experts from
// the router's logits, moe_combine sums the experts' outputs by their weights onto the residual.
struct Params {
  m: u32,     // tokens
  e: u32,     // experts
  k: u32,     // experts used per token
  n: u32,     // moe_combine: the row length
  norm: u32,  // moe_route: 1 the chosen weights sum to 1 (softmax over the chosen logits)
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;     // moe_route: [m, e]
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;  // moe_route: [m * k] each pair's expert
@group(0) @binding(2) var<storage, read_write> wts: array<f32>;  // moe_route: [m * k] each pair's weight
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read> dn: array<f32>;         // moe_combine: [m * k, n] the pairs' outputs
@group(0) @binding(5) var<storage, read> cw: array<f32>;         // moe_combine: [m * k] the pairs' weights
@group(0) @binding(6) var<storage, read> res: array<f32>;        // moe_combine: [m, n]
@group(0) @binding(7) var<storage, read_write> out: array<f32>;  // moe_combine: [m, n]

var<workgroup> mr_key_of: array<u32, MOE_MAX_E>;  // each expert's order key
var<workgroup> mr_exp: array<f32, MOE_MAX_E>;      // exp(logit - top) of the chosen (by rank), or of all
var<workgroup> mr_top: f32;

// Unsigned order = float order, NaN as -inf (sampling's argmax key).
fn mr_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// A workgroup per token. Each expert's rank is the count of experts ahead of it (a larger
// logit, or an equal one at a lower index): ranks are distinct, and the experts of rank < k are
// the token's, in slot order. Then their softmax weights, over all experts or (norm) over the
// chosen ones. Three barriers whatever k is.
@compute @workgroup_size(MOE_WG)
fn moe_route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.m) { return; }  // the whole workgroup: barriers stay uniform
  for (var i = lid; i < p.e; i += MOE_WG) { mr_key_of[i] = mr_key(logits[t * p.e + i]); }
  workgroupBarrier();
  var rank: array<u32, MOE_MAX_E / MOE_WG>;
  for (var i = lid; i < p.e; i += MOE_WG) {
    let key = mr_key_of[i];
    var r = 0u;
    for (var j = 0u; j < p.e; j++) {
      let kj = mr_key_of[j];
      r += select(0u, 1u, kj > key || (kj == key && j < i));
    }
    rank[i / MOE_WG] = r;
    if (r == 0u) { mr_top = logits[t * p.e + i]; }
  }
  workgroupBarrier();
  let top = mr_top;
  for (var i = lid; i < p.e; i += MOE_WG) {
    let r = rank[i / MOE_WG];
    let v = exp(logits[t * p.e + i] - top);  // the largest logit's is 1: no overflow
    if (p.norm != 0u) {
      if (r < p.k) { mr_exp[r] = v; }
    } else {
      mr_exp[i] = v;
    }
  }
  workgroupBarrier();
  for (var i = lid; i < p.e; i += MOE_WG) {
    let r = rank[i / MOE_WG];
    if (r >= p.k) { continue; }
    var total = 0.0;
    for (var j = 0u; j < select(p.e, p.k, p.norm != 0u); j++) { total += mr_exp[j]; }
    ids[t * p.k + r] = i;
    wts[t * p.k + r] = exp(logits[t * p.e + i] - top) / total;
  }
}

// out[t] = res[t] + sum over the token's slots s of cw[t k + s] * dn[t k + s], a thread per value.
@compute @workgroup_size(MOE_WG)
fn moe_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * MOE_WG + lid;
  if (i >= p.m * p.n) { return; }
  let t = i / p.n;
  let c = i % p.n;
  var acc = res[i];
  for (var s = 0u; s < p.k; s++) {
    let j = t * p.k + s;
    acc += cw[j] * dn[j * p.n + c];
  }
  out[i] = acc;
}
