// A part (gpu/pipeline.h, `//! use iq4_grid`): the grid of iq4_nl and iq4_xs, ggml's 16
// non-linear 4-bit values, indexed by the stored nibble (ops/quant/quant.h kIq4Values; a test
// compares the two).
const IQ4_GRID = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0,
                                1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
