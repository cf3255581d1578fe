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

override F16: bool = false;  // rope_qkv: the caches hold f16 pairs
override TABLE: bool = false;  // positions (and rope_qkv's cache rows) from kv_rows

const WG: u32 = 256u;

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

@compute @workgroup_size(WG)
fn rope_qkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let t = (wid.x + wid.y * nwg.x) * WG + lid;
  let quads = p.head_dim / 4u;
  let heads = p.n_heads + 2u * p.n_kv_heads;
  if (t >= p.n_tokens * heads * quads) { return; }
  let u = t % quads;
  let head = (t / quads) % heads;  // q heads, then k, then v
  let token = t / (quads * heads);
  var position = symbol(p.pos_sym) + token;
  var row = position;  // the cache row k and v go to
  if (TABLE) {
    position = kv_pos(token);
    row = kv_dst(token, p.n_ctx);
  }
  let base = (token * heads + head) * p.head_dim;
  let half_rot = p.n_rot / 2u;
  let kind = select(select(2u, 1u, head < p.n_heads + p.n_kv_heads), 0u, head < p.n_heads);  // q, k, v

  // The two (first, second) element pairs this thread owns, as stored (before rotation).
  var e0 = 4u * u;       // pair A = (e0, e0 + 1) after the write
  var e1 = 4u * u + 2u;  // pair B
  var a = vec2<f32>(x[base + e0], x[base + e0 + 1u]);
  var b = vec2<f32>(x[base + e1], x[base + e1 + 1u]);
  if (kind != 2u) {
    if (p.neox != 0u && 2u * u < half_rot) {
      // Rotation pairs (2u, 2u + h) and (2u + 1, 2u + 1 + h), h = n_rot / 2.
      e0 = 2u * u;
      e1 = half_rot + 2u * u;
      let r0 = rotate(x[base + e0], x[base + e1], position, 2u * u);
      let r1 = rotate(x[base + e0 + 1u], x[base + e1 + 1u], position, 2u * u + 1u);
      a = vec2<f32>(r0.x, r1.x);
      b = vec2<f32>(r0.y, r1.y);
    } else if (p.neox == 0u && 2u * u < half_rot) {
      a = rotate(a.x, a.y, position, 2u * u);
      b = rotate(b.x, b.y, position, 2u * u + 1u);
    }
  }
  if (kind == 0u) {
    let o = (token * p.n_heads + head) * p.head_dim;
    y[o + e0] = a.x;
    y[o + e0 + 1u] = a.y;
    y[o + e1] = b.x;
    y[o + e1 + 1u] = b.y;
    return;
  }
  let kv_head = select(head - p.n_heads - p.n_kv_heads, head - p.n_heads, kind == 1u);
  cache_store(kind == 1u, kv_head, row, e0, a);
  cache_store(kind == 1u, kv_head, row, e1, b);
}
