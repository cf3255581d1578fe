// A part of attention.wgsl (gpu/pipeline.h `//! use`): decode_vec, flash-decoding with one row
// word per lane and the workgroup's query heads as the components of a vec4.
//
// A workgroup per (chunk, HPW <= 4 query heads of one KV head, token), as decode_sg (the last of a
// KV head's workgroups may take fewer: decode_heads). Its VWG
// threads form key groups of VKL lanes (the row's words rounded up to a power of two, <= SG):
// lane i of a group owns word i of every K/V row (8 halves or 4 floats) and of the output. A
// group takes VKEYS consecutive keys per turn, the next turn's K and V words loaded before this
// turn's arithmetic so that the loads of two turns are in flight together. Every per-lane value
// is a named register, never an array indexed in a loop (which would land in local memory):
// q and the weighted V sums are one vec4 per element of the word, a component per head; the
// scores of a key are a vec4 (one per head), the turn's four summed over the group's lanes by
// shuffles (halving, then doubling: vx_allreduce), so every lane holds them and runs the heads'
// online softmax itself. The groups are merged as decode_sg
// merges them: by shuffles inside a subgroup, then once through workgroup memory.
override VKL: u32 = 16u;   // lanes per key group: a power of two >= row_words(), <= SG
override VWG: u32 = 128u;  // threads, a multiple of SG

// Lane state: q (scaled) and the V sums of element e of this lane's word, heads as components.
var<private> vq0: vec4<f32>;
var<private> vq1: vec4<f32>;
var<private> vq2: vec4<f32>;
var<private> vq3: vec4<f32>;
var<private> vq4: vec4<f32>;
var<private> vq5: vec4<f32>;
var<private> vq6: vec4<f32>;
var<private> vq7: vec4<f32>;
var<private> va0: vec4<f32>;
var<private> va1: vec4<f32>;
var<private> va2: vec4<f32>;
var<private> va3: vec4<f32>;
var<private> va4: vec4<f32>;
var<private> va5: vec4<f32>;
var<private> va6: vec4<f32>;
var<private> va7: vec4<f32>;
var<private> vm: vec4<f32>;  // running max per head
var<private> vl: vec4<f32>;  // running sum per head
var<private> vx_lane: u32;   // this lane's word of the row (its index in the key group)

var<workgroup> vx_ml: array<vec4<f32>, 2u * (VWG / SG)>;         // [subgroup] (max, sum), heads as components
var<workgroup> vx_acc: array<vec4<f32>, (VWG / SG) * HEAD_DIM>;  // [subgroup][element]

fn vx_xor(x: vec4<f32>, mask: u32) -> vec4<f32> {
  return vec4<f32>(sg_xor(x.x, mask), sg_xor(x.y, mask), sg_xor(x.z, mask), sg_xor(x.w, mask));
}

// The query of element e of word `w`, heads head0 .. head0 + n - 1 as components.
fn vx_q(head0: u32, n: u32, w: u32, e: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  let d = w * select(4u, 8u, F16) + e;
  for (var h = 0u; h < n; h++) {
    let x = q[((head0 + h) * HEAD_DIM + d) / 4u];
    r[h] = x[d % 4u] * p.scale;
  }
  return r;
}

fn vx_load_q(head0: u32, n: u32, w: u32) {
  vq0 = vx_q(head0, n, w, 0u);
  vq1 = vx_q(head0, n, w, 1u);
  vq2 = vx_q(head0, n, w, 2u);
  vq3 = vx_q(head0, n, w, 3u);
  if (F16) {
    vq4 = vx_q(head0, n, w, 4u);
    vq5 = vx_q(head0, n, w, 5u);
    vq6 = vx_q(head0, n, w, 6u);
    vq7 = vx_q(head0, n, w, 7u);
  }
}

// This lane's part of one key's scores (a component per head).
fn vx_dot(w: vec4<u32>) -> vec4<f32> {
  if (F16) {
    let a = unpack2x16float(w.x);
    let b = unpack2x16float(w.y);
    let c = unpack2x16float(w.z);
    let d = unpack2x16float(w.w);
    return vq0 * a.x + vq1 * a.y + vq2 * b.x + vq3 * b.y + vq4 * c.x + vq5 * c.y + vq6 * d.x + vq7 * d.y;
  }
  let f = bitcast<vec4<f32>>(w);
  return vq0 * f.x + vq1 * f.y + vq2 * f.z + vq3 * f.w;
}

fn vx_scale(a: vec4<f32>) {
  va0 *= a;
  va1 *= a;
  va2 *= a;
  va3 *= a;
  if (F16) {
    va4 *= a;
    va5 *= a;
    va6 *= a;
    va7 *= a;
  }
}

// V sums += pk (a weight per head) x this lane's word of a V row.
fn vx_add(pk: vec4<f32>, w: vec4<u32>) {
  if (F16) {
    let a = unpack2x16float(w.x);
    let b = unpack2x16float(w.y);
    let c = unpack2x16float(w.z);
    let d = unpack2x16float(w.w);
    va0 += pk * a.x;
    va1 += pk * a.y;
    va2 += pk * b.x;
    va3 += pk * b.y;
    va4 += pk * c.x;
    va5 += pk * c.y;
    va6 += pk * d.x;
    va7 += pk * d.y;
  } else {
    let f = bitcast<vec4<f32>>(w);
    va0 += pk * f.x;
    va1 += pk * f.y;
    va2 += pk * f.z;
    va3 += pk * f.w;
  }
}

// Merge this lane's (max, sum, V sums) with the lane `mask` away's.
fn vx_merge(mask: u32) {
  let mo = vx_xor(vm, mask);
  let lo = vx_xor(vl, mask);
  let big = max(vm, mo);
  let fs = exp(vm - big);
  let fo = exp(mo - big);
  vm = big;
  vl = vl * fs + lo * fo;
  va0 = va0 * fs + vx_xor(va0, mask) * fo;
  va1 = va1 * fs + vx_xor(va1, mask) * fo;
  va2 = va2 * fs + vx_xor(va2, mask) * fo;
  va3 = va3 * fs + vx_xor(va3, mask) * fo;
  if (F16) {
    va4 = va4 * fs + vx_xor(va4, mask) * fo;
    va5 = va5 * fs + vx_xor(va5, mask) * fo;
    va6 = va6 * fs + vx_xor(va6, mask) * fo;
    va7 = va7 * fs + vx_xor(va7, mask) * fo;
  }
}

fn vx_word(cache_k: bool, key: u32, dw: DecodeWork, w: u32, on: bool) -> vec4<u32> {
  if (!on || key >= dw.k_end) { return vec4<u32>(0u); }
  let at = (dw.row0 + key) * row_words() + w;
  if (cache_k) { return k_word(at); }
  return v_word(at);
}

// One key group's K and V words of a turn: keys key0 .. key0 + 3 (zeros past k_end).
fn vx_load(key0: u32, dw: DecodeWork, w: u32, on: bool) -> KvWords {
  return KvWords(vx_word(true, key0, dw, w, on), vx_word(true, key0 + 1u, dw, w, on),
                vx_word(true, key0 + 2u, dw, w, on), vx_word(true, key0 + 3u, dw, w, on),
                vx_word(false, key0, dw, w, on), vx_word(false, key0 + 1u, dw, w, on),
                vx_word(false, key0 + 2u, dw, w, on), vx_word(false, key0 + 3u, dw, w, on));
}

fn vx_xor2(x: vec2<f32>, mask: u32) -> vec2<f32> { return vec2<f32>(sg_xor(x.x, mask), sg_xor(x.y, mask)); }

// Lane (w & mask) != 0 of a pair: whether it keeps the second half of what the pair exchanges.
fn vx_hi(mask: u32) -> bool { return (vx_lane & mask) != 0u; }

// The turn's 16 partial scores (4 keys x 4 heads) summed over the key group's VKL lanes, the sums
// in every lane: halving (each step a lane keeps half of its values and adds its partner's copy
// of that half) down to one value a lane, then doubling back. 2 x 15 shuffles at VKL 16, where
// summing every value over every lane would take 64.
fn vx_allreduce(d: Scores) -> Scores {
  // Halving: keys {0, 1} or {2, 3}; then one key; then heads xy or zw; then one head.
  let m1 = VKL / 2u;
  let h1 = vx_hi(m1);
  var a = select(d.s0, d.s2, h1) + vx_xor(select(d.s2, d.s0, h1), m1);
  var b = select(d.s1, d.s3, h1) + vx_xor(select(d.s3, d.s1, h1), m1);
  var c = vec4<f32>(0.0);
  var e = vec2<f32>(0.0);
  if (VKL >= 4u) {
    let m = VKL / 4u;
    let h = vx_hi(m);
    c = select(a, b, h) + vx_xor(select(b, a, h), m);
  }
  if (VKL >= 8u) {
    let m = VKL / 8u;
    let h = vx_hi(m);
    e = select(c.xy, c.zw, h) + vx_xor2(select(c.zw, c.xy, h), m);
  }
  if (VKL >= 16u) {
    let m = VKL / 16u;
    let h = vx_hi(m);
    var f = select(e.x, e.y, h) + sg_xor(select(e.y, e.x, h), m);
    if (VKL >= 32u) { f += sg_xor(f, 1u); }  // two lanes a value at 32: the last step sums them
    let o = sg_xor(f, m);
    e = select(vec2<f32>(f, o), vec2<f32>(o, f), h);
  }
  // Doubling: every lane gets its partners' halves back.
  if (VKL >= 8u) {
    let m = VKL / 8u;
    let o = vx_xor2(e, m);
    c = select(vec4<f32>(e, o), vec4<f32>(o, e), vx_hi(m));
  }
  if (VKL >= 4u) {
    let m = VKL / 4u;
    let o = vx_xor(c, m);
    let h = vx_hi(m);
    a = select(c, o, h);
    b = select(o, c, h);
  }
  let oa = vx_xor(a, m1);
  let ob = vx_xor(b, m1);
  if (h1) { return Scores(oa, ob, a, b); }
  return Scores(a, b, oa, ob);
}

// One turn of a key group: keys key0 .. key0 + 3 (those at or past k_end score nothing).
fn vx_turn(cur: KvWords, key0: u32, k_end: u32) {
  let sc = vx_allreduce(Scores(vx_dot(cur.k0), vx_dot(cur.k1), vx_dot(cur.k2), vx_dot(cur.k3)));
  let sm = softmax4(vm, vl, sc, vec4<bool>(key0 < k_end), vec4<bool>(key0 + 1u < k_end),
                    vec4<bool>(key0 + 2u < k_end), vec4<bool>(key0 + 3u < k_end));
  vm = sm.m;
  vl = sm.l;
  vx_scale(sm.alpha);
  vx_add(sm.p.s0, cur.v0);
  vx_add(sm.p.s1, cur.v1);
  vx_add(sm.p.s2, cur.v2);
  vx_add(sm.p.s3, cur.v3);
}

// decode_vec's work; xq: its outputs at one chunk also staged in xo (decode_vec_xq).
fn vx_body(wid: vec3<u32>, t: u32, xq: bool) {
  let R = row_words();
  let E = select(4u, 8u, F16);  // elements per word
  let TURN = (VWG / VKL) * VKEYS;  // keys per workgroup turn
  let dw = decode_work(wid);
  let k_end = dw.k_end;
  let head0 = dw.heads.head0;
  let kg = t / VKL;
  let w = t % VKL;
  let on = R == VKL || w < R;  // lanes past the row's words hold zeros
  vx_lane = w;

  if (on) { vx_load_q(head0, dw.heads.n, w); }
  vm = vec4<f32>(NEG);
  vl = vec4<f32>(0.0);
  va0 = vec4<f32>(0.0);
  va1 = vec4<f32>(0.0);
  va2 = vec4<f32>(0.0);
  va3 = vec4<f32>(0.0);
  va4 = vec4<f32>(0.0);
  va5 = vec4<f32>(0.0);
  va6 = vec4<f32>(0.0);
  va7 = vec4<f32>(0.0);

  var key0 = dw.k_begin + kg * VKEYS;
  var cur = vx_load(key0, dw, w, on);
  for (var b0 = dw.k_begin; b0 < k_end; b0 += TURN) {
    // The next turn's words first: their loads overlap this turn's arithmetic.
    let nxt = vx_load(key0 + TURN, dw, w, on);
    vx_turn(cur, key0, k_end);
    key0 += TURN;
    cur = nxt;
  }

  // Merge the key groups: inside each subgroup by shuffles, then across subgroups.
  for (var mask = VKL; mask < SG; mask <<= 1u) { vx_merge(mask); }
  let sub = t / SG;
  if (t % SG < VKL && on) {
    let o = sub * HEAD_DIM + w * E;
    vx_acc[o] = va0;
    vx_acc[o + 1u] = va1;
    vx_acc[o + 2u] = va2;
    vx_acc[o + 3u] = va3;
    if (F16) {
      vx_acc[o + 4u] = va4;
      vx_acc[o + 5u] = va5;
      vx_acc[o + 6u] = va6;
      vx_acc[o + 7u] = va7;
    }
  }
  if (t % SG == 0u) {
    vx_ml[2u * sub] = vm;
    vx_ml[2u * sub + 1u] = vl;
  }
  workgroupBarrier();
  let NS = VWG / SG;
  for (var i = t; i < dw.heads.n * HEAD_DIM; i += VWG) {
    let h = i / HEAD_DIM;
    let d = i % HEAD_DIM;
    var big = NEG;
    for (var k = 0u; k < NS; k++) { big = max(big, vx_ml[2u * k][h]); }
    var sum = 0.0;
    var o = 0.0;
    for (var k = 0u; k < NS; k++) {
      let f = exp(vx_ml[2u * k][h] - big);
      sum += vx_ml[2u * k + 1u][h] * f;
      o += vx_acc[k * HEAD_DIM + d][h] * f;
    }
    let head = head0 + h;
    if (p.n_chunks == 1u) {
      out[head * HEAD_DIM + d] = o / sum;
      if (xq) { xo[i] = o / sum; }
    } else {
      split[(head * p.n_chunks + wid.x) * HEAD_DIM + d] = o;
      if (d == 0u) {
        let mi = p.ml_offset + (head * p.n_chunks + wid.x) * 2u;
        split[mi] = big;
        split[mi + 1u] = sum;
      }
    }
  }
}

@compute @workgroup_size(VWG)
fn decode_vec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) { vx_body(wid, t, false); }

@compute @workgroup_size(VWG)
fn decode_vec_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  vx_body(wid, t, true);
  if (p.n_chunks == 1u && p.n_tokens == 1u) {
    let hd = decode_heads(wid, 0u);
    xo_put(hd.head0 * HEAD_DIM, hd.n * HEAD_DIM, t, VWG);
  }
}
