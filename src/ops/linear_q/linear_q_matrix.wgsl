// A part of linear_q.wgsl (gpu/pipeline.h `//! use`): the matrix routes, small_m (2..7 rows)
// and the gemm route's two kernels (quantize_act, then the int8 gemm). Bindings and overrides
// are linear_q.wgsl's.
// ---- small M (2..7 rows) ----------------------------------------------------------------
// 256 threads: 32 along K times 8 row sets of RPT rows; one weight word per row per step,
// applied to every live row of x (f32 activations; q6k has no small_m: its gemm serves).
const MMAX: u32 = 7u;
// The lanes along K are summed by subgroup shuffles, then (where a subgroup is narrower than
// SK) the SK / SG partials of each lane group through red_s, RCH accumulators at a time:
// red_s is [RCH][WG / SG] words (7 KiB without subgroups, one word with SG >= SK), so the
// kernel fits WebGPU's default 16 KiB of workgroup storage.
const RCH: u32 = 7u;
override SM_RED: u32 = 1792u;  // RCH * WG / SG, or 1 when SG >= SK
var<workgroup> red_s: array<f32, SM_RED>;

@compute @workgroup_size(WG)
fn small_m(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let t = lid % SK;
  let n0 = (wid.x + wid.y * nwg.x) * (RPT * (WG / SK)) + (lid / SK) * RPT;
  let per = select(8u, 4u, BITS == 8u);  // values per word
  let wpr = select(p.k / per, 0u, BITS <= 3u);  // q2k / q3k: their own loop below
  let rw = q_row_words();
  let k4 = p.k / 4u;
  let qs = select(16.0, 32.0, BITS == 5u);  // q = qs * (v - 1), as in the gemv
  var rows: array<u32, RPT>;
  for (var r = 0u; r < RPT; r++) { rows[r] = min(n0 + r, p.n - 1u); }
  nl_grid_load(lid, WG);
  if (NL) { workgroupBarrier(); }
  var acc: array<f32, 28>;  // [RPT][MMAX]
  // q2k / q3k: one plane word (16 values, one sub-block) per row and step, its scale byte and
  // (q3k) third bits beside it, the gemv's q23_sub on each live row of x.
  for (var g = select(p.k, t, BITS <= 3u); g < p.k / 16u; g += SK) {
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xc: array<vec4<f32>, MMAX>;
    var xd: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        let xi = m * k4 + 4u * g;
        xa[m] = x4[xi];
        xb[m] = x4[xi + 1u];
        xc[m] = x4[xi + 2u];
        xd[m] = x4[xi + 3u];
        xsum[m] = dot(xa[m] + xb[m] + xc[m] + xd[m], vec4<f32>(1.0));
      }
    }
    let pw = g % 16u;  // the plane word in its block
    for (var r = 0u; r < RPT; r++) {
      let rb = rows[r] * rw + (g / 16u) * q23_block_words();
      let blk = rows[r] * (p.k / 256u) + g / 16u;
      let sb = qw[rb + select(16u, 24u, BITS == 3u) + pw / 4u] >> (8u * (pw % 4u));
      var o = Q23Row(vec4<u32>(qw[rb + pw], 0u, 0u, 0u), vec2<u32>(0u), sb, vec2<f32>(0.0));
      if (BITS == 3u) {
        o.hb.x = qw[rb + 16u + pw / 2u] >> (4u * (pw % 2u));
        o.d = vec2<f32>(scale_at(blk), 0.0);
      } else {
        o.d = unpack2x16float(sc[blk]);
      }
      for (var m = 0u; m < MMAX; m++) {
        if (m < p.m) { acc[r * MMAX + m] += q23_sub(o, 0u, xa[m], xb[m], xc[m], xd[m], xsum[m]); }
      }
    }
  }
  for (var w = t; w < wpr; w += SK) {
    let k0 = w * per;
    var xa: array<vec4<f32>, MMAX>;
    var xb: array<vec4<f32>, MMAX>;
    var xsum: array<f32, MMAX>;
    for (var m = 0u; m < MMAX; m++) {
      if (m < p.m) {
        xa[m] = x4[m * k4 + k0 / 4u];
        if (BITS != 8u) {
          xb[m] = x4[m * k4 + k0 / 4u + 1u];
          xsum[m] = dot(xa[m] + xb[m], vec4<f32>(1.0));
        }
      }
    }
    for (var r = 0u; r < RPT; r++) {
      let word = qw[rows[r] * rw + w];
      let f = gv_affine(rows[r], k0);
      if (BITS == 8u) {
        let v = q8_vals(word);
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) { acc[r * MMAX + m] = fma(dot(v, xa[m]), f.x, acc[r * MMAX + m]); }
        }
      } else {
        var lo: vec4<f32>;
        var hi: vec4<f32>;
        if (NL) {
          lo = nl_vals(word);
          hi = nl_vals(word >> 16u);
          for (var m = 0u; m < MMAX; m++) {
            if (m < p.m) { acc[r * MMAX + m] = fma(dot(lo, xa[m]) + dot(hi, xb[m]), f.x, acc[r * MMAX + m]); }
          }
          continue;
        }
        if (BITS == 5u) {
          let hb = qw[rows[r] * rw + p.k / 8u + w / 4u] >> (8u * (w % 4u));
          lo = q5_mant(word, hb);
          hi = q5_mant(word >> 16u, hb >> 4u);
        } else {
          lo = q4_mant(word);
          hi = q4_mant(word >> 16u);
        }
        for (var m = 0u; m < MMAX; m++) {
          if (m < p.m) {
            let d = dot(lo, xa[m]) + dot(hi, xb[m]) - xsum[m];
            acc[r * MMAX + m] += fma(d, qs * f.x, -f.y * xsum[m]);
          }
        }
      }
    }
  }
  for (var i = 0u; i < RPT * MMAX; i++) { acc[i] = sg_sum(acc[i]); }
  if (SG < SK) {
    let width = WG / SG;  // partials held by lanes t % SG == 0, lane group g's at g * SK / SG
    for (var c0 = 0u; c0 < RPT * MMAX; c0 += RCH) {
      if (t % SG == 0u) {
        for (var j = 0u; j < RCH && c0 + j < RPT * MMAX; j++) { red_s[j * width + lid / SG] = acc[c0 + j]; }
      }
      workgroupBarrier();
      if (t == 0u) {
        for (var j = 0u; j < RCH && c0 + j < RPT * MMAX; j++) {
          var sum = 0.0;
          for (var q = 0u; q < SK / SG; q++) { sum += red_s[j * width + lid / SG + q]; }
          acc[c0 + j] = sum;
        }
      }
      workgroupBarrier();
    }
  }
  if (t == 0u) {
    for (var r = 0u; r < RPT; r++) {
      let n = n0 + r;
      if (n >= p.n) { continue; }
      for (var m = 0u; m < p.m; m++) { y[m * p.ld + p.y_off + n] = finish_mn(acc[r * MMAX + m], m, n); }
    }
  }
}

// ---- int8 activations (gemm route, first kernel) ----------------------------------------
// One thread per (row m, group g): scale = absmax / 127, q = round(x * 127 / absmax).
// For q4/q5 weights each 8 values are stored as two words, k = 0, 2, 4, 6 then 1, 3, 5, 7, the
// order in which the gemm unpacks the weight nibbles. The K-quants use groups of 32 (gs).
@compute @workgroup_size(64)
fn quantize_act(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lid;
  let groups = p.k / p.gs;
  if (i >= p.m * groups) { return; }
  let m = i / groups;
  let g = i % groups;
  let base = (m * p.k + g * p.gs) / 4u;  // vec4 index into x, and word index into xq
  var amax = 0.0;
  for (var j = 0u; j < p.gs / 4u; j++) {
    let v = abs(x4[base + j]);
    amax = max(amax, max(max(v.x, v.y), max(v.z, v.w)));
  }
  xs[i] = amax / 127.0;
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  if (BITS == 4u || BITS == 5u) {
    for (var j = 0u; j < p.gs / 8u; j++) {
      let a = x4[base + 2u * j] * inv;
      let b = x4[base + 2u * j + 1u] * inv;
      xq[base + 2u * j] = pack4xI8(vec4<i32>(round(vec4<f32>(a.x, a.z, b.x, b.z))));
      xq[base + 2u * j + 1u] = pack4xI8(vec4<i32>(round(vec4<f32>(a.y, a.w, b.y, b.w))));
    }
  } else {
    for (var j = 0u; j < p.gs / 4u; j++) {
      xq[base + j] = pack4xI8(vec4<i32>(round(x4[base + j] * inv)));
    }
  }
}

// ---- int8 x int4/int5/int6/int8 GEMM (gemm route, second kernel) -------------------------
// 64 x 128 outputs per workgroup, 4 x 8 per thread: rows 4 tm + i, columns 4 tn + c and
// BN / 2 + 4 tn + c, so that a thread's fragments of a K word are one vec4 of as_ and two of
// bs_ (3 workgroup loads for 32 dot products; a quarter-warp's 8 threads read 8 consecutive
// vec4s, no bank conflicts). K in steps of 32. Integer sums per group, then one f32
// multiply-add by both scales. The K-quants flush every 32 values: the AFFINE formats
// (unsigned q, value = a q - b) subtract b times the integer sum of the activations; q6k (q - 32
// signed, an int8 scale per 16 values) and q3k (q - 4 signed, likewise) weight each half's
// integer sums in f32 by d times its scale; q2k by d times its 4-bit scale, and takes
// dmin * min * sum(x) off each half.
// Split K (SPLIT, where few column tiles leave SMs idle): workgroup z sums K values
// [z * kslice, (z + 1) * kslice) and writes its raw sums to y as [slices][M][N];
// gemm_combine adds the slices and finishes the outputs.
override SPLIT: bool = false;
var<workgroup> as_: array<vec4<u32>, 128>;  // [8 words][BM / 4]
var<workgroup> bs_: array<vec4<u32>, 256>;  // [8 words][BN / 4], signed int8 quadruples
var<workgroup> sx: array<vec4<f32>, 16>;    // [BM / 4]
var<workgroup> sw: array<vec4<f32>, 32>;    // [BN / 4]
var<workgroup> smin: array<vec4<f32>, 32>;  // AFFINE: the group's min; q2k: dmin
var<workgroup> sk6: array<vec4<u32>, 32>;   // q6k, q3k, q2k: the two sub-block scales of the step, bytes 0 and 1

// The integer sums of a group (q4, q5, q8: at most 128 * 127 * 256) or a half group (q6k, q3k,
// q2k, before their sub-block scales: at most 16 * 127 * 32) stay within +-2^22: they start at
// the bits of the f32 1.5 * 2^23 and are read back as bitcast<f32>(sum) - 1.5 * 2^23, which is
// exact: a float add instead of the int-to-float conversion (a quarter-rate instruction on
// NVIDIA).
const I2F_BIAS: i32 = 0x4B400000;
fn acc_value(a: i32) -> f32 { return bitcast<f32>(a) - 12582912.0; }
// The thread's column j (< 8) of the tile.
fn gemm_col(tn: u32, j: u32) -> u32 { return (j / 4u) * (BN / 2u) + 4u * tn + j % 4u; }

// Stored nibbles (q + 8, one per byte) to signed bytes q: flip bit 3, then sign-extend it.
fn q4_to_i8(v: u32) -> u32 {
  let t = v ^ 0x08080808u;
  return t | ((t & 0x08080808u) * 0x1Eu);
}

// Bits 0, 2, 4, 6 of e to bit 4 of bytes 0..3 (q5k's fifth bits beside the nibble bytes).
fn spread5(e: u32) -> u32 {
  return ((e & 1u) << 4u) | ((e & 4u) << 10u) | ((e & 16u) << 16u) | ((e & 64u) << 22u);
}

// q3k's bytes q in 0..7 to signed bytes q - 4: flip bit 2, then sign-extend it.
fn q3_to_i8(v: u32) -> u32 {
  let t = v ^ 0x04040404u;
  return t | ((t & 0x04040404u) * 0x3Eu);
}

// Bytes q in 0..63 to signed bytes q - 32: flip bit 5, then sign-extend it.
fn q6_to_i8(v: u32) -> u32 {
  let t = v ^ 0x20202020u;
  return t | ((t & 0x20202020u) * 6u);
}

// Where a gemm workgroup's tile lies: rows i < live of the tile are x's rows m0 + i (the experts'
// gemm: the pairs gx_pair[i], x's row pair / ex_xdiv); its columns n0 + c are the weight's rows
// row0 + n0 + c (an expert's block), zeros from column nlim on.
struct GemmTile {
  m0: u32,
  live: u32,
  row0: u32,
  nlim: u32,
  ex: bool,
}
const GEMM_NONE: u32 = 0xFFFFFFFFu;
var<workgroup> gx_pair: array<u32, BM>;  // the experts' gemm: the tile's pairs

// Tile row i's row of x, GEMM_NONE past the live rows.
fn gemm_xrow(t: GemmTile, i: u32) -> u32 {
  if (i >= t.live) { return GEMM_NONE; }
  if (t.ex) { return gx_pair[i] / p.ex_xdiv; }
  return t.m0 + i;
}

// Tile row i's row of y (i < t.live).
fn gemm_yrow(t: GemmTile, i: u32) -> u32 {
  if (t.ex) { return gx_pair[i]; }
  return t.m0 + i;
}

// The global words of one K step, loaded a step ahead (gemm_fetch, issued before the current
// step's dot products so that their latency overlaps them) and decoded into workgroup memory at
// the top of the next step (gemm_store).
struct GemmStep {
  xw: array<u32, 2>,  // the thread's two words of the x tile
  bw: array<u32, 8>,  // its weight words, raw: [2e] and [2e + 1] per load e (see gemm_fetch)
  s: f32,             // lid < BM: the row's activation scale; BM <= lid < BM + BN: the column's
  mn: f32,            // AFFINE: the group's min; q2k: dmin
  k6: u32,            // q6k, q3k, q2k: the two sub-block scales of the step, bytes 0 and 1
}

// Loads e of the B tile (the weight) of step k0: per column 4 words of nibble pairs (4/5 bits,
// 2 loads per thread: the word, and for 5 bits the column's fifth-bit word) or 8 words (6, <= 3
// and 8 bits, 4 loads per thread: q6k's ql and qh, q2k/q3k's plane word and q3k's high bits).
fn b_column(lid: u32, e: u32) -> u32 { return (lid + WG * e) / select(8u, 4u, BITS == 4u || BITS == 5u); }
fn b_word(lid: u32, e: u32) -> u32 { return (lid + WG * e) % select(8u, 4u, BITS == 4u || BITS == 5u); }

// Load e of the B tile (the weight) of step k0: the raw words (lo, hi) of column
// n0 + b_column(lid, e) (zeros past the last row).
fn gemm_fetch_b(n0: u32, k0: u32, lid: u32, e: u32) -> vec2<u32> { return gemm_fetch_rows(n0, k0, lid, e, 0u, p.n); }

// gemm_fetch_b for the columns of weight rows row0 + n, zeros from column nlim on.
fn gemm_fetch_rows(n0: u32, k0: u32, lid: u32, e: u32, row0: u32, nlim: u32) -> vec2<u32> {
  let n = n0 + b_column(lid, e);
  let r = row0 + n;
  let w = b_word(lid, e);
  let rw = q_row_words();
  var lo = 0u;
  var hi = 0u;
  if (BITS == 4u || BITS == 5u) {
    lo = select(0x88888888u, 0u, AFFINE);  // zeros
    if (n < nlim) {
      lo = qw[r * rw + k0 / 8u + w];
      if (BITS == 5u) { hi = qw[r * rw + p.k / 8u + k0 / 32u] >> (8u * w); }
    }
  } else if (n < nlim) {
    if (BITS == 6u) {
      // Chunk c of the row: block c / 8, half h, quarter t (quant.h's Q6K, as in the gemv).
      let c = k0 / 32u;
      let base = r * rw + (c / 8u) * Q6K_WORDS;
      lo = qw[base + 16u * ((c / 4u) % 2u) + 8u * ((c % 4u) % 2u) + w];
      hi = qw[base + 32u + 8u * ((c / 4u) % 2u) + w];
    } else if (BITS <= 3u) {
      // The step's 32 values are plane words wq, wq + 1 of block k0 / 256; word w of the step
      // is plane w % 4 of word wq + w / 4 (values 4w .. 4w + 3).
      let base = r * rw + (k0 / 256u) * q23_block_words();
      let pw = (k0 % 256u) / 16u + w / 4u;
      lo = qw[base + pw];
      if (BITS == 3u) { hi = qw[base + 16u + pw / 2u]; }
    } else {
      lo = qw[r * rw + k0 / 4u + w];
    }
  }
  return vec2<u32>(lo, hi);
}

// Column n's factors for step k0 (n < p.n): s the scale (q6k, q3k: d; q2k: d), mn the min
// (AFFINE; q2k: dmin), k6 (q6k, q3k, q2k) the two sub-block scale bytes of the step, bytes 0, 1.
struct ColScale {
  s: f32,
  mn: f32,
  k6: u32,
}

fn gemm_col_scale(n: u32, k0: u32) -> ColScale {
  var c = ColScale(0.0, 0.0, 0u);
  if (BITS == 6u) {
    let ch = k0 / 32u;
    c.s = scale_at(n * (p.k / 256u) + ch / 8u);
    let j = 8u * ((ch / 4u) % 2u) + 2u * (ch % 4u);  // the scale of the chunk's first 16 values
    c.k6 = qw[n * q_row_words() + (ch / 8u) * Q6K_WORDS + 48u + j / 4u] >> (8u * (j % 4u));
  } else if (BITS <= 3u) {
    // The step's two sub-blocks' scale bytes (q2k scale | min << 4, q3k int8) in bytes 0, 1.
    let blk = n * (p.k / 256u) + k0 / 256u;
    let j = (k0 % 256u) / 16u;
    c.k6 = qw[n * q_row_words() + (k0 / 256u) * q23_block_words() + select(16u, 24u, BITS == 3u) + j / 4u] >>
           (8u * (j % 4u));
    if (BITS == 3u) {
      c.s = scale_at(blk);
    } else {
      let dm = unpack2x16float(sc[blk]);
      c.s = dm.x;
      c.mn = dm.y;
    }
  } else {
    let f = gv_affine(n, k0);
    c.s = f.x;
    c.mn = f.y;
  }
  return c;
}

fn gemm_fetch(t: GemmTile, n0: u32, k0: u32, lid: u32) -> GemmStep {
  var st: GemmStep;
  let k4 = p.k / 4u;
  for (var e = 0u; e < 2u; e++) {
    let idx = lid + WG * e;
    let xr = gemm_xrow(t, idx / 8u);
    st.xw[e] = 0u;
    if (xr != GEMM_NONE) { st.xw[e] = xq[xr * k4 + k0 / 4u + idx % 8u]; }
  }
  let loads = select(4u, 2u, BITS == 4u || BITS == 5u);
  for (var e = 0u; e < loads; e++) {
    let b = gemm_fetch_rows(n0, k0, lid, e, t.row0, t.nlim);
    st.bw[2u * e] = b.x;
    st.bw[2u * e + 1u] = b.y;
  }
  st.s = 0.0;
  st.mn = 0.0;
  st.k6 = 0u;
  if (lid < BM) {
    let xr = gemm_xrow(t, lid);
    if (xr != GEMM_NONE) { st.s = xs[xr * (p.k / p.gs) + k0 / p.gs]; }
  } else if (lid < BM + BN) {
    let n = n0 + lid - BM;
    if (n < t.nlim) {
      let c = gemm_col_scale(t.row0 + n, k0);
      st.s = c.s;
      st.mn = c.mn;
      st.k6 = c.k6;
    }
  }
  return st;
}

// The int8 words of load e (raw words v, h of word w of its column, `live` inside the weight):
// for 4 and 5 bits (lo, hi) hold k = 8w + 0, 2, 4, 6 and 8w + 1, 3, 5, 7 (quantize_act's order),
// else (q, 0) holds k = 4w .. 4w + 3. Signed bytes, or unsigned for AFFINE.
fn gemm_qwords(v: u32, h: u32, live: bool, w: u32, k0: u32) -> vec2<u32> {
  if (BITS == 4u || BITS == 5u) {
    var lo = v & 0x0F0F0F0Fu;
    var hi = (v >> 4u) & 0x0F0F0F0Fu;
    if (NL) {
      lo = nl_bytes(lo);
      hi = nl_bytes(hi);
    } else if (!AFFINE) {
      lo = q4_to_i8(lo);
      hi = q4_to_i8(hi);
    }
    if (BITS == 5u) {
      lo |= spread5(h & 0x55u);
      hi |= spread5((h >> 1u) & 0x55u);
    }
    return vec2<u32>(lo, hi);
  }
  var q = 0u;
  if (live) {
    if (BITS == 6u) {
      let t = (k0 / 32u) % 4u;
      q = q6_to_i8(((v >> (4u * (t / 2u))) & 0x0F0F0F0Fu) | (((h >> (2u * t)) & 0x03030303u) << 4u));
    } else if (BITS <= 3u) {
      let pw = (k0 % 256u) / 16u + w / 4u;
      let s2 = w % 4u;
      q = (v >> (2u * s2)) & 0x03030303u;
      if (BITS == 3u) { q = q3_to_i8(q | (((h >> (4u * (pw % 2u) + s2)) & 0x01010101u) << 2u)); }
    } else {
      q = v;
    }
  }
  return vec2<u32>(q, 0u);
}

// Step k0's words (fetched by gemm_fetch) into as_, bs_ (int8 quadruples) and the scales.
fn gemm_store(st: GemmStep, n0: u32, nlim: u32, k0: u32, lid: u32) {
  for (var e = 0u; e < 2u; e++) {
    let idx = lid + WG * e;
    let a = (idx % 8u) * BM + idx / 8u;  // word idx % 8 of row idx / 8
    as_[a / 4u][a % 4u] = st.xw[e];
  }
  let loads = select(4u, 2u, BITS == 4u || BITS == 5u);
  for (var e = 0u; e < loads; e++) {
    let nn = b_column(lid, e);
    let w = b_word(lid, e);
    let q = gemm_qwords(st.bw[2u * e], st.bw[2u * e + 1u], n0 + nn < nlim, w, k0);
    if (BITS == 4u || BITS == 5u) {
      bs_[((2u * w) * BN + nn) / 4u][nn % 4u] = q.x;
      bs_[((2u * w + 1u) * BN + nn) / 4u][nn % 4u] = q.y;
    } else {
      bs_[(w * BN + nn) / 4u][nn % 4u] = q.x;
    }
  }
  if (lid < BM) {
    sx[lid / 4u][lid % 4u] = st.s;
  } else if (lid < BM + BN) {
    let c = lid - BM;
    sw[c / 4u][c % 4u] = st.s;
    smin[c / 4u][c % 4u] = st.mn;
    sk6[c / 4u][c % 4u] = st.k6;
  }
}

// Word kw of the step: the thread's 4 x 8 integer dots (AFFINE: and its rows' activation sums).
fn gemm_word(kw: u32, tm: u32, tn: u32, acc: ptr<function, array<array<i32, 8>, 4>>,
             xsum: ptr<function, array<i32, 4>>) {
  let a = as_[kw * (BM / 4u) + tm];
  let b0 = bs_[kw * (BN / 4u) + tn];
  let b1 = bs_[kw * (BN / 4u) + BN / 8u + tn];
  let b = array<u32, 8>(b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w);
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 8u; j++) { (*acc)[i][j] += dot4I8Packed(a[i], b[j]); }
    if (AFFINE || BITS == 2u) { (*xsum)[i] += dot4I8Packed(a[i], 0x01010101u); }
  }
}

fn i8_at(w: u32, byte: u32) -> i32 { return (bitcast<i32>(w << (24u - 8u * byte))) >> 24u; }

// The thread's 8 columns' values of a [BN / 4] vec4 array (sw, smin).
fn cols8(v0: vec4<f32>, v1: vec4<f32>) -> array<f32, 8> {
  return array<f32, 8>(v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w);
}

// The tile t's outputs at columns n0.., K slice z.
fn gemm_tile(t: GemmTile, n0: u32, z: u32, lid: u32) {
  let tn = lid % 16u;
  let tm = lid / 16u;
  let k_begin = z * p.kslice;
  let k_end = min(p.k, k_begin + p.kslice);
  var acci: array<array<i32, 8>, 4>;
  var accf: array<array<f32, 8>, 4>;
  var xsum: array<i32, 4>;  // AFFINE: the activations' integer sums of the group
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 8u; j++) { acci[i][j] = I2F_BIAS; }
  }
  nl_grid_load(lid, WG);
  if (NL) { workgroupBarrier(); }
  var st = gemm_fetch(t, n0, k_begin, lid);
  for (var k0 = k_begin; k0 < k_end; k0 += 32u) {
    gemm_store(st, n0, t.nlim, k0, lid);
    workgroupBarrier();
    if (k0 + 32u < k_end) { st = gemm_fetch(t, n0, k0 + 32u, lid); }
    if (BITS == 6u || BITS <= 3u) {
      // Two halves of 16 values, each weighted in f32 by d times its column's int8 scale (q2k:
      // its 4-bit scale, and its 4-bit min times the half's activation sums xh taken off).
      // (part is reset explicitly: a declaration inside the loop was not re-zeroed on lavapipe.)
      var part: array<array<i32, 8>, 4>;
      var xh: array<i32, 4>;
      let sk = array<u32, 8>(sk6[tn].x, sk6[tn].y, sk6[tn].z, sk6[tn].w, sk6[BN / 8u + tn].x,
                             sk6[BN / 8u + tn].y, sk6[BN / 8u + tn].z, sk6[BN / 8u + tn].w);
      let sxv = sx[tm];
      let swv = cols8(sw[tn], sw[BN / 8u + tn]);
      let mins = cols8(smin[tn], smin[BN / 8u + tn]);
      for (var hf = 0u; hf < 2u; hf++) {
        for (var i = 0u; i < 4u; i++) {
          for (var j = 0u; j < 8u; j++) { part[i][j] = I2F_BIAS; }
          xh[i] = 0;
        }
        for (var kw = 4u * hf; kw < 4u * hf + 4u; kw++) { gemm_word(kw, tm, tn, &part, &xh); }
        for (var j = 0u; j < 8u; j++) {
          let s6 = select(i8_at(sk[j], hf), i32((sk[j] >> (8u * hf)) & 15u), BITS == 2u);
          let w = swv[j] * f32(s6);
          for (var i = 0u; i < 4u; i++) { accf[i][j] = fma(acc_value(part[i][j]), sxv[i] * w, accf[i][j]); }
          if (BITS == 2u) {
            let mn = f32((sk[j] >> (8u * hf + 4u)) & 15u) * mins[j];
            for (var i = 0u; i < 4u; i++) { accf[i][j] -= sxv[i] * mn * f32(xh[i]); }
          }
        }
      }
    } else {
      for (var kw = 0u; kw < 8u; kw++) { gemm_word(kw, tm, tn, &acci, &xsum); }
    }
    if (BITS != 6u && BITS > 3u && (k0 + 32u) % p.gs == 0u) {  // q6k, q3k, q2k took theirs per half
      let sxv = sx[tm];
      let swv = cols8(sw[tn], sw[BN / 8u + tn]);
      let mins = cols8(smin[tn], smin[BN / 8u + tn]);
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 8u; j++) {
          if (AFFINE) {
            accf[i][j] += sxv[i] * fma(acc_value(acci[i][j]), swv[j], -f32(xsum[i]) * mins[j]);
          } else {
            accf[i][j] = fma(acc_value(acci[i][j]), sxv[i] * swv[j], accf[i][j]);
          }
          acci[i][j] = I2F_BIAS;
        }
        xsum[i] = 0;
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    if (4u * tm + i >= t.live) { continue; }
    let m = gemm_yrow(t, 4u * tm + i);
    for (var j = 0u; j < 8u; j++) {
      let n = n0 + gemm_col(tn, j);
      if (n >= t.nlim) { continue; }
      if (SPLIT) {
        y[(z * p.m + m) * p.n + n] = accf[i][j];
      } else {
        y[m * p.ld + p.y_off + n] = finish_mn(accf[i][j], m, n);
      }
    }
  }
}

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let m0 = wid.y * BM;
  gemm_tile(GemmTile(m0, select(0u, p.m - m0, p.m > m0), 0u, p.n, false), wid.x * BN, wid.z, lid);
}

// ---- the experts' grouped gemm (linear_q_experts.cpp's gemm route, after moe_sort) ----------
// A workgroup per (column tile, entry of moe_sort's tile list): the entry's rows are pairs of one
// expert, x's row of pair j is j / p.ex_xdiv and y's row is j (p.ld = p.ex_n); the columns are
// the expert's block of p.ex_n weight rows (p.n is all experts' rows, for the scales' regions).
// Entries of 0 rows (past the list's end) return at once.
@group(0) @binding(21) var<storage, read> gx_order: array<u32>;         // moe_sort's pairs by expert
@group(0) @binding(22) var<storage, read> gx_tiles: array<vec4<u32>>;  // (expert, first, rows, 0)

@compute @workgroup_size(WG)
fn gemm_experts(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tile = gx_tiles[wid.y];
  if (tile.z == 0u) { return; }  // the whole workgroup: barriers stay uniform
  if (lid < tile.z) { gx_pair[lid] = gx_order[tile.y + lid]; }
  workgroupBarrier();
  gemm_tile(GemmTile(0u, tile.z, tile.x * p.ex_n, p.ex_n, true), wid.x * BN, 0u, lid);
}

// ---- split K's sums (gemm route, after a SPLIT gemm) -------------------------------------
// One thread per 4 outputs: the slices' sums of (m, n .. n + 3), read from x4 (the gemm's
// [slices][M][N] scratch; N a multiple of 4), finished into y.
@compute @workgroup_size(64)
fn gemm_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 64u + lid;
  let n4 = p.n / 4u;
  if (i >= p.m * n4) { return; }
  let slices = (p.k + p.kslice - 1u) / p.kslice;
  var v = vec4<f32>(0.0);
  for (var s = 0u; s < slices; s++) { v += x4[s * p.m * n4 + i]; }
  let m = i / n4;
  let n = 4u * (i % n4);
  for (var c = 0u; c < 4u; c++) { y[m * p.ld + p.y_off + n + c] = finish_mn(v[c], m, n + c); }
}
