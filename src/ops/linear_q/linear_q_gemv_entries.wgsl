// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the gemv entry points: gemv, gemv_xq,
// gemv_swiglu, gemv_swiglu_xq, gemv_argmax and gemv_rope (their fused epilogues). The row loops
// are linear_q_gemv.wgsl's and linear_q_gemv_i8.wgsl's.
//
// Several rows of x (p.m of them, 1 .. kLinearQGemvMaxRows): a workgroup per (tile of weight
// rows, GV_XR rows of x), the workgroups of a tile adjacent in dispatch order, so they run
// together (the tile's weights can come from L2 for all but the first).
fn gv_wg(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
fn gv_groups() -> u32 { return (p.m + GV_XR - 1u) / GV_XR; }
fn gv_m0(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return (gv_wg(wid, nwg) % gv_groups()) * GV_XR; }

fn gv_set(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (gv_wg(wid, nwg) / gv_groups()) * GV_SETS + lid / GV_TK;
}

fn gv_clamp(r: vec4<u32>) -> vec4<u32> { return min(r, vec4<u32>(p.n - 1u)); }

fn gv_finish(v: f32, m: u32, n: u32) -> f32 {
  var o = finish(v, n);
  if (RES) { o += res[m * p.ld + p.y_off + n]; }
  return o;
}

// The gemv's outputs: y, and row 0's 4 in lane 0 of each row set (gemv_xq's).
fn gemv_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec4<f32> {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let m0 = gv_m0(wid, nwg);
  let acc = gv_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), m0, p.x_row, lid);
  var out = vec4<f32>(0.0);
  if (lid % GV_TK == 0u) {
    for (var q = 0u; q < GV_XR; q++) {
      let m = m0 + q;
      let a = gv_pick(acc, q);
      for (var r = 0u; r < 4u; r++) {
        if (m < p.m && n0 + r < p.n) {
          let o = gv_finish(a[r], m, n0 + r);
          y[m * p.ld + p.y_off + n0 + r] = o;
          out[r] = o;
        }
      }
    }
  }
  return out;
}

@compute @workgroup_size(GV_WG)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  _ = gemv_body(wid, nwg, lid);
}

// gemv, and with one row of x (uniform) its outputs also as xq block n0 / 16 (N a multiple of 16).
@compute @workgroup_size(GV_WG)
fn gemv_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let out = gemv_body(wid, nwg, lid);
  if (p.m == 1u) { gv_put_xq(out, 4u, gv_set(wid, nwg, lid) * 4u, gv_wg(wid, nwg), p.n, lid); }
}

// Row of gate j in a weight whose (gate, up) rows are interleaved in blocks of 16; up is 16 on.
fn swiglu_gate_row(j: u32) -> u32 { return (j / 16u) * 32u + j % 16u; }

// gemv_swiglu's outputs: y, and row 0's 2 in lane 0 of each row set (gemv_swiglu_xq's).
fn swiglu_body(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> vec4<f32> {
  let j0 = gv_set(wid, nwg, lid) * 2u;
  let m0 = gv_m0(wid, nwg);
  let g0 = swiglu_gate_row(j0);
  let g1 = swiglu_gate_row(j0 + 1u);
  let rows = vec4<u32>(g0, g0 + 16u, g1, g1 + 16u);
  let acc = gv_run(gv_clamp(rows), m0, p.x_row, lid);
  let half = p.n / 2u;
  var out = vec4<f32>(0.0);
  if (lid % GV_TK == 0u) {
    for (var q = 0u; q < GV_XR; q++) {
      let m = m0 + q;
      let a = gv_pick(acc, q);
      let o = vec2<f32>(gate_act(finish(a.x, rows.x)) * finish(a.y, rows.y),
                        gate_act(finish(a.z, rows.z)) * finish(a.w, rows.w));
      if (m < p.m && j0 < half) { y[m * half + j0] = o.x; }
      if (m < p.m && j0 + 1u < half) { y[m * half + j0 + 1u] = o.y; }
      if (q == 0u) { out = vec4<f32>(o, 0.0, 0.0); }
    }
  }
  return out;
}

@compute @workgroup_size(GV_WG)
fn gemv_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  _ = swiglu_body(wid, nwg, lid);
}

// gemv_swiglu at 8 row sets, and with one row of x (uniform) the workgroup's 16 outputs also as
// xq block j0 / 16.
@compute @workgroup_size(GV_WG)
fn gemv_swiglu_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let out = swiglu_body(wid, nwg, lid);
  if (p.m == 1u) { gv_put_xq(out, 2u, gv_set(wid, nwg, lid) * 2u, gv_wg(wid, nwg), p.n / 2u, lid); }
}

// The sampling family's order key (sampling.wgsl): unsigned order = float order, NaN as -inf,
// -0 as +0, so sampling's argmax_final can finish the partials written here.
fn gv_key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { b = 0xff800000u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

var<workgroup> gv_best: array<vec2<u32>, GV_SETS>;

@compute @workgroup_size(GV_WG)
fn gemv_argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let rows = vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u);
  let acc = gv_reduce(gv_dots(gv_clamp(rows), p.x_row, lid % GV_TK, lid), lid);
  if (lid % GV_TK == 0u) {
    var best = vec2<u32>(0u, 0xffffffffu);  // the sentinel: worse than any logit
    for (var r = 0u; r < 4u; r++) {
      let n = n0 + r;
      if (n < p.n) {
        let v = gv_finish(acc[r], 0u, n);
        y[p.y_off + n] = v;
        let key = gv_key(v);
        if (key > best.x || best.y == 0xffffffffu) { best = vec2<u32>(key, p.y_off + n); }
      }
    }
    gv_best[lid / GV_TK] = best;
  }
  workgroupBarrier();
  if (lid == 0u) {
    // Sets hold ascending rows, so keeping the first strict maximum keeps the lowest index.
    var best = gv_best[0];
    for (var s = 1u; s < GV_SETS; s++) {
      let b = gv_best[s];
      if (b.y != 0xffffffffu && (b.x > best.x || best.y == 0xffffffffu)) { best = b; }
    }
    // p.m is 1: the output head's one row. A weight split by rows: this part's partials follow
    // the earlier parts' (their rows are whole workgroups of GV_ROWS).
    let wg = p.y_off / GV_ROWS + gv_wg(wid, nwg);
    part[2u * wg] = best.x;
    part[2u * wg + 1u] = best.y;
  }
}
// ---- gemv_rope: the q|k|v projection with RoPE and the KV-cache write in its epilogue ----
// The weight's rows are q heads, then k heads, then v heads (several weights: each kernel its
// columns from y_off). Lane 0 of a row set holds 4 consecutive columns of one head, i.e. two
// rotation pairs (2j, 2j + 1) of the normal layout: it turns the q and k ones (rope_turn.wgsl)
// and writes q to y [m, q columns], k and v to the caches [n_kv_heads, n_ctx, head_dim] at
// pos + m for x's row m (pos from the graph's symbol block). Neox pairs (j, j + n_rot / 2) span
// row sets: their gemv writes q|k|v, then rope_qkv.
override ROPE_HD: u32 = 64u;      // head_dim, a multiple of 4
override ROPE_NROT: u32 = 64u;    // rotated dims per head, a multiple of 4
override ROPE_Q: u32 = 0u;        // q columns (n_heads * head_dim)
override ROPE_KV: u32 = 0u;       // k columns, and v columns (n_kv_heads * head_dim)
override ROPE_F16: bool = false;  // the caches hold f16 pairs

@group(0) @binding(12) var<storage, read> rope_freqs: array<u32>;  // [n_rot / 2][hi, lo]
@group(0) @binding(13) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(14) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(15) var<uniform> symbols: Symbols;

// Pair (e, e + 1) of a head turned at `pos`; past n_rot it passes through.
fn rope_pair(v: vec2<f32>, e: u32, pos: u32) -> vec2<f32> {
  if (e >= ROPE_NROT) { return v; }
  return rope_turn(v.x, v.y, pos, rope_freqs[e], rope_freqs[e + 1u]);  // pair e / 2's (hi, lo)
}

// Columns col..col + 3 of k (or v) into cache row `row` of their head.
fn rope_store(to_k: bool, col: u32, v: vec4<f32>, row: u32) {
  let at = ((col / ROPE_HD) * p.n_ctx + row) * ROPE_HD + col % ROPE_HD;  // element index
  var w = bitcast<vec4<u32>>(v);
  var words = 4u;
  var o = at;
  if (ROPE_F16) {
    w = vec4<u32>(pack2x16float(v.xy), pack2x16float(v.zw), 0u, 0u);
    words = 2u;
    o = at / 2u;
  }
  for (var i = 0u; i < words; i++) {
    if (to_k) { k_cache[o + i] = w[i]; } else { v_cache[o + i] = w[i]; }
  }
}

@compute @workgroup_size(GV_WG)
fn gemv_rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let m0 = gv_m0(wid, nwg);  // the tokens at pos + m0 ..
  let acc = gv_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), m0, 0u, lid);
  if (lid % GV_TK != 0u || n0 >= p.n) { return; }
  for (var q = 0u; q < GV_XR; q++) {
    let pos = symbol(p.pos_sym) + m0 + q;
    if (m0 + q < p.m) { rope_out(gv_pick(acc, q), n0, m0 + q, pos, pos); }
  }
}

// gemv_rope for a step of several sequences: row m turns at p_m of KvRows::table and its k, v
// land at cache row b_m + p_m (kv_rows.wgsl).
@group(0) @binding(20) var<storage, read> kv_rows: array<u32>;  // [rows][p_i, b_i]

@compute @workgroup_size(GV_WG)
fn gemv_rope_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let m0 = gv_m0(wid, nwg);
  let acc = gv_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), m0, 0u, lid);
  if (lid % GV_TK != 0u || n0 >= p.n) { return; }
  for (var q = 0u; q < GV_XR; q++) {
    if (m0 + q < p.m) { rope_out(gv_pick(acc, q), n0, m0 + q, kv_pos(m0 + q), kv_dst(m0 + q, p.n_ctx)); }
  }
}

// Weight rows n0..n0 + 3 of x's row m, turned at `pos`: q to y, k and v to cache row `row`.
fn rope_out(a: vec4<f32>, n0: u32, m: u32, pos: u32, row: u32) {
  let c = p.y_off + n0;  // the q|k|v column of row n0 (weights have whole heads: n0 + 3 < p.n)
  var v = vec4<f32>(finish(a.x, n0), finish(a.y, n0 + 1u), finish(a.z, n0 + 2u), finish(a.w, n0 + 3u));
  if (c < ROPE_Q + ROPE_KV) {
    let e = c % ROPE_HD;
    v = vec4<f32>(rope_pair(v.xy, e, pos), rope_pair(v.zw, e + 2u, pos));
  }
  if (c < ROPE_Q) {
    for (var i = 0u; i < 4u; i++) { y[m * ROPE_Q + c + i] = v[i]; }
    return;
  }
  let kv = c - ROPE_Q;
  rope_store(kv < ROPE_KV, kv % ROPE_KV, v, row);
}
// ---- gemv_experts: a mixture-of-experts FFN's weights, the chosen experts' rows only ----
// The weight holds E experts' blocks of p.ex_n rows each (p.n = E * ex_n, the GGUF layout of
// ffn_{gate,up,down}_exps). Output row j is a (token, slot) pair: x's row j / p.ex_xdiv (the
// token, for gate|up; the pair's own row, for down) times expert ex_ids[j]'s block. A workgroup
// per (tile of the expert's rows, pair), GV_XR 1: pairs read different experts.
@group(0) @binding(16) var<storage, read> ex_ids: array<u32>;  // [pairs] each pair's expert

// Rows `local` of expert e (clamped to its block).
fn ex_rows(local: vec4<u32>, e: u32) -> vec4<u32> { return min(local, vec4<u32>(p.ex_n - 1u)) + e * p.ex_n; }

@compute @workgroup_size(GV_WG)
fn gemv_experts(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let j = gv_m0(wid, nwg);
  let n0 = gv_set(wid, nwg, lid) * 4u;
  let e = ex_ids[j];
  let acc = gv_run(ex_rows(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u), e), j / p.ex_xdiv, 0u, lid);
  if (lid % GV_TK == 0u && j < p.m) {
    for (var r = 0u; r < 4u; r++) {
      if (n0 + r < p.ex_n) { y[j * p.ex_n + n0 + r] = acc.a0[r]; }
    }
  }
}

// gemv_experts over each expert's (gate, up) rows interleaved in blocks of 16: y [pairs, ex_n / 2].
// Pair j's rows of expert e (the pair's, from ex_ids or its route), SiLU(gate) * up out.
fn ex_swiglu(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, j: u32, e: u32) {
  let j0 = gv_set(wid, nwg, lid) * 2u;
  let g0 = swiglu_gate_row(j0);
  let g1 = swiglu_gate_row(j0 + 1u);
  let a = gv_run(ex_rows(vec4<u32>(g0, g0 + 16u, g1, g1 + 16u), e), j / p.ex_xdiv, 0u, lid).a0;
  let half = p.ex_n / 2u;
  if (lid % GV_TK == 0u && j < p.m) {
    if (j0 < half) { y[j * half + j0] = gate_act(a.x) * a.y; }
    if (j0 + 1u < half) { y[j * half + j0 + 1u] = gate_act(a.z) * a.w; }
  }
}

@compute @workgroup_size(GV_WG)
fn gemv_experts_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
  let j = gv_m0(wid, nwg);
  ex_swiglu(wid, nwg, lid, j, ex_ids[j]);
}

// ---- gemv_experts_swiglu_route: moe_route's choice inside gate|up, for steps of few tokens ----
// Each workgroup ranks its token's router logits as moe_route does (an expert's rank: the experts
// with a larger logit, or an equal one at a lower index) and takes the expert of its slot's
// rank; the pair's first tile also writes the pair's expert and weight for down and moe_combine.
// x_div is the slots: pair j is token j / p.ex_xdiv, slot j % p.ex_xdiv.
@group(0) @binding(17) var<storage, read> rt_logits: array<f32>;     // [tokens, p.ex_e]
@group(0) @binding(18) var<storage, read_write> rt_ids: array<u32>;  // [pairs]
@group(0) @binding(19) var<storage, read_write> rt_wts: array<f32>;  // [pairs]
var<workgroup> rt_key4: array<vec4<u32>, EX_MAX_E / 4u>;  // each expert's order key, 4 a word; then exps
var<workgroup> rt_rank: array<u32, EX_MAX_E>;
var<workgroup> rt_pick: u32;
var<workgroup> rt_top: f32;

// The expert of slot `slot` of token t; with `first` (uniform: the pair's first tile) also the
// pair's expert into rt_ids[j] and its weight into rt_wts[j]: softmax over all experts, or
// (ex_norm) over the chosen ones, as moe_route's.
fn rt_route(t: u32, slot: u32, j: u32, first: bool, lid: u32) -> u32 {
  let e = p.ex_e;
  let k = p.ex_xdiv;
  let words = (e + 3u) / 4u;
  for (var i = lid; i < words * 4u; i += GV_WG) {
    rt_key4[i / 4u][i % 4u] = select(0u, moe_key(rt_logits[t * e + min(i, e - 1u)]), i < e);
  }
  workgroupBarrier();
  for (var i = lid; i < e; i += GV_WG) {
    let key = vec4<u32>(rt_key4[i / 4u][i % 4u]);
    var rank = 0u;
    for (var w = 0u; w < words; w++) {
      let kv = rt_key4[w];
      let jv = vec4<u32>(4u * w) + vec4<u32>(0u, 1u, 2u, 3u);
      rank += dot(select(vec4<u32>(0u), vec4<u32>(1u), (kv > key) | ((kv == key) & (jv < vec4<u32>(i)))),
                  vec4<u32>(1u));
    }
    rt_rank[i] = rank;
    if (rank == slot) { rt_pick = i; }
    if (rank == 0u) { rt_top = rt_logits[t * e + i]; }
  }
  workgroupBarrier();
  let pick = rt_pick;
  if (first) {
    // The keys are read no more: their words hold exp(logit - top) by rank (ex_norm, the chosen
    // ones) or by expert.
    let top = rt_top;
    for (var i = lid; i < e; i += GV_WG) {
      let rank = rt_rank[i];
      let at = select(i, rank, p.ex_norm != 0u);
      if (p.ex_norm == 0u || rank < k) {
        rt_key4[at / 4u][at % 4u] = bitcast<u32>(exp(rt_logits[t * e + i] - top));  // the top's is 1
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      var total = 0.0;
      for (var i = 0u; i < select(e, k, p.ex_norm != 0u); i++) { total += bitcast<f32>(rt_key4[i / 4u][i % 4u]); }
      rt_ids[j] = pick;
      rt_wts[j] = exp(rt_logits[t * e + pick] - top) / total;
    }
  }
  return pick;
}

@compute @workgroup_size(GV_WG)
fn gemv_experts_swiglu_route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                             @builtin(local_invocation_index) lid: u32) {
  let j = gv_m0(wid, nwg);
  let jr = min(j, p.m - 1u);  // the whole workgroup routes (barriers stay uniform)
  let e = rt_route(jr / p.ex_xdiv, jr % p.ex_xdiv, jr, gv_wg(wid, nwg) / gv_groups() == 0u && j < p.m, lid);
  ex_swiglu(wid, nwg, lid, j, e);
}
