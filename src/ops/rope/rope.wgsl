// Rotary position embedding, a thread per (token, head, pair); the rotation is rope_turn.wgsl's.
// Token i turns at pos + i (pos the graph symbol p.pos_sym names), or (TABLE) at p_i of
// KvRows::table (kv_rows.wgsl).
//! use rope_turn
//! use kv_rows
//! use graph_symbols
struct Params {
  n_tokens: u32,
  n_heads: u32,
  head_dim: u32,
  n_rot: u32,
  pos_sym: u32,  // the symbol block's index of pos
  neox: u32,
  n_kv_heads: u32,
  n_ctx: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> freqs: array<u32>;  // [n_rot / 2][hi, lo]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;  // rope_qkv
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;

@group(0) @binding(6) var<storage, read> kv_rows: array<u32>;  // [n_tokens][p_i, b_i]; TABLE only
@group(0) @binding(7) var<uniform> symbols: Symbols;

override F16: bool = false;  // rope_qkv: the caches hold f16 pairs (rope_qkv_q8: q8_0 blocks)
override TABLE: bool = false;  // positions (and rope_qkv's cache rows) from kv_rows


// The rotation of pair j of the row at `position` applied to (x0, x1).
fn rotate(x0: f32, x1: f32, position: u32, j: u32) -> vec2<f32> {
  return rope_turn(x0, x1, position, freqs[2u * j], freqs[2u * j + 1u]);
}

@compute @workgroup_size(WG)
fn rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * WG + lid;
  let half_dim = p.head_dim / 2u;
  if (t >= p.n_tokens * p.n_heads * half_dim) { return; }
  let j = t % half_dim;
  let row_head = t / half_dim;  // token * n_heads + head
  let token = row_head / p.n_heads;
  let base = row_head * p.head_dim;
  let half_rot = p.n_rot / 2u;

  if (j >= half_rot) {  // past n_rot: pass through (the same pairs in both layouts)
    y[base + 2u * j] = x[base + 2u * j];
    y[base + 2u * j + 1u] = x[base + 2u * j + 1u];
    return;
  }
  var i0 = base + 2u * j;
  var i1 = i0 + 1u;
  if (p.neox != 0u) {
    i0 = base + j;
    i1 = i0 + half_rot;
  }

  var position = symbol(p.pos_sym) + token;
  if (TABLE) { position = kv_pos(token); }
  let r = rotate(x[i0], x[i1], position, j);
  y[i0] = r.x;
  y[i1] = r.y;
}

// ---- rope_qkv: RoPE of q and k and the KV-cache write, from one fused projection -----------
// x is qkv [n_tokens, (n_heads + 2 n_kv_heads) * head_dim]: q heads, k heads, v heads. y gets
// the rotated q [n_tokens, n_heads * head_dim]; rotated k and v go to the caches
// [n_kv_heads, n_ctx, head_dim] at position pos + token (TABLE: q and k turn at p_i, k and v
// land at cache row b_i + p_i, clamped into the cache). A thread owns 4 consecutive output
// elements of one head (two rotation pairs, whose elements land in whole f16 words in either
// layout): normal pairs (2j, 2j + 1) for j = 2u, 2u + 1 are elements 4u..4u + 3; neox pairs
// (j, j + n_rot / 2) are elements 2u, 2u + 1 and n_rot / 2 + 2u, + 1. n_rot % 4 == 0.

fn cache_store(is_k: bool, head: u32, position: u32, e: u32, v: vec2<f32>) {
  // position: the cache row within the head.
  // e: the even element index of the pair within the head row.
  if (F16) {
    let w = (head * p.n_ctx + position) * (p.head_dim / 2u) + e / 2u;
    if (is_k) { k_cache[w] = pack2x16float(v); } else { v_cache[w] = pack2x16float(v); }
  } else {
    let w = (head * p.n_ctx + position) * p.head_dim + e;
    if (is_k) {
      k_cache[w] = bitcast<u32>(v.x);
      k_cache[w + 1u] = bitcast<u32>(v.y);
    } else {
      v_cache[w] = bitcast<u32>(v.x);
      v_cache[w + 1u] = bitcast<u32>(v.y);
    }
  }
}

// One thread's part of rope_qkv: which head (0 q, 1 k, 2 v) of which token, its cache row, the
// two pairs' element indices and their values after the rotation.
struct QkvQuad {
  kind: u32,
  head: u32,  // the q head, or the KV head
  row: u32,   // the cache row (k and v)
  token: u32,
  u: u32,     // the thread's quad within its head
  e0: u32,
  e1: u32,
  a: vec2<f32>,
  b: vec2<f32>,
}

// The thread's four elements as stored, before any norm or rotation: normal pairs at 4u..4u + 3;
// neox pairs (2u, 2u + h) and (2u + 1, 2u + 1 + h) (h = n_rot / 2) of q and k within the
// rotated dims.
fn qkv_load(t: u32) -> QkvQuad {
  var o: QkvQuad;
  let quads = p.head_dim / 4u;
  let u = t % quads;
  o.u = u;
  let heads = p.n_heads + 2u * p.n_kv_heads;
  let head = (t / quads) % heads;  // q heads, then k, then v
  o.token = t / (quads * heads);
  o.row = symbol(p.pos_sym) + o.token;  // the cache row k and v go to
  if (TABLE) { o.row = kv_dst(o.token, p.n_ctx); }
  o.kind = select(select(2u, 1u, head < p.n_heads + p.n_kv_heads), 0u, head < p.n_heads);
  o.head = select(select(head - p.n_heads - p.n_kv_heads, head - p.n_heads, o.kind == 1u), head, o.kind == 0u);
  let neox = p.neox != 0u && o.kind != 2u && 2u * u < p.n_rot / 2u;
  o.e0 = select(4u * u, 2u * u, neox);
  o.e1 = select(4u * u + 2u, p.n_rot / 2u + 2u * u, neox);
  let base = (o.token * heads + head) * p.head_dim;
  o.a = vec2<f32>(x[base + o.e0], x[base + o.e0 + 1u]);
  o.b = vec2<f32>(x[base + o.e1], x[base + o.e1 + 1u]);
  return o;
}

// q and k's pairs turned at the token's position (rows past n_rot, and v, as they are).
fn qkv_turn(o_in: QkvQuad) -> QkvQuad {
  var o = o_in;
  let u2 = 2u * o.u;  // the first pair's index
  if (o.kind == 2u || u2 >= p.n_rot / 2u) { return o; }
  var position = symbol(p.pos_sym) + o.token;
  if (TABLE) { position = kv_pos(o.token); }
  if (p.neox != 0u) {
    let r0 = rotate(o.a.x, o.b.x, position, u2);
    let r1 = rotate(o.a.y, o.b.y, position, u2 + 1u);
    o.a = vec2<f32>(r0.x, r1.x);
    o.b = vec2<f32>(r0.y, r1.y);
  } else {
    o.a = rotate(o.a.x, o.a.y, position, u2);
    o.b = rotate(o.b.x, o.b.y, position, u2 + 1u);
  }
  return o;
}

fn q_store(o: QkvQuad) {
  let at = (o.token * p.n_heads + o.head) * p.head_dim;
  y[at + o.e0] = o.a.x;
  y[at + o.e0 + 1u] = o.a.y;
  y[at + o.e1] = o.b.x;
  y[at + o.e1 + 1u] = o.b.y;
}

// QK_NORM (Qwen3, Gemma 3): each q and k head is RMS-normalized over head_dim by q_norm or k_norm
// (element-wise weights, in the qkv's element order) before it turns. A workgroup holds whole
// heads (rope.cpp checks head_dim / 4 divides WG): each thread's share of the head's sum of
// squares meets the others' in qk_ss.
override QK_NORM: bool = false;
override QK_EPS: f32 = 1e-6;
@group(0) @binding(8) var<storage, read> q_norm: array<f32>;  // [head_dim]
@group(0) @binding(9) var<storage, read> k_norm: array<f32>;
var<workgroup> qk_ss: array<f32, WG>;

fn qk_normed(o_in: QkvQuad, lid: u32) -> QkvQuad {
  var o = o_in;
  let quads = p.head_dim / 4u;
  var ss = 0.0;
  for (var i = lid - lid % quads; i < lid - lid % quads + quads; i++) { ss += qk_ss[i]; }
  if (o.kind == 2u) { return o; }
  let r = inverseSqrt(ss / f32(p.head_dim) + QK_EPS);
  if (o.kind == 0u) {
    o.a *= r * vec2<f32>(q_norm[o.e0], q_norm[o.e0 + 1u]);
    o.b *= r * vec2<f32>(q_norm[o.e1], q_norm[o.e1 + 1u]);
  } else {
    o.a *= r * vec2<f32>(k_norm[o.e0], k_norm[o.e0 + 1u]);
    o.b *= r * vec2<f32>(k_norm[o.e1], k_norm[o.e1 + 1u]);
  }
  return o;
}

@compute @workgroup_size(WG)
fn rope_qkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * WG + lid;
  let live = t < p.n_tokens * (p.n_heads + 2u * p.n_kv_heads) * (p.head_dim / 4u);
  var o = qkv_load(min(t, p.n_tokens * (p.n_heads + 2u * p.n_kv_heads) * (p.head_dim / 4u) - 1u));
  if (QK_NORM) {  // every thread reaches the barrier
    qk_ss[lid] = dot(o.a, o.a) + dot(o.b, o.b);
    workgroupBarrier();
    o = qk_normed(o, lid);
  }
  if (!live) { return; }
  o = qkv_turn(o);
  if (o.kind == 0u) {
    q_store(o);
    return;
  }
  cache_store(o.kind == 1u, o.head, o.row, o.e0, o.a);
  cache_store(o.kind == 1u, o.head, o.row, o.e1, o.b);
}

// ---- rope_qkv_q8: the same into q8_0 caches (kv_cache.h's layout and kv_write's rule) --------
// A workgroup holds whole heads (q8_heads_per_group of them: rope.cpp plans the grid): each
// thread stages its four rotated values in q8_stage, then the first threads of each k or v head
// quantize two blocks of 32 each (d = amax / 127, q = round(x / d), ties away from zero) and
// write their quants and the blocks' scale word.
var<workgroup> q8_stage: array<f32, 4u * WG>;  // every value the workgroup's heads hold

fn q8_heads_per_group() -> u32 { return WG / (p.head_dim / 4u); }

fn round_away(v: f32) -> f32 { return sign(v) * floor(abs(v) + 0.5); }

// Blocks 2 w and 2 w + 1 of the staged head at `slot` into cache row `row` of KV head `head`.
fn q8_store(is_k: bool, head: u32, row: u32, slot: u32, w: u32) {
  let blocks = p.head_dim / 32u;
  let cache_row = head * p.n_ctx + row;
  var ds = vec2<f32>(0.0);
  for (var h = 0u; h < 2u; h++) {
    let blk = 2u * w + h;
    if (blk >= blocks) { break; }
    let src = slot * p.head_dim + blk * 32u;
    var amax = 0.0;
    for (var i = 0u; i < 32u; i++) { amax = max(amax, abs(q8_stage[src + i])); }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d > 0.0);
    ds[h] = d;
    for (var k = 0u; k < 8u; k++) {
      var word = 0u;
      for (var j = 0u; j < 4u; j++) {
        let q = i32(clamp(round_away(q8_stage[src + 4u * k + j] * id), -127.0, 127.0));
        word |= (bitcast<u32>(q) & 0xffu) << (8u * j);
      }
      let at = cache_row * (p.head_dim / 4u) + blk * 8u + k;
      if (is_k) { k_cache[at] = word; } else { v_cache[at] = word; }
    }
  }
  let at = p.n_kv_heads * p.n_ctx * p.head_dim / 4u + cache_row * ((blocks + 1u) / 2u) + w;
  if (is_k) { k_cache[at] = pack2x16float(ds); } else { v_cache[at] = pack2x16float(ds); }
}

@compute @workgroup_size(WG)
fn rope_qkv_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let quads = p.head_dim / 4u;
  let per = q8_heads_per_group() * quads;  // the workgroup's threads that hold a head's values
  let t = (wid.x + wid.y * nwg.x) * per + lid;
  let total = p.n_tokens * (p.n_heads + 2u * p.n_kv_heads) * quads;
  let live = lid < per && t < total;
  var o = qkv_load(min(t, total - 1u));
  if (QK_NORM) {  // every thread reaches the barrier; the heads lie in the first `per` threads
    qk_ss[lid] = dot(o.a, o.a) + dot(o.b, o.b);
    workgroupBarrier();
    o = qk_normed(o, lid);
  }
  if (live) {
    o = qkv_turn(o);
    if (o.kind == 0u) {
      q_store(o);
    } else {
      let at = (lid / quads) * p.head_dim;
      q8_stage[at + o.e0] = o.a.x;
      q8_stage[at + o.e0 + 1u] = o.a.y;
      q8_stage[at + o.e1] = o.b.x;
      q8_stage[at + o.e1 + 1u] = o.b.y;
    }
  }
  workgroupBarrier();
  let w = lid % quads;  // the head's scale word this thread writes
  if (live && o.kind != 0u && w < (p.head_dim / 32u + 1u) / 2u) { q8_store(o.kind == 1u, o.head, o.row, lid / quads, w); }
}
