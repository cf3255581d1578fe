// A part of attention.wgsl (gpu/pipeline.h `//! use`): prefill_sg, prefill attention with key
// groups of subgroup lanes, each holding 4 rows in registers.
//
// A workgroup per (RPW = 4 * PWG / PL rows, KV head g of the cache part). Rows are (token, query
// head of g's group) pairs in token order, as in prefill: row r is token r / GROUP, head r % GROUP.
// The workgroup's threads form key groups of PL lanes (a power of two <= SG); each group owns 4
// consecutive rows, held as the components of a vec4 (q, the scores, the V sums, the running max
// and sum), and lane i of a group owns the vec4s i, i + PL, i + 2 PL, i + 3 PL (PV4 of them) of
// every row of q, K, V and the output. Tiles of PBK keys of K and V are staged in workgroup memory
// as f32 (each cache element converted once per workgroup; the next tile's words loaded into
// registers while this one is walked); every group then walks all of the
// tile's keys, four per turn: a key's scores are summed over the group's lanes by shuffles, so
// every lane holds them and runs the rows' online softmax itself. All groups read the same key
// at once (one broadcast load per vec4). No group shares rows with another: no merge at the end,
// two barriers per tile. Every per-lane value is a named register (a struct field), never an
// array indexed in a loop.
// TABLE: the workgroup's tokens are taken a run of equal b_i at a time, as in prefill.
override PL: u32 = 8u;    // lanes per key group: a power of two <= SG, PL * PV4 >= HEAD_DIM / 4
override PV4: u32 = 4u;   // vec4s of a row per lane, 1..4
override PWG: u32 = 64u;  // threads, a multiple of SG
override PBK: u32 = 32u;  // keys per tile, a multiple of 4
override PNF: u32 = 4u;   // tile words per thread: ceil(PBK * row_words() / PWG), 1..4

var<workgroup> ps_k: array<vec4<f32>, PBK * HEAD_DIM / 4u>;  // [PBK][HEAD_DIM / 4]
var<workgroup> ps_v: array<vec4<f32>, PBK * HEAD_DIM / 4u>;

struct PsOct {  // two vec4s (8 elements) of a lane, the 4 rows as components
  e0: vec4<f32>,
  e1: vec4<f32>,
  e2: vec4<f32>,
  e3: vec4<f32>,
  e4: vec4<f32>,
  e5: vec4<f32>,
  e6: vec4<f32>,
  e7: vec4<f32>,
}

var<private> ps_qa: PsOct;  // q (scaled): the lane's vec4s 0 and 1 (a), 2 and 3 (b)
var<private> ps_qb: PsOct;
var<private> ps_oa: PsOct;  // the V sums, likewise
var<private> ps_ob: PsOct;
var<private> ps_m: vec4<f32>;  // running max per row
var<private> ps_l: vec4<f32>;  // running sum per row

// This lane's part of a key's scores over two vec4s x0, x1 of the key's row.
fn ps_dot(q4: PsOct, x0: vec4<f32>, x1: vec4<f32>) -> vec4<f32> {
  return ((q4.e0 * x0.x + q4.e1 * x0.y) + (q4.e2 * x0.z + q4.e3 * x0.w)) +
         ((q4.e4 * x1.x + q4.e5 * x1.y) + (q4.e6 * x1.z + q4.e7 * x1.w));
}

// o + pk (a weight per row) x two vec4s of a V row.
fn ps_axpy(o: PsOct, pk: vec4<f32>, x0: vec4<f32>, x1: vec4<f32>) -> PsOct {
  return PsOct(o.e0 + pk * x0.x, o.e1 + pk * x0.y, o.e2 + pk * x0.z, o.e3 + pk * x0.w,
               o.e4 + pk * x1.x, o.e5 + pk * x1.y, o.e6 + pk * x1.z, o.e7 + pk * x1.w);
}

fn ps_scale(o: PsOct, s: vec4<f32>) -> PsOct {
  return PsOct(o.e0 * s, o.e1 * s, o.e2 * s, o.e3 * s, o.e4 * s, o.e5 * s, o.e6 * s, o.e7 * s);
}

// Whether the lane's vec4 c (0..3) lies within the row.
fn ps_on(li: u32, c: u32) -> bool { return c < PV4 && li + c * PL < HEAD_DIM / 4u; }

// The lane's vec4s c0 and c0 + 1 of q (scaled) for rows r0 .. r0 + 3, zeros past the step.
fn ps_q(r0: u32, g: u32, li: u32, c0: u32) -> PsOct {
  var o: PsOct;
  for (var i = 0u; i < 4u; i++) {
    if ((r0 + i) / GROUP < p.n_tokens) {
      let at = prefill_row(r0 + i, g) + li;
      var a = vec4<f32>(0.0);
      var b = vec4<f32>(0.0);
      if (ps_on(li, c0)) { a = q[at + c0 * PL] * p.scale; }
      if (ps_on(li, c0 + 1u)) { b = q[at + (c0 + 1u) * PL] * p.scale; }
      o.e0[i] = a.x;
      o.e1[i] = a.y;
      o.e2[i] = a.z;
      o.e3[i] = a.w;
      o.e4[i] = b.x;
      o.e5[i] = b.y;
      o.e6[i] = b.z;
      o.e7[i] = b.w;
    }
  }
  return o;
}

// The lane's vec4s c0 and c0 + 1 of rows r0 .. r0 + 3 of the output: o / sum, rows past the step
// skipped.
fn ps_store(o: PsOct, inv: vec4<f32>, r0: u32, g: u32, li: u32, c0: u32) {
  for (var i = 0u; i < 4u; i++) {
    if ((r0 + i) / GROUP < p.n_tokens) {
      let at = (prefill_row(r0 + i, g) + li) * 4u;
      if (ps_on(li, c0)) {
        let b = at + c0 * PL * 4u;
        out[b] = o.e0[i] * inv[i];
        out[b + 1u] = o.e1[i] * inv[i];
        out[b + 2u] = o.e2[i] * inv[i];
        out[b + 3u] = o.e3[i] * inv[i];
      }
      if (ps_on(li, c0 + 1u)) {
        let b = at + (c0 + 1u) * PL * 4u;
        out[b] = o.e4[i] * inv[i];
        out[b + 1u] = o.e5[i] * inv[i];
        out[b + 2u] = o.e6[i] * inv[i];
        out[b + 3u] = o.e7[i] * inv[i];
      }
    }
  }
}

// Word i of the tile at cache rows row0 + k0 ..: K (else V), zeros past kv_len or the tile.
fn ps_word(v: bool, i: u32, row0: u32, k0: u32, kv_len: u32) -> vec4<u32> {
  let R = row_words();
  let j = i / R;
  if (i >= PBK * R || k0 + j >= kv_len) { return vec4<u32>(0u); }
  let at = (row0 + k0 + j) * R + i % R;
  if (v) { return v_word(at); }
  return k_word(at);
}

// A thread's share of a K/V tile as loaded: words t, t + PWG, .. (PNF of them) of K and of V.
fn ps_fetch(t: u32, row0: u32, k0: u32, kv_len: u32) -> KvWords {
  var f = KvWords(vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u),
                  vec4<u32>(0u), vec4<u32>(0u));
  f.k0 = ps_word(false, t, row0, k0, kv_len);
  f.v0 = ps_word(true, t, row0, k0, kv_len);
  if (PNF > 1u) {
    f.k1 = ps_word(false, t + PWG, row0, k0, kv_len);
    f.v1 = ps_word(true, t + PWG, row0, k0, kv_len);
  }
  if (PNF > 2u) {
    f.k2 = ps_word(false, t + 2u * PWG, row0, k0, kv_len);
    f.v2 = ps_word(true, t + 2u * PWG, row0, k0, kv_len);
  }
  if (PNF > 3u) {
    f.k3 = ps_word(false, t + 3u * PWG, row0, k0, kv_len);
    f.v3 = ps_word(true, t + 3u * PWG, row0, k0, kv_len);
  }
  return f;
}

// Word i of the tile into ps_k / ps_v as f32 (words past the tile dropped).
fn ps_put(i: u32, kw: vec4<u32>, vw: vec4<u32>) {
  let R = row_words();
  if (i >= PBK * R) { return; }
  let at = (i / R) * (HEAD_DIM / 4u) + (i % R) * word_vec4s();
  if (F16) {
    ps_k[at] = vec4<f32>(unpack2x16float(kw.x), unpack2x16float(kw.y));
    ps_k[at + 1u] = vec4<f32>(unpack2x16float(kw.z), unpack2x16float(kw.w));
    ps_v[at] = vec4<f32>(unpack2x16float(vw.x), unpack2x16float(vw.y));
    ps_v[at + 1u] = vec4<f32>(unpack2x16float(vw.z), unpack2x16float(vw.w));
  } else {
    ps_k[at] = bitcast<vec4<f32>>(kw);
    ps_v[at] = bitcast<vec4<f32>>(vw);
  }
}

fn ps_stage(t: u32, f: KvWords) {
  ps_put(t, f.k0, f.v0);
  if (PNF > 1u) { ps_put(t + PWG, f.k1, f.v1); }
  if (PNF > 2u) { ps_put(t + 2u * PWG, f.k2, f.v2); }
  if (PNF > 3u) { ps_put(t + 3u * PWG, f.k3, f.v3); }
}

// The lane's vec4 c of key j of the tile, K (else V); zeros where off.
fn ps_x(v: bool, j: u32, li: u32, c: u32) -> vec4<f32> {
  if (!ps_on(li, c)) { return vec4<f32>(0.0); }
  let at = j * (HEAD_DIM / 4u) + li + c * PL;
  if (v) { return ps_v[at]; }
  return ps_k[at];
}

// Key j's scores for the group's 4 rows, summed over its lanes (every lane gets them).
fn ps_score(j: u32, li: u32) -> vec4<f32> {
  var s = ps_dot(ps_qa, ps_x(false, j, li, 0u), ps_x(false, j, li, 1u));
  if (PV4 > 2u) { s += ps_dot(ps_qb, ps_x(false, j, li, 2u), ps_x(false, j, li, 3u)); }
  for (var mask = PL / 2u; mask > 0u; mask >>= 1u) { s += vx_xor(s, mask); }
  return s;
}

// The V sums += pk x V row j of the tile.
fn ps_add(pk: vec4<f32>, j: u32, li: u32) {
  ps_oa = ps_axpy(ps_oa, pk, ps_x(true, j, li, 0u), ps_x(true, j, li, 1u));
  if (PV4 > 2u) { ps_ob = ps_axpy(ps_ob, pk, ps_x(true, j, li, 2u), ps_x(true, j, li, 3u)); }
}

@compute @workgroup_size(PWG)
fn prefill_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let RPW = 4u * (PWG / PL);  // rows per workgroup
  let li = t % PL;
  let r0 = wid.x * RPW + (t / PL) * 4u;  // the key group's first row
  let g = wid.y;
  ps_qa = ps_q(r0, g, li, 0u);
  if (PV4 > 2u) { ps_qb = ps_q(r0, g, li, 2u); }
  ps_oa = PsOct(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
                vec4<f32>(0.0), vec4<f32>(0.0));
  ps_ob = ps_oa;
  ps_m = vec4<f32>(NEG);
  ps_l = vec4<f32>(0.0);

  // The rows' tokens (clamped into the step: rows past it run along unwritten), the last key
  // each row sees, and the workgroup's tokens (its loops are the same in every lane).
  let tok = min((vec4<u32>(r0) + vec4<u32>(0u, 1u, 2u, 3u)) / GROUP, vec4<u32>(p.n_tokens - 1u));
  let tok0 = (wid.x * RPW) / GROUP;
  let last_tok = min((wid.x * RPW + RPW - 1u) / GROUP, p.n_tokens - 1u);
  let pos = symbol(p.pos_sym);
  var limit = vec4<u32>(pos) + tok;
  if (TABLE) {
    limit = vec4<u32>(kv_span(tok.x, p.n_ctx).y, kv_span(tok.y, p.n_ctx).y, kv_span(tok.z, p.n_ctx).y,
                      kv_span(tok.w, p.n_ctx).y) - vec4<u32>(1u);
  }

  var run0 = tok0;  // the run's first token
  loop {
    let run = prefill_run(run0, last_tok, g, pos);
    let kv_len = run.kv_len;
    let row0 = run.row0;
    let in_run = !vec4<bool>(TABLE) | ((tok >= vec4<u32>(run0)) & (tok < vec4<u32>(run.end)));

    let k_first = first_tile(run, PBK);
    var next = ps_fetch(t, row0, k_first, kv_len);
    for (var k0 = k_first; k0 < kv_len; k0 += PBK) {
      workgroupBarrier();
      ps_stage(t, next);
      workgroupBarrier();
      next = ps_fetch(t, row0, k0 + PBK, kv_len);  // in flight while this tile is walked
      let nk = min(PBK, kv_len - k0);
      for (var j = 0u; j < nk; j += 4u) {  // keys past nk (a tail) are zeros, masked
        let key = vec4<u32>(k0 + j);
        let ok0 = seen4(key, limit) & in_run;
        let ok1 = seen4(key + vec4<u32>(1u), limit) & in_run;
        let ok2 = seen4(key + vec4<u32>(2u), limit) & in_run;
        let ok3 = seen4(key + vec4<u32>(3u), limit) & in_run;
        let sm = softmax4(ps_m, ps_l, Scores(ps_score(j, li), ps_score(j + 1u, li), ps_score(j + 2u, li),
                                             ps_score(j + 3u, li)), ok0, ok1, ok2, ok3);
        ps_m = sm.m;
        ps_l = sm.l;
        ps_oa = ps_scale(ps_oa, sm.alpha);
        if (PV4 > 2u) { ps_ob = ps_scale(ps_ob, sm.alpha); }
        ps_add(sm.p.s0, j, li);
        ps_add(sm.p.s1, j + 1u, li);
        ps_add(sm.p.s2, j + 2u, li);
        ps_add(sm.p.s3, j + 3u, li);
      }
    }
    run0 = run.end;
    if (run0 > last_tok) { break; }
  }

  let inv = vec4<f32>(1.0) / ps_l;
  ps_store(ps_oa, inv, r0, g, li, 0u);
  if (PV4 > 2u) { ps_store(ps_ob, inv, r0, g, li, 2u); }
}
