// A part (gpu/pipeline.h, `//! use iq4_grid`): the grid of iq4_nl and iq4_xs, ggml's 16
// non-linear 4-bit values, indexed by the stored nibble (ops/quant/quant.h kIq4Values; a test
// compares the two).
const IQ4_GRID = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

// The grid as kernels read it, by a nibble known only at run time: in workgroup memory (16 words
// on 16 banks, so a warp's lookups do not conflict). A copy in private or function memory would
// be placed in local memory on NVIDIA, where it held the gemv to 3.5% of the read peak
// (docs/PERFORMANCE.md). Every entry point that reads iq4_f calls iq4_grid_load first, then
// passes a barrier before its first read; wg: its workgroup size.
var<workgroup> iq4_f: array<f32, 16>;

fn iq4_grid_load(lid: u32, wg: u32) {
  for (var i = lid; i < 16u; i += wg) { iq4_f[i] = IQ4_GRID[i]; }
}
