// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the gemv_m route's kernel, several rows
// of x (2 .. kLinearQGemvMaxRows) against each weight row read once. Bindings, overrides and the
// helpers (gv_affine, gv_hi, q6k_load, q6k_bytes, gv_wg, sg_sum) are linear_q.wgsl's.
//
// x comes quantized once per step (quantize_act: int8 per 32 values, the q4 / q5 nibble order
// where the weight needs it, one f32 scale per activation group). A workgroup takes 16 weight
// rows (4 row sets of GV_TK lanes along K, 4 rows per lane) and a block of up to GM_M live rows
// of x: per 32-value chunk a lane loads its 4 rows' words, unpacks them to int8 bytes once
// (GmRow), then for each row of x reads the chunk's 8 int8 words (16-byte loads, shared through
// L1 by the workgroups of an SM) and takes 8 dot4I8Packed per weight row. No staging, no
// barriers in the K loop. The accumulators are a private array indexed by constants only: the
// loops over x's rows run to GM_M, an override (a constant at pipeline creation, so the driver
// can unroll them and keep the array in registers). Past GM_M rows of x a tile's workgroups take
// blocks of GM_M rows each, adjacent in dispatch order (all but the first find the tile's
// weights in L2).
override GM_M: u32 = 8u;  // rows of x per workgroup (linear_q.h gemv_m_block), at most 16 (gm_acc's length)

@group(0) @binding(16) var<storage, read> xq4: array<vec4<u32>>;  // int8 x [M, K / 32][2] (quantize_act)

var<private> gm_acc: array<vec4<f32>, 16>;  // [row of x] the lane's 4 weight rows

// A weight row's 32-value chunk as int8 bytes in x's word order (a: x's words 0..3, b: 4..7)
// (also what gemv_multi's lanes unpack, linear_q.wgsl gv_rows_multi) and its factors: chunk . x = f.x dot(a, xa) + f.y dot(b, xb) + f.z sum(xa) + f.w sum(xb),
// sums over x's int8 values (the formats' mins and q6k's -32).
struct GmRow {
  a: vec4<u32>,
  b: vec4<u32>,
  f: vec4<f32>,
}

fn gm_nib(w: u32, hb: u32, high: bool) -> u32 {
  var v = select(w, w >> 4u, high) & 0x0F0F0F0Fu;
  if (BITS == 5u) { v |= spread5(select(hb, hb >> 1u, high) & 0x55u); }
  return v;
}

fn gm_row(r: u32, c: u32) -> GmRow {
  if (BITS == 6u) {
    let o = q6k_load(r, c);
    let t = c % 4u;
    let s = vec4<f32>(unpack4xI8(o.sw));
    let s0 = o.d * select(s.x, s.z, (t % 2u) == 1u);
    let s1 = o.d * select(s.y, s.w, (t % 2u) == 1u);
    return GmRow(vec4<u32>(q6k_bytes(o.ql0.x, o.qh0.x, t), q6k_bytes(o.ql0.y, o.qh0.y, t),
                           q6k_bytes(o.ql0.z, o.qh0.z, t), q6k_bytes(o.ql0.w, o.qh0.w, t)),
                 vec4<u32>(q6k_bytes(o.ql1.x, o.qh1.x, t), q6k_bytes(o.ql1.y, o.qh1.y, t),
                           q6k_bytes(o.ql1.z, o.qh1.z, t), q6k_bytes(o.ql1.w, o.qh1.w, t)),
                 vec4<f32>(s0, s1, -32.0 * s0, -32.0 * s1));
  }
  let rs = q_row_words() / 4u;
  let f = gv_affine(r, c * 32u);
  let fv = vec4<f32>(f.x, f.x, -f.y, -f.y);
  if (BITS == 8u) { return GmRow(qw4[r * rs + 2u * c], qw4[r * rs + 2u * c + 1u], fv); }
  let w = qw4[r * rs + c];
  let h = gv_hi(r, c);
  return GmRow(vec4<u32>(gm_nib(w.x, h, false), gm_nib(w.x, h, true), gm_nib(w.y, h >> 8u, false),
                         gm_nib(w.y, h >> 8u, true)),
               vec4<u32>(gm_nib(w.z, h >> 16u, false), gm_nib(w.z, h >> 16u, true), gm_nib(w.w, h >> 24u, false),
                         gm_nib(w.w, h >> 24u, true)),
               fv);
}

// An integer sum as f32 by the float trick (|i| < 2^22: 16 products of int8 by at most 8 bits).
fn gm_f32(i: i32) -> f32 { return bitcast<f32>(i + 0x4B400000) - 12582912.0; }

fn gm_dot4(w: vec4<u32>, x: vec4<u32>) -> i32 {
  return dot4I8Packed(w.x, x.x) + dot4I8Packed(w.y, x.y) + dot4I8Packed(w.z, x.z) + dot4I8Packed(w.w, x.w);
}

fn gm_dot(w: GmRow, xa: vec4<u32>, xb: vec4<u32>, hs: vec2<f32>) -> f32 {
  if (BITS == 6u) { return w.f.x * gm_f32(gm_dot4(w.a, xa)) + w.f.y * gm_f32(gm_dot4(w.b, xb)) + dot(w.f.zw, hs); }
  return fma(w.f.x, gm_f32(gm_dot4(w.a, xa) + gm_dot4(w.b, xb)), w.f.z * (hs.x + hs.y));
}

// The lane's share of K for weight rows r.x .. r.w against every live row of x, into gm_acc.
fn gm_run(r: vec4<u32>, t: u32, m0: u32, mb: u32) {
  let nchunks = p.k / 32u;
  let groups = p.k / p.gs;  // x's scales per row
  let ones = 0x01010101u;
  for (var m = 0u; m < GM_M; m++) { gm_acc[m] = vec4<f32>(0.0); }
  for (var c = t; c < nchunks; c += GV_TK) {
    let w0 = gm_row(r.x, c);
    let w1 = gm_row(r.y, c);
    let w2 = gm_row(r.z, c);
    let w3 = gm_row(r.w, c);
    let g = (c * 32u) / p.gs;
    for (var m = 0u; m < GM_M; m++) {
      if (m < mb) {
        let xi = 2u * ((m0 + m) * nchunks + c);
        let xa = xq4[xi];
        let xb = xq4[xi + 1u];
        var hs = vec2<f32>(0.0);
        if (BITS != 8u) {  // q8 alone has no min
          hs = vec2<f32>(gm_f32(dot4I8Packed(xa.x, ones) + dot4I8Packed(xa.y, ones) + dot4I8Packed(xa.z, ones) +
                                dot4I8Packed(xa.w, ones)),
                         gm_f32(dot4I8Packed(xb.x, ones) + dot4I8Packed(xb.y, ones) + dot4I8Packed(xb.z, ones) +
                                dot4I8Packed(xb.w, ones)));
        }
        let d = vec4<f32>(gm_dot(w0, xa, xb, hs), gm_dot(w1, xa, xb, hs), gm_dot(w2, xa, xb, hs),
                          gm_dot(w3, xa, xb, hs));
        gm_acc[m] = fma(d, vec4<f32>(xs[(m0 + m) * groups + g]), gm_acc[m]);
      }
    }
  }
}

// ---- the lanes' sums: gm_acc[m] (4 rows) over the row set's GV_TK lanes, into gm_red --------
// With subgroups of 4 or more lanes, per row of x: a reduce-scatter inside the subgroup (rows
// 0, 1 against 2, 3 across lanes L / 2 apart, then row against row L / 4 apart, then plain
// butterflies), 6 shuffles for 4 sums where 4 full reductions take 20; each of 4 lanes then
// holds one row's sum of the subgroup and writes it to gm_red, and the epilogue adds the
// GV_TK / SG subgroups of a set (at most GM_SUBS: the host keeps GV_TK <= GM_SUBS * SG).
// Without subgroups (SG 1) a set's lanes are summed through workgroup memory, row of x by row.
const GM_SUBS: u32 = 8u;
var<workgroup> gm_red: array<f32, 2048>;  // [GV_SETS][16 rows of x][4 rows][GM_SUBS]

fn gm_slot(st: u32, m: u32, r: u32, sub: u32) -> u32 { return ((st * 16u + m) * 4u + r) * GM_SUBS + sub; }

// Row 2 (t & L/2 != 0) + (t & L/4 != 0) of v summed over the subgroup's L lanes of the set,
// valid in the lanes with t % (L / 4) == 0.
fn gm_scatter(v: vec4<f32>, t: u32) -> f32 {
  let l = min(SG, GV_TK);
  let ha = (t & (l / 2u)) != 0u;
  let give = select(v.zw, v.xy, ha);
  let keep = select(v.xy, v.zw, ha) + vec2<f32>(sg_xor(give.x, l / 2u), sg_xor(give.y, l / 2u));
  let hb = (t & (l / 4u)) != 0u;
  var s = select(keep.x, keep.y, hb) + sg_xor(select(keep.y, keep.x, hb), l / 4u);
  for (var o = l / 8u; o > 0u; o >>= 1u) { s += sg_xor(s, o); }
  return s;
}

fn gm_reduce(lid: u32, mb: u32) {
  let st = lid / GV_TK;
  let t = lid % GV_TK;
  for (var m = 0u; m < GM_M; m++) {
    if (m < mb) {
      if (SG >= 4u) {
        let l = min(SG, GV_TK);
        let s = gm_scatter(gm_acc[m], t);
        if (t % (l / 4u) == 0u) {
          let r = select(0u, 2u, (t & (l / 2u)) != 0u) + select(0u, 1u, (t & (l / 4u)) != 0u);
          gm_red[gm_slot(st, m, r, t / l)] = s;
        }
      } else {
        gv_red[lid] = gm_acc[m];
        workgroupBarrier();
        if (t == 0u) {
          var s = gv_red[lid];
          for (var i = 1u; i < GV_TK; i++) { s += gv_red[lid + i]; }
          for (var r = 0u; r < 4u; r++) { gm_red[gm_slot(st, m, r, 0u)] = s[r]; }
        }
        workgroupBarrier();
      }
    }
  }
  workgroupBarrier();
}

// Row r of the set's 4 for the block's row m of x, once gm_reduce is done.
fn gm_sum(st: u32, m: u32, r: u32) -> f32 {
  let subs = select(max(GV_TK / SG, 1u), 1u, SG < 4u);
  var s = 0.0;
  for (var i = 0u; i < subs; i++) { s += gm_red[gm_slot(st, m, r, i)]; }
  return s;
}

// The workgroup's first row set (its tile's), first row of x and rows of x (at most GM_M).
fn gm_blocks() -> u32 { return (p.m + GM_M - 1u) / GM_M; }
fn gm_tile(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return (gv_wg(wid, nwg) / gm_blocks()) * GV_SETS; }
fn gm_m0(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return (gv_wg(wid, nwg) % gm_blocks()) * GM_M; }
fn gm_rows(m0: u32) -> u32 { return min(GM_M, p.m - m0); }

// The workgroup's outputs (set, x row m, weight row r) spread over its threads.
@compute @workgroup_size(GV_WG)
fn gemv_m(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let n0 = (gm_tile(wid, nwg) + lid / GV_TK) * 4u;
  let m0 = gm_m0(wid, nwg);
  let mb = gm_rows(m0);
  gm_run(gv_clamp(vec4<u32>(n0, n0 + 1u, n0 + 2u, n0 + 3u)), lid % GV_TK, m0, mb);
  gm_reduce(lid, mb);
  for (var o = lid; o < GV_SETS * 4u * mb; o += GV_WG) {
    let st = o / (4u * mb);
    let m = (o / 4u) % mb;
    let n = (gm_tile(wid, nwg) + st) * 4u + o % 4u;
    if (n < p.n) { y[(m0 + m) * p.ld + p.y_off + n] = gv_finish(gm_sum(st, m, o % 4u), m0 + m, n); }
  }
}

// Rows in (gate, up) pairs, 16-row blocks interleaved (gemv_swiglu's): y = gate_act(gate) * up.
// A set's rows are (gate j0, up j0, gate j0 + 1, up j0 + 1).
@compute @workgroup_size(GV_WG)
fn gemv_m_swiglu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
  let j0 = (gm_tile(wid, nwg) + lid / GV_TK) * 2u;
  let g0 = swiglu_gate_row(j0);
  let g1 = swiglu_gate_row(j0 + 1u);
  let m0 = gm_m0(wid, nwg);
  let mb = gm_rows(m0);
  gm_run(gv_clamp(vec4<u32>(g0, g0 + 16u, g1, g1 + 16u)), lid % GV_TK, m0, mb);
  gm_reduce(lid, mb);
  let half = p.n / 2u;
  for (var o = lid; o < GV_SETS * 2u * mb; o += GV_WG) {
    let st = o / (2u * mb);
    let m = (o / 2u) % mb;
    let e = o % 2u;
    let j = (gm_tile(wid, nwg) + st) * 2u + e;
    if (j < half) {
      let g = swiglu_gate_row(j);
      y[(m0 + m) * half + j] = gate_act(finish(gm_sum(st, m, 2u * e), g)) * finish(gm_sum(st, m, 2u * e + 1u), g + 16u);
    }
  }
}
