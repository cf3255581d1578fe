// A part (gpu/pipeline.h, `//! use iq4_grid`): the grid of iq4_nl and iq4_xs, ggml's 16
// non-linear 4-bit values, indexed by the stored nibble (ops/quant/quant.h kIq4Values; a test
// compares the two).
const IQ4_GRID = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// The grid as kernels read it, by a nibble known only at run time: in workgroup memory (16 words
// on 16 banks, so a warp's lookups do not conflict). A copy in private or function memory would
// be placed in local memory on NVIDIA, where it held the gemv to 3.5% of the read peak
// (docs/perf/2026-12-05.md, "The peer table at a768ed6"). Every entry point that reads iq4_f calls iq4_grid_load first, then
// passes a barrier before its first read; wg: its workgroup size.
var<workgroup> iq4_f: array<f32, 16>;

fn iq4_grid_load(lid: u32, wg: u32) {
  for (var i = lid; i < 16u; i += wg) { iq4_f[i] = IQ4_GRID[i]; }
}

// The grid for int8 dot products, by byte: entry b holds the int8 grid value of b's low nibble
// in bits 0..7 and that of its high nibble in bits 16..23, so two entries shifted and or-ed
// give a word's low-nibble values and its high-nibble values (iq4_bytes). Half the lookups of
// one per nibble. Loaded by iq4_pair_load, read after a barrier as iq4_f is.
var<workgroup> iq4_pair: array<u32, 256>;

fn iq4_byte(q: u32) -> u32 { return bitcast<u32>(i32(IQ4_GRID[q])) & 0xFFu; }

fn iq4_pair_load(lid: u32, wg: u32) {
  for (var b = lid; b < 256u; b += wg) { iq4_pair[b] = iq4_byte(b & 15u) | (iq4_byte(b >> 4u) << 16u); }
}

// The nibble word w (nibble i: value i of 8) as int8 grid values: x = values 0, 2, 4, 6 (the
// low nibbles), y = values 1, 3, 5, 7, the order i4_dot's staged x takes them in.
fn iq4_bytes(w: u32) -> vec2<u32> {
  let a = iq4_pair[w & 0xFFu] | (iq4_pair[(w >> 8u) & 0xFFu] << 8u);
  let b = iq4_pair[(w >> 16u) & 0xFFu] | (iq4_pair[w >> 24u] << 8u);
  return vec2<u32>((a & 0xFFFFu) | (b << 16u), (a >> 16u) | (b & 0xFFFF0000u));
}
