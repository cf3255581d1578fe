// A part of attention.wgsl (gpu/pipeline.h `//! use`): prefill_rt, prefill attention with
// register tiles (head dims 32, 64, 96, 128 on a device with subgroups of 8 lanes or more).
//
// A workgroup per (RB = RTW / 2 rows, KV head g of the cache part); rows in token order as in
// prefill_sg (row r: token r / GROUP, head r % GROUP of g's group). Thread t is key lane
// sc = t % 8 of row group sr = t / 8, which owns rows sr, sr + RG, sr + 2 RG, sr + 3 RG (RG = RTW / 8
// row groups) as the components of a vec4.
// q (scaled) is staged once in workgroup memory, dimension-major (rq[d][row]); every tile of 16
// keys of K dimension-major (rk[d][key]) and of V key-major (rv[key][d]), in f32, the next tile's
// words loaded into registers while this one is walked.
// Scores: the thread's 4 rows against keys sc and sc + 8 over the whole row, eight vec4
// accumulators: 6 workgroup loads per 32 multiply-adds and no shuffles (each score is whole in
// one lane). Softmax: the rows' max over the tile by 3 shuffles across the 8 key lanes; each lane
// keeps its own part of the rows' sums (one shuffle sum at the end). P x V: the thread's 4 rows x
// vec4 columns sc, sc + 8, .. (HEAD_DIM / 32 of them) of the output, in registers; lane sc takes the
// weights of keys sc ^ x and sc ^ x + 8 from lane sc ^ x by a shuffle (x = 0..7), so that the 8 lanes
// read 8 different V rows at 8 different bank groups. Two barriers per tile; every per-lane value is
// a named register.
// TABLE: the workgroup's tokens are taken a run of equal b_i at a time, as in prefill.
override RTW: u32 = 128u;  // threads, a multiple of 8 and of the subgroup: RTW / 2 rows
override RTF: u32 = 2u;    // K (and V) tile words per thread: ceil(RK * row_words() / RTW), 1..4;
                           // 0: more, copied straight into workgroup memory after the barrier

const RKL: u32 = 8u;  // key lanes of a row group

var<workgroup> rq: array<vec4<f32>, (RTW / 2u) * (HEAD_DIM / 4u)>;  // [HEAD_DIM / 4][RB], scaled
var<workgroup> rk: array<vec4<f32>, RK * (HEAD_DIM / 4u)>;          // [HEAD_DIM / 4][RK]
var<workgroup> rv: array<vec4<f32>, RK * (HEAD_DIM / 4u)>;          // [RK][HEAD_DIM / 4]

struct RtRow {  // a row's output vec4 columns sc, sc + 8, sc + 16, sc + 24 (HEAD_DIM / 32 used)
  c0: vec4<f32>,
  c1: vec4<f32>,
  c2: vec4<f32>,
  c3: vec4<f32>,
}

var<private> ro0: RtRow;  // the V sums of the thread's rows 0..3
var<private> ro1: RtRow;
var<private> ro2: RtRow;
var<private> ro3: RtRow;
var<private> rm: vec4<f32>;  // running max per row
var<private> rl: vec4<f32>;  // this lane's part of the running sum per row

fn rt_cols() -> u32 { return HEAD_DIM / 32u; }

// q's rows of workgroup w (scaled) into rq, zeros past the step; a row's vec4s are read by
// consecutive threads.
fn rt_stage_q(t: u32, w: u32, g: u32) {
  let RB = RTW / 2u;
  let D4 = HEAD_DIM / 4u;
  for (var i = t; i < RB * D4; i += RTW) {
    let r = i / D4;
    let d = i % D4;
    var x = vec4<f32>(0.0);
    if ((w * RB + r) / GROUP < p.n_tokens) { x = q[prefill_row(w * RB + r, g) + d] * p.scale; }
    rq[d * RB + r] = x;
  }
}

// Word i of a tile of `keys` keys at cache rows row0 + k0 ..: K (else V), zeros past kv_len or
// the tile. K's words are taken key-fastest (so that the transposing stores are conflict-free),
// V's row by row. (prefill_rt: RK keys, prefill_rth: RHK.)
fn rt_word(v: bool, i: u32, row0: u32, k0: u32, kv_len: u32, keys: u32) -> vec4<u32> {
  let R = row_words();
  let j = select(i % keys, i / R, v);
  let w = select(i / keys, i % R, v);
  if (i >= keys * R || k0 + j >= kv_len) { return vec4<u32>(0u); }
  let at = (row0 + k0 + j) * R + w;
  if (v) { return v_word(at); }
  return k_word(at);
}

// A thread's share of a K/V tile of `keys` keys as loaded: words t, t + RTW, .. (RTF of them) of
// K and of V.
fn rt_fetch(t: u32, row0: u32, k0: u32, kv_len: u32, keys: u32) -> KvWords {
  var f = KvWords(vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u),
                  vec4<u32>(0u), vec4<u32>(0u));
  if (RTF == 0u) { return f; }
  f.k0 = rt_word(false, t, row0, k0, kv_len, keys);
  f.v0 = rt_word(true, t, row0, k0, kv_len, keys);
  if (RTF > 1u) {
    f.k1 = rt_word(false, t + RTW, row0, k0, kv_len, keys);
    f.v1 = rt_word(true, t + RTW, row0, k0, kv_len, keys);
  }
  if (RTF > 2u) {
    f.k2 = rt_word(false, t + 2u * RTW, row0, k0, kv_len, keys);
    f.v2 = rt_word(true, t + 2u * RTW, row0, k0, kv_len, keys);
  }
  if (RTF > 3u) {
    f.k3 = rt_word(false, t + 3u * RTW, row0, k0, kv_len, keys);
    f.v3 = rt_word(true, t + 3u * RTW, row0, k0, kv_len, keys);
  }
  return f;
}

// Word i of K and of V into rk / rv as f32 (words past the tile dropped).
fn rt_put(i: u32, kw: vec4<u32>, vw: vec4<u32>) {
  let R = row_words();
  let D4 = HEAD_DIM / 4u;
  if (i >= RK * R) { return; }
  let kd = (i / RK) * word_vec4s();
  let kj = i % RK;
  let vat = (i / R) * D4 + (i % R) * word_vec4s();
  let k = unpack_word(kw);
  let v = unpack_word(vw);
  rk[kd * RK + kj] = k[0];
  rv[vat] = v[0];
  if (F16) {
    rk[(kd + 1u) * RK + kj] = k[1];
    rv[vat + 1u] = v[1];
  }
}

// The whole tile at k0, each thread's words in turn (RTF = 0: no registers held across the walk).
fn rt_copy(t: u32, row0: u32, k0: u32, kv_len: u32) {
  for (var i = t; i < RK * row_words(); i += RTW) {
    rt_put(i, rt_word(false, i, row0, k0, kv_len, RK), rt_word(true, i, row0, k0, kv_len, RK));
  }
}

fn rt_stage(t: u32, f: KvWords) {
  rt_put(t, f.k0, f.v0);
  if (RTF > 1u) { rt_put(t + RTW, f.k1, f.v1); }
  if (RTF > 2u) { rt_put(t + 2u * RTW, f.k2, f.v2); }
  if (RTF > 3u) { rt_put(t + 3u * RTW, f.k3, f.v3); }
}

fn rt_hsum(a: vec4<f32>) -> f32 { return (a.x + a.y) + (a.z + a.w); }

// Scores of rows sr + {0, 1, 2, 3} RG against tile keys sc (.xy of the result's pairs: a) and
// sc + 8 (b), unscaled by the mask: (a, b).
struct RtScores {
  a: vec4<f32>,
  b: vec4<f32>,
}
fn rt_scores(sr: u32, sc: u32) -> RtScores {
  let RB = RTW / 2u;
  let RG = RTW / 8u;
  var a0 = vec4<f32>(0.0);
  var a1 = vec4<f32>(0.0);
  var a2 = vec4<f32>(0.0);
  var a3 = vec4<f32>(0.0);
  var b0 = vec4<f32>(0.0);
  var b1 = vec4<f32>(0.0);
  var b2 = vec4<f32>(0.0);
  var b3 = vec4<f32>(0.0);
  for (var d = 0u; d < HEAD_DIM / 4u; d++) {
    let ka = rk[d * RK + sc];
    let kb = rk[d * RK + sc + RKL];
    let q0 = rq[d * RB + sr];
    let q1 = rq[d * RB + sr + RG];
    let q2 = rq[d * RB + sr + 2u * RG];
    let q3 = rq[d * RB + sr + 3u * RG];
    a0 = fma(q0, ka, a0);
    a1 = fma(q1, ka, a1);
    a2 = fma(q2, ka, a2);
    a3 = fma(q3, ka, a3);
    b0 = fma(q0, kb, b0);
    b1 = fma(q1, kb, b1);
    b2 = fma(q2, kb, b2);
    b3 = fma(q3, kb, b3);
  }
  return RtScores(vec4<f32>(rt_hsum(a0), rt_hsum(a1), rt_hsum(a2), rt_hsum(a3)),
                  vec4<f32>(rt_hsum(b0), rt_hsum(b1), rt_hsum(b2), rt_hsum(b3)));
}

// o + wa x va + wb x vb for one row and one column.
fn rt_fma2(o: vec4<f32>, wa: f32, va: vec4<f32>, wb: f32, vb: vec4<f32>) -> vec4<f32> {
  return fma(vec4<f32>(wb), vb, fma(vec4<f32>(wa), va, o));
}

// The rows' V sums += pa (a weight per row) x V row j + pb x V row j + 8 of the tile, over the
// thread's columns sc + 8 c.
fn rt_pv(pa: vec4<f32>, pb: vec4<f32>, j: u32, sc: u32) {
  let D4 = HEAD_DIM / 4u;
  let a = j * D4 + sc;
  let b = (j + RKL) * D4 + sc;
  var va = rv[a];
  var vb = rv[b];
  ro0.c0 = rt_fma2(ro0.c0, pa.x, va, pb.x, vb);
  ro1.c0 = rt_fma2(ro1.c0, pa.y, va, pb.y, vb);
  ro2.c0 = rt_fma2(ro2.c0, pa.z, va, pb.z, vb);
  ro3.c0 = rt_fma2(ro3.c0, pa.w, va, pb.w, vb);
  if (rt_cols() > 1u) {
    va = rv[a + 8u];
    vb = rv[b + 8u];
    ro0.c1 = rt_fma2(ro0.c1, pa.x, va, pb.x, vb);
    ro1.c1 = rt_fma2(ro1.c1, pa.y, va, pb.y, vb);
    ro2.c1 = rt_fma2(ro2.c1, pa.z, va, pb.z, vb);
    ro3.c1 = rt_fma2(ro3.c1, pa.w, va, pb.w, vb);
  }
  if (rt_cols() > 2u) {
    va = rv[a + 16u];
    vb = rv[b + 16u];
    ro0.c2 = rt_fma2(ro0.c2, pa.x, va, pb.x, vb);
    ro1.c2 = rt_fma2(ro1.c2, pa.y, va, pb.y, vb);
    ro2.c2 = rt_fma2(ro2.c2, pa.z, va, pb.z, vb);
    ro3.c2 = rt_fma2(ro3.c2, pa.w, va, pb.w, vb);
  }
  if (rt_cols() > 3u) {
    va = rv[a + 24u];
    vb = rv[b + 24u];
    ro0.c3 = rt_fma2(ro0.c3, pa.x, va, pb.x, vb);
    ro1.c3 = rt_fma2(ro1.c3, pa.y, va, pb.y, vb);
    ro2.c3 = rt_fma2(ro2.c3, pa.z, va, pb.z, vb);
    ro3.c3 = rt_fma2(ro3.c3, pa.w, va, pb.w, vb);
  }
}

fn rt_scale(o: RtRow, s: f32) -> RtRow { return RtRow(o.c0 * s, o.c1 * s, o.c2 * s, o.c3 * s); }

// Row r's columns sc + 8 c of the output: o / sum (r past the step: skipped).
fn rt_store(o: RtRow, inv: f32, r: u32, g: u32, sc: u32) {
  if (r / GROUP >= p.n_tokens) { return; }
  let at = prefill_row(r, g) + sc;
  for (var c = 0u; c < rt_cols(); c++) {
    var x = o.c0;
    if (c == 1u) { x = o.c1; }
    if (c == 2u) { x = o.c2; }
    if (c == 3u) { x = o.c3; }
    let b = (at + 8u * c) * 4u;
    out[b] = x.x * inv;
    out[b + 1u] = x.y * inv;
    out[b + 2u] = x.z * inv;
    out[b + 3u] = x.w * inv;
  }
}

// A prefill_rt thread's rows (4) and what they see: their tokens (clamped into the step: rows
// past it run along unwritten) and the last key of each.
struct RtWork {
  rows: vec4<u32>,
  tok: vec4<u32>,
  limit: vec4<u32>,
}
fn rt_work(rows: vec4<u32>, pos: u32) -> RtWork {
  let tok = min(rows / GROUP, vec4<u32>(p.n_tokens - 1u));
  var limit = vec4<u32>(pos) + tok;
  if (TABLE) {
    limit = vec4<u32>(kv_span(tok.x, p.n_ctx).y, kv_span(tok.y, p.n_ctx).y, kv_span(tok.z, p.n_ctx).y,
                      kv_span(tok.w, p.n_ctx).y) - vec4<u32>(1u);
  }
  return RtWork(rows, tok, limit);
}

// Workgroup w's first and last token (its loops are the same in every lane).
fn rt_tok0(w: u32) -> u32 { return (w * (RTW / 2u)) / GROUP; }
fn rt_last_tok(w: u32) -> u32 { return min((w * (RTW / 2u) + RTW / 2u - 1u) / GROUP, p.n_tokens - 1u); }

// The rows of a run (TABLE: of the run's region; else every row).
fn rt_in_run(wk: RtWork, run0: u32, end: u32) -> vec4<bool> {
  return !vec4<bool>(TABLE) | ((wk.tok >= vec4<u32>(run0)) & (wk.tok < vec4<u32>(end)));
}

fn rt_init() {
  let zero = vec4<f32>(0.0);
  ro0 = RtRow(zero, zero, zero, zero);
  ro1 = ro0;
  ro2 = ro0;
  ro3 = ro0;
  rm = vec4<f32>(NEG);
  rl = zero;
}

// The online softmax of a tile: the rows' new max from this lane's tile max mt (over its keys,
// masked keys at NEG) and its 7 neighbours', the V sums and this lane's sums rescaled. Returns
// the new max.
fn rt_softmax(mt_lane: vec4<f32>) -> vec4<f32> {
  var mt = mt_lane;
  mt = max(mt, vx_xor(mt, 1u));
  mt = max(mt, vx_xor(mt, 2u));
  mt = max(mt, vx_xor(mt, 4u));
  let mx = max(rm, mt);
  let alpha = exp(rm - mx);
  rm = mx;
  rl *= alpha;
  ro0 = rt_scale(ro0, alpha.x);
  ro1 = rt_scale(ro1, alpha.y);
  ro2 = rt_scale(ro2, alpha.z);
  ro3 = rt_scale(ro3, alpha.w);
  return mx;
}

// The rows' outputs: the V sums over the sums of the 8 key lanes' parts.
fn rt_finish(rows: vec4<u32>, g: u32, sc: u32) {
  var l = rl;
  l += vx_xor(l, 1u);
  l += vx_xor(l, 2u);
  l += vx_xor(l, 4u);
  let inv = vec4<f32>(1.0) / l;
  rt_store(ro0, inv.x, rows.x, g, sc);
  rt_store(ro1, inv.y, rows.y, g, sc);
  rt_store(ro2, inv.z, rows.z, g, sc);
  rt_store(ro3, inv.w, rows.w, g, sc);
}

@compute @workgroup_size(RTW)
fn prefill_rt(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let RG = RTW / 8u;  // row groups
  let sc = t % RKL;
  let sr = t / RKL;
  let g = wid.y;
  rt_stage_q(t, wid.x, g);  // read after the first tile's barriers
  rt_init();
  let pos = symbol(p.pos_sym);
  let last_tok = rt_last_tok(wid.x);
  let wk = rt_work(vec4<u32>(wid.x * (RTW / 2u) + sr) + vec4<u32>(0u, RG, 2u * RG, 3u * RG), pos);

  var run0 = rt_tok0(wid.x);  // the run's first token
  loop {
    let run = prefill_run(run0, last_tok, g, pos);
    let kv_len = run.kv_len;
    let row0 = run.row0;
    let in_run = rt_in_run(wk, run0, run.end);

    let k_first = first_tile(run, RK);
    var next = rt_fetch(t, row0, k_first, kv_len, RK);
    for (var k0 = k_first; k0 < kv_len; k0 += RK) {
      workgroupBarrier();
      if (RTF == 0u) {
        rt_copy(t, row0, k0, kv_len);
      } else {
        rt_stage(t, next);
      }
      workgroupBarrier();
      if (RTF > 0u) { next = rt_fetch(t, row0, k0 + RK, kv_len, RK); }  // in flight while this tile is walked
      let key = vec4<u32>(k0 + sc);
      let oka = seen4(key, wk.limit) & in_run;  // keys past kv_len lie past every limit
      let okb = seen4(key + vec4<u32>(RKL), wk.limit) & in_run;
      let s = rt_scores(sr, sc);
      let sa = select(vec4<f32>(NEG), capped4(s.a), oka);
      let sb = select(vec4<f32>(NEG), capped4(s.b), okb);
      let mx = rt_softmax(max(sa, sb));
      let pa = select(vec4<f32>(0.0), exp(sa - mx), oka);
      let pb = select(vec4<f32>(0.0), exp(sb - mx), okb);
      rl += pa + pb;
      rt_pv(pa, pb, sc, sc);
      for (var x = 1u; x < RKL; x++) { rt_pv(vx_xor(pa, x), vx_xor(pb, x), sc ^ x, sc); }
    }
    run0 = run.end;
    if (run0 > last_tok) { break; }
  }
  rt_finish(wk.rows, g, sc);
}
