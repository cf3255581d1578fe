// A part of attention.wgsl (gpu/pipeline.h `//! use`): decode_sg, flash-decoding with key
// groups of subgroup lanes (and decode_sg_xq, its output also quantized ahead).
//
// A workgroup per (chunk, HPW query heads of one KV head), as decode_split. Its DWG threads form
// key groups of DKL lanes (a power of two <= SG); lane i of a group owns words i, i + DKL, ..
// (DWPL of them) of every K/V row and of the output. A group takes DKPI consecutive keys per
// turn: each lane loads its words of their K and V rows, forms its part of the dots with the
// heads' queries (held in registers), and the group sums them by shuffles, so every lane has
// the scores; each group keeps its own online softmax (max, sum, weighted V of its words). The
// groups are merged at the end: by shuffles inside a subgroup, then once through workgroup
// memory across subgroups. With one chunk the workgroup writes the normalized output and the
// plan skips decode_reduce; else it writes the chunk's partials for decode_reduce.
override DKL: u32 = 8u;    // lanes per key group
override DWPL: u32 = 1u;   // row words per lane: ceil(row_words / DKL)
override DKPI: u32 = 4u;   // keys per group and turn
override DWG: u32 = 128u;  // threads, a multiple of SG
const DACC: u32 = 8u;      // vec4 accumulators per lane: HPW * DWPL * word_vec4s() <= DACC
const DSC: u32 = 16u;      // scores per lane and turn: HPW * DKPI <= DSC
const DLD: u32 = 4u;       // K (and V) words loaded per lane and turn: DKPI * DWPL <= DLD

var<workgroup> sg_ml: array<vec2<f32>, (DWG / SG) * HPW>;              // [subgroup][head] (max, sum)
var<workgroup> sg_acc: array<vec4<f32>, (DWG / SG) * HPW * HEAD_DIM / 4u>;  // [subgroup][head][HEAD_DIM / 4]

// The (max, sum, V sums) of this lane and of the lane `mask` away, merged; the V sums are
// acc[h * DWPL * E4 ..) of head h.
fn sg_merge(h: u32, mask: u32, m: ptr<function, array<f32, MAX_GROUP>>, l: ptr<function, array<f32, MAX_GROUP>>,
            acc: ptr<function, array<vec4<f32>, DACC>>) {
  let n = DWPL * word_vec4s();
  let mo = sg_xor((*m)[h], mask);
  let lo = sg_xor((*l)[h], mask);
  let big = max((*m)[h], mo);
  let fs = exp((*m)[h] - big);
  let fo = exp(mo - big);
  (*m)[h] = big;
  (*l)[h] = (*l)[h] * fs + lo * fo;
  for (var j = 0u; j < n; j++) {
    let a = (*acc)[h * n + j];
    let o = vec4<f32>(sg_xor(a.x, mask), sg_xor(a.y, mask), sg_xor(a.z, mask), sg_xor(a.w, mask));
    (*acc)[h * n + j] = a * fs + o * fo;
  }
}

// decode_sg's work; xq: its outputs at one chunk also staged in xo (decode_sg_xq).
fn sg_body(wid: vec3<u32>, t: u32, xq: bool) {
  let R = row_words();
  let E4 = word_vec4s();
  let D4 = HEAD_DIM / 4u;
  let NA = DWPL * E4;        // vec4 accumulators per head
  let NKG = DWG / DKL;       // key groups
  let TURN = NKG * DKPI;     // keys per workgroup turn
  let c = wid.x;
  let dw = decode_work(wid);
  let hd = dw.heads;
  let head0 = hd.head0;
  let k_begin = dw.k_begin;
  let k_end = dw.k_end;
  let row0 = dw.row0;
  let kg = t / DKL;
  let li = t % DKL;

  var qv: array<vec4<f32>, DACC>;
  var acc: array<vec4<f32>, DACC>;
  for (var h = 0u; h < HPW; h++) {
    for (var j = 0u; j < DWPL; j++) {
      let w = li + j * DKL;
      for (var u = 0u; u < E4; u++) {
        var v = vec4<f32>(0.0);
        if ((R % DKL == 0u || w < R) && h < hd.n) { v = q[(head0 + h) * D4 + w * E4 + u] * p.scale; }
        qv[(h * DWPL + j) * E4 + u] = v;
        acc[(h * DWPL + j) * E4 + u] = vec4<f32>(0.0);
      }
    }
  }
  var m = array<f32, MAX_GROUP>(NEG, NEG, NEG, NEG, NEG, NEG, NEG, NEG);
  var l = array<f32, MAX_GROUP>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);

  for (var b0 = k_begin; b0 < k_end; b0 += TURN) {
    let key0 = b0 + kg * DKPI;
    var kw: array<vec4<u32>, DLD>;
    var vw: array<vec4<u32>, DLD>;
    for (var u = 0u; u < DKPI; u++) {
      for (var j = 0u; j < DWPL; j++) {
        let w = li + j * DKL;
        var kx = vec4<u32>(0u);
        var vx = vec4<u32>(0u);
        if (key0 + u < k_end && (R % DKL == 0u || w < R)) {
          let at = (row0 + key0 + u) * R + w;
          kx = k_word(at);
          vx = v_word(at);
        }
        kw[u * DWPL + j] = kx;
        vw[u * DWPL + j] = vx;
      }
    }
    var s = array<f32, DSC>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (var u = 0u; u < DKPI; u++) {
      for (var j = 0u; j < DWPL; j++) {
        let kf = unpack_word(kw[u * DWPL + j]);
        for (var e = 0u; e < E4; e++) {
          for (var h = 0u; h < HPW; h++) { s[h * DKPI + u] += dot(qv[(h * DWPL + j) * E4 + e], kf[e]); }
        }
      }
    }
    for (var i = 0u; i < HPW * DKPI; i++) {
      var x = s[i];
      for (var mask = DKL / 2u; mask > 0u; mask >>= 1u) { x += sg_xor(x, mask); }
      s[i] = capped(x);
    }
    for (var h = 0u; h < HPW; h++) {
      var mx = m[h];
      for (var u = 0u; u < DKPI; u++) {
        if (key0 + u < k_end) { mx = max(mx, s[h * DKPI + u]); }
      }
      let alpha = exp(m[h] - mx);
      m[h] = mx;
      var sum = l[h] * alpha;
      for (var j = 0u; j < NA; j++) { acc[h * NA + j] *= alpha; }
      for (var u = 0u; u < DKPI; u++) {
        let pu = select(0.0, exp(s[h * DKPI + u] - mx), key0 + u < k_end);
        sum += pu;
        for (var j = 0u; j < DWPL; j++) {
          let vf = unpack_word(vw[u * DWPL + j]);
          for (var e = 0u; e < E4; e++) { acc[h * NA + j * E4 + e] += pu * vf[e]; }
        }
      }
      l[h] = sum;
    }
  }

  // Merge the key groups: inside each subgroup by shuffles, then across subgroups.
  for (var mask = DKL; mask < SG; mask <<= 1u) {
    for (var h = 0u; h < HPW; h++) { sg_merge(h, mask, &m, &l, &acc); }
  }
  let sub = t / SG;
  if (t % SG < DKL) {
    for (var h = 0u; h < HPW; h++) {
      for (var j = 0u; j < DWPL; j++) {
        let w = li + j * DKL;
        if (R % DKL == 0u || w < R) {
          for (var e = 0u; e < E4; e++) { sg_acc[(sub * HPW + h) * D4 + w * E4 + e] = acc[h * NA + j * E4 + e]; }
        }
      }
      if (li == 0u) { sg_ml[sub * HPW + h] = vec2<f32>(m[h], l[h]); }
    }
  }
  workgroupBarrier();
  let NS = DWG / SG;
  for (var i = t; i < hd.n * D4; i += DWG) {
    let h = i / D4;
    let d4 = i % D4;
    var big = NEG;
    for (var k = 0u; k < NS; k++) { big = max(big, sg_ml[k * HPW + h].x); }
    var sum = 0.0;
    var o = vec4<f32>(0.0);
    for (var k = 0u; k < NS; k++) {
      let ml = sg_ml[k * HPW + h];
      let f = exp(ml.x - big);
      sum += ml.y * f;
      o += sg_acc[(k * HPW + h) * D4 + d4] * f;
    }
    let head = head0 + h;
    if (p.n_chunks == 1u) {
      put_out4(head * HEAD_DIM + d4 * 4u, o / sum, xq, 4u * i);
    } else {
      let b = (head * p.n_chunks + c) * HEAD_DIM + d4 * 4u;
      split[b] = o.x;
      split[b + 1u] = o.y;
      split[b + 2u] = o.z;
      split[b + 3u] = o.w;
      if (d4 == 0u) {
        let mi = p.ml_offset + (head * p.n_chunks + c) * 2u;
        split[mi] = big;
        split[mi + 1u] = sum;
      }
    }
  }
}

@compute @workgroup_size(DWG)
fn decode_sg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) { sg_body(wid, t, false); }

@compute @workgroup_size(DWG)
fn decode_sg_xq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  sg_body(wid, t, true);
  if (p.n_chunks == 1u && p.n_tokens == 1u) {
    let hd = decode_heads(wid, 0u);
    xo_put(hd.head0 * HEAD_DIM, hd.n * HEAD_DIM, t, DWG);
  }
}
