// A part of attention.wgsl (gpu/pipeline.h `//! use`): prefill_rth, prefill_rt for f16 caches.
//
// The K/V tiles stay f16 in workgroup memory as the cache holds them (copied, no conversion), so
// a tile holds 32 keys in the room of prefill_rt's 16 f32 keys and a thread's score tile grows to 4
// rows x 4 keys (keys sc, sc + 8, sc + 16, sc + 24 of the tile): per 4 dimensions 4 loads of q (a
// vec4 of the thread's 4 rows each) and 4 of K (4 halves of a key each) feed 64 multiply-adds,
// half the workgroup-memory bytes per multiply-add of prefill_rt. The halves are widened where
// they are used. q is staged dimension-major with the thread's 4 consecutive rows as the
// components of a vec4 (rhq[d][row / 4]); V key-major (rhv[key][d / 4]). Otherwise as prefill_rt:
// the rows' max by shuffles across the 8 key lanes, the weights of lane sc ^ x's keys taken by
// shuffles for P x V, two barriers per tile.

var<workgroup> rhq: array<vec4<f32>, (RTW / 8u) * HEAD_DIM>;  // [HEAD_DIM][RB / 4], scaled
var<workgroup> rhk: array<vec2<u32>, RHK * (HEAD_DIM / 4u)>;  // [HEAD_DIM / 4][RHK]: 4 halves of a key
var<workgroup> rhv: array<vec2<u32>, RHK * (HEAD_DIM / 4u)>;  // [RHK][HEAD_DIM / 4]

// q's rows of workgroup w (scaled) into rhq, zeros past the step.
fn rh_stage_q(t: u32, w: u32, g: u32) {
  let RB = RTW / 2u;
  let D4 = HEAD_DIM / 4u;
  for (var i = t; i < RB * D4; i += RTW) {
    let r = i / D4;
    let d = i % D4;
    var x = vec4<f32>(0.0);
    if ((w * RB + r) / GROUP < p.n_tokens) { x = q[prefill_row(w * RB + r, g) + d] * p.scale; }
    let at = 4u * d * (RB / 4u) + r / 4u;
    rhq[at][r % 4u] = x.x;
    rhq[at + RB / 4u][r % 4u] = x.y;
    rhq[at + 2u * (RB / 4u)][r % 4u] = x.z;
    rhq[at + 3u * (RB / 4u)][r % 4u] = x.w;
  }
}

// Word i (8 halves) of K and of V into rhk / rhv (words past the tile dropped).
fn rh_put(i: u32, kw: vec4<u32>, vw: vec4<u32>) {
  let R = row_words();
  if (i >= RHK * R) { return; }
  let kd = (i / RHK) * 2u;
  let kj = i % RHK;
  rhk[kd * RHK + kj] = kw.xy;
  rhk[(kd + 1u) * RHK + kj] = kw.zw;
  let vat = (i / R) * (HEAD_DIM / 4u) + (i % R) * 2u;
  rhv[vat] = vw.xy;
  rhv[vat + 1u] = vw.zw;
}

fn rh_copy(t: u32, row0: u32, k0: u32, kv_len: u32) {
  for (var i = t; i < RHK * row_words(); i += RTW) {
    rh_put(i, rt_word(false, i, row0, k0, kv_len, RHK), rt_word(true, i, row0, k0, kv_len, RHK));
  }
}

fn rh_stage(t: u32, f: KvWords) {
  rh_put(t, f.k0, f.v0);
  if (RTF > 1u) { rh_put(t + RTW, f.k1, f.v1); }
  if (RTF > 2u) { rh_put(t + 2u * RTW, f.k2, f.v2); }
  if (RTF > 3u) { rh_put(t + 3u * RTW, f.k3, f.v3); }
}

fn rh_half4(w: vec2<u32>) -> vec4<f32> { return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)); }

// Scores of rows 4 sr .. 4 sr + 3 (components) against tile keys sc + 8 m (field m).
struct RhScores {
  s0: vec4<f32>,
  s1: vec4<f32>,
  s2: vec4<f32>,
  s3: vec4<f32>,
}
fn rh_scores(sr: u32, sc: u32) -> RhScores {
  let RQ = RTW / 8u;  // row quads
  var s0 = vec4<f32>(0.0);
  var s1 = vec4<f32>(0.0);
  var s2 = vec4<f32>(0.0);
  var s3 = vec4<f32>(0.0);
  for (var d = 0u; d < HEAD_DIM / 4u; d++) {
    let k0 = rh_half4(rhk[d * RHK + sc]);
    let k1 = rh_half4(rhk[d * RHK + sc + 8u]);
    let k2 = rh_half4(rhk[d * RHK + sc + 16u]);
    let k3 = rh_half4(rhk[d * RHK + sc + 24u]);
    let qx = rhq[(4u * d) * RQ + sr];  // the 4 rows at dimension 4 d
    let qy = rhq[(4u * d + 1u) * RQ + sr];
    let qz = rhq[(4u * d + 2u) * RQ + sr];
    let qw = rhq[(4u * d + 3u) * RQ + sr];
    s0 = fma(qw, vec4<f32>(k0.w), fma(qz, vec4<f32>(k0.z), fma(qy, vec4<f32>(k0.y), fma(qx, vec4<f32>(k0.x), s0))));
    s1 = fma(qw, vec4<f32>(k1.w), fma(qz, vec4<f32>(k1.z), fma(qy, vec4<f32>(k1.y), fma(qx, vec4<f32>(k1.x), s1))));
    s2 = fma(qw, vec4<f32>(k2.w), fma(qz, vec4<f32>(k2.z), fma(qy, vec4<f32>(k2.y), fma(qx, vec4<f32>(k2.x), s2))));
    s3 = fma(qw, vec4<f32>(k3.w), fma(qz, vec4<f32>(k3.z), fma(qy, vec4<f32>(k3.y), fma(qx, vec4<f32>(k3.x), s3))));
  }
  return RhScores(s0, s1, s2, s3);
}

// The rows' V sums += w (a weight per row) x V row j of the tile, over the thread's columns sc + 8 c.
fn rh_pv(w: vec4<f32>, j: u32, sc: u32) {
  let a = j * (HEAD_DIM / 4u) + sc;
  var v = rh_half4(rhv[a]);
  ro0.c0 = fma(vec4<f32>(w.x), v, ro0.c0);
  ro1.c0 = fma(vec4<f32>(w.y), v, ro1.c0);
  ro2.c0 = fma(vec4<f32>(w.z), v, ro2.c0);
  ro3.c0 = fma(vec4<f32>(w.w), v, ro3.c0);
  if (rt_cols() > 1u) {
    v = rh_half4(rhv[a + 8u]);
    ro0.c1 = fma(vec4<f32>(w.x), v, ro0.c1);
    ro1.c1 = fma(vec4<f32>(w.y), v, ro1.c1);
    ro2.c1 = fma(vec4<f32>(w.z), v, ro2.c1);
    ro3.c1 = fma(vec4<f32>(w.w), v, ro3.c1);
  }
  if (rt_cols() > 2u) {
    v = rh_half4(rhv[a + 16u]);
    ro0.c2 = fma(vec4<f32>(w.x), v, ro0.c2);
    ro1.c2 = fma(vec4<f32>(w.y), v, ro1.c2);
    ro2.c2 = fma(vec4<f32>(w.z), v, ro2.c2);
    ro3.c2 = fma(vec4<f32>(w.w), v, ro3.c2);
  }
  if (rt_cols() > 3u) {
    v = rh_half4(rhv[a + 24u]);
    ro0.c3 = fma(vec4<f32>(w.x), v, ro0.c3);
    ro1.c3 = fma(vec4<f32>(w.y), v, ro1.c3);
    ro2.c3 = fma(vec4<f32>(w.z), v, ro2.c3);
    ro3.c3 = fma(vec4<f32>(w.w), v, ro3.c3);
  }
}

// Keys j, j + 8, j + 16, j + 24 of the tile with their weights.
fn rh_pv4(p0: vec4<f32>, p1: vec4<f32>, p2: vec4<f32>, p3: vec4<f32>, j: u32, sc: u32) {
  rh_pv(p0, j, sc);
  rh_pv(p1, j + 8u, sc);
  rh_pv(p2, j + 16u, sc);
  rh_pv(p3, j + 24u, sc);
}

@compute @workgroup_size(RTW)
fn prefill_rth(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let sc = t % RKL;
  let sr = t / RKL;
  let g = wid.y;
  rh_stage_q(t, wid.x, g);  // read after the first tile's barriers
  rt_init();
  let pos = symbol(p.pos_sym);
  let last_tok = rt_last_tok(wid.x);
  let wk = rt_work(vec4<u32>(wid.x * (RTW / 2u) + 4u * sr) + vec4<u32>(0u, 1u, 2u, 3u), pos);

  var run0 = rt_tok0(wid.x);  // the run's first token
  loop {
    let run = prefill_run(run0, last_tok, g, pos);
    let kv_len = run.kv_len;
    let row0 = run.row0;
    let in_run = rt_in_run(wk, run0, run.end);

    let k_first = first_tile(run, RHK);
    var next = rt_fetch(t, row0, k_first, kv_len, RHK);
    for (var k0 = k_first; k0 < kv_len; k0 += RHK) {
      workgroupBarrier();
      if (RTF == 0u) {
        rh_copy(t, row0, k0, kv_len);
      } else {
        rh_stage(t, next);
      }
      workgroupBarrier();
      if (RTF > 0u) { next = rt_fetch(t, row0, k0 + RHK, kv_len, RHK); }  // in flight while this tile is walked
      let key = vec4<u32>(k0 + sc);
      let ok0 = seen4(key, wk.limit) & in_run;  // keys past kv_len lie past every limit
      let ok1 = seen4(key + vec4<u32>(8u), wk.limit) & in_run;
      let ok2 = seen4(key + vec4<u32>(16u), wk.limit) & in_run;
      let ok3 = seen4(key + vec4<u32>(24u), wk.limit) & in_run;
      let s = rh_scores(sr, sc);
      let s0 = select(vec4<f32>(NEG), capped4(s.s0), ok0);
      let s1 = select(vec4<f32>(NEG), capped4(s.s1), ok1);
      let s2 = select(vec4<f32>(NEG), capped4(s.s2), ok2);
      let s3 = select(vec4<f32>(NEG), capped4(s.s3), ok3);
      let mx = rt_softmax(max(max(s0, s1), max(s2, s3)));
      let p0 = select(vec4<f32>(0.0), exp(s0 - mx), ok0);
      let p1 = select(vec4<f32>(0.0), exp(s1 - mx), ok1);
      let p2 = select(vec4<f32>(0.0), exp(s2 - mx), ok2);
      let p3 = select(vec4<f32>(0.0), exp(s3 - mx), ok3);
      rl += (p0 + p1) + (p2 + p3);
      rh_pv4(p0, p1, p2, p3, sc, sc);
      for (var x = 1u; x < RKL; x++) {
        rh_pv4(vx_xor(p0, x), vx_xor(p1, x), vx_xor(p2, x), vx_xor(p3, x), sc ^ x, sc);
      }
    }
    run0 = run.end;
    if (run0 > last_tok) { break; }
  }
  rt_finish(wk.rows, g, sc);
}
