// Mixture-of-experts routing and combining (moe.h): moe_route picks each token's experts from
// the router's logits, moe_sort groups the (token, slot) pairs by expert for the experts' grouped
// gemm, moe_combine sums the experts' outputs by their weights onto the residual.
//! use moe_key
struct Params {
  m: u32,     // tokens
  e: u32,     // experts
  k: u32,     // experts used per token; moe_sort: rows per tile
  n: u32,     // moe_combine: the row length; moe_sort: the tile list's entries
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
@group(0) @binding(8) var<storage, read_write> order: array<u32>;        // moe_sort: [m] pairs by expert
@group(0) @binding(9) var<storage, read_write> tiles: array<vec4<u32>>;  // moe_sort: [n] (expert, first, rows, 0)

const MR_PER: u32 = MOE_MAX_E / MOE_WG;  // experts a thread holds: i = lid + MOE_WG * s
var<workgroup> mr_key4: array<vec4<u32>, MOE_MAX_E / 4u>;  // each expert's order key, 4 a word
var<workgroup> mr_exp4: array<vec4<f32>, MOE_MAX_E / 4u>;  // exp(logit - top): by rank (norm), or by expert
var<workgroup> mr_top: f32;

// A workgroup per token; each thread holds its experts' logits in registers. An expert's rank is
// the count of experts ahead of it (a larger logit, or an equal one at a lower index), counted
// over the keys four at a time: ranks are distinct, and the experts of rank < k are the token's,
// in slot order. Then their softmax weights, over all experts or (norm) over the chosen ones.
// Three barriers whatever k is.
@compute @workgroup_size(MOE_WG)
fn moe_route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.m) { return; }  // the whole workgroup: barriers stay uniform
  let words = (p.e + 3u) / 4u;
  var lg: array<f32, MR_PER>;
  var key: array<u32, MR_PER>;
  for (var s = 0u; s < MR_PER; s++) {
    let i = lid + MOE_WG * s;
    key[s] = 0u;
    if (i < p.e) {
      lg[s] = logits[t * p.e + i];
      key[s] = moe_key(lg[s]);
    }
    if (i < words * 4u) { mr_key4[i / 4u][i % 4u] = key[s]; }
  }
  workgroupBarrier();
  var rank: array<u32, MR_PER>;
  for (var s = 0u; s < MR_PER; s++) { rank[s] = 0u; }
  for (var j = 0u; j < words; j++) {
    let kv = mr_key4[j];
    let jv = vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u);
    for (var s = 0u; s < MR_PER; s++) {
      let i = lid + MOE_WG * s;
      let kk = vec4<u32>(key[s]);
      let ahead = (kv > kk) | ((kv == kk) & (jv < vec4<u32>(i)));
      rank[s] += dot(select(vec4<u32>(0u), vec4<u32>(1u), ahead), vec4<u32>(1u));
    }
  }
  for (var s = 0u; s < MR_PER; s++) {
    if (lid + MOE_WG * s < p.e && rank[s] == 0u) { mr_top = lg[s]; }
  }
  workgroupBarrier();
  let top = mr_top;
  var ex: array<f32, MR_PER>;
  for (var s = 0u; s < MR_PER; s++) {
    let i = lid + MOE_WG * s;
    ex[s] = exp(lg[s] - top);  // the largest logit's is 1: no overflow
    let at = select(i, rank[s], p.norm != 0u);
    if (i < p.e && at < select(words * 4u, p.k, p.norm != 0u)) { mr_exp4[at / 4u][at % 4u] = ex[s]; }
    if (i >= p.e && i < words * 4u && p.norm == 0u) { mr_exp4[i / 4u][i % 4u] = 0.0; }
  }
  workgroupBarrier();
  for (var s = 0u; s < MR_PER; s++) {
    let i = lid + MOE_WG * s;
    if (i >= p.e || rank[s] >= p.k) { continue; }
    var total = vec4<f32>(0.0);
    let n = select(words, (p.k + 3u) / 4u, p.norm != 0u);
    for (var j = 0u; j < n; j++) {
      var v = mr_exp4[j];
      if (p.norm != 0u) { v = select(vec4<f32>(0.0), v, vec4<u32>(4u * j) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.k)); }
      total += v;
    }
    ids[t * p.k + rank[s]] = i;
    wts[t * p.k + rank[s]] = ex[s] / (total.x + total.y + total.z + total.w);
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

// ---- moe_sort: the pairs (ids, p.m of them) grouped by expert, and the grouped gemm's tiles ----
// One workgroup. order lists the pairs expert by expert (within an expert in no set order: each
// row is computed alone, so the outputs do not depend on it); tiles[i] is (expert, its first
// place in order, rows): up to p.k rows of one expert, the experts in order, and the entries past
// the last tile have 0 rows (the gemm's workgroups there return). p.n >= ceil(m / k) + min(e, m)
// holds every tile: an expert of c pairs takes ceil(c / k) <= c / k + 1 of them.
var<workgroup> ms_count: array<atomic<u32>, MOE_MAX_E>;
var<workgroup> ms_first: array<u32, MOE_MAX_E>;  // the expert's first place in order
var<workgroup> ms_tile: array<u32, MOE_MAX_E>;   // the expert's first tile
var<workgroup> ms_tiles: u32;

@compute @workgroup_size(MOE_WG)
fn moe_sort(@builtin(local_invocation_index) lid: u32) {
  for (var e = lid; e < p.e; e += MOE_WG) { atomicStore(&ms_count[e], 0u); }
  workgroupBarrier();
  for (var j = lid; j < p.m; j += MOE_WG) { atomicAdd(&ms_count[min(ids[j], p.e - 1u)], 1u); }
  workgroupBarrier();
  if (lid == 0u) {
    var first = 0u;
    var tile = 0u;
    for (var e = 0u; e < p.e; e++) {
      let c = atomicLoad(&ms_count[e]);
      ms_first[e] = first;
      ms_tile[e] = tile;
      first += c;
      tile += (c + p.k - 1u) / p.k;
    }
    ms_tiles = tile;
  }
  workgroupBarrier();
  for (var e = lid; e < p.e; e += MOE_WG) {
    let c = atomicLoad(&ms_count[e]);
    for (var t = 0u; t * p.k < c; t++) {
      tiles[ms_tile[e] + t] = vec4<u32>(e, ms_first[e] + t * p.k, min(p.k, c - t * p.k), 0u);
    }
  }
  for (var i = ms_tiles + lid; i < p.n; i += MOE_WG) { tiles[i] = vec4<u32>(0u); }
  workgroupBarrier();
  for (var e = lid; e < p.e; e += MOE_WG) { atomicStore(&ms_count[e], 0u); }  // now each expert's next place
  workgroupBarrier();
  for (var j = lid; j < p.m; j += MOE_WG) {
    let e = min(ids[j], p.e - 1u);
    order[ms_first[e] + atomicAdd(&ms_count[e], 1u)] = j;
  }
}
