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

var<workgroup> mr_l: array<f32, MOE_MAX_E>;
var<workgroup> mr_taken: array<u32, MOE_MAX_E>;
var<workgroup> mr_red: array<vec2<u32>, MOE_WG>;  // (order key, expert)
var<workgroup> mr_sel: array<u32, MOE_MAX_K>;

const MR_NONE: u32 = 0xffffffffu;

// Unsigned order = float order, NaN as -inf (sampling's argmax key).
fn mr_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// Whether candidate a beats b: a larger logit, the lower expert on ties.
fn mr_better(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y != MR_NONE && (b.y == MR_NONE || a.x > b.x || (a.x == b.x && a.y < b.y));
}

// A workgroup per token: k rounds of a workgroup argmax over the experts not yet taken, then
// the chosen experts' softmax weights (over all experts, or over the chosen ones with norm).
@compute @workgroup_size(MOE_WG)
fn moe_route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.m) { return; }  // the whole workgroup: barriers stay uniform
  for (var i = lid; i < p.e; i += MOE_WG) {
    mr_l[i] = logits[t * p.e + i];
    mr_taken[i] = 0u;
  }
  workgroupBarrier();
  for (var s = 0u; s < p.k; s++) {
    var best = vec2<u32>(0u, MR_NONE);
    for (var i = lid; i < p.e; i += MOE_WG) {
      let c = vec2<u32>(mr_key(mr_l[i]), i);
      if (mr_taken[i] == 0u && mr_better(c, best)) { best = c; }
    }
    mr_red[lid] = best;
    workgroupBarrier();
    for (var w = MOE_WG / 2u; w > 0u; w /= 2u) {
      if (lid < w && mr_better(mr_red[lid + w], mr_red[lid])) { mr_red[lid] = mr_red[lid + w]; }
      workgroupBarrier();
    }
    if (lid == 0u) {
      mr_sel[s] = mr_red[0].y;
      mr_taken[mr_red[0].y] = 1u;
    }
    workgroupBarrier();
  }
  if (lid != 0u) { return; }
  let top = mr_l[mr_sel[0]];  // the largest logit: every exp below is at most 1
  var total = 0.0;
  if (p.norm != 0u) {
    for (var s = 0u; s < p.k; s++) { total += exp(mr_l[mr_sel[s]] - top); }
  } else {
    for (var i = 0u; i < p.e; i++) { total += exp(mr_l[i] - top); }
  }
  for (var s = 0u; s < p.k; s++) {
    ids[t * p.k + s] = mr_sel[s];
    wts[t * p.k + s] = exp(mr_l[mr_sel[s]] - top) / total;
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
