// KV-cache write: rows of k and v [n_tokens, row_heads * head_dim] (f32) into caches
// [n_kv_heads, n_ctx, head_dim] at positions pos + token, or (TABLE) at rows b_i + p_i of
// KvRows::table. One thread per cache word: an f32, or (F16) two halves packed with pack2x16float,
// or (Q8) two blocks of 32 values quantized and their scale word (q8_0 layout: kv_cache.h).
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
  units: u32,  // threads per cache row (kv_write_units)
}

override K_F16: bool = false;  // the k cache's dtype: f16, q8_0 or (neither) f32
override V_F16: bool = false;
override K_Q8: bool = false;
override V_Q8: bool = false;
override TABLE: bool = false;  // rows from kv_rows (else pos + token)

@group(0) @binding(0) var<storage, read> k: array<f32>;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(3) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> kv_rows: array<u32>;  // [n_tokens][p_i, b_i]; TABLE only
@group(0) @binding(6) var<uniform> symbols: Symbols;


// One q8_0 block of 32 values from x[src ..]: 8 words of 4 int8 quants and the scale d.
struct Q8Block {
  q: array<u32, 8>,
  d: f32,
}

// round(x) with ties away from zero (WGSL's round takes ties to even).
fn round_away(x: f32) -> f32 { return sign(x) * floor(abs(x) + 0.5); }

fn q8_block(is_v: bool, src: u32) -> Q8Block {
  var b: Q8Block;
  var amax = 0.0;
  for (var i = 0u; i < 32u; i++) { amax = max(amax, abs(select(k[src + i], v[src + i], is_v))); }
  b.d = amax / 127.0;
  let id = select(0.0, 1.0 / b.d, b.d > 0.0);
  for (var w = 0u; w < 8u; w++) {
    var word = 0u;
    for (var j = 0u; j < 4u; j++) {
      let x = select(k[src + w * 4u + j], v[src + w * 4u + j], is_v);
      let q = i32(clamp(round_away(x * id), -127.0, 127.0));
      word |= (bitcast<u32>(q) & 0xffu) << (8u * j);
    }
    b.q[w] = word;
  }
  return b;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n_tokens * p.n_kv_heads * p.units) { return; }
  let u = i % p.units;
  let head = (i / p.units) % p.n_kv_heads;
  let token = i / (p.units * p.n_kv_heads);
  let src_row = (token * p.row_heads + p.head_off + head) * p.head_dim;
  var row = symbol(p.pos_sym) + token;
  if (TABLE) { row = kv_dst(token, p.n_ctx); }
  let cache_row = head * p.n_ctx + row;
  // f32 and f16: unit u is a word of the row; q8_0: unit u is blocks 2u and 2u + 1 and their scale word.
  let blocks = p.head_dim / 32u;
  let scale_words = (blocks + 1u) / 2u;
  let scales0 = p.n_kv_heads * p.n_ctx * p.head_dim / 4u + cache_row * scale_words;
  for (var side = 0u; side < 2u; side++) {
    let is_v = side == 1u;
    let f16 = select(K_F16, V_F16, is_v);
    let q8 = select(K_Q8, V_Q8, is_v);
    if (q8) {
      if (u >= scale_words) { continue; }
      var ds = vec2<f32>(0.0);
      for (var h = 0u; h < 2u; h++) {
        let blk = 2u * u + h;
        if (blk >= blocks) { break; }
        let b = q8_block(is_v, src_row + blk * 32u);
        ds[h] = b.d;
        let dst = cache_row * (p.head_dim / 4u) + blk * 8u;
        for (var w = 0u; w < 8u; w++) {
          if (is_v) { v_cache[dst + w] = b.q[w]; } else { k_cache[dst + w] = b.q[w]; }
        }
      }
      if (is_v) { v_cache[scales0 + u] = pack2x16float(ds); } else { k_cache[scales0 + u] = pack2x16float(ds); }
    } else if (f16) {
      if (u >= p.head_dim / 2u) { continue; }
      let src = src_row + 2u * u;
      let dst = cache_row * (p.head_dim / 2u) + u;
      if (is_v) { v_cache[dst] = pack2x16float(vec2<f32>(v[src], v[src + 1u])); }
      else { k_cache[dst] = pack2x16float(vec2<f32>(k[src], k[src + 1u])); }
    } else {
      if (u >= p.head_dim) { continue; }
      let dst = cache_row * p.head_dim + u;
      if (is_v) { v_cache[dst] = bitcast<u32>(v[src_row + u]); } else { k_cache[dst] = bitcast<u32>(k[src_row + u]); }
    }
  }
}
