// argmax and top-k over logits rows, in two passes (sampling.h). Values are compared as
// order keys: a u32 whose unsigned order is the float order (NaN as -inf, -0 as +0); ties go
// to the lower index. Key 0 with index 0xffffffff is the sentinel, worse than any logit.
struct Params {
  n_rows: u32,
  n_vocab: u32,
  n_blocks: u32,
  chunk: u32,
  k: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<u32>;  // (key, index) pairs
@group(0) @binding(2) var<storage, read_write> out_idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> out_val: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 256u;
const NO_INDEX: u32 = 0xffffffffu;

fn order_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }  // NaN -> -inf
  if (b == 0x80000000u) { b = 0u; }                          // -0 -> +0
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn key_value(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// (ka, ia) ranks before (kb, ib).
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
  return ka > kb || (ka == kb && ia < ib);
}

// ---- argmax -------------------------------------------------------------------------------
var<workgroup> rkey: array<u32, WG>;
var<workgroup> ridx: array<u32, WG>;

// Leaves the workgroup's best pair in rkey[0], ridx[0].
fn argmax_reduce(lid: u32, key: u32, idx: u32) {
  rkey[lid] = key;
  ridx[lid] = idx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s && before(rkey[lid + s], ridx[lid + s], rkey[lid], ridx[lid])) {
      rkey[lid] = rkey[lid + s];
      ridx[lid] = ridx[lid + s];
    }
    workgroupBarrier();
  }
}

// Grid (n_blocks, n_rows): the best of one chunk of one row.
@compute @workgroup_size(WG)
fn argmax_partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let block = wid.x;
  let row = wid.y;
  let start = block * p.chunk;
  let end = min(start + p.chunk, p.n_vocab);
  let base = row * p.n_vocab;
  var bk = 0u;
  var bi = NO_INDEX;
  for (var e = start + lid; e < end; e += WG) {
    let k = order_key(logits[base + e]);
    if (before(k, e, bk, bi)) {
      bk = k;
      bi = e;
    }
  }
  argmax_reduce(lid, bk, bi);
  if (lid == 0u) {
    let o = (row * p.n_blocks + block) * 2u;
    partial[o] = rkey[0];
    partial[o + 1u] = ridx[0];
  }
}

// Chunk b's pair of `row` (the sentinel past the row's chunks).
fn partial_pair(row: u32, b: u32) -> vec2<u32> {
  if (b >= p.n_blocks) { return vec2<u32>(0u, NO_INDEX); }
  let o = (row * p.n_blocks + b) * 2u;
  return vec2<u32>(partial[o], partial[o + 1u]);
}

fn better(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(b, a, before(a.x, a.y, b.x, b.y)); }

// Grid (1, n_rows): the best of the row's chunks. A thread takes four pairs a turn, their loads
// issued together: the partials were just written, and each turn is a round trip to L2.
@compute @workgroup_size(WG)
fn argmax_final(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  var best = vec2<u32>(0u, NO_INDEX);
  for (var b = lid; b < p.n_blocks; b += 4u * WG) {
    let a0 = partial_pair(row, b);
    let a1 = partial_pair(row, b + WG);
    let a2 = partial_pair(row, b + 2u * WG);
    let a3 = partial_pair(row, b + 3u * WG);
    best = better(best, better(better(a0, a1), better(a2, a3)));
  }
  argmax_reduce(lid, best.x, best.y);
  if (lid == 0u) { out_idx[row] = ridx[0]; }
}

// ---- top-k --------------------------------------------------------------------------------
// The buffer: [0, count) holds the kept top entries (sorted, after a settle that sorted) then
// new candidates appended since; a candidate is appended only if it ranks before the
// threshold, the k-th kept entry (the sentinel until k are kept).
const BUF: u32 = 1024u;
var<workgroup> bkey: array<u32, BUF>;
var<workgroup> bidx: array<u32, BUF>;
var<workgroup> bcount: atomic<u32>;
var<workgroup> bcount_read: u32;
var<workgroup> th_key: u32;
var<workgroup> th_idx: u32;

fn topk_reset(lid: u32) {
  if (lid == 0u) {
    atomicStore(&bcount, 0u);
    th_key = 0u;
    th_idx = NO_INDEX;
  }
  workgroupBarrier();
}

fn topk_offer(key: u32, idx: u32) {
  if (before(key, idx, th_key, th_idx)) {
    let slot = atomicAdd(&bcount, 1u);
    bkey[slot] = key;
    bidx[slot] = idx;
  }
}

// Bitonic sort of [0, n) (n a power of two), best first.
fn topk_sort(lid: u32, n: u32) {
  for (var size = 2u; size <= n; size <<= 1u) {
    for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
      for (var t = lid; t < n / 2u; t += WG) {
        let i = 2u * t - (t & (stride - 1u));
        let j = i + stride;
        let ki = bkey[i];
        let ii = bidx[i];
        let kj = bkey[j];
        let ij = bidx[j];
        // Ascending halves put the better first, descending halves the worse.
        let forward = (i & size) == 0u;
        if (select(before(ki, ii, kj, ij), before(kj, ij, ki, ii), forward)) {
          bkey[i] = kj;
          bidx[i] = ij;
          bkey[j] = ki;
          bidx[j] = ii;
        }
      }
      workgroupBarrier();
    }
  }
}

// After each tile: when the next tile might not fit (or `last`), sort and keep the best k.
// Returns the entries in the buffer.
fn topk_settle(lid: u32, last: bool) -> u32 {
  workgroupBarrier();
  if (lid == 0u) { bcount_read = atomicLoad(&bcount); }
  let c = workgroupUniformLoad(&bcount_read);
  if (!last && c + WG <= BUF) { return c; }
  var n = 2u;
  while (n < c) { n <<= 1u; }
  for (var i = c + lid; i < n; i += WG) {
    bkey[i] = 0u;
    bidx[i] = NO_INDEX;
  }
  workgroupBarrier();
  topk_sort(lid, n);
  let kept = min(c, p.k);
  if (lid == 0u) {
    atomicStore(&bcount, kept);
    if (c >= p.k) {
      th_key = bkey[p.k - 1u];
      th_idx = bidx[p.k - 1u];
    }
  }
  workgroupBarrier();
  return kept;
}

// Grid (n_blocks, n_rows): the best k of one chunk of one row, padded with sentinels.
@compute @workgroup_size(WG)
fn topk_partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let block = wid.x;
  let row = wid.y;
  let start = block * p.chunk;
  let end = min(start + p.chunk, p.n_vocab);
  let base = row * p.n_vocab;
  topk_reset(lid);
  for (var t = start; t < end; t += WG) {
    let e = t + lid;
    if (e < end) { topk_offer(order_key(logits[base + e]), e); }
    topk_settle(lid, false);
  }
  let kept = topk_settle(lid, true);
  let o = (row * p.n_blocks + block) * p.k;
  for (var i = lid; i < p.k; i += WG) {
    partial[(o + i) * 2u] = select(0u, bkey[i], i < kept);
    partial[(o + i) * 2u + 1u] = select(NO_INDEX, bidx[i], i < kept);
  }
}

// Grid (1, n_rows): the best k of the row's n_blocks * k candidates.
@compute @workgroup_size(WG)
fn topk_final(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  let n = p.n_blocks * p.k;
  let src = row * n;
  topk_reset(lid);
  for (var t = 0u; t < n; t += WG) {
    let e = t + lid;
    if (e < n) { topk_offer(partial[(src + e) * 2u], partial[(src + e) * 2u + 1u]); }
    topk_settle(lid, false);
  }
  topk_settle(lid, true);
  for (var i = lid; i < p.k; i += WG) {
    out_idx[row * p.k + i] = bidx[i];
    out_val[row * p.k + i] = key_value(bkey[i]);
  }
}

// ---- sample_pick: a sampled token from the top-k, on the GPU --------------------------------
// The CPU sampler's steps (llm/sampler.cpp) on the top-k candidates (best first): the top-p and
// min-p cuts on the temperature-1 softmax, weights exp((l_i - l_0) / T), and the first index
// whose running weight passes u * sum, u = draw / 2^32; the id goes to out_idx[row]
// (next_token). A workgroup of one thread per row, each row with its own PickParams: k <= 512
// candidates, a few microseconds.
struct PickParams {
  draw: u32,
  temperature: f32,
  top_p: f32,
  min_p: f32,
  k: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}
@group(0) @binding(6) var<storage, read> cand_ids: array<u32>;
@group(0) @binding(7) var<storage, read> cand_vals: array<f32>;
@group(0) @binding(8) var<storage, read> picks: array<PickParams>;

// Grid (1, n_rows).
@compute @workgroup_size(1)
fn sample_pick(@builtin(workgroup_id) wid: vec3<u32>) {
  let row = wid.y;
  let pick = picks[row];
  let base = row * p.k;
  let k = max(1u, min(pick.k, p.k));
  let l0 = cand_vals[base];
  var sum = 0.0;
  for (var i = 0u; i < k; i++) { sum += exp(cand_vals[base + i] - l0); }
  var keep = k;
  var cum = 0.0;
  for (var i = 0u; i < k; i++) {
    cum += exp(cand_vals[base + i] - l0) / sum;
    if (cum >= pick.top_p) {
      keep = i + 1u;
      break;
    }
  }
  for (var i = 1u; i < keep; i++) {
    if (exp(cand_vals[base + i] - l0) < pick.min_p) {
      keep = i;
      break;
    }
  }
  var total = 0.0;
  for (var i = 0u; i < keep; i++) { total += exp((cand_vals[base + i] - l0) / pick.temperature); }
  let goal = f32(pick.draw) / 4294967296.0 * total;
  var chosen = keep - 1u;
  var run = 0.0;
  for (var i = 0u; i < keep; i++) {
    run += exp((cand_vals[base + i] - l0) / pick.temperature);
    if (run > goal) {
      chosen = i;
      break;
    }
  }
  out_idx[row] = cand_ids[base + chosen];
}

// ---- logsumexp: the log-softmax normalizer of each row, for log-probabilities ----------------
// log sum_i exp(l_i), NaN read as -inf; a row of -inf gives -inf. Pass 1 writes each chunk's
// (max, sum exp(l - max)) as f32 bits into `partial`; pass 2 merges a row's chunks into out_val.
// The empty set is (LOWEST, 0): a constant may not be infinite, and exp(LOWEST - m) is 0 for any
// m a logit can be.
var<workgroup> lmax: array<f32, WG>;
var<workgroup> lsum: array<f32, WG>;

const LOWEST: f32 = -0x1.fffffep+127f;  // -FLT_MAX

// (m, s) of the union of two sets, exp-sums rescaled to the larger max.
fn lse_merge(ma: f32, sa: f32, mb: f32, sb: f32) -> vec2<f32> {
  let m = max(ma, mb);
  if (m <= LOWEST) { return vec2<f32>(LOWEST, 0.0); }
  return vec2<f32>(m, sa * exp(ma - m) + sb * exp(mb - m));
}

fn lse_reduce(lid: u32, m: f32, s: f32) {
  lmax[lid] = m;
  lsum[lid] = s;
  workgroupBarrier();
  for (var st = WG / 2u; st > 0u; st >>= 1u) {
    if (lid < st) {
      let r = lse_merge(lmax[lid], lsum[lid], lmax[lid + st], lsum[lid + st]);
      lmax[lid] = r.x;
      lsum[lid] = r.y;
    }
    workgroupBarrier();
  }
}

// Grid (n_blocks, n_rows): one chunk of one row.
@compute @workgroup_size(WG)
fn lse_partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let block = wid.x;
  let row = wid.y;
  let start = block * p.chunk;
  let end = min(start + p.chunk, p.n_vocab);
  let base = row * p.n_vocab;
  var m = LOWEST;
  var s = 0.0;
  for (var e = start + lid; e < end; e += WG) {
    let b = bitcast<u32>(logits[base + e]);
    if ((b & 0x7fffffffu) > 0x7f800000u || b == 0xff800000u) { continue; }  // NaN, -inf: no mass
    let r = lse_merge(m, s, bitcast<f32>(b), 1.0);
    m = r.x;
    s = r.y;
  }
  lse_reduce(lid, m, s);
  if (lid == 0u) {
    let o = (row * p.n_blocks + block) * 2u;
    partial[o] = bitcast<u32>(lmax[0]);
    partial[o + 1u] = bitcast<u32>(lsum[0]);
  }
}

// Grid (1, n_rows): the row's chunks merged; m + log s, or -inf for a row without mass.
@compute @workgroup_size(WG)
fn lse_final(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.y;
  var m = LOWEST;
  var s = 0.0;
  for (var b = lid; b < p.n_blocks; b += WG) {
    let o = (row * p.n_blocks + b) * 2u;
    let r = lse_merge(m, s, bitcast<f32>(partial[o]), bitcast<f32>(partial[o + 1u]));
    m = r.x;
    s = r.y;
  }
  lse_reduce(lid, m, s);
  if (lid == 0u) {
    out_val[row] = bitcast<f32>(select(bitcast<u32>(lmax[0] + log(lsum[0])), 0xff800000u, lmax[0] <= LOWEST));
  }
}
