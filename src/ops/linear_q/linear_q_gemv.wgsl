// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the gemv route's shared parts and its f32
// row loops: the row sets, their reductions, the staging of x and the q4 / q5 / q8 / iq4 dot
// products. Bindings, the Params block and the format constants are linear_q.wgsl's.
// ---- GEMV (m = 1 .. kLinearQGemvMaxRows: a workgroup per tile and row of x, gv_set) -----
// 128 threads: 4 row sets of 32 lanes along K. A row set computes 4 rows: each lane reads one
// vec4<u32> per row per step (32 q4, 16 q8 or 64 q2k / q3k values, inside one block) and its x values from
// the workgroup's staged copy (gv_stage), reused for the 4 rows. Lanes are reduced with subgroup shuffles (SG lanes at a time), then through
// workgroup memory where the subgroup is narrower than 32. Accumulators are named scalars, not
// arrays: an array indexed in a loop would live in local memory.
//
// Fused variants (override constants and entry points; linear_q.h lists them):
//   NORM        x is RMS-normalized (norm weight nw, eps): each row set sums x^2 over its
//               lanes along with the dots, so the norm costs no dispatch and no pass of its own
//   gemv        y = acc (+ bias) (+ res when RES)
//   gemv_swiglu rows come in (gate, up) pairs, 16-row blocks interleaved in the weight; y has
//               N/2 columns: y = silu(gate) * up
//   gemv_argmax also writes each workgroup's (largest value, its lowest index) to `part`
override SG: u32 = 1u;        // lanes per subgroup used by the shuffles (1: workgroup memory)
override NORM: bool = false;
override RES: bool = false;

// Lanes along K per row set: 32 (one subgroup), or 64 where few rows leave the GPU short of
// warps (two subgroups per set, reduced through workgroup memory).
override GV_TK: u32 = 32u;
// Row sets per workgroup: 4, or 8 for gemv_swiglu_xq's node (16 outputs: one xq block).
override GV_SETS: u32 = 4u;
override GV_WG: u32 = GV_SETS * GV_TK;

@group(0) @binding(9) var<storage, read> res: array<f32>;      // [M, N] residual (RES)
@group(0) @binding(10) var<storage, read> nw4: array<vec4<f32>>;  // [K] norm weight (NORM)
@group(0) @binding(11) var<storage, read_write> part: array<u32>;  // argmax partials

var<workgroup> gv_red: array<vec4<f32>, GV_WG>;
var<workgroup> gv_sum: array<f32, GV_WG>;

fn sg_sum(v: f32) -> f32 {
  var s = v;
  if (SG > 16u) { s += sg_xor(s, 16u); }
  if (SG > 8u) { s += sg_xor(s, 8u); }
  if (SG > 4u) { s += sg_xor(s, 4u); }
  if (SG > 2u) { s += sg_xor(s, 2u); }
  if (SG > 1u) { s += sg_xor(s, 1u); }
  return s;
}

// Sum of the 32 lanes of each row set, valid in lane 0 of the set; NORM: times 1 / rms of the
// row, from the threads' gv_ss summed over the workgroup (which staged x together).
fn gv_reduce(a: vec4<f32>, lid: u32) -> vec4<f32> { return gv_reduce_ss(a, gv_ss.x, lid); }

// gv_reduce for a row of x whose sum of squares (NORM) this thread holds a share `own` of.
fn gv_reduce_ss(a: vec4<f32>, own: f32, lid: u32) -> vec4<f32> {
  var r = vec4<f32>(sg_sum(a.x), sg_sum(a.y), sg_sum(a.z), sg_sum(a.w));
  var ss = 0.0;
  if (NORM) {
    let part = sg_sum(own);
    if (lid % SG == 0u) { gv_sum[lid / SG] = part; }
    workgroupBarrier();
    for (var i = 0u; i < GV_WG / SG; i++) { ss += gv_sum[i]; }
    workgroupBarrier();
  }
  if (SG < GV_TK) {
    gv_red[lid] = r;
    workgroupBarrier();
    if (lid % GV_TK == 0u) {
      for (var i = SG; i < GV_TK; i += SG) { r += gv_red[lid + i]; }
    }
  }
  if (NORM) { r *= inverseSqrt(ss / f32(p.k) + p.eps); }
  return r;
}

fn q4_dot(w: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  return dot(q4_mant(w), xa) + dot(q4_mant(w >> 16u), xb);
}

// The fifth-bit formats: word w's 8 values with their fifth bits in the low byte of hb.
fn q5_dot(w: u32, hb: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  return dot(q5_mant(w, hb), xa) + dot(q5_mant(w >> 16u, hb >> 4u), xb);
}

// One row's 32-value chunk (q4 / q5): dot(v, x) of the mantissa-built values, vec4 word w,
// the fifth bits hw (BITS 5).
fn gv_chunk(w: vec4<u32>, hw: u32, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>, x4_: vec4<f32>,
            x5: vec4<f32>, x6: vec4<f32>, x7: vec4<f32>) -> f32 {
  if (BITS == 5u) {
    return q5_dot(w.x, hw, x0, x1) + q5_dot(w.y, hw >> 8u, x2, x3) + q5_dot(w.z, hw >> 16u, x4_, x5) +
           q5_dot(w.w, hw >> 24u, x6, x7);
  }
  if (NL) { return nl_dot(w.x, x0, x1) + nl_dot(w.y, x2, x3) + nl_dot(w.z, x4_, x5) + nl_dot(w.w, x6, x7); }
  return q4_dot(w.x, x0, x1) + q4_dot(w.y, x2, x3) + q4_dot(w.z, x4_, x5) + q4_dot(w.w, x6, x7);
}

// The dot products of x's row `xrow` with weight rows r.x..r.w (clamped in bounds), summed over
// this lane's share of K. Turn by turn the workgroup stages the next 32 chunks of x (NORM: times
// the norm weight) in workgroup memory with coalesced loads, once for its 4 row sets: read
// straight from global memory each lane's 8 vec4 sit 128 bytes apart, so the x loads, not the
// weights, filled the load units. A chunk's vec4s sit GV_XSTRIDE apart (one pad) so the 8 lanes
// of a quarter-warp hit distinct banks. NORM: gv_ss gets the thread's share of sum(x^2) over
// what it staged (component q for the workgroup's row q of x); gv_reduce totals it over the
// workgroup.
const GV_XSTRIDE: u32 = 9u;  // vec4 slots per staged chunk (8 for q4, 4 for q8, + 1 pad)
// Rows of x per workgroup: 1, or 2 or 4 in the gemv_multi route (linear_q.h), where int8 rows
// of x are staged side by side (3 * GV_TK slots each, gv_stage_i8) and every lane's unpacked
// weight chunk serves them all (gv_rows_multi).
override GV_XR: u32 = 1u;
// [GV_TK chunks][GV_XSTRIDE], twice over for 4 rows of x (linear_q_choices.cpp gemv_workgroup_bytes mirrors it)
var<workgroup> gv_x: array<vec4<f32>, GV_TK * GV_XSTRIDE * ((GV_XR + 2u) / 3u)>;
var<private> gv_ss: vec4<f32>;

// q2k / q3k lanes take 64-value chunks, staged in two halves h of 32 (gv_xh() = 2): staged
// chunk j of turn `it` is then x's 32-value chunk 2 (it * GV_TK + j) + h.
fn gv_xh() -> u32 { return select(1u, 2u, BITS <= 3u); }

fn gv_stage(xo: u32, it: u32, per: u32, h: u32, lid: u32) {
  // per: vec4 per chunk (8 q4, 4 q8); the turn covers GV_TK * per vec4 of x.
  let k4 = p.k / 4u;
  for (var j = lid; j < GV_TK * per; j += GV_WG) {
    let gi = ((it * GV_TK + j / per) * gv_xh() + h) * per + j % per;
    var v = vec4<f32>(0.0);
    if (gi < k4) {
      v = x4[xo + gi];
      if (NORM) {
        gv_ss.x += dot(v, v);
        v *= nw4[gi];
      }
    }
    gv_x[(j / per) * GV_XSTRIDE + j % per] = v;
  }
}

// Row r's affine factors at element k0: (scale, min) with value = scale * q - min, q the stored
// integer (q4gsw: the nibble, min = 8 * scale; q5_0: 16 * scale; q8: min 0; q4_1 / q5_1:
// value = d * q + m, so min = -m).
fn gv_affine(r: u32, k0: u32) -> vec2<f32> {
  if (SCALES == 1u) { return kq_affine(r, k0 / 32u); }
  if (SCALES == 2u) {
    let dm = unpack2x16float(sc[r * (p.k / 32u) + k0 / 32u]);
    return vec2<f32>(dm.x, -dm.y);
  }
  if (SCALES == 3u) {
    let b = r * (p.k / 256u) + k0 / 256u;
    let j = (k0 / 32u) % 8u;
    let w0 = sc[2u * b];
    let ls = ((sc[2u * b + 1u] >> (4u * j)) & 15u) | (((w0 >> (16u + 2u * j)) & 3u) << 4u);
    return vec2<f32>(unpack2x16float(w0).x * f32(i32(ls) - 32), 0.0);
  }
  let s = scale_at(r * (p.k / p.gs) + k0 / p.gs);
  return vec2<f32>(s, s * select(select(0.0, 16.0, BITS == 5u), 8.0, BITS == 4u && !NL));
}

// iq4_xs: the grid values of nibbles 0..3 of w.
fn nl_vals(w: u32) -> vec4<f32> {
  return vec4<f32>(iq4_f[w & 15u], iq4_f[(w >> 4u) & 15u], iq4_f[(w >> 8u) & 15u], iq4_f[(w >> 12u) & 15u]);
}

// iq4_xs: the grid's int8 byte of each byte (a nibble index) of v.
fn nl_bytes(v: u32) -> u32 {
  var o = 0u;
  for (var i = 0u; i < 4u; i++) {
    let q = (v >> (8u * i)) & 15u;
    o |= (bitcast<u32>(i32(iq4_f[q])) & 0xFFu) << (8u * i);
  }
  return o;
}

fn nl_dot(w: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 { return dot(nl_vals(w), xa) + dot(nl_vals(w >> 16u), xb); }

// BITS 5: the fifth-bit word of row r's chunk c.
fn gv_hi(r: u32, c: u32) -> u32 {
  if (BITS != 5u) { return 0u; }
  let i = r * q_row_words() + p.k / 8u + c;
  return qw4[i >> 2u][i & 3u];
}

fn gv_rows(r: vec4<u32>, xrow: u32, t: u32, lid: u32) -> vec4<f32> {
  let vals = select(32u, 16u, BITS == 8u);
  let per = vals / 4u;
  let nvec = p.k / vals;
  let rs = q_row_words() / 4u;  // vec4 per weight row
  let xo = xrow * (p.k / 4u);
  let turns = (nvec + GV_TK - 1u) / GV_TK;  // the same for every thread: barriers stay uniform
  // q = qs * (v - 1) from the mantissa-built v (q4: 16, q5: 32).
  let qs = select(16.0, 32.0, BITS == 5u);
  var a0 = 0.0;
  var a1 = 0.0;
  var a2 = 0.0;
  var a3 = 0.0;
  nl_grid_load(lid, GV_WG);  // read after the first turn's barrier (turns >= 1)
  for (var it = 0u; it < turns; it++) {
    let c = min(it * GV_TK + t, nvec - 1u);  // lanes past the end compute on a valid chunk, dropped below
    let live = it * GV_TK + t < nvec;
    // The weights first: their loads stay in flight through the staging and the barrier.
    let f0 = gv_affine(r.x, c * vals);
    let f1 = gv_affine(r.y, c * vals);
    let f2 = gv_affine(r.z, c * vals);
    let f3 = gv_affine(r.w, c * vals);
    let w0 = qw4[r.x * rs + c];
    let w1 = qw4[r.y * rs + c];
    let w2 = qw4[r.z * rs + c];
    let w3 = qw4[r.w * rs + c];
    let h0 = gv_hi(r.x, c);
    let h1 = gv_hi(r.y, c);
    let h2 = gv_hi(r.z, c);
    let h3 = gv_hi(r.w, c);
    gv_stage(xo, it, per, 0u, lid);
    workgroupBarrier();
    let xb = t * GV_XSTRIDE;
    let x0 = gv_x[xb];
    let x1 = gv_x[xb + 1u];
    let x2 = gv_x[xb + 2u];
    let x3 = gv_x[xb + 3u];
    if (BITS == 4u || BITS == 5u) {
      let x4_ = gv_x[xb + 4u];
      let x5 = gv_x[xb + 5u];
      let x6 = gv_x[xb + 6u];
      let x7 = gv_x[xb + 7u];
      if (NL) {  // iq4_xs, iq4_nl: the grid values times the (sub-)block's scale, no min
        let d0 = gv_chunk(w0, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d1 = gv_chunk(w1, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d2 = gv_chunk(w2, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        let d3 = gv_chunk(w3, 0u, x0, x1, x2, x3, x4_, x5, x6, x7);
        if (live) {
          a0 = fma(d0, f0.x, a0);
          a1 = fma(d1, f1.x, a1);
          a2 = fma(d2, f2.x, a2);
          a3 = fma(d3, f3.x, a3);
        }
        workgroupBarrier();
        continue;
      }
      // dot(q, x) = qs * (dot(v, x) - sum(x)); value = scale * q - min: the sum taken out once
      // for the four rows.
      let sx = dot(x0 + x1 + x2 + x3 + x4_ + x5 + x6 + x7, vec4<f32>(1.0));
      let d0 = gv_chunk(w0, h0, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d1 = gv_chunk(w1, h1, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d2 = gv_chunk(w2, h2, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      let d3 = gv_chunk(w3, h3, x0, x1, x2, x3, x4_, x5, x6, x7) - sx;
      if (live) {
        a0 += fma(d0, qs * f0.x, -f0.y * sx);
        a1 += fma(d1, qs * f1.x, -f1.y * sx);
        a2 += fma(d2, qs * f2.x, -f2.y * sx);
        a3 += fma(d3, qs * f3.x, -f3.y * sx);
      }
    } else {
      let d0 = dot(q8_vals(w0.x), x0) + dot(q8_vals(w0.y), x1) + dot(q8_vals(w0.z), x2) + dot(q8_vals(w0.w), x3);
      let d1 = dot(q8_vals(w1.x), x0) + dot(q8_vals(w1.y), x1) + dot(q8_vals(w1.z), x2) + dot(q8_vals(w1.w), x3);
      let d2 = dot(q8_vals(w2.x), x0) + dot(q8_vals(w2.y), x1) + dot(q8_vals(w2.z), x2) + dot(q8_vals(w2.w), x3);
      let d3 = dot(q8_vals(w3.x), x0) + dot(q8_vals(w3.y), x1) + dot(q8_vals(w3.z), x2) + dot(q8_vals(w3.w), x3);
      if (live) {
        a0 = fma(d0, f0.x, a0);
        a1 = fma(d1, f1.x, a1);
        a2 = fma(d2, f2.x, a2);
        a3 = fma(d3, f3.x, a3);
      }
    }
    workgroupBarrier();  // before the next turn overwrites gv_x
  }
  return vec4<f32>(a0, a1, a2, a3);
}
