#include "ops/linear_q/linear_q.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "ops/norm/norm.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"
#include "support/knobs.h"

namespace wgrt::ops {

namespace {
// linear_q's knobs (support/knobs.h): each forces a route or a tile, to measure.
const knobs::Count kGemvMaxM{"WGRT_GEMV_MAX_M", 1, kLinearQGemvMaxRows, kLinearQGemvMaxRows,
                             "most rows of x the gemv route serves", knobs::Lab};
const knobs::Count kGemvMBlock{"WGRT_GEMV_M_BLOCK", 1, kLinearQGemvMaxRows, kLinearQGemvMBlock,
                               "rows of x per gemv_m workgroup", knobs::Lab};
const knobs::Count kGemvMFrom{"WGRT_GEMV_M_FROM", 0, kLinearQGemvMaxRows + 1, 0,
                              "first row count of the gemv_m route (0: the device's; 2..)", knobs::Lab};
const knobs::Choice kGemvX{"WGRT_GEMV_X", "auto|1|2|4", "auto", "rows of x per gemv_multi workgroup", knobs::Lab};
const knobs::Count kGemmSplitN{"WGRT_GEMM_SPLIT_N", 0, 65536, 4096,
                               "split K of the gemm for weights of at most this many rows (0: never)", knobs::Lab};
const knobs::Count kGemmSplitWgs{"WGRT_GEMM_SPLIT_WGS", 1, 1 << 20, kLinearQSplitTarget,
                                 "workgroups split K aims for", knobs::Lab};
const knobs::Choice kGemvTk{"WGRT_GEMV_TK", "auto|8|16|32|64", "auto", "gemv lanes along K", knobs::Lab};
const knobs::Choice kGemvI8{"WGRT_GEMV_I8", "auto|0|1", "auto",
                            "gemv activations: 0 f32, 1 int8 (auto: int8 on GPUs)", knobs::Lab};
const knobs::Choice kMma{"WGRT_MMA", "auto|0|1", "auto",
                         "the gemm on matrix cores where the device has them (auto: kLinearQMmaByDefault)", knobs::Lab};
const knobs::Choice kMmaBm{"WGRT_MMA_BM", "auto|64|128", "auto",
                           "rows of y per matrix-core gemm workgroup (auto: 128 from 4096 rows, else the int8 gemm)",
                           knobs::Lab};
const knobs::Choice kGemvXq{"WGRT_GEMV_XQ", "auto|0|1", "auto", "0: no gemv reads x quantized ahead", knobs::Lab};
const knobs::Choice kGemvRope{"WGRT_GEMV_ROPE", "auto|0|1", "auto", "0: the q, k, v gemv leaves rope to its own kernel",
                              knobs::Lab};
}  // namespace

namespace {
constexpr ParamField kFields[] = {
    {"m", offsetof(LinearQParams, m)},       {"n", offsetof(LinearQParams, n)},
    {"k", offsetof(LinearQParams, k)},       {"gs", offsetof(LinearQParams, gs)},
    {"has_bias", offsetof(LinearQParams, has_bias)}, {"x_row", offsetof(LinearQParams, x_row)},
    {"eps", offsetof(LinearQParams, eps)},   {"y_off", offsetof(LinearQParams, y_off)},
    {"ld", offsetof(LinearQParams, ld)},     {"pos_sym", offsetof(LinearQParams, pos_sym)},
    {"n_ctx", offsetof(LinearQParams, n_ctx)}, {"kslice", offsetof(LinearQParams, kslice)}};
constexpr uint32_t kWg = 256;  // linear_q.wgsl WG
constexpr uint32_t kRpt = 4;   // linear_q.wgsl RPT
constexpr uint32_t kSmallK = 32;  // linear_q.wgsl SK
constexpr uint32_t kSiluWg = 256;  // silu_mul.wgsl WG
}  // namespace

const ParamLayout kLinearQLayout{"linear_q", sizeof(LinearQParams), kFields};

graph::Shape infer_linear_q(const LinearQInferCtx& c) {
  if (c.x.rank != 2 || c.x[1] != c.k)
    throw std::invalid_argument(
        fmt::format("linear_q: x {} does not have K = {} columns", graph::to_string(c.x), c.k));
  return graph::Shape{c.x[0], c.n};
}

std::vector<uint32_t> interleave_swiglu_rows(std::span<const uint32_t> gate, std::span<const uint32_t> up,
                                             uint32_t ff, uint32_t row_words) {
  if (ff % 16 != 0 || gate.size() != size_t(ff) * row_words || up.size() != gate.size())
    throw std::invalid_argument(fmt::format("interleave_swiglu_rows: ff {} must be a multiple of 16 with "
                                            "{} words per row", ff, row_words));
  std::vector<uint32_t> out(2 * gate.size());
  for (uint32_t r = 0; r < ff; ++r) {
    const size_t g_row = size_t(r / 16) * 32 + r % 16;
    std::copy_n(gate.begin() + size_t(r) * row_words, row_words, out.begin() + g_row * row_words);
    std::copy_n(up.begin() + size_t(r) * row_words, row_words, out.begin() + (g_row + 16) * row_words);
  }
  return out;
}

uint32_t gemv_max_rows() { return uint32_t(kGemvMaxM.get()); }

uint32_t gemv_m_block() { return uint32_t(kGemvMBlock.get()); }

// gemv_m pays a fixed cost the gemv does not (rms_norm and quantize_act as dispatches of their
// own, a workgroup per tile whatever the rows): on the H200 it lost to the gemv's workgroup per
// row on every weight of up to 16,384 rows (2048 x 2048 at 8 rows: 15.7-18.4 us against 9.6,
// docs/perf/2026-12-03.md, "Batched decode: where the step goes") and won on the vocabulary (q6k 2048 x 128256 at 8 rows in the 1B model:
// 262 us against 439). On CPU drivers it won everywhere measured (lavapipe, the demo model, 4
// sequences: 118 tok/s against 49).
uint32_t gemv_m_from(const gpu::DeviceCaps& caps, uint32_t n, int gemv_int8) {
  const uint32_t never = kLinearQGemvMaxRows + 1;
  if (gemv_int8 == 0) return never;  // f32 activations asked for: gemv_m's are int8
  const uint32_t fallback = caps.adapter.type == WGPUAdapterType_CPU || n > 16384 ? kLinearQGemvMFrom : never;
  const int64_t forced = kGemvMFrom.get();
  if (forced == 1) throw std::invalid_argument("WGRT_GEMV_M_FROM='1' (hint: 0 for the device's, or 2..)");
  return forced ? uint32_t(forced) : fallback;
}

namespace {
// gemv_m's first row count for a node: LinearQDesc::gemv_m_from where set.
uint32_t node_gemv_m_from(const gpu::DeviceCaps& caps, uint32_t n, int gemv_int8, uint32_t forced) {
  if (gemv_int8 == 0) return kLinearQGemvMaxRows + 1;
  return forced ? std::clamp<uint32_t>(forced, 2, kLinearQGemvMaxRows + 1) : gemv_m_from(caps, n, gemv_int8);
}
}  // namespace

uint32_t gemv_x_rows(uint32_t forced) {
  if (forced) {
    if (forced != 1 && forced != 2 && forced != 4)
      throw std::invalid_argument(fmt::format("gemv_x = {} rows of x per gemv_multi workgroup (hint: 1, 2 or 4)",
                                              forced));
    return forced;
  }
  const std::string v = kGemvX.get();
  return v == "auto" ? kLinearQGemvX : uint32_t(std::stoul(v));
}

namespace {
// Whether a node has the gemv_multi route: several rows of x per gemv workgroup, on int8 x.
bool gemv_multi_on(const gpu::DeviceCaps& caps, int gemv_int8, uint32_t gemv_x) {
  return gemv_x_rows(gemv_x) > 1 && gemv_takes_int8(caps, gemv_int8);
}
}  // namespace

bool gemv_m_takes(QuantFormat f) { return f != QuantFormat::Q2K && f != QuantFormat::Q3K && !has_iq4_grid(f); }

uint32_t gemm_split_max_n() { return uint32_t(kGemmSplitN.get()); }

namespace {
uint32_t kslice_for(uint32_t m, uint32_t n, uint32_t k, uint32_t gs, uint32_t target) {
  const uint64_t tiles = ceil_div(n, kLinearQGemmBN) * ceil_div(m, kLinearQGemmBM);
  const uint64_t slices = std::min<uint64_t>({kLinearQSplitMax, ceil_div(target, tiles), k / kLinearQSplitMinK});
  if (slices <= 1) return k;
  return uint32_t(ceil_div(ceil_div(k, slices), gs) * gs);  // whole activation groups
}
}  // namespace

uint32_t gemm_kslice(uint32_t m, uint32_t n, uint32_t k, uint32_t gs) {
  return kslice_for(m, n, k, gs, uint32_t(kGemmSplitWgs.get()));
}

namespace {
// The rows of split K's scratch [slices * M, N] for up to max_m rows of x: the most slices times
// rows that any live row count in the gemm route takes.
uint32_t split_scratch_rows(uint32_t max_m, uint32_t n, uint32_t k, uint32_t gs) {
  uint64_t rows = 0;
  const auto target = uint32_t(kGemmSplitWgs.get());  // read once, not per row count
  for (uint32_t m = 1; m <= max_m; ++m)
    rows = std::max<uint64_t>(rows, ceil_div(k, kslice_for(m, n, k, gs, target)) * m);
  return uint32_t(rows);
}
}  // namespace

graph::RouteId linear_q_route(const gpu::DeviceCaps& caps, uint32_t n, uint32_t m, int gemv_int8, uint32_t gemv_x,
                              uint32_t gemv_m_from) {
  if (m <= gemv_max_rows()) {
    if (m >= node_gemv_m_from(caps, n, gemv_int8, gemv_m_from)) return kLinearQGemvM;
    return m >= 2 && gemv_multi_on(caps, gemv_int8, gemv_x) ? kLinearQGemvMulti : kLinearQGemv;
  }
  return m <= 7 ? kLinearQSmallM : kLinearQGemm;
}

void plan_linear_q(const LinearQPlanCtx& c, const LinearQLive& live, std::span<const LinearQStep> steps,
                   graph::Plan& plan) {
  const uint32_t m = live.m;
  // last_row: the gemv reads x's last live row and writes one output row.
  const uint32_t out_m = c.last_row ? 1 : m;
  const uint32_t maxg = live.max_groups_per_dim;
  if (c.rope) check_rope_positions(c.name, *c.rope, c.rope_caches, m, live.pos);
  auto part_params = [&](const LinearQPartPlan& pp) {
    return LinearQParams{out_m, pp.n, c.k, c.gs, c.has_bias ? 1u : 0u, c.last_row ? m - 1 : 0u, c.eps,
                         pp.y_off, c.n, c.rope ? rope_qkv_symbol(*c.rope).v : 0u, c.rope_caches.n_ctx, c.k};
  };
  auto gemm_params = [&](const LinearQPartPlan& pp) {  // a split weight's slices of K
    LinearQParams params = part_params(pp);
    if (pp.split) params.kslice = gemm_kslice(m, pp.n, c.k, c.gs);
    return params;
  };
  for (size_t j = 0; j < steps.size(); ++j) {
    const LinearQPartPlan& pp = c.parts.at(steps[j].part);
    switch (steps[j].kind) {
      case LinearQStep::Norm:  // rms_norm into the node's normalized-x scratch
        plan.params[j].set(RmsNormParams{m, c.k, c.eps, 0});
        plan.grids[j] = grid_1d(m, maxg);
        break;
      case LinearQStep::QuantizeAct:
        plan.params[j].set(part_params(pp));
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * (c.k / c.gs), 64), maxg);
        break;
      case LinearQStep::Gemv: {
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;  // swiglu: a row set makes 2 outputs of 4 rows
        const uint64_t tiles = ceil_div(rows, (c.swiglu ? 2 : 4) * c.gemv_sets);
        plan.grids[j] = grid_1d(tiles * out_m, maxg);  // a workgroup per tile and row of x
        break;
      }
      case LinearQStep::GemvMulti: {  // a workgroup per tile and gemv_x rows of x
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;
        const uint64_t tiles = ceil_div(rows, c.swiglu ? kLinearQGemvRows / 2 : kLinearQGemvRows);
        plan.grids[j] = grid_1d(tiles * ceil_div(m, pp.gemv_x), maxg);
        break;
      }
      case LinearQStep::GemvM: {  // a workgroup per tile and block of rows of x
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;
        const uint64_t tiles = ceil_div(rows, c.swiglu ? kLinearQGemvRows / 2 : kLinearQGemvRows);
        plan.grids[j] = grid_1d(tiles * ceil_div(m, c.gemv_m_block), maxg);
        break;
      }
      case LinearQStep::ArgmaxFinal:
        plan.params[j].set(SamplingParams{1, c.n, uint32_t(ceil_div(c.n, kLinearQGemvRows)), 0, 1, 0, 0, 0});
        plan.grids[j] = {1, 1, 1};
        break;
      case LinearQStep::SmallM:
        plan.params[j].set(part_params(pp));
        plan.grids[j] = grid_1d(ceil_div(pp.n, kRpt * (kWg / kSmallK)), maxg);
        break;
      case LinearQStep::Gemm: {
        const LinearQParams params = gemm_params(pp);
        plan.params[j].set(params);
        const uint32_t bm = pp.mma_bm ? pp.mma_bm : kLinearQGemmBM;
        plan.grids[j] = {uint32_t(ceil_div(pp.n, kLinearQGemmBN)), uint32_t(ceil_div(m, bm)),
                         uint32_t(ceil_div(c.k, params.kslice))};
        break;
      }
      case LinearQStep::GemmCombine:
        plan.params[j].set(gemm_params(pp));
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * pp.n / 4, 64), maxg);
        break;
      case LinearQStep::SiluMul:
        plan.params[j].set(SiluMulParams{m, c.n / 2, kSiluBlocked, 0});
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * (c.n / 2), kSiluWg), maxg);
        break;
      case LinearQStep::RopeQkv:
        plan_rope_qkv(c.name, *c.rope, c.rope_caches, m, live.pos, maxg, plan.params[j], plan.grids[j]);
        break;
    }
  }
}

graph::DType scales_dtype(QuantFormat f) { return has_word_scales(f) ? graph::DType::U32 : graph::DType::F16; }

graph::Shape scales_shape(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs) {
  if (has_kq_scales(f)) return graph::Shape{uint32_t(kq_scale_words(n, k))};
  if (f == QuantFormat::IQ4XS) return graph::Shape{n, k / 256 * 2};  // the blocks' headers
  return graph::Shape{n, k / gs};  // f16 pairs, or Q41/Q51's (d, m) words
}

QuantTensors add_quant_weight(graph::Graph& g, const std::string& name, QuantFormat f, uint32_t n,
                              uint32_t k, uint32_t gs) {
  check_format_shape(f, n, k, gs, name.c_str());
  QuantTensors t;
  t.q = graph::add_weight(g, {.name = name + ".q", .dtype = graph::DType::U32,
                              .shape = {n, quant_row_words(f, k)}});
  t.scales = graph::add_weight(g, {.name = name + ".scales", .dtype = scales_dtype(f),
                                   .shape = scales_shape(f, n, k, gs)});
  return t;
}

void write_quant_weight(graph::Graph& g, const QuantTensors& t, const QuantWeight& w) {
  graph::write_tensor<uint32_t>(g, t.q, w.q);
  graph::write_tensor<uint32_t>(g, t.scales, w.scales);
}

namespace {

// linear_q.wgsl's BITS: the kernel's weight layout.
double kernel_bits(QuantFormat f) {
  switch (f) {
    case QuantFormat::Q4gsw:
    case QuantFormat::Q4K:
    case QuantFormat::Q41:
    case QuantFormat::IQ4XS:
    case QuantFormat::IQ4NL: return 4;
    case QuantFormat::Q5K:
    case QuantFormat::Q50:
    case QuantFormat::Q51: return 5;
    case QuantFormat::Q6K: return 6;
    case QuantFormat::Q8: return 8;
    case QuantFormat::Q2K: return 2;
    case QuantFormat::Q3K: return 3;
  }
  return 0;
}

// linear_q.wgsl's SCALES: how the kernel finds a group's (scale, min).
double kernel_scales(QuantFormat f) {
  return has_kq_scales(f) ? 1 : has_dm_scales(f) ? 2 : f == QuantFormat::IQ4XS ? 3 : 0;
}

constexpr uint32_t kGemvWideRows = 16384;  // gemv_lanes: 32 lanes from here

// Lanes along K per gemv row set (linear_q.wgsl GV_TK): 64 (8 warps per workgroup) where the
// weight has few rows, so the GPU has warps enough to hide the loads; 32 from 16,384 rows
// (kGemvWideRows), where more warps only add x traffic (H200, 1B Q4_K_M decode: the 2048- and
// 3072-row projections 10-30% faster with 64, the 128,256-row vocabulary 12% slower; 1B Q4_0,
// its 16,384-row gate|up reading x quantized ahead: 17.4 -> 14.6 us a call with 32, tg128
// +4.3%, docs/perf/2026-12-04.md, "The decode gemvs as the step runs them"). A CPU driver runs
// a workgroup's lanes one SIMD batch after another, so lanes past a row's chunks only cost:
// 16 there (lavapipe, the demo model's K = 384 rows of 24 q8 chunks: 16-lane sets decode 2x
// faster than 64). Never fewer than a subgroup (the shuffles sum SG lanes of one set).
// gemv_multi's kernels (xr > 1 rows of x per workgroup) take 32 on GPUs whatever the rows: they
// already have xr rows' work per lane, and the 64-lane sets' fixed part (staging, the reduction
// through workgroup memory) outweighed their extra warps (H200, 1B Q4_0 at 8 sequences: gate|up
// 897 -> 701 us per step, q|k|v + o 609 -> 513, down 422 -> 373; x8 +8%).
// `forced` (LinearQDesc::gemv_lanes) or WGRT_GEMV_TK=8|16|32|64 picks one (to measure).
uint32_t gemv_lanes(const gpu::DeviceCaps& caps, uint32_t n, uint32_t forced, const std::string& name, uint32_t xr) {
  uint32_t lanes = forced;
  if (const std::string v = kGemvTk.get(); v != "auto" && !forced) lanes = uint32_t(std::stoul(v));
  if (!lanes)
    lanes = std::max(caps.adapter.type == WGPUAdapterType_CPU ? 16u : xr > 1 || n >= kGemvWideRows ? 32u : 64u,
                     gpu::subgroup_lanes(caps));
  if ((lanes != 8 && lanes != 16 && lanes != 32 && lanes != 64) || lanes < gpu::subgroup_lanes(caps))
    throw std::invalid_argument(fmt::format("{}: {} gemv lanes along K (hint: 8, 16, 32 or 64, and at least the "
                                            "device's {} subgroup lanes)", name, lanes, gpu::subgroup_lanes(caps)));
  return lanes;
}

// Workgroup memory of the gemv kernels (linear_q.wgsl's gv_x, gv_red and gv_sum) at `lanes`
// lanes per row set and xr rows of x per workgroup.
uint64_t gemv_workgroup_bytes(uint32_t lanes, uint32_t xr) {
  const uint64_t threads = 4ull * lanes;  // GV_WG = GV_SETS * GV_TK
  constexpr uint64_t iq4_tables = 16 * 4 + 256 * 4;  // iq4_grid.wgsl's iq4_f and iq4_pair
  return uint64_t(lanes) * 9 * ((xr + 2) / 3) * 16 + threads * 16 + threads * 4 + iq4_tables;  // GV_XSTRIDE = 9 vec4
}

}  // namespace

// Whether the gemv quantizes x to int8 as it stages it (linear_q.wgsl XI8): on GPUs, where
// the f32 decode's ALU work, not the memory, bounds the gemv (H200: 1.2-1.8x faster kernels,
// decode +19-28%, docs/perf/2026-12-01.md, "... the gemv with int8 activations"); off on CPU drivers, where it is no faster (lavapipe,
// the demo model: the same tok/s within noise) and the f32 results stay closest to the
// references. Every format has the route (iq4_xs / iq4_nl look their nibbles' int8 grid
// values up by byte pairs, iq4_grid.wgsl iq4_bytes). Not on devices whose subgroups are
// narrower than the 4 threads that stage a chunk together. `forced` (LinearQDesc::gemv_int8)
// or WGRT_GEMV_I8=0|1 picks (to measure).
bool gemv_takes_int8(const gpu::DeviceCaps& caps, int forced) {
  if (gpu::subgroup_lanes(caps) < 4) return false;
  if (forced >= 0) return forced == 1;
  if (const std::string v = kGemvI8.get(); v != "auto") return v == "1";
  return caps.adapter.type != WGPUAdapterType_CPU;
}

bool gemm_takes_mma(const gpu::DeviceCaps& caps) {
  const std::string v = kMma.get();
  if (!(v == "auto" ? kLinearQMmaByDefault : v == "1")) return false;
  const bool f16_tile = std::any_of(caps.subgroup_matrix_configs.begin(), caps.subgroup_matrix_configs.end(),
                                    [](const gpu::SubgroupMatrixConfig& c) {
                                      return c.component == WGPUSubgroupMatrixComponentType_F16 &&
                                             c.result == WGPUSubgroupMatrixComponentType_F32 && c.m == 16 &&
                                             c.n == 16 && c.k == 16;
                                    });
  return caps.subgroup_matrix && caps.shader_f16 && f16_tile && caps.subgroup_min_size == kLinearQMmaLanes &&
         caps.subgroup_max_size == kLinearQMmaLanes &&
         caps.limits.maxComputeWorkgroupStorageSize >= kLinearQMmaWorkgroupBytes &&
         caps.limits.maxComputeInvocationsPerWorkgroup >= kWg;
}

uint32_t gemm_mma_bm(uint32_t n) {
  if (const std::string v = kMmaBm.get(); v != "auto") return uint32_t(std::stoul(v));
  return n >= kLinearQMmaMinN ? kLinearQMmaMaxBM : 0;
}

bool linear_q_takes_xq(const gpu::DeviceCaps& caps, QuantFormat f, int forced_int8) {
  if (kGemvXq.get() == "0") return false;
  return gemv_takes_int8(caps, forced_int8) && kernel_bits(f) > 3;
}

graph::TensorId linear_q_xq(const graph::Graph& g, const std::string& name) {
  return graph::find_tensor(g, name + ".xq_ahead");
}

namespace {

// Whether the gemv turns q and k itself (gemv_rope): each lane's 4 columns must be two pairs of
// one head (the normal layout, weights of whole 4-row groups) and the device must bind its 9
// storage buffers (WebGPU's default limit is 8: rope_qkv follows the gemv there). It saves a
// dispatch per layer and the q|k|v round trip through memory. WGRT_GEMV_ROPE=0 turns it off
// (to measure).
bool gemv_turns_rope(const gpu::DeviceCaps& caps, const RopeQkv& r, std::span<const LinearQPartPlan> parts) {
  if (r.rows) return false;  // a step of several sequences: rope_qkv reads the table
  if (r.layout != RopeLayout::Normal || caps.limits.maxStorageBuffersPerShaderStage < 9) return false;
  for (const LinearQPartPlan& pp : parts)
    if (pp.n % 4 != 0) return false;
  return kGemvRope.get() != "0";
}

enum class Scratch : uint8_t { Partial, Normed, GateUp, Qkv, Xq, Xs, Split, XqOut };

void check_f32(const graph::Graph& g, graph::TensorId t, const graph::Shape& want, const std::string& what,
               const std::string& name) {
  const graph::Tensor& x = graph::tensor_info(g, t);
  if (x.dtype != graph::DType::F32 || x.max_shape != want)
    throw std::invalid_argument(fmt::format("{}: {} must be f32 {}, not {} {}", name, what, graph::to_string(want),
                                            graph::dtype_name(x.dtype), graph::to_string(x.max_shape)));
}

// A weight's rows (N), after checking its words and scales against K.
uint32_t check_part(const graph::Graph& g, const LinearQPart& wp, uint32_t k, const std::string& name) {
  const graph::Tensor& q = graph::tensor_info(g, wp.q);
  const graph::Tensor& s = graph::tensor_info(g, wp.scales);
  const char* fmt_name = quant_format_name(wp.format);
  if (q.dtype != graph::DType::U32 || q.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: {} weight words must be a u32 [N, K/{}] tensor", name, fmt_name,
                                            values_per_word(wp.format)));
  const uint32_t n = q.max_shape[0];
  check_format_shape(wp.format, n, k, wp.gs, name.c_str());
  if (q.max_shape[1] != quant_row_words(wp.format, k))
    throw std::invalid_argument(fmt::format("{}: {} weight {} does not match K = {} (want [{}, {}])", name, fmt_name,
                                            graph::to_string(q.max_shape), k, n, quant_row_words(wp.format, k)));
  const graph::Shape want_s = scales_shape(wp.format, n, k, wp.gs);
  if (s.dtype != scales_dtype(wp.format) || s.max_shape != want_s)
    throw std::invalid_argument(fmt::format("{}: {} scales must be {} {}, not {} {}", name, fmt_name,
                                            graph::dtype_name(scales_dtype(wp.format)), graph::to_string(want_s),
                                            graph::dtype_name(s.dtype), graph::to_string(s.max_shape)));
  return n;
}

}  // namespace

graph::TensorId add_linear_q(graph::Graph& g, const LinearQDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: linear_q takes f32 x [M, K]", d.name));
  const uint32_t max_m = x.max_shape[0], k = x.max_shape[1];
  // The weights: the first, then `more` (their rows continue y's columns).
  std::vector<LinearQPart> parts = {{d.format, d.gs, d.q, d.scales}};
  parts.insert(parts.end(), d.more.begin(), d.more.end());
  std::vector<LinearQPartPlan> part_plans;
  uint32_t n = 0;
  for (const LinearQPart& wp : parts) {
    part_plans.push_back({check_part(g, wp, k, d.name), n});
    n += part_plans.back().n;
  }
  auto act_group = [](const LinearQPart& wp) { return activation_group(wp.format, wp.gs); };
  const uint32_t act_gs = act_group(parts[0]);
  for (const LinearQPart& wp : parts)
    if (act_group(wp) != act_gs)
      throw std::invalid_argument(fmt::format("{}: weights of group sizes {} and {} cannot share one output "
                                              "(hint: fuse weights with equal group sizes)", d.name, act_gs,
                                              act_group(wp)));
  if (parts.size() > 1 && d.swiglu)
    throw std::invalid_argument(fmt::format("{}: several weights take no swiglu", d.name));
  if (d.argmax_out)  // each part's argmax partials follow the earlier parts' (a workgroup per 16 rows)
    for (size_t i = 0; i + 1 < part_plans.size(); ++i)
      if (part_plans[i].n % kLinearQGemvRows != 0)
        throw std::invalid_argument(fmt::format("{}: with argmax, every weight but the last has a multiple of {} "
                                                "rows, not {}", d.name, kLinearQGemvRows, part_plans[i].n));
  if (d.bias) check_f32(g, *d.bias, {n}, "bias", d.name);
  if (d.norm) check_f32(g, *d.norm, {k}, "norm weight", d.name);
  if (d.swiglu && (n % 32 != 0 || d.residual || d.argmax_out))
    throw std::invalid_argument(fmt::format("{}: a swiglu weight has (gate, up) blocks of 16 rows (N = {} is "
                                            "not a multiple of 32) and takes no residual or argmax", d.name, n));
  if (d.argmax_out && !d.last_row)
    throw std::invalid_argument(fmt::format("{}: the argmax epilogue projects the last row only", d.name));
  if (d.last_row && (d.swiglu || d.residual))
    throw std::invalid_argument(fmt::format("{}: last_row takes no swiglu or residual", d.name));
  std::optional<RopeQkvCaches> rope_caches;
  if (d.rope) {
    if (d.swiglu || d.last_row || d.residual || d.argmax_out)
      throw std::invalid_argument(fmt::format("{}: the rope epilogue takes no swiglu, last_row, residual or argmax",
                                              d.name));
    rope_caches = check_rope_qkv(g, d.name, *d.rope, n, max_m);
  }
  const uint32_t n_out = d.swiglu ? n / 2 : d.rope ? d.rope->n_heads * d.rope->head_dim : n;
  const uint32_t y_rows = d.last_row ? 1 : max_m;
  if (d.residual) check_f32(g, *d.residual, {max_m, n}, "residual", d.name);
  if (d.argmax_out) {
    const graph::Tensor& a = graph::tensor_info(g, *d.argmax_out);
    if (a.dtype != graph::DType::U32 || a.max_shape != graph::Shape{1})
      throw std::invalid_argument(fmt::format("{}: argmax_out must be u32 [1]", d.name));
  }
  if (d.xq_out && (parts.size() > 1 || d.rope || d.argmax_out || d.last_row || n_out % 16 != 0))
    throw std::invalid_argument(fmt::format("{}: xq_out takes one weight of a multiple of 16 outputs (not {}) and no "
                                            "rope, argmax or last_row", d.name, n_out));
  if (d.xq_norm && (!d.xq_out || d.norm))
    throw std::invalid_argument(fmt::format("{}: xq_norm goes with xq_out and without norm (both bind the kernels' "
                                            "norm weight)", d.name));
  if (d.xq_norm) check_f32(g, *d.xq_norm, {n_out}, "xq norm weight", d.name);
  if (d.xq_in) {
    const graph::Tensor& t = graph::tensor_info(g, *d.xq_in);
    if (t.dtype != graph::DType::U32 || t.max_shape != graph::Shape{linear_q_xq_words(k)})
      throw std::invalid_argument(fmt::format("{}: xq_in must be u32 [{}] (a producer's xq of K = {} values)", d.name,
                                              linear_q_xq_words(k), k));
  }

  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, {y_rows, n_out});
  // Bindings a variant declares but does not read get x (read-only, never written here).
  graph::TensorId bias = d.bias.value_or(d.scales);
  graph::TensorId res = d.residual.value_or(d.x);
  graph::TensorId nw = d.norm.value_or(d.x);
  const gpu::DeviceCaps& caps = graph::device_caps(g);
  const double sg = double(gpu::subgroup_lanes(caps));
  const bool gemv_rope = d.rope && gemv_turns_rope(caps, *d.rope, part_plans);
  const uint32_t m_block = gemv_m_block();
  // xr: rows of x per gemv workgroup (GV_XR; gemv_multi's kernels)
  // x quantized ahead (one row of x): this node's one-row gemv writes its output as xq blocks too
  // (gemv_xq, gemv_swiglu_xq: the node's one-row kernels take 8 row sets with swiglu, 16 outputs a
  // workgroup), and reads its x from xq_in (XQ_IN) where its gemv route serves one row only and
  // the part's format can.
  const uint32_t out_sets = d.xq_out && d.swiglu ? 8 : 4;
  bool one_row_gemv = false;  // the gemv route serves one row only (set with the routes below)
  auto reads_xq = [&](const LinearQPart& wp) {
    return d.xq_in && one_row_gemv && linear_q_takes_xq(caps, wp.format, d.gemv_int8);
  };
  // xr: rows of x per gemv workgroup (GV_XR; gemv_multi's kernels); xq: the gemv route's kernel
  auto key = [&](const LinearQPart& wp, const char* entry, bool norm, bool split = false, uint32_t xr = 1,
                 bool xq = false, uint32_t mma_bm = 0) {
    std::vector<gpu::OverrideConstant> extra = {{"BITS", kernel_bits(wp.format)},
                                                {"AFFINE", is_affine(wp.format) ? 1.0 : 0.0},
                                                {"SCALES", kernel_scales(wp.format)},
                                                {"NL", has_iq4_grid(wp.format) ? 1.0 : 0.0},
                                                {"RES", d.residual ? 1.0 : 0.0}};
    if (std::string_view(entry).starts_with("gemv")) {
      const bool gm = std::string_view(entry).starts_with("gemv_m");
      uint32_t lanes = gemv_lanes(caps, n, d.gemv_lanes, d.name, gm ? 1 : xr);
      if (gm) {
        extra.push_back({"GM_M", double(m_block)});
        lanes = std::min(lanes, 8 * gpu::subgroup_lanes(caps));  // linear_q_gemv_m.wgsl GM_SUBS
      }
      const bool int8 = gemv_takes_int8(graph::device_caps(g), d.gemv_int8);
      extra.push_back({"NORM", norm ? 1.0 : 0.0});
      extra.push_back({"SG", sg});
      extra.push_back({"XI8", int8 ? 1.0 : 0.0});
      if (!gm) extra.push_back({"GV_XR", double(xr)});
      if (!gm && xr == 1 && out_sets != 4) {
        lanes = std::min(lanes, caps.limits.maxComputeInvocationsPerWorkgroup / out_sets);
        if (lanes < gpu::subgroup_lanes(caps))
          throw std::invalid_argument(fmt::format("{}: {} row sets of a subgroup each pass the device's {} invocations "
                                                  "per workgroup (hint: no xq_out)", d.name, out_sets,
                                                  caps.limits.maxComputeInvocationsPerWorkgroup));
        extra.push_back({"GV_SETS", double(out_sets)});
      }
      if (xq && d.xq_norm) extra.push_back({"XQ_NORM", 1.0});
      if (xq && reads_xq(wp)) extra.push_back({"XQ_IN", 1.0});
      extra.push_back({"GV_TK", double(lanes)});
      if (std::string_view(entry) == "gemv_rope")
        extra.insert(extra.end(), {{"ROPE_HD", double(d.rope->head_dim)},
                                   {"ROPE_NROT", double(rope_caches->n_rot)},
                                   {"ROPE_Q", double(d.rope->n_heads * d.rope->head_dim)},
                                   {"ROPE_KV", double(d.rope->n_kv_heads * d.rope->head_dim)},
                                   {"ROPE_F16", rope_caches->f16 ? 1.0 : 0.0}});
    } else if (std::string_view(entry) == "gemm") {
      extra.push_back({"SPLIT", split ? 1.0 : 0.0});
    } else if (std::string_view(entry) == "gemm_mma") {
      extra.push_back({"MMA_BM", double(mma_bm)});
      gpu::PipelineKey pk = gpu::make_key("linear_q_mma", entry, std::move(extra));
      pk.sg_shim = true;
      return pk;
    } else if (std::string_view(entry) == "small_m") {
      extra.push_back({"SG", sg});
      extra.push_back({"SM_RED", sg >= kSmallK ? 1.0 : double(7 * kWg) / sg});  // linear_q.wgsl RCH * WG / SG
    }
    gpu::PipelineKey pk = gpu::make_key("linear_q", entry, std::move(extra));
    pk.sg_shim = true;
    return pk;
  };
  using graph::Binding;
  std::vector<graph::TensorId> outputs = {y};
  std::vector<Scratch> scratch_kind;  // of outputs[1..]
  auto scratch = [&](Scratch kind, const char* suffix, graph::DType t, graph::Shape shape) {
    graph::TensorId id = graph::add_tensor(g, d.name + suffix, t, shape);
    outputs.push_back(id);
    scratch_kind.push_back(kind);
    return id;
  };
  // The output quantized ahead for the next gemv (xq_out): written by the one-row gemv.
  std::optional<graph::TensorId> xq_out;
  if (d.xq_out) xq_out = scratch(Scratch::XqOut, ".xq_ahead", graph::DType::U32, {linear_q_xq_words(n_out)});
  graph::RouteSet routes{graph::RouteKey::of_dim(d.x, 0), {}};
  std::vector<std::pair<graph::RouteId, std::vector<LinearQStep>>> route_steps;  // what each route's kernels are
  auto add_route = [&](graph::RouteId id, const char* name, int64_t lo, int64_t hi, std::vector<graph::KernelSpec> ks,
                       std::vector<LinearQStep> steps) {
    routes.routes.push_back({id, name, lo, hi, std::move(ks)});
    route_steps.push_back({id, std::move(steps)});
  };

  const uint32_t gemv_m = gemv_max_rows();  // the gemv routes' rows: [1, gemv_m]
  const uint32_t m_from = node_gemv_m_from(caps, n, d.gemv_int8, d.gemv_m_from);  // gemv_m's first row count
  const bool has_gemv_m = !d.last_row && max_m >= m_from && m_from <= gemv_m;
  // The gemv's rows past the first, where gemv_multi takes them: [2, gemv_hi].
  const int64_t gemv_hi = d.last_row ? max_m : std::min<int64_t>(has_gemv_m ? m_from - 1 : gemv_m, max_m);
  const bool has_multi = !d.last_row && gemv_hi >= 2 && gemv_multi_on(caps, d.gemv_int8, d.gemv_x);
  // last_row reading x quantized ahead (the output head): the gemv serves one row, reading xq_in,
  // and gemv_last the last row of longer steps, staging it.
  const bool has_last = d.last_row && d.xq_in && gemv_hi >= 2;
  one_row_gemv = has_multi || has_last || gemv_hi <= 1;
  // Rows of x per workgroup: gemv_x_rows(), halved while the kernel's workgroup memory passes the
  // device's limit (4 rows at 64 lanes need 23,552 bytes; WebGPU's default limit is 16,384).
  uint32_t multi_x = has_multi ? gemv_x_rows(d.gemv_x) : 1;
  while (multi_x > 1 &&
         gemv_workgroup_bytes(gemv_lanes(caps, n, d.gemv_lanes, d.name, multi_x), multi_x) >
             caps.limits.maxComputeWorkgroupStorageSize)
    multi_x /= 2;
  for (uint32_t i = 0; i < parts.size(); ++i)
    if (multi_x > 1 && gemv_takes_int8(caps, d.gemv_int8) && gemv_m_takes(parts[i].format))
      part_plans[i].gemv_x = multi_x;
  const bool has_matrix = !d.last_row && max_m > gemv_m;
  // rope outside the gemv: q|k|v lands in scratch, then rope_qkv writes y and the caches.
  std::optional<graph::TensorId> qkv;
  if (d.rope && (!gemv_rope || has_gemv_m || has_matrix)) qkv = scratch(Scratch::Qkv, ".qkv", graph::DType::F32, {max_m, n});
  auto add_rope_step = [&](std::vector<graph::KernelSpec>& ks, std::vector<LinearQStep>& steps) {
    ks.push_back(rope_qkv_kernel(*d.rope, *rope_caches, *qkv, y));
    steps.push_back({LinearQStep::RopeQkv, 0});
  };
  // The gemv kernel of part i over x (norm: fused) into yv (swiglu: y), xr rows of x per
  // workgroup; also the GemvM route's fallback.
  auto gemv_kernel = [&](uint32_t i, graph::TensorId xv, bool norm, graph::TensorId yv, bool turn_rope,
                         std::optional<graph::TensorId> partial, uint32_t xr = 1, bool xq = false) {
    // xq: the gemv route's kernel (one row of x at a time): x quantized ahead in, xq out.
    const char* entry = d.swiglu ? (xq && xq_out ? "gemv_swiglu_xq" : "gemv_swiglu")
                        : d.argmax_out ? "gemv_argmax" : turn_rope ? "gemv_rope" : xq && xq_out ? "gemv_xq" : "gemv";
    const graph::TensorId xin = xq && reads_xq(parts[i]) ? *d.xq_in : xv;
    const graph::TensorId nwv = xq && d.xq_norm ? *d.xq_norm : nw;
    std::vector<Binding> b = {Binding::of(0, xin), Binding::of(1, parts[i].q), Binding::of(2, parts[i].scales),
                              Binding::of(3, bias), Binding::of(4, yv), Binding::params(5), Binding::of(10, nwv)};
    if (turn_rope)
      b.insert(b.end(), {Binding::of(12, d.rope->freqs), Binding::of(13, d.rope->k_cache),
                         Binding::of(14, d.rope->v_cache), Binding::symbol_block(15)});
    else if (!d.swiglu)
      b.push_back(Binding::of(9, res));  // gemv_swiglu and gemv_rope add no residual
    if (partial) b.push_back(Binding::of(11, *partial));
    if (xq && xq_out) b.push_back(Binding::of(11, *xq_out));
    return graph::KernelSpec{key(parts[i], entry, norm, false, xr, xq), b};
  };

  // gemv: every fusion inside one kernel per weight (argmax: plus the partials' reduction).
  // gemv_multi: the same kernels, gemv_x rows of x per workgroup; gemv_last: the same kernels
  // staging the last row of x.
  std::optional<graph::TensorId> partial;  // bound writable only by gemv_argmax
  if (d.argmax_out)
    partial = scratch(Scratch::Partial, ".partial", graph::DType::U32, {uint32_t(ceil_div(n, kLinearQGemvRows)), 2});
  for (const bool multi : {false, true}) {
    if (multi && !has_multi && !has_last) break;
    const graph::TensorId yv = d.rope && !gemv_rope ? *qkv : y;
    std::vector<graph::KernelSpec> ks;
    std::vector<LinearQStep> steps;
    for (uint32_t i = 0; i < parts.size(); ++i) {
      const uint32_t xr = multi && has_multi ? part_plans[i].gemv_x : 1;
      ks.push_back(gemv_kernel(i, d.x, d.norm.has_value(), yv, gemv_rope, partial, xr, !multi));
      steps.push_back({xr > 1 ? LinearQStep::GemvMulti : LinearQStep::Gemv, i});
    }
    if (partial) {
      ks.push_back({gpu::make_key("sampling", "argmax_final"),
                    {Binding::of(1, *partial), Binding::of(2, *d.argmax_out), Binding::params(4)}});
      steps.push_back({LinearQStep::ArgmaxFinal, 0});
    }
    if (d.rope && !gemv_rope) add_rope_step(ks, steps);
    if (multi && has_last)
      add_route(kLinearQGemvLast, "gemv_last", 2, gemv_hi, std::move(ks), std::move(steps));
    else if (multi)
      add_route(kLinearQGemvMulti, "gemv_multi", 2, gemv_hi, std::move(ks), std::move(steps));
    else
      add_route(kLinearQGemv, "gemv", 1, one_row_gemv ? 1 : gemv_hi, std::move(ks), std::move(steps));
  }

  if (has_gemv_m || has_matrix) {
    // The other routes: [rms_norm] -> [quantize_act] -> a kernel per weight -> [silu_mul] -> [rope_qkv].
    graph::TensorId xin = d.x;
    if (d.norm) xin = scratch(Scratch::Normed, ".normed", graph::DType::F32, {max_m, k});
    // int8 activations, one copy per layout the weights need (q4/q5 nibble order or natural).
    std::optional<graph::TensorId> xq[2], xs[2];
    auto permuted = [](const LinearQPart& wp) { return kernel_bits(wp.format) == 4 || kernel_bits(wp.format) == 5; };
    auto layout_of = [&](uint32_t i) { return permuted(parts[i]) ? 1 : 0; };
    // The norm and one quantize_act per layout that the parts `quantized(i)` read.
    auto add_prologue = [&](std::vector<graph::KernelSpec>& ks, std::vector<LinearQStep>& steps, auto quantized) {
      if (d.norm) {
        ks.push_back({gpu::make_key("rms_norm", "rms_norm"),
                      {Binding::of(0, d.x), Binding::of(1, *d.norm), Binding::of(2, xin), Binding::params(3)}});
        steps.push_back({LinearQStep::Norm, 0});
      }
      for (int layout = 0; layout < 2; ++layout)
        for (uint32_t i = 0; i < parts.size(); ++i)
          if (quantized(i) && layout_of(i) == layout) {
            if (!xq[layout]) {
              xq[layout] = scratch(Scratch::Xq, layout ? ".xq4" : ".xq", graph::DType::U32, {max_m, k / 4});
              xs[layout] = scratch(Scratch::Xs, layout ? ".xs4" : ".xs", graph::DType::F32, {max_m, k / act_gs});
            }
            ks.push_back({key(parts[i], "quantize_act", false),
                          {Binding::of(0, xin), Binding::params(5), Binding::of(6, *xq[layout]),
                           Binding::of(7, *xs[layout])}});
            steps.push_back({LinearQStep::QuantizeAct, i});
            break;
          }
    };

    if (has_gemv_m) {
      // gemv_m: a kernel per weight over the int8 x, all rows at once; swiglu inside.
      const graph::TensorId yv = d.rope ? *qkv : y;
      std::vector<graph::KernelSpec> ks;
      std::vector<LinearQStep> steps;
      auto takes = [&](uint32_t i) { return gemv_m_takes(parts[i].format); };
      add_prologue(ks, steps, takes);
      for (uint32_t i = 0; i < parts.size(); ++i) {
        if (!takes(i)) {
          ks.push_back(gemv_kernel(i, xin, false, yv, false, std::nullopt));
          steps.push_back({LinearQStep::Gemv, i});
          continue;
        }
        const int layout = layout_of(i);
        std::vector<Binding> b = {Binding::of(1, parts[i].q), Binding::of(2, parts[i].scales), Binding::of(3, bias),
                                  Binding::of(4, yv), Binding::params(5), Binding::of(16, *xq[layout]),
                                  Binding::of(7, *xs[layout])};
        if (!d.swiglu) b.push_back(Binding::of(9, res));
        ks.push_back({key(parts[i], d.swiglu ? "gemv_m_swiglu" : "gemv_m", false), b});
        steps.push_back({LinearQStep::GemvM, i});
      }
      if (d.rope) add_rope_step(ks, steps);
      add_route(kLinearQGemvM, "gemv_m", m_from, std::min<int64_t>(gemv_m, max_m), std::move(ks), std::move(steps));
    }

    if (has_matrix) {
      graph::TensorId ymat = d.swiglu ? scratch(Scratch::GateUp, ".gate_up", graph::DType::F32, {max_m, n})
                             : d.rope ? *qkv : y;
      // Split K: the weights of few rows (gemm_split_max_n) sum slices of K into one scratch
      // [slices][M][N], shared by the weights one after the other. Up to 3 weights (q|k|v in three
      // formats: 10 kernels with norm, act quantizations, combines and rope, graph::kMaxDispatches).
      // On matrix cores (gemm_takes_mma, and gemm_mma_bm for the weight's rows) the gemm reads f32
      // x itself and splits no K.
      const bool mma = gemm_takes_mma(caps);
      std::optional<graph::TensorId> split_sums;
      uint64_t split_words = 0;
      for (LinearQPartPlan& pp : part_plans) {
        pp.mma_bm = mma ? gemm_mma_bm(pp.n) : 0;
        pp.split = !pp.mma_bm && parts.size() <= 3 && pp.n <= gemm_split_max_n() && pp.n % 4 == 0 &&
                   k >= 2 * kLinearQSplitMinK;
        if (pp.split)
          split_words = std::max<uint64_t>(split_words, uint64_t(split_scratch_rows(max_m, pp.n, k, act_gs)) * pp.n);
      }
      if (split_words) split_sums = scratch(Scratch::Split, ".split", graph::DType::F32, {uint32_t(split_words)});
      auto matrix_route = [&](graph::RouteId id, const char* name, int64_t lo, int64_t hi, bool small) {
        std::vector<graph::KernelSpec> ks;
        std::vector<LinearQStep> steps;
        // q6k has no small_m kernel: its gemm serves every row count past the gemv's.
        auto uses_gemm = [&](uint32_t i) { return !small || parts[i].format == QuantFormat::Q6K; };
        add_prologue(ks, steps, [&](uint32_t i) { return uses_gemm(i) && !part_plans[i].mma_bm; });
        for (uint32_t i = 0; i < parts.size(); ++i) {
          if (uses_gemm(i) && part_plans[i].mma_bm) {
            ks.push_back({key(parts[i], "gemm_mma", false, false, 1, false, part_plans[i].mma_bm),
                          {Binding::of(0, xin), Binding::of(8, parts[i].q), Binding::of(2, parts[i].scales),
                           Binding::of(3, bias), Binding::of(4, ymat), Binding::params(5), Binding::of(9, res)}});
            steps.push_back({LinearQStep::Gemm, i});
          } else if (uses_gemm(i)) {
            const int layout = layout_of(i);
            const bool split = part_plans[i].split;
            ks.push_back({key(parts[i], "gemm", false, split),
                          {Binding::of(8, parts[i].q), Binding::of(2, parts[i].scales), Binding::of(3, bias),
                           Binding::of(4, split ? *split_sums : ymat), Binding::params(5), Binding::of(6, *xq[layout]),
                           Binding::of(7, *xs[layout]), Binding::of(9, res)}});
            steps.push_back({LinearQStep::Gemm, i});
            if (split) {
              ks.push_back({key(parts[i], "gemm_combine", false),
                            {Binding::of(0, *split_sums), Binding::of(3, bias), Binding::of(4, ymat),
                             Binding::params(5), Binding::of(9, res)}});
              steps.push_back({LinearQStep::GemmCombine, i});
            }
          } else {
            ks.push_back({key(parts[i], "small_m", false),
                          {Binding::of(0, xin), Binding::of(8, parts[i].q), Binding::of(2, parts[i].scales),
                           Binding::of(3, bias), Binding::of(4, ymat), Binding::params(5), Binding::of(9, res)}});
            steps.push_back({LinearQStep::SmallM, i});
          }
        }
        if (d.swiglu) {
          ks.push_back({gpu::make_key("silu_mul", "silu_mul"),
                        {Binding::of(0, ymat), Binding::of(1, ymat), Binding::of(2, y), Binding::params(3)}});
          steps.push_back({LinearQStep::SiluMul, 0});
        }
        if (d.rope) add_rope_step(ks, steps);
        add_route(id, name, lo, hi, std::move(ks), std::move(steps));
      };
      if (gemv_m < 7) matrix_route(kLinearQSmallM, "small_m", gemv_m + 1, std::min<int64_t>(7, max_m), true);
      if (max_m >= 8) matrix_route(kLinearQGemm, "gemm", std::max<int64_t>(8, gemv_m + 1), max_m, false);
    }
  }
  if (d.argmax_out) outputs.push_back(*d.argmax_out);
  if (d.rope) outputs.insert(outputs.end(), {d.rope->k_cache, d.rope->v_cache});

  std::vector<graph::TensorId> inputs = {d.x};
  if (d.xq_in) inputs.push_back(*d.xq_in);
  for (const LinearQPart& wp : parts) inputs.insert(inputs.end(), {wp.q, wp.scales});
  for (const auto& t : {d.bias, d.norm, d.residual})
    if (t) inputs.push_back(*t);
  if (d.rope) inputs.push_back(d.rope->freqs);
  const bool rope_rows = d.rope && d.rope->rows;
  if (rope_rows) inputs.push_back(d.rope->rows->table);  // the last input (infer checks its rows)
  const LinearQPlanCtx base{.n = n, .k = k, .gs = act_gs, .has_bias = d.bias.has_value(),
                            .norm = d.norm.has_value(), .eps = d.eps,
                            .swiglu = d.swiglu, .last_row = d.last_row, .gemv_m_block = m_block,
                            .gemv_sets = out_sets,
                            .parts = part_plans, .name = d.name,
                            .rope = d.rope, .rope_caches = rope_caches.value_or(RopeQkvCaches{})};
  uint64_t weight_bytes = 0;
  for (size_t i = 0; i < parts.size(); ++i)
    weight_bytes += quant_bytes(parts[i].format, part_plans[i].n, k, parts[i].gs);
  std::string op = std::string("linear_") + quant_format_name(d.format);
  for (const LinearQPart& wp : d.more) op += std::string("+") + quant_format_name(wp.format);
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = op,
      .inputs = inputs,
      .outputs = outputs,
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [base, n_out, scratch_kind, rope_rows](const graph::InferArgs& a) {
            const uint32_t m = infer_linear_q({a.in[0], base.n, base.k})[0];
            if (rope_rows) check_kv_rows_live(base.name, a.in.back(), m);
            a.out[0] = graph::Shape{base.last_row ? 1 : m, n_out};
            for (size_t i = 0; i < scratch_kind.size(); ++i) {  // scratch follows the live rows
              graph::Shape& out = a.out[1 + i];
              switch (scratch_kind[i]) {
                case Scratch::Partial: break;  // fixed: a pair per gemv workgroup
                case Scratch::Split: break;    // fixed: the most slices of the most rows
                case Scratch::XqOut: out = graph::Shape{linear_q_xq_words(n_out)}; break;  // one row
                case Scratch::Normed: out = graph::Shape{m, base.k}; break;
                case Scratch::GateUp:
                case Scratch::Qkv: out = graph::Shape{m, base.n}; break;
                case Scratch::Xq: out = graph::Shape{m, base.k / 4}; break;
                case Scratch::Xs: out = graph::Shape{m, base.k / base.gs}; break;
              }
            }
          },
      .plan =
          [base, route_steps](const graph::PlanArgs& a, graph::Plan& p) {
            const LinearQLive live{.m = a.in[0][0],
                                   .max_groups_per_dim = a.caps->limits.maxComputeWorkgroupsPerDimension,
                                   .pos = base.rope ? a.sym[rope_qkv_symbol(*base.rope)] : 0};
            for (const auto& [id, steps] : route_steps)
              if (a.route_is(id)) plan_linear_q(base, live, steps, p);
          },
      .cost =
          [base, n_out, weight_bytes, has_res = d.residual.has_value()](const graph::PlanArgs& a) {
            // The weights once (q + scales), the rows of x read, y (and the residual).
            const uint64_t m = base.last_row ? 1 : a.in[0][0];
            uint64_t act = m * base.k * 4 + m * n_out * 4 * (has_res ? 2 : 1);
            if (base.rope)  // k and v into the caches
              act += 2 * m * base.rope->n_kv_heads * base.rope->head_dim * (base.rope_caches.f16 ? 2 : 4);
            return graph::NodeCost{weight_bytes + act, 2.0 * double(m) * base.n * base.k};
          },
  });
  return y;
}

}  // namespace wgrt::ops
