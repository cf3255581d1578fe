// KV-cache write: rows of k and v [n_tokens, row_heads * head_dim] (f32) into caches
// [n_kv_heads, n_ctx, head_dim] at positions pos + token, or (TABLE) at rows b_i + p_i of
// KvRows::table. One thread per cache word: an f32, or (F16) two halves packed with pack2x16float.
// A cache part holds KV heads head_off .. head_off + n_kv_heads - 1 of the rows.
//! use kv_rows
//! use graph_symbols
struct Params {
  n_tokens: u32,
  n_kv_heads: u32,
  head_dim: u32,
  pos_sym: u32,  // the symbol block's index of pos
  n_ctx: u32,
  head_off: u32,
  row_heads: u32,
  _pad0: u32,
}

override F16: bool = false;
override TABLE: bool = false;  // rows from kv_rows (else pos + token)

@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> kv_rows: array<u32>;  // [n_tokens][p_i, b_i]; TABLE only
@group(0) @binding(6) var<uniform> symbols: Symbols;

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let per = select(1u, 2u, F16);          // elements per word
  let row_words = p.head_dim / per;
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n_tokens * p.n_kv_heads * row_words) { return; }
  let w = i % row_words;
  let head = (i / row_words) % p.n_kv_heads;
  let token = i / (row_words * p.n_kv_heads);
  let src = (token * p.row_heads + p.head_off + head) * p.head_dim + w * per;
  var row = symbol(p.pos_sym) + token;
  if (TABLE) { row = kv_dst(token, p.n_ctx); }
  let dst = (head * p.n_ctx + row) * row_words + w;
  if (F16) {
    k_cache[dst] = pack2x16float(vec2<f32>(k[src], k[src + 1u]));
    v_cache[dst] = pack2x16float(vec2<f32>(v[src], v[src + 1u]));
  } else {
    k_cache[dst] = bitcast<u32>(k[src]);
    v_cache[dst] = bitcast<u32>(v[src]);
  }
}
