// Embedding lookup: out[t, d] = table[ids[t], d] as f32; ids >= vocab give zeros.
// One thread per output value; one entry point per table type.
// A table split by rows (past the storage binding limit) runs one kernel per part, in order:
// each writes the tokens whose rows it holds, the first also zeros for every other token (the
// later parts overwrite theirs).
//! use iq4_grid
struct Params {
  n_tokens: u32,
  dim: u32,
  vocab: u32,  // this part's rows
  gs: u32,
  row0: u32,   // the part's first row of the whole table
  first: u32,  // 1 for the first part
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> ids: array<u32>;
@group(0) @binding(1) var<storage, read> tf32: array<f32>;
@group(0) @binding(2) var<storage, read> tw: array<u32>;  // f16 pairs, or quantized words
@group(0) @binding(3) var<storage, read> sc: array<u32>;  // f16 scales, pairs
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;


fn half_at(i: u32) -> f32 {
  let h = unpack2x16float(tw[i >> 1u]);
  return select(h.x, h.y, (i & 1u) == 1u);
}

fn scale_at(i: u32) -> f32 {
  let h = unpack2x16float(sc[i >> 1u]);
  return select(h.x, h.y, (i & 1u) == 1u);
}

// What a thread writes: output value i (dimension d of token i / dim) from row `row` of this
// part's table. A token whose id is outside the part (below row0 it wraps past vocab) reads
// row 0 of it and writes 0 (inside false), in the first part only (write false in the others).
struct Slot {
  i: u32,
  d: u32,
  row: u32,
  inside: bool,
  write: bool,
}

fn slot(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> Slot {
  let i = (wid.x + wid.y * nwg.x) * WG + lid;
  if (i >= p.n_tokens * p.dim) { return Slot(0u, 0u, 0u, false, false); }
  let id = ids[i / p.dim] - p.row0;
  let inside = id < p.vocab;
  return Slot(i, i % p.dim, select(0u, id, inside), inside, inside || p.first != 0u);
}

fn store(s: Slot, v: f32) { out[s.i] = select(0.0, v, s.inside); }

@compute @workgroup_size(WG)
fn emb_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, tf32[s.row * p.dim + s.d]); }
}

@compute @workgroup_size(WG)
fn emb_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, half_at(s.row * p.dim + s.d)); }
}

fn q8_value(id: u32, d: u32) -> f32 {
  let e = id * p.dim + d;
  let q = unpack4xI8(tw[e / 4u])[e % 4u];
  return f32(q) * scale_at(id * (p.dim / p.gs) + d / p.gs);
}

@compute @workgroup_size(WG)
fn emb_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, q8_value(s.row, s.d)); }
}

fn q4_value(id: u32, d: u32) -> f32 {
  let e = id * p.dim + d;
  let q = i32((tw[e / 8u] >> (4u * (e % 8u))) & 15u) - 8;
  return f32(q) * scale_at(id * (p.dim / p.gs) + d / p.gs);
}

@compute @workgroup_size(WG)
fn emb_q4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, q4_value(s.row, s.d)); }
}

// q6k (quant.h): 52 words per 256 values, d per block in sc. Element e = 128 h + 32 t + l of
// its block: q = ql[64 h + 32 (t % 2) + l] nibble (t / 2) | qh[32 h + l] bits 2t..2t+1 << 4,
// value = d * scales[8 h + 2 t + l / 16] * (q - 32) (ggml's Q6_K).
fn byte_at(word: u32, byte: u32) -> u32 { return (tw[word + byte / 4u] >> (8u * (byte % 4u))) & 0xFFu; }

fn q6k_value(id: u32, d: u32) -> f32 {
  let block = id * (p.dim / 256u) + d / 256u;
  let w0 = block * 52u;
  let e = d % 256u;
  let h = e / 128u;
  let t = (e / 32u) % 4u;
  let l = e % 32u;
  let ql = (byte_at(w0, 64u * h + 32u * (t % 2u) + l) >> (4u * (t / 2u))) & 15u;
  let qh = (byte_at(w0 + 32u, 32u * h + l) >> (2u * t)) & 3u;
  let s = f32(bitcast<i32>(byte_at(w0 + 48u, 8u * h + 2u * t + l / 16u) << 24u) >> 24u);
  return scale_at(block) * s * f32(i32(ql | (qh << 4u)) - 32);
}

@compute @workgroup_size(WG)
fn emb_q6k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, q6k_value(s.row, s.d)); }
}

// q4k / q5k (quant.h): nibble words, q5k's fifth bits after them in each row, and per block
// (d, dmin) in region A of sc, the 6-bit scales and mins in region B:
// value = d * scale[j] * q - dmin * min[j], j = (element % 256) / 32.
fn kq_value(id: u32, d: u32, q5: bool) -> f32 {
  let rw = select(p.dim / 8u, p.dim / 8u + p.dim / 32u, q5);
  var q = (tw[id * rw + d / 8u] >> (4u * (d % 8u))) & 15u;
  if (q5) { q |= ((tw[id * rw + p.dim / 8u + d / 32u] >> (d % 32u)) & 1u) << 4u; }
  let block = id * (p.dim / 256u) + d / 256u;
  let dm = unpack2x16float(sc[block]);
  let j = (d % 256u) / 32u;
  let w = ((p.vocab * (p.dim / 256u) + 3u) / 4u) * 4u + 4u * block + j / 4u;
  let sh = 8u * (j % 4u);
  return dm.x * f32((sc[w] >> sh) & 0xFFu) * f32(q) - dm.y * f32((sc[w + 2u] >> sh) & 0xFFu);
}

@compute @workgroup_size(WG)
fn emb_q4k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, kq_value(s.row, s.d, false)); }
}

@compute @workgroup_size(WG)
fn emb_q5k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, kq_value(s.row, s.d, true)); }
}

// q4_1 / q5_0 / q5_1 / iq4_nl (quant.h): nibble words, then (q5_x) the fifth-bit words, padded
// to a multiple of 4 in each row; per group of 32 an f16 d (q5_0: value = d * (q - 16); iq4_nl:
// d * grid[q]) or a (d, m) word (value = d * q + m).
fn legacy_value(id: u32, d: u32, five: bool, dm: bool, nl: bool) -> f32 {
  let rw = select(p.dim / 8u, p.dim / 8u + (p.dim / 32u + 3u) / 4u * 4u, five);
  var q = (tw[id * rw + d / 8u] >> (4u * (d % 8u))) & 15u;
  if (five) { q |= ((tw[id * rw + p.dim / 8u + d / 32u] >> (d % 32u)) & 1u) << 4u; }
  let g = id * (p.dim / 32u) + d / 32u;
  if (dm) {
    let f = unpack2x16float(sc[g]);
    return f.x * f32(q) + f.y;
  }
  if (nl) { return scale_at(g) * iq4_f[q]; }
  return scale_at(g) * f32(i32(q) - 16);
}

@compute @workgroup_size(WG)
fn emb_q4_1(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, legacy_value(s.row, s.d, false, true, false)); }
}

@compute @workgroup_size(WG)
fn emb_q5_0(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, legacy_value(s.row, s.d, true, false, false)); }
}

@compute @workgroup_size(WG)
fn emb_q5_1(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, legacy_value(s.row, s.d, true, true, false)); }
}

@compute @workgroup_size(WG)
fn emb_iq4_nl(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  iq4_grid_load(lid, WG);
  workgroupBarrier();
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, legacy_value(s.row, s.d, false, false, true)); }
}

// iq4_xs (quant.h): nibble words indexing the grid, per block two words: f16 d | scales_h << 16
// and scales_l; value = d * (ls - 32) * grid[nibble].

fn iq4_xs_value(id: u32, d: u32) -> f32 {
  let q = (tw[id * (p.dim / 8u) + d / 8u] >> (4u * (d % 8u))) & 15u;
  let b = id * (p.dim / 256u) + d / 256u;
  let j = (d % 256u) / 32u;
  let w0 = sc[2u * b];
  let ls = ((sc[2u * b + 1u] >> (4u * j)) & 15u) | (((w0 >> (16u + 2u * j)) & 3u) << 4u);
  return unpack2x16float(w0).x * f32(i32(ls) - 32) * iq4_f[q];
}

@compute @workgroup_size(WG)
fn emb_iq4_xs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  iq4_grid_load(lid, WG);
  workgroupBarrier();
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, iq4_xs_value(s.row, s.d)); }
}

// q2k / q3k (quant.h): element e of a block is byte e % 4, bits 2 ((e % 16) / 4) of plane word
// e / 16; q3k's third bit is bit 8 (e % 4) + 4 ((e / 16) % 2) + (e % 16) / 4 of word 16 + e / 32.
// Sub-block e / 16's scale byte follows (q2k scale | min << 4, with (d, dmin) in sc; q3k int8,
// with d an f16 in sc): value = d * scale * q - dmin * min, or d * scale * (q - 4).
fn q23_value(id: u32, d: u32, q3: bool) -> f32 {
  let blk = id * (p.dim / 256u) + d / 256u;
  let w0 = blk * select(20u, 28u, q3);
  let e = d % 256u;
  var q = (tw[w0 + e / 16u] >> (8u * (e % 4u) + 2u * ((e % 16u) / 4u))) & 3u;
  let sb = byte_at(w0 + select(16u, 24u, q3), e / 16u);
  if (q3) {
    q |= ((tw[w0 + 16u + e / 32u] >> (8u * (e % 4u) + 4u * ((e / 16u) % 2u) + (e % 16u) / 4u)) & 1u) << 2u;
    return scale_at(blk) * f32(bitcast<i32>(sb << 24u) >> 24u) * f32(i32(q) - 4);
  }
  let dm = unpack2x16float(sc[blk]);
  return dm.x * f32(sb & 15u) * f32(q) - dm.y * f32(sb >> 4u);
}

@compute @workgroup_size(WG)
fn emb_q2k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, q23_value(s.row, s.d, false)); }
}

@compute @workgroup_size(WG)
fn emb_q3k(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  let s = slot(wid, nwg, lid);
  if (s.write) { store(s, q23_value(s.row, s.d, true)); }
}
