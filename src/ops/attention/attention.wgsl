// Causal scaled dot-product attention over the KV cache, with GQA (see attention.h).
// Caches are read as vec4<u32> words: 4 f32 elements, or (F16) 8 halves.
// TABLE (a step of several sequences, KvRows in kv_cache.h): token i attends cache rows
// b_i .. b_i + p_i of kv_rows (clamped into the cache: kv_rows.wgsl); the decode kernels take a
// token per grid z, their partials a region per token (query row token * n_heads + head).
//! use kv_rows
//! use graph_symbols
//! use xq_row
//! use attention_decode_sg
//! use attention_decode_vec
//! use attention_prefill_sg
//! use attention_prefill_rt
//! use attention_prefill_rth
struct Params {
  n_tokens: u32,
  n_heads: u32,
  n_kv_heads: u32,
  pos_sym: u32,  // the symbol block's index of pos (the first query's position)
  n_ctx: u32,
  n_chunks: u32,
  chunk_blocks: u32,
  ml_offset: u32,
  scale: f32,
  kv_off: u32,  // the cache part's first KV head (a cache split by heads: a kernel per part)
  window: u32,   // sliding window in keys (0: none); see seen4
  softcap: f32,  // attention logit soft-capping (0: none); see capped4
}

override HEAD_DIM: u32 = 128u;  // a multiple of 8, 16..256
override GROUP: u32 = 1u;       // query heads per KV head, 1..MAX_GROUP
override F16: bool = false;     // cache dtype
override TABLE: bool = false;   // per-token positions and regions from kv_rows (else pos + i)
// q8_0 caches (layout: kv_cache.h) are read natively: each word the kernels load (k_word,
// v_word) is dequantized in registers into the f16 word of 8 halves they read with F16 set.
override K_Q8: bool = false;
override V_Q8: bool = false;

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> split: array<f32>;  // decode partials
@group(0) @binding(5) var<uniform> p: Params;
@group(0) @binding(6) var<storage, read> kv_rows: array<u32>;  // [n_tokens][p_i, b_i]; TABLE only
@group(0) @binding(7) var<uniform> symbols: Symbols;

// Subgroup lanes (sg_xor) of decode_sg, decode_vec and decode_reduce; decode_sg and decode_vec need
// 4 or more, decode_reduce takes 1 (workgroup memory alone).
override SG: u32 = 1u;
const NEG: f32 = -3.4e38;

// The sliding window (Params::window, 0: none): a query whose last visible key row is `limit`
// sees rows limit - window + 1 .. limit only. The cache keeps every row (it is full-length); the
// older rows are masked, in the same place as the causal mask (scores at NEG, weights 0), and
// the key tiles and decode chunks wholly before a workgroup's first visible row are skipped
// (first_tile, decode_work). Rows before the window that a kernel still walks weigh nothing: the row's own key is always
// visible, so its max ends above NEG and exp(NEG - max) rescales their sums to 0.
fn win_keys() -> u32 { return select(p.window, 0xffffffffu, p.window == 0u); }
fn seen4(key: vec4<u32>, limit: vec4<u32>) -> vec4<bool> {
  return (key <= limit) & (limit - key < vec4<u32>(win_keys()));
}
// The first key row a query whose last visible row is `limit` sees.
fn first_seen(limit: u32) -> u32 { return limit - min(limit, win_keys() - 1u); }

// Logit soft-capping of the scaled scores (Params::softcap, 0: none): cap * tanh(s / cap). The
// argument is clamped where tanh is 1 in f32 already (an implementation's exp-based tanh
// overflows to NaN for large ones).
fn capped4(s: vec4<f32>) -> vec4<f32> {
  if (p.softcap == 0.0) { return s; }
  return p.softcap * tanh(clamp(s / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0)));
}
fn capped(s: f32) -> f32 { return capped4(vec4<f32>(s)).x; }

// A q8_0 cache word of 4 int8 quants times the block scale d.
fn q8_dequant(w: u32, d: f32) -> vec4<f32> {
  let b = vec4<i32>(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u), bitcast<i32>(w));
  return vec4<f32>(b >> vec4<u32>(24u)) * d;
}

// F16 word `at` (8 elements, HEAD_DIM / 8 a row) of a q8_0 cache: its 8 quants are half of the
// vec4 at / 2 of the quant plane, its block's scale a half in the scale plane past this part's
// n_kv_heads * n_ctx rows of quants.
fn q8_word(is_v: bool, at: u32) -> vec4<u32> {
  let rw = HEAD_DIM / 8u;
  let row = at / rw;
  let blk = (at % rw) / 4u;
  let s = p.n_kv_heads * p.n_ctx * (HEAD_DIM / 4u) + row * ((HEAD_DIM / 32u + 1u) / 2u) + blk / 2u;
  var qv: vec4<u32>;
  var sv: vec4<u32>;
  if (is_v) {
    qv = v_cache[at / 2u];
    sv = v_cache[s / 4u];
  } else {
    qv = k_cache[at / 2u];
    sv = k_cache[s / 4u];
  }
  let q = select(qv.xy, qv.zw, (at & 1u) == 1u);
  let d = unpack2x16float(sv[s % 4u])[blk % 2u];
  let a = q8_dequant(q.x, d);
  let b = q8_dequant(q.y, d);
  return vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy), pack2x16float(b.zw));
}
fn k_word(at: u32) -> vec4<u32> {
  if (K_Q8) { return q8_word(false, at); }
  return k_cache[at];
}
fn v_word(at: u32) -> vec4<u32> {
  if (V_Q8) { return q8_word(true, at); }
  return v_cache[at];
}

// Up to four K and four V cache words of a thread (a turn of decode_vec, a tile share of prefill_sg).
struct KvWords {
  k0: vec4<u32>,
  k1: vec4<u32>,
  k2: vec4<u32>,
  k3: vec4<u32>,
  v0: vec4<u32>,
  v1: vec4<u32>,
  v2: vec4<u32>,
  v3: vec4<u32>,
}

// Four keys' values (scores, or their softmax weights), a component per query row or head.
struct Scores {
  s0: vec4<f32>,
  s1: vec4<f32>,
  s2: vec4<f32>,
  s3: vec4<f32>,
}

// One online-softmax step over four keys (decode_vec's turn, prefill_sg's): from the running max
// m and sum l, the new ones, the factor alpha the running V sums take, and the keys' weights p
// (keys not ok weigh nothing and leave the max alone); the scores are soft-capped here.
struct Softmax4 {
  m: vec4<f32>,
  l: vec4<f32>,
  alpha: vec4<f32>,
  p: Scores,
}
fn softmax4(m: vec4<f32>, l: vec4<f32>, s: Scores, ok0: vec4<bool>, ok1: vec4<bool>, ok2: vec4<bool>,
            ok3: vec4<bool>) -> Softmax4 {
  let s0 = select(vec4<f32>(NEG), capped4(s.s0), ok0);
  let s1 = select(vec4<f32>(NEG), capped4(s.s1), ok1);
  let s2 = select(vec4<f32>(NEG), capped4(s.s2), ok2);
  let s3 = select(vec4<f32>(NEG), capped4(s.s3), ok3);
  let mx = max(m, max(max(s0, s1), max(s2, s3)));
  let alpha = exp(m - mx);
  let p0 = select(vec4<f32>(0.0), exp(s0 - mx), ok0);
  let p1 = select(vec4<f32>(0.0), exp(s1 - mx), ok1);
  let p2 = select(vec4<f32>(0.0), exp(s2 - mx), ok2);
  let p3 = select(vec4<f32>(0.0), exp(s3 - mx), ok3);
  return Softmax4(mx, l * alpha + ((p0 + p1) + (p2 + p3)), alpha, Scores(p0, p1, p2, p3));
}

// Elements 0..3 and 4..7 of a cache word; an f32 word holds only the first four.
fn unpack_word(w: vec4<u32>) -> array<vec4<f32>, 2> {
  if (F16) {
    return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
                               vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
  }
  return array<vec4<f32>, 2>(bitcast<vec4<f32>>(w), vec4<f32>(0.0));
}

fn row_words() -> u32 { return HEAD_DIM / select(4u, 8u, F16); }
fn word_vec4s() -> u32 { return select(1u, 2u, F16); }

// The decode kernels' token (grid z) and its (first cache row of the region, keys).
fn decode_token(wid: vec3<u32>) -> u32 { return select(0u, wid.z, TABLE); }
fn decode_span(token: u32) -> vec2<u32> {
  if (TABLE) { return kv_span(token, p.n_ctx); }
  return vec2<u32>(0u, symbol(p.pos_sym) + 1u);
}

// The decode kernels' query heads: a workgroup takes HPW consecutive heads of KV head g's GROUP;
// the last workgroup of a group takes fewer where HPW does not divide GROUP (GQA 5, 6, 7).
struct DecodeHeads {
  g: u32,      // KV head of the cache part (its rows start at g * n_ctx)
  head0: u32,  // first query row (token * n_heads + head)
  n: u32,      // heads taken, 1..HPW
}
fn decode_heads(wid: vec3<u32>, tok: u32) -> DecodeHeads {
  let per = (GROUP + HPW - 1u) / HPW;  // workgroups per KV head
  let g = wid.y / per;
  let first = (wid.y % per) * HPW;
  return DecodeHeads(g, tok * p.n_heads + (p.kv_off + g) * GROUP + first, min(HPW, GROUP - first));
}

// A decode workgroup's work: its query heads, and keys k_begin .. k_end of its chunk (chunk
// wid.x; empty past the token's keys) at cache rows row0 + key of its KV head's region.
struct DecodeWork {
  heads: DecodeHeads,
  k_begin: u32,
  k_end: u32,
  row0: u32,
}
fn decode_work(wid: vec3<u32>) -> DecodeWork {
  let tok = decode_token(wid);
  let span = decode_span(tok);
  let heads = decode_heads(wid, tok);
  let k_begin = wid.x * p.chunk_blocks * KB;
  // The sliding window starts the token's keys at first_seen: chunks before it are empty (they
  // merge as nothing; chunk 0 is the only chunk where it is the whole context, and then holds
  // the token's own key), the chunk it falls in starts there.
  return DecodeWork(heads, max(k_begin, first_seen(span.y - 1u)), min(k_begin + p.chunk_blocks * KB, span.y),
                    heads.g * p.n_ctx + span.x);
}

// The smallest power of two >= n (n >= 1).
fn pow2_ceil(n: u32) -> u32 { return 1u << (32u - countLeadingZeros(n - 1u)); }

// ---- the output quantized ahead (the _xq entry points) -------------------------------------
// With one token, the kernels that write the output (decode_vec and decode_sg at one chunk,
// decode_reduce) can also write it as an xq row (xq_row.wgsl) for the output projection's gemv,
// which then reads its x from there instead of each of its workgroups staging and quantizing it
// (linear_q.h LinearQDesc::xq_in). decode_vec_xq, decode_sg_xq and decode_reduce_xq are their
// kernels with that epilogue: the body stages the workgroup's outputs in xo, then xo_put writes
// their blocks of 16 (HEAD_DIM a multiple of 16: a block never spans two heads).
override XO: u32 = 1u;  // outputs staged per workgroup: HPW * HEAD_DIM (reduce: HEAD_DIM) in the _xq kernels
@group(0) @binding(9) var<storage, read_write> xq_out: array<u32>;  // the _xq kernels' xq row
var<workgroup> xo: array<f32, XO>;

// Four outputs at out[at ..], and with xq also staged at xo[xi ..].
fn put_out4(at: u32, v: vec4<f32>, xq: bool, xi: u32) {
  out[at] = v.x;
  out[at + 1u] = v.y;
  out[at + 2u] = v.z;
  out[at + 3u] = v.w;
  if (xq) {
    xo[xi] = v.x;
    xo[xi + 1u] = v.y;
    xo[xi + 2u] = v.z;
    xo[xi + 3u] = v.w;
  }
}

// The workgroup's n outputs staged in xo, columns col0 .. col0 + n - 1 of the row (both multiples
// of 16), as their xq blocks: 8 threads a block, a word each. Every thread calls it (a barrier
// inside).
fn xo_put(col0: u32, n: u32, t: u32, threads: u32) {
  workgroupBarrier();
  let width = p.n_heads * HEAD_DIM;
  for (var i = t; i < n / 2u; i += threads) {
    let b = i / 8u;  // the workgroup's block
    let e = i % 8u;  // its word
    let v0 = 16u * b;
    var amax = 0.0;
    for (var j = 0u; j < 16u; j++) { amax = max(amax, abs(xo[v0 + j])); }
    let inv = xq_inv(amax);
    let at = xq_values(e) + vec4<u32>(v0);
    let blk = col0 / 16u + b;
    xq_out[xq_word_at(e, blk, width)] = xq_pack(vec4<f32>(xo[at.x], xo[at.y], xo[at.z], xo[at.w]), inv);
    if (e == 0u) {
      var hs = 0;
      var ss = 0.0;
      for (var j = 0u; j < 16u; j++) {
        let v = xo[v0 + j];
        hs += i32(round(v * inv));
        ss += v * v;
      }
      xq_out[xq_scale_at(blk, width)] = bitcast<u32>(amax / 127.0);
      xq_out[xq_scale_at(blk, width) + 1u] = bitcast<u32>(f32(hs));
      xq_out[xq_squares_at(blk, width)] = bitcast<u32>(ss);
    }
  }
}

// ---- decode, split: a workgroup per (chunk, HPW query heads of one KV head) ---------------
// Blocks of KB keys: LANES = WG / KB threads per key form the dot products with the heads'
// queries; then every thread owns one word of the row and a strided share of the keys for
// P*V (WG / R key lanes; threads past them idle). V for the block is loaded before the
// scores are known so both loads are in flight together. HPW = GROUP reads K/V once per
// group; fewer heads per workgroup fit a smaller workgroup memory (attention.cpp sizes it).
override HPW: u32 = 1u;  // query heads per workgroup (decode_heads), <= GROUP
override KB: u32 = 64u;  // keys per block: 64, or 32 where a row has more than 32 words

var<workgroup> dq: array<vec4<f32>, HPW * HEAD_DIM / 4u>;  // [HPW][HEAD_DIM / 4], scaled
var<workgroup> dpart: array<f32, HPW * WG>;  // [HPW][KB][LANES] partial dots, then reduce scratch
var<workgroup> dp: array<f32, HPW * KB>;     // [HPW][KB] scores, then probabilities
var<workgroup> dalpha: array<f32, MAX_GROUP>; // per head: rescale of the running sums
var<workgroup> dmax: array<f32, MAX_GROUP>;
var<workgroup> dred: array<vec4<f32>, WG * (1u + u32(F16))>;  // [WG][word vec4s] final sums

// The max (or sum) of dp[h][0 .. n_valid) for every head h, left in dpart[h * KB]: a tree over
// the block's KB entries per head, all heads at once.
fn block_reduce(t: u32, n_valid: u32, is_max: bool) {
  for (var i = t; i < HPW * KB; i += WG) {
    dpart[i] = select(select(0.0, NEG, is_max), dp[i], i % KB < n_valid);
  }
  workgroupBarrier();
  for (var s = KB / 2u; s > 0u; s >>= 1u) {
    for (var i = t; i < HPW * KB; i += WG) {
      if (i % KB < s) {
        let a = dpart[i];
        let b = dpart[i + s];
        dpart[i] = select(a + b, max(a, b), is_max);
      }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG)
fn decode_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let R = row_words();
  let E4 = word_vec4s();
  let D4 = HEAD_DIM / 4u;
  let LANES = WG / KB;
  let WPL = (R + LANES - 1u) / LANES;  // score phase: words per lane
  let NVL = WG / R;                    // key lanes in the P*V phase
  let KPL = (KB + NVL - 1u) / NVL;     // and keys per lane
  let c = wid.x;
  let dw = decode_work(wid);
  let hd = dw.heads;
  let head0 = hd.head0;
  let k_begin = dw.k_begin;
  let k_end = dw.k_end;
  let row0 = dw.row0;

  for (var i = t; i < HPW * D4; i += WG) {
    var v = vec4<f32>(0.0);  // heads past the group's end score zeros and are not written
    if (i / D4 < hd.n) { v = q[head0 * D4 + i] * p.scale; }
    dq[i] = v;
  }
  let sj = t / LANES;  // score phase: key of the block
  let sl = t % LANES;  // and lane
  let vw = t % R;      // P*V phase: word of the row
  let vl = t / R;      // and key lane (idle when >= NVL)
  var acc: array<array<vec4<f32>, 2>, MAX_GROUP>;
  var m_run = NEG;  // threads t < HPW: head t's running max and sum
  var l_run = 0.0;
  workgroupBarrier();

  for (var b0 = k_begin; b0 < k_end; b0 += KB) {
    let n_valid = min(KB, k_end - b0);
    var vv: array<vec4<u32>, MAX_KPL>;
    for (var i = 0u; i < KPL; i++) {
      let j = vl + i * NVL;
      vv[i] = vec4<u32>(0u);
      if ((WG % R == 0u || vl < NVL) && j < n_valid) { vv[i] = v_word((row0 + b0 + j) * R + vw); }
    }
    var part = array<f32, MAX_GROUP>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);  // explicit: a bare loop-local var was not re-zeroed per turn on lavapipe
    let key = b0 + sj;
    if (key < k_end) {
      for (var i = 0u; i < WPL; i++) {
        let w = sl + i * LANES;
        if (R % LANES == 0u || w < R) {
          let kv = unpack_word(k_word((row0 + key) * R + w));
          for (var u = 0u; u < E4; u++) {
            for (var h = 0u; h < HPW; h++) { part[h] += dot(dq[h * D4 + w * E4 + u], kv[u]); }
          }
        }
      }
    }
    for (var h = 0u; h < HPW; h++) { dpart[(h * KB + sj) * LANES + sl] = part[h]; }
    workgroupBarrier();
    for (var i = t; i < HPW * KB; i += WG) {
      var s = 0.0;
      for (var l = 0u; l < LANES; l++) { s += dpart[i * LANES + l]; }
      dp[i] = capped(s);
    }
    workgroupBarrier();
    // Each head's block max and sum by trees (no thread walks the block).
    block_reduce(t, n_valid, true);
    if (t < HPW) {
      let m_new = max(m_run, dpart[t * KB]);
      dalpha[t] = exp(m_run - m_new);
      dmax[t] = m_new;
      m_run = m_new;
    }
    workgroupBarrier();
    for (var i = t; i < HPW * KB; i += WG) {
      dp[i] = select(0.0, exp(dp[i] - dmax[i / KB]), i % KB < n_valid);
    }
    workgroupBarrier();
    block_reduce(t, n_valid, false);
    if (t < HPW) { l_run = l_run * dalpha[t] + dpart[t * KB]; }
    for (var h = 0u; h < HPW; h++) {
      let a = dalpha[h];
      var s0 = acc[h][0] * a;
      var s1 = acc[h][1] * a;
      for (var i = 0u; i < KPL; i++) {
        let j = vl + i * NVL;
        if (KB % NVL == 0u || j < KB) {
          let pj = dp[h * KB + j];
          let vf = unpack_word(vv[i]);
          s0 += pj * vf[0];
          s1 += pj * vf[1];
        }
      }
      acc[h][0] = s0;
      acc[h][1] = s1;
    }
    workgroupBarrier();
  }

  // Sum the key lanes' partial P*V per head; write this chunk's (V sums, max, sum).
  let P2 = pow2_ceil(NVL);
  for (var h = 0u; h < HPW; h++) {
    for (var u = 0u; u < E4; u++) { dred[t * E4 + u] = acc[h][u]; }
    workgroupBarrier();
    for (var s = P2 / 2u; s > 0u; s >>= 1u) {  // a tree over the key lanes (t = vl * R + vw)
      if (vl < s && vl + s < NVL) {
        for (var u = 0u; u < E4; u++) { dred[t * E4 + u] += dred[(t + s * R) * E4 + u]; }
      }
      workgroupBarrier();
    }
    if (t < R && h < hd.n) {
      let o = ((head0 + h) * p.n_chunks + c) * HEAD_DIM + t * E4 * 4u;
      for (var u = 0u; u < E4; u++) {
        let s0 = dred[t * E4 + u];
        split[o + 4u * u] = s0.x;
        split[o + 4u * u + 1u] = s0.y;
        split[o + 4u * u + 2u] = s0.z;
        split[o + 4u * u + 3u] = s0.w;
      }
    }
    workgroupBarrier();
  }
  if (t < hd.n) {
    let i = p.ml_offset + ((head0 + t) * p.n_chunks + c) * 2u;
    split[i] = m_run;
    split[i + 1u] = l_run;
  }
}

// ---- decode, reduce: a workgroup per query row merges its chunks ---------------------------
// Thread t takes chunks t and t + RWG for the (max, sum): reduced by shuffles inside each
// subgroup (SG lanes; 1 without subgroups), then across the subgroups in workgroup memory. Then
// each chunk group g (G = RWG / (HEAD_DIM / 4) of them) sums the weighted partials of chunks
// g, g + G, ... for one vec4 of the output per thread, four chunks a turn so that their loads go
// out together (the first turn's before the reductions), and the groups' sums meet in workgroup
// memory. The partials are read through a read-only binding of their vec4s (split4: the same
// scratch that the decode kernels write).
@group(0) @binding(8) var<storage, read> split4: array<vec4<f32>>;
var<workgroup> rw: array<f32, MAX_CHUNKS>;  // per chunk: exp(m_c - M) / L
var<workgroup> rr: array<f32, RWG>;
var<workgroup> ro: array<vec4<f32>, RWG>;

fn split_at(i: u32) -> f32 { return split4[i / 4u][i % 4u]; }

// The workgroup's max (is_max) or sum of v, in every thread.
fn reduce_rr(v: f32, t: u32, is_max: bool) -> f32 {
  var r = v;
  for (var mask = 1u; mask < SG; mask <<= 1u) {
    let o = sg_xor(r, mask);
    r = select(r + o, max(r, o), is_max);
  }
  if (t % SG == 0u) { rr[t / SG] = r; }
  workgroupBarrier();
  for (var s = RWG / SG / 2u; s > 0u; s >>= 1u) {
    if (t < s) { rr[t] = select(rr[t] + rr[t + s], max(rr[t], rr[t + s]), is_max); }
    workgroupBarrier();
  }
  let all = rr[0];
  workgroupBarrier();
  return all;
}

// Chunk c's partial vec4 for this thread (zeros past the chunks or past the groups).
fn reduce_part(base: u32, c: u32, on: bool) -> vec4<f32> {
  if (!on || c >= p.n_chunks) { return vec4<f32>(0.0); }
  return split4[base + c * (HEAD_DIM / 4u)];
}

// Chunk c's weight (zero past the chunks).
fn reduce_weight(c: u32) -> f32 { return select(0.0, rw[min(c, MAX_CHUNKS - 1u)], c < p.n_chunks); }

// decode_reduce's work; xq: its outputs also staged in xo (decode_reduce_xq).
fn reduce_body(wid: vec3<u32>, t: u32, xq: bool) {
  let h = select(0u, wid.y, TABLE) * p.n_heads + wid.x;  // query row (TABLE: token wid.y)
  let nc = p.n_chunks;
  let ml = p.ml_offset + h * nc * 2u;
  let D4 = HEAD_DIM / 4u;
  let G = RWG / D4;  // chunk groups, >= 2 (HEAD_DIM <= 256)
  let g = t / D4;
  let on = g < G;
  let base = h * nc * D4 + t % D4;  // vec4 of chunk 0's partial
  // The group's first four partials go out with the (max, sum) loads: their round trip overlaps
  // the reductions below (the weights they wait for).
  let o0 = reduce_part(base, g, on);
  let o1 = reduce_part(base, g + G, on);
  let o2 = reduce_part(base, g + 2u * G, on);
  let o3 = reduce_part(base, g + 3u * G, on);
  let c1 = t + RWG;
  var m0 = NEG;
  var l0 = 0.0;
  var m1 = NEG;
  var l1 = 0.0;
  if (t < nc) {
    m0 = split_at(ml + 2u * t);
    l0 = split_at(ml + 2u * t + 1u);
  }
  if (c1 < nc) {
    m1 = split_at(ml + 2u * c1);
    l1 = split_at(ml + 2u * c1 + 1u);
  }
  let big = reduce_rr(max(m0, m1), t, true);
  let w0 = exp(m0 - big);
  let w1 = exp(m1 - big);
  let inv = 1.0 / reduce_rr(w0 * l0 + w1 * l1, t, false);
  if (t < nc) { rw[t] = w0 * inv; }
  if (c1 < nc) { rw[c1] = w1 * inv; }
  workgroupBarrier();

  var acc = reduce_weight(g) * o0 + reduce_weight(g + G) * o1 + reduce_weight(g + 2u * G) * o2 +
            reduce_weight(g + 3u * G) * o3;
  if (on) {
    var c = g + 4u * G;
    for (; c + 3u * G < nc; c += 4u * G) {
      acc += rw[c] * split4[base + c * D4] + rw[c + G] * split4[base + (c + G) * D4] +
             rw[c + 2u * G] * split4[base + (c + 2u * G) * D4] + rw[c + 3u * G] * split4[base + (c + 3u * G) * D4];
    }
    for (; c < nc; c += G) { acc += rw[c] * split4[base + c * D4]; }
  }
  ro[t] = acc;
  workgroupBarrier();
  if (t < D4) {
    var o = ro[t];
    for (var k = 1u; k < G; k++) { o += ro[k * D4 + t]; }
    put_out4(h * HEAD_DIM + 4u * t, o, xq, 4u * t);
  }
}

@compute @workgroup_size(RWG)
fn decode_reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  reduce_body(wid, t, false);
}

// With one token, query row wid.x is head wid.x.
@compute @workgroup_size(RWG)
fn decode_reduce_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  reduce_body(wid, t, true);
  if (p.n_tokens == 1u) { xo_put(wid.x * HEAD_DIM, HEAD_DIM, t, RWG); }
}

// The vec4 offset in q and out of prefill row r (token r / GROUP, head r % GROUP of KV head g's
// group; r past the step's rows: not read or written).
fn prefill_row(r: u32, g: u32) -> u32 {
  return ((r / GROUP) * p.n_heads + (p.kv_off + g) * GROUP + r % GROUP) * (HEAD_DIM / 4u);
}

// A prefill workgroup's run of tokens from run0 up to last_tok: TABLE, the tokens with run0's
// region (equal b_i); else all of them. One past its last token, its keys (the last token's:
// positions increase within a sequence), the cache row of its key 0 in KV head g's rows, and the
// first key any of its tokens sees (run0's first_seen: 0 without a sliding window).
struct PrefillRun {
  end: u32,
  kv_len: u32,
  row0: u32,
  first: u32,
}
fn prefill_run(run0: u32, last_tok: u32, g: u32, pos: u32) -> PrefillRun {
  if (!TABLE) { return PrefillRun(last_tok + 1u, pos + last_tok + 1u, g * p.n_ctx, first_seen(pos + run0)); }
  let b = kv_rows[2u * run0 + 1u];
  var end = run0 + 1u;
  while (end <= last_tok && kv_rows[2u * end + 1u] == b) { end++; }
  let span = kv_span(end - 1u, p.n_ctx);
  return PrefillRun(end, span.y, g * p.n_ctx + span.x, first_seen(kv_span(run0, p.n_ctx).y - 1u));
}
// A run's first key tile of `keys` keys: tiles wholly before its sliding window are skipped.
fn first_tile(run: PrefillRun, keys: u32) -> u32 { return run.first - run.first % keys; }

// ---- prefill: a workgroup per (tile of ROWS (token, head) rows, KV head) -----------------
// Row r is token tok0 + r / GROUP and query head (kv_off + g) * GROUP + r % GROUP, g the KV head
// of the cache part (grid y), so one K/V tile in
// workgroup memory serves all query heads of the group. Tiles of BK keys up to the causal
// limit of the tile's last token; an online softmax per row. Thread t serves row t % ROWS;
// its column group t / ROWS (of NG = WG / ROWS) takes KPT keys of a tile for the scores and
// OV vec4s of the row for the output (threads past the tile's keys or the row idle).
// TABLE: the tile's tokens may belong to several sequences. It takes the runs of tokens with
// equal b_i in turn (one run in the common case): for each, K/V tiles of that region from key 0
// to the run's last p_i, the rows of other runs masked (they add nothing); row r keeps its own
// causal limit p_r.
override ROWS: u32 = 32u;  // rows per tile, >= GROUP (attention.cpp picks it): ROWS / GROUP whole tokens
override BK: u32 = 32u;    // keys per tile

var<workgroup> pq: array<vec4<f32>, ROWS * (HEAD_DIM / 4u + 1u)>;  // [ROWS][HEAD_DIM/4 + 1]
var<workgroup> pkv: array<vec4<f32>, BK * HEAD_DIM / 4u>;           // [BK][HEAD_DIM/4]: K, then V
var<workgroup> pp: array<f32, ROWS * (BK + 1u)>;                    // [ROWS][BK + 1] scores, then p
var<workgroup> pmax: array<f32, WG>;  // [NG][ROWS]: each thread's max over its keys of the tile
var<workgroup> psum: array<f32, WG>;  // [NG][ROWS]: each thread's sum of its keys' exps

const QREG: u32 = 32u;  // q's vec4s per row held in registers in the score phase (head_dim <= 128)
override Q_IN_REGS: bool = true;  // hold q in registers where it fits (WGRT_PREFILL_QREG=0: read pq)

// Keys grp * KPT + u of the tile against q's vec4 d4 of the thread's row.
fn prefill_scores(s: ptr<function, array<f32, 4>>, qv: vec4<f32>, d4: u32, grp: u32, KPT: u32, NG: u32, D4: u32) {
  for (var u = 0u; u < KPT; u++) {
    if (BK % NG == 0u || grp * KPT + u < BK) { (*s)[u] += dot(qv, pkv[(grp * KPT + u) * D4 + d4]); }
  }
}

// Cache rows row0 + k0 .. + BK of K (or V) into pkv as f32, zeros past kv_len.
fn prefill_load_tile(v: bool, t: u32, row0: u32, k0: u32, kv_len: u32) {
  let R = row_words();
  let E4 = word_vec4s();
  let D4 = HEAD_DIM / 4u;
  for (var i = t; i < BK * R; i += WG) {
    let j = i / R;
    let w = i % R;
    var word = vec4<u32>(0u);
    if (k0 + j < kv_len) {
      if (v) { word = v_word((row0 + k0 + j) * R + w); } else { word = k_word((row0 + k0 + j) * R + w); }
    }
    let f = unpack_word(word);
    for (var u = 0u; u < E4; u++) { pkv[j * D4 + w * E4 + u] = f[u]; }
  }
}

@compute @workgroup_size(WG)
fn prefill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let D4 = HEAD_DIM / 4u;
  let QST = D4 + 1u;
  let NG = WG / ROWS;
  let OV = (D4 + NG - 1u) / NG;   // output vec4s per thread, <= 4
  let KPT = (BK + NG - 1u) / NG;  // keys per thread in the score phase, <= 4
  let tpt = ROWS / GROUP;
  let tok0 = wid.x * tpt;
  let g = wid.y;
  let last_tok = min(tok0 + tpt, p.n_tokens) - 1u;

  for (var i = t; i < ROWS * D4; i += WG) {
    let r = i / D4;
    let d4 = i % D4;
    let tok = tok0 + r / GROUP;
    var v = vec4<f32>(0.0);
    if (tok < p.n_tokens && r < tpt * GROUP) { v = q[(tok * p.n_heads + (p.kv_off + g) * GROUP + r % GROUP) * D4 + d4] * p.scale; }
    pq[r * QST + d4] = v;
  }
  let r = t % ROWS;
  let grp = t / ROWS;  // scores: keys grp * KPT ..; output: vec4s grp * OV ..
  workgroupBarrier();
  var qr: array<vec4<f32>, QREG>;  // row r of q, where it fits (D4 <= QREG)
  if (Q_IN_REGS && D4 <= QREG) {
    for (var d4 = 0u; d4 < D4; d4++) { qr[d4] = pq[r * QST + d4]; }
  }
  let PST = BK + 1u;   // padded row stride of pp (banks)
  let my_tok = min(tok0 + r / GROUP, p.n_tokens - 1u);
  let pos = symbol(p.pos_sym);
  var limit = pos + my_tok;  // last key row r sees (TABLE: within its region)
  if (TABLE) { limit = kv_span(my_tok, p.n_ctx).y - 1u; }
  var m_run = NEG;  // row r's running max and sum (every thread of the row holds them)
  var l_run = 0.0;
  var acc: array<vec4<f32>, 4>;

  var run0 = tok0;  // the run's first token
  loop {
    let run = prefill_run(run0, last_tok, g, pos);
    let kv_len = run.kv_len;
    let row0 = run.row0;
    let in_run = !TABLE || (my_tok >= run0 && my_tok < run.end);

    for (var k0 = first_tile(run, BK); k0 < kv_len; k0 += BK) {
      workgroupBarrier();
      prefill_load_tile(false, t, row0, k0, kv_len);
      workgroupBarrier();
      var s = array<f32, 4>(0.0, 0.0, 0.0, 0.0);  // explicit, as `part` above
      // Guards of the form `X % Y == 0u || ...` fold away after override substitution where the
      // shape divides evenly (the 64/128 fast paths), keeping the loops' trip counts constant.
      // Rows of up to QREG vec4s read q from registers, longer ones from pq.
      if (Q_IN_REGS && D4 <= QREG) {
        for (var d4 = 0u; d4 < D4; d4++) { prefill_scores(&s, qr[d4], d4, grp, KPT, NG, D4); }
      } else {
        for (var d4 = 0u; d4 < D4; d4++) { prefill_scores(&s, pq[r * QST + d4], d4, grp, KPT, NG, D4); }
      }
      // The online softmax, spread over the NG threads of each row: each takes the max of its own
      // keys' scores (still in registers), the row's max comes from the NG partials, each writes
      // its keys' exps and their sum; every thread of a row keeps the row's (max, sum) itself.
      let n_valid = select(0u, min(BK, limit + 1u - k0), limit >= k0 && in_run);
      let lo = first_seen(limit);  // keys before it lie outside the sliding window
      var bm = NEG;
      for (var u = 0u; u < KPT; u++) {
        s[u] = capped(s[u]);
        if (grp * KPT + u < n_valid && k0 + grp * KPT + u >= lo) { bm = max(bm, s[u]); }
      }
      pmax[t] = bm;
      workgroupBarrier();
      prefill_load_tile(true, t, row0, k0, kv_len);
      var m_tile = NEG;
      for (var i = 0u; i < NG; i++) { m_tile = max(m_tile, pmax[i * ROWS + r]); }
      let m_new = max(m_run, m_tile);
      let a = exp(m_run - m_new);
      var part = 0.0;
      for (var u = 0u; u < KPT; u++) {
        let j = grp * KPT + u;
        if (BK % NG == 0u || j < BK) {
          let e = select(0.0, exp(s[u] - m_new), j < n_valid && k0 + j >= lo);
          pp[r * PST + j] = e;
          part += e;
        }
      }
      psum[t] = part;
      m_run = m_new;
      workgroupBarrier();
      var sum = 0.0;
      for (var i = 0u; i < NG; i++) { sum += psum[i * ROWS + r]; }
      l_run = l_run * a + sum;
      for (var v = 0u; v < OV; v++) { acc[v] *= a; }
      for (var j = 0u; j < BK; j++) {
        let pj = pp[r * PST + j];
        for (var v = 0u; v < OV; v++) {
          if (D4 % NG == 0u || grp * OV + v < D4) { acc[v] += pj * pkv[j * D4 + grp * OV + v]; }
        }
      }
    }
    run0 = run.end;
    if (run0 > last_tok) { break; }
  }
  let tok = tok0 + r / GROUP;
  if (tok < p.n_tokens && r < tpt * GROUP) {  // rows past the tile's whole tokens idle (GQA 3, 5, 6, 7)
    let inv = 1.0 / l_run;
    for (var v = 0u; v < OV && grp * OV + v < D4; v++) {
      let o = acc[v] * inv;
      let b = ((tok * p.n_heads + (p.kv_off + g) * GROUP + r % GROUP) * D4 + grp * OV + v) * 4u;
      out[b] = o.x;
      out[b + 1u] = o.y;
      out[b + 2u] = o.z;
      out[b + 3u] = o.w;
    }
  }
}
