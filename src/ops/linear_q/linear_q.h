// linear with quantized weights (q4gsw, q8, the K-quants q2k, q3k, q4k, q5k, q6k, iq4_xs and
// q4_1, q5_0, q5_1, iq4_nl read in their GGUF blocks; ops/quant/quant.h has the layouts):
//   y[m, n] = sum_k x[m, k] * value(n, k) (+ bias[n]) (+ residual[m, n])
// Every format is value = scale * q - min per group of 32 (or 16: q2k, q3k, q6k), q a small integer:
// the kernels take the integer dot and apply both factors once per group.
// Routes on x's live rows (n_tokens):
//   [1, F-1]  gemv      (every row count with last_row) 16 rows per workgroup, 4 row sets of 8-64 lanes along K reduced by
//                       subgroup shuffles; vec4<u32> weight loads; x staged in workgroup memory
//                       once per workgroup and turn (coalesced), each read serving 4 rows; on
//                       GPUs x is quantized to int8 per 32 values as it is staged and the rows
//                       take dot4I8Packed (gemv_takes_int8), elsewhere f32 activations. Past
//                       one row of x: a workgroup per (16 weight rows, row of x), a tile's
//                       workgroups adjacent in dispatch order
//   [2, F-1]  gemv_multi (where the gemv takes int8 x and gemv_x_rows() > 1: GPUs) the gemv's
//                       kernels with X = gemv_x_rows() rows of x per workgroup: it quantizes and
//                       stages X rows side by side, unpacks each lane's weight chunk once to int8
//                       bytes and takes it against all X (norm, swiglu, rope and residual in the
//                       kernel as in the gemv). Formats gemv_m_takes(); the others' parts run
//                       the gemv's kernel per row of x. Then the gemv serves [1, 1] alone
//   [2, max]  gemv_last (last_row with xq_in: the output head) the gemv's kernels on the last row
//                       of x, staged; then the gemv serves [1, 1] alone, reading x quantized ahead
//   [F, G]    gemv_m    (F = gemv_m_from(): 2 on CPU drivers and for weights past 16,384 rows,
//                       else none; WGRT_GEMV_M_FROM sets it) x RMS-normalized by
//                       rms_norm where `norm`, quantized to int8 once by `quantize_act`, then a
//                       workgroup per 16 weight rows takes up to gemv_m_block() rows of x: each
//                       weight chunk is loaded and unpacked once and serves them all (dot4I8Packed);
//                       swiglu in its epilogue, rope by rope_qkv after. Formats gemv_m_takes();
//                       the others' parts run the gemv kernel per (16 rows, row of x) on the
//                       normalized x
//   [G+1, 7]  small_m   f32 activations, one u32 word (8 or 4 values) per step for all live rows
//                       (q6k has no small_m kernel: its weights take the gemm's kernels here);
//                       only where G < 7
//   [G+1, max] gemm     (from 8 where G < 7) `quantize_act` turns each x row into int8 with one f32 scale per (row,
//                       group of gs; 32 for the K-quants), then `gemm` multiplies int8 x int8
//                       with dot4I8Packed (64 x 128 tile per workgroup), scaling per group in f32;
//                       weights of few rows split K over up to 8 workgroups and `gemm_combine`
//                       adds the slices (gemm_split_max_n, gemm_kslice)
// Several weights (LinearQDesc::more) share one output: one kernel per weight in every route,
// each writing its columns (y_off, ld), the norm and the int8 activations done once.
// Fusions (LinearQDesc), spelled out by the builders:
//   norm      x is RMS-normalized by `norm` first: inside the gemv (every workgroup recomputes
//             the row's sum of squares), as an rms_norm kernel ahead of the other routes
//   residual  added in every route's epilogue
//   swiglu    the weight's rows are (gate, up) pairs interleaved in blocks of 16 rows
//             (interleave_swiglu_rows); y = silu(gate) * up has N/2 columns: in the gemv's
//             epilogue, as a silu_mul kernel after the other routes
//   argmax    (with last_row) the gemv also reduces each workgroup's best logit, and sampling's
//             argmax_final picks the row's argmax into `argmax_out` ([1] u32)
//   last_row  only x's last live row is projected: y is [1, N] for any n_tokens (the output
//             head); the gemv route serves every n_tokens (with xq_in: gemv and gemv_last)
//   rope      the weight is q|k|v (rope.h RopeQkv): y is the rotated q [M, n_heads * head_dim],
//             k and v go rotated into the caches at pos + row. In the gemv's epilogue
//             (gemv_rope: normal layout, devices with 9 storage buffers per stage), elsewhere
//             rope_qkv after the matrix kernels (q|k|v in the node's scratch). With RopeQkv::rows
//             (a step of several sequences) the positions and cache rows come from the table:
//             in the gemv's epilogue gemv_rope_rows (10 storage buffers), else in rope_qkv
// The GEMM's result differs from f32 math by the activation rounding: at most
// absmax(x in group) / 254 per activation (tests/ops/linear_q_test.cpp bounds it exactly).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/quant/quant.h"
#include "ops/rope/rope.h"
#include "ops/silu_mul/silu_mul.h"

namespace wgrt::ops {

// A further weight whose rows continue y's columns (linear_q runs one kernel per weight, each
// writing its columns): q|k|v fused across formats, e.g. q and k in Q4_K with v in Q6_K.
struct LinearQPart {
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t gs = 32;
  graph::TensorId q, scales;
};

struct LinearQDesc {
  std::string name;        // node and output name, e.g. "ffn_down.3"
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t gs = 32;        // group size along K: 32, 64 or 128 (q4k/q5k/q4_1/q5_x 32, q2k/q3k/q6k 256)
  graph::TensorId x;       // [M, K] f32, M may vary
  graph::TensorId q;       // u32 [N, quant_row_words]
  graph::TensorId scales;  // f16 [N, K/gs]; q4k/q5k: u32 [kq_scale_words]; q4_1/q5_1: u32 [N, K/32]
  std::optional<graph::TensorId> bias;  // [N] f32
  std::optional<graph::TensorId> norm;  // [K] f32 RMS-norm weight applied to x first
  float eps = 1e-5f;                    // of the norm
  std::optional<graph::TensorId> residual;  // [M, N] f32 added to y
  bool swiglu = false;                  // y = act(gate) * up over interleaved row pairs: [M, N/2]
  GateAct act = GateAct::Silu;          // swiglu's act: SiLU, or GELU (tanh; GeGLU)
  bool last_row = false;                // y = the last live row's projection, [1, N]
  std::optional<graph::TensorId> argmax_out;  // [1] u32 (State or Intermediate); needs last_row
  std::vector<LinearQPart> more;        // further weights: y = [x w^T | x more[0]^T | ...]; no swiglu
  std::optional<RopeQkv> rope;          // y = rotated q of q|k|v, k and v to the caches; no swiglu/last_row/residual
  uint32_t gemv_lanes = 0;              // gemv lanes along K: 8, 16, 32, 64; 0: the device's (linear_q.cpp)
  int gemv_int8 = -1;                   // gemv with int8 x (XI8): 1 on, 0 off (no gemv_m either), -1 the device's
  uint32_t gemv_x = 0;                  // rows of x per gemv_multi workgroup (1: no gemv_multi); 0: gemv_x_rows()
  uint32_t gemv_m_from = 0;             // gemv_m's first row count (17: none); 0: gemv_m_from()
  // x quantized ahead (linear_q_gemv_i8.wgsl XQ_IN / XQ_OUT), for one row of x, where one gemv feeds the
  // next: the producer's gemv also writes its output as int8 blocks, `<name>.xq_ahead`
  // (linear_q_xq_words(N) u32; xq_norm: times the consumer's RMS-norm weight, [N]), and the
  // consumer's gemv reads its x from there (xq_in) where it can (linear_q_takes_xq) instead of
  // staging it (with last_row: at one row, gemv_last staging the last row of longer steps). The
  // producer's N is a multiple of 16, it has one weight and no rope or argmax.
  bool xq_out = false;
  std::optional<graph::TensorId> xq_norm;  // with xq_out; not with norm (both bind nw4)
  std::optional<graph::TensorId> xq_in;    // a producer's `<name>.xq_ahead`, of this node's x
};

graph::TensorId add_linear_q(graph::Graph& g, const LinearQDesc& d);

// A mixture-of-experts FFN's weight (ffn_{gate,up,down}_exps): E experts' blocks of n_expert rows
// in one weight [E * n_expert, K], GGUF's layout. For each live (token, slot) pair j (ids' live
// rows) y[j] = x[j / x_div] . (the rows of expert ids[j]): gate|up reads the token's row (x_div =
// the slots per token), down the pair's own (x_div = 1). Only the chosen experts' rows are read:
// a gemv workgroup per (16 of the expert's rows, pair), int8 x where the gemv takes it
// (gemv_takes_int8). swiglu: each expert's (gate, up) rows interleaved in blocks of 16
// (interleave_swiglu_rows over the flat rows keeps each expert's block), y [pairs, n_expert / 2].
struct LinearQExpertsDesc {
  std::string name;
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t gs = 32;
  graph::TensorId x;          // [tokens, K] (x_div = slots) or [pairs, K] (x_div = 1) f32
  graph::TensorId ids;        // u32 [pairs]: each pair's expert; its live rows are the pairs
  graph::TensorId q, scales;  // the weight's words and scales, [E * n_expert] rows
  uint32_t n_expert = 0;      // rows per expert
  uint32_t x_div = 1;
  bool swiglu = false;
  GateAct act = GateAct::Silu;
  uint32_t gemv_lanes = 0;  // as LinearQDesc's
  int gemv_int8 = -1;       // as LinearQDesc's
  // x RMS-normalized with this weight [K] inside the gemv (x_div > 1: the FFN's input rows).
  std::optional<graph::TensorId> norm;
  float eps = 1e-5f;
  // Steps of at least this many pairs take the grouped gemm (0: kExpertsGemmMinPairs, or
  // WGRT_EXPERTS_GEMM_FROM): moe_sort groups the pairs by expert on the GPU, then a gemm per
  // expert's rows reads its weights once per 64 pairs (linear_q_matrix.wgsl gemm_experts).
  uint32_t gemm_from = 0;
};
// Pairs from which the grouped gemm serves by default (a pair per expert on average at a
// router of 128 experts: fewer leave its 64-row tiles mostly empty).
inline constexpr uint32_t kExpertsGemmMinPairs = 128;
graph::TensorId add_linear_q_experts(graph::Graph& g, const LinearQExpertsDesc& d);
// gate|up (swiglu, x a row per token, x_div = the slots) with moe_route's choice made in the
// node (d.ids unset): for steps of at most kExpertsRoutedMaxTokens tokens each workgroup ranks
// its token's logits itself (linear_q_gemv_entries.wgsl gemv_experts_swiglu_route: no dispatch of
// its own), for longer ones a moe_route kernel runs first. Either way the node writes the
// pairs' experts and weights as moe_route does (route.name + ".ids" / ".weights"), for down and
// moe_combine; where the device's workgroup memory cannot hold the ranking, moe_route always.
struct MoeRouteDesc;
struct ExpertsRouted {
  graph::TensorId y, ids, weights;
};
inline constexpr uint32_t kExpertsRoutedMaxTokens = 4;
ExpertsRouted add_linear_q_experts_routed(graph::Graph& g, const LinearQExpertsDesc& d, const MoeRouteDesc& route);

// u32 words of an xq row of k values (xq_row.wgsl's layout): int8 values twice (natural and q4
// order), a (scale, sum) pair per 16 values and a sum of squares per 16.
constexpr uint32_t linear_q_xq_words(uint32_t k) { return k / 4 + k / 4 + k / 8 + k / 16; }
// The xq output of the node named `name` (LinearQDesc::xq_out).
graph::TensorId linear_q_xq(const graph::Graph& g, const std::string& name);
// Whether a one-row gemv of a weight of format f reads x quantized ahead on this device: with
// int8 x (gemv_takes_int8), for the formats whose rows read 32-value chunks (not q2k / q3k),
// where its gemv route serves one row only (GPUs, or gemv_multi forced). WGRT_GEMV_XQ=0 turns
// it off (to measure). forced_int8: LinearQDesc::gemv_int8.
bool linear_q_takes_xq(const gpu::DeviceCaps& caps, QuantFormat f, int forced_int8 = -1);

// Whether the gemvs take int8 activations on this device (XI8: x quantized per 32 values while
// staged, as the gemm's; every weight format has that route; the tests' references follow it).
// forced: LinearQDesc::gemv_int8.
bool gemv_takes_int8(const gpu::DeviceCaps& caps, int forced = -1);

// Weight tensors for a QuantWeight: adds `<name>.q` and `<name>.scales` (call before build,
// write with write_quant_weight after).
struct QuantTensors {
  graph::TensorId q, scales;
};
graph::DType scales_dtype(QuantFormat f);
graph::Shape scales_shape(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs);
QuantTensors add_quant_weight(graph::Graph& g, const std::string& name, QuantFormat f, uint32_t n,
                              uint32_t k, uint32_t gs);
void write_quant_weight(graph::Graph& g, const QuantTensors& t, const QuantWeight& w);

struct LinearQParams {
  uint32_t m, n, k, gs;  // n: this kernel's weight rows
  uint32_t has_bias;
  uint32_t x_row;  // gemv: the row of x it reads
  float eps;
  uint32_t y_off;  // the weight's first column of y (and of bias, residual)
  uint32_t ld;     // y's (and the residual's) row length
  uint32_t pos_sym;  // gemv_rope: the symbol block's index of pos (the first token's position)
  uint32_t n_ctx;  // gemv_rope: positions per cache head
  uint32_t kslice;  // gemm: K values per workgroup z (split K), k where it is not split
  uint32_t ex_n;     // gemv_experts: rows per expert (n: all experts' rows)
  uint32_t ex_xdiv;  // gemv_experts: (token, slot) pairs per row of x
  uint32_t ex_e;     // gemv_experts_swiglu_route: the router's experts
  uint32_t ex_norm;  // gemv_experts_swiglu_route: moe_route's norm
};
static_assert(sizeof(LinearQParams) == 64);
extern const ParamLayout kLinearQLayout;

struct LinearQInferCtx {
  graph::Shape x;
  uint32_t n, k;
};
graph::Shape infer_linear_q(const LinearQInferCtx& c);

// Route ids (graph/routes.h): gemv, small_m, gemm, gemv_m, gemv_multi, gemv_last, experts (the header's
// table says on which rows).
inline constexpr graph::RouteId kLinearQGemv{1}, kLinearQSmallM{2}, kLinearQGemm{3}, kLinearQGemvM{4},
    kLinearQGemvMulti{5}, kLinearQGemvLast{6}, kLinearQExperts{7}, kLinearQExpertsRouted{8}, kLinearQExpertsGemm{9};
// The rows of x the gemv routes serve (G): kLinearQGemvMaxRows, or WGRT_GEMV_MAX_M=1..16 (to
// measure); the first row count gemv_m takes (F) for a node of n weight rows on this device:
// kLinearQGemvMFrom or none (linear_q.cpp says where), or WGRT_GEMV_M_FROM=2..17 (17: never);
// never where LinearQDesc::gemv_int8 is 0 (gemv_m's activations are int8). Read when a node is
// added. The route a node (not last_row) of n rows takes for m rows of x.
constexpr uint32_t kLinearQGemvMaxRows = 16;
constexpr uint32_t kLinearQGemvMFrom = 2;
uint32_t gemv_max_rows();
uint32_t gemv_m_from(const gpu::DeviceCaps& caps, uint32_t n, int gemv_int8 = -1);
// Rows of x per gemv_m workgroup (past them a tile's workgroups take blocks of rows):
// kLinearQGemvMBlock, or WGRT_GEMV_M_BLOCK=1..16 (to measure).
constexpr uint32_t kLinearQGemvMBlock = 8;
uint32_t gemv_m_block();
// Rows of x per gemv_multi workgroup: `forced` (LinearQDesc::gemv_x), else WGRT_GEMV_X=1|2|4 (to
// measure; 1: no gemv_multi route), else kLinearQGemvX.
constexpr uint32_t kLinearQGemvX = 2;
uint32_t gemv_x_rows(uint32_t forced = 0);
// The route of m live rows for a node of n weight rows; gemv_int8, gemv_x and gemv_m_from as
// LinearQDesc's (what forcing them changes).
graph::RouteId linear_q_route(const gpu::DeviceCaps& caps, uint32_t n, uint32_t m, int gemv_int8 = -1,
                              uint32_t gemv_x = 0, uint32_t gemv_m_from = 0);
// Whether gemv_m's kernel reads weights of format f (every format but q2k, q3k, iq4_xs and iq4_nl).
bool gemv_m_takes(QuantFormat f);
// What a route's kernels are, in order: plan_linear_q fills each one's params and grid.
struct LinearQStep {
  enum Kind : uint8_t {
    Norm, QuantizeAct, Gemv, GemvMulti, GemvM, ArgmaxFinal, SmallM, Gemm, GemmCombine, SiluMul, RopeQkv
  } kind;
  uint32_t part;  // the weight it reads
};
struct LinearQPartPlan {
  uint32_t n, y_off;  // the weight's rows and first column of y
  bool split = false;  // its gemm splits K (gemm_split_max_n) and gemm_combine finishes it
  uint32_t gemv_x = 1;  // rows of x per workgroup of its gemv_multi kernel (1 where gemv_m_takes not)
  uint32_t mma_bm = 0;  // its gemm on matrix cores: the rows per workgroup (gemm_mma_bm), else 0
};
// The node's constants, built once; a plan call adds the live values (LinearQLive).
struct LinearQPlanCtx {
  uint32_t n, k, gs;  // n: all weights' rows; gs: the activation groups (32 for the K-quants)
  bool has_bias;
  bool norm = false;
  float eps = 0;
  bool swiglu = false;
  bool last_row = false;
  uint32_t gemv_m_block = kLinearQGemvMBlock;  // rows of x per gemv_m workgroup (its kernels' GM_M)
  uint32_t gemv_sets = 4;  // row sets per workgroup of the one-row gemv (8: swiglu writing xq)
  std::vector<LinearQPartPlan> parts;
  std::string name;                  // the node's (errors)
  std::optional<ops::RopeQkv> rope;  // and its caches
  RopeQkvCaches rope_caches;
};
struct LinearQLive {
  uint32_t m;  // live rows of x
  uint32_t max_groups_per_dim;
  int64_t pos = 0;  // with rope: rope_qkv_symbol's value (pos, or with rope->rows max_keys)
};
void plan_linear_q(const LinearQPlanCtx& c, const LinearQLive& live, std::span<const LinearQStep> steps,
                   graph::Plan& plan);

// Rows [N, ...] of a fused gate|up weight, from gate and up rows [ff, ...] (row_words u32 per
// row): blocks of 16 gate rows then the 16 matching up rows. ff must be a multiple of 16.
std::vector<uint32_t> interleave_swiglu_rows(std::span<const uint32_t> gate, std::span<const uint32_t> up,
                                             uint32_t ff, uint32_t row_words);

// Kernel tiles (GV_ROWS: linear_q_gemv.wgsl; BM, BN: linear_q_matrix.wgsl).
constexpr uint32_t kLinearQGemvRows = 16;  // rows per gemv workgroup at 4 sets (GV_ROWS: gemv_argmax's partials)
constexpr uint32_t kLinearQGemmBM = 64, kLinearQGemmBN = 128;  // linear_q_matrix.wgsl BM, BN
// Split K: weights of at most gemm_split_max_n() rows (4096, or WGRT_GEMM_SPLIT_N=0..65536; 0
// turns it off) split K where their tiles number fewer than kLinearQSplitTarget workgroups
// (about two per SM on a 132-SM GPU; WGRT_GEMM_SPLIT_WGS overrides): at most
// kLinearQSplitMax slices of at least kLinearQSplitMinK values. H200, M = 512 (lab, chain):
// 2048x512 2.7x, 4096x1024 2x, 2048x2048 1.08x faster than one slice (docs/perf/2026-12-02.md, "... vec4 fragments and split K").
constexpr uint32_t kLinearQSplitMax = 8, kLinearQSplitMinK = 256, kLinearQSplitTarget = 256;
uint32_t gemm_split_max_n();
// The K values per slice for m live rows of a split weight of n rows (k where one slice serves).
uint32_t gemm_kslice(uint32_t m, uint32_t n, uint32_t k, uint32_t gs);
constexpr uint32_t kLinearQSmallRows = 8;  // rows of the weight per small_m workgroup (x 32 threads)

// The gemm route on matrix cores (linear_q_mma.wgsl): where the device has subgroup matrices
// with an f16 x f16 -> f32 16 x 16 x 16 configuration, shader-f16, a subgroup size of exactly
// kLinearQMmaLanes and the kernel's workgroup memory (x and weight tiles as f16 rows of
// kLinearQMmaLd values, one 16 x 16 f32 result per subgroup), the gemm of every weight format can
// run there, for weights of kLinearQMmaMinN rows or more (gemm_mma_bm): by default
// (kLinearQMmaByDefault; the op suites pass on an H100 with it, and it is 1.2-1.4x the int8 gemm
// there, docs/PERFORMANCE.md), WGRT_MMA=0 keeps the int8 gemm. Its sums differ from f32 math by
// f16 rounding of x and of the decoded weights.
constexpr bool kLinearQMmaByDefault = true;
constexpr uint32_t kLinearQMmaLanes = 32;
// linear_q_mma.wgsl MMA_MAX_BM (rows of its x tile) and MMA_LD (the tiles' row stride in f16
// values), with MMA_SG = kLinearQMmaLanes (ops/kernel_constants.cpp writes them into it).
constexpr uint32_t kLinearQMmaMaxBM = 128, kLinearQMmaLd = 72;
constexpr uint32_t kLinearQMmaWorkgroupBytes =
    2 * (kLinearQMmaMaxBM + kLinearQGemmBN) * kLinearQMmaLd + 4 * (256 / kLinearQMmaLanes) * 16 * 16;
bool gemm_takes_mma(const gpu::DeviceCaps& caps);
// The rows of y per matrix-core gemm workgroup (MMA_BM) for a weight of n rows on a device where
// gemm_takes_mma: 128 from kLinearQMmaMinN rows, and 0 (the int8 gemm, which splits K where its
// tiles are few) below; WGRT_MMA_BM=64 or 128 forces the matrix cores at that tile (to measure).
// H100, wgrt_lab_linear --m 512 at 32 values a step: 4096 x 4096 q4gsw 295 us (128 rows) against
// the int8 gemm's 342, q4k 284 against 378; 2048 x 512 138 against 40 (split K).
constexpr uint32_t kLinearQMmaMinN = 4096;
uint32_t gemm_mma_bm(uint32_t n);

}  // namespace wgrt::ops
