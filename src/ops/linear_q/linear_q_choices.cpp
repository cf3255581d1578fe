// linear_q's device choices: the knobs, the routes' row ranges, the gemv's lanes and int8 x,
// split K, the matrix-core gemm, and how the kernels read each weight format.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"
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
const knobs::Count kExpertsGemmFrom{"WGRT_EXPERTS_GEMM_FROM", 0, 1 << 24, kExpertsGemmMinPairs,
                                    "pairs from which a mixture of experts takes the grouped gemm (0: never)",
                                    knobs::Lab};
const knobs::Choice kGemvRope{"WGRT_GEMV_ROPE", "auto|0|1", "auto", "0: the q, k, v gemv leaves rope to its own kernel",
                              knobs::Lab};
}  // namespace


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

namespace linear_q_detail {
// gemv_m's first row count for a node: LinearQDesc::gemv_m_from where set.
uint32_t node_gemv_m_from(const gpu::DeviceCaps& caps, uint32_t n, int gemv_int8, uint32_t forced) {
  if (gemv_int8 == 0) return kLinearQGemvMaxRows + 1;
  return forced ? std::clamp<uint32_t>(forced, 2, kLinearQGemvMaxRows + 1) : gemv_m_from(caps, n, gemv_int8);
}
}  // namespace linear_q_detail

uint32_t linear_q_detail::experts_gemm_from(uint32_t forced) {
  return forced ? forced : uint32_t(kExpertsGemmFrom.get());
}

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

// Whether a node has the gemv_multi route: several rows of x per gemv workgroup, on int8 x.
bool linear_q_detail::gemv_multi_on(const gpu::DeviceCaps& caps, int gemv_int8, uint32_t gemv_x) {
  return gemv_x_rows(gemv_x) > 1 && gemv_takes_int8(caps, gemv_int8);
}

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

// The rows of split K's scratch [slices * M, N] for up to max_m rows of x: the most slices times
// rows that any live row count in the gemm route takes.
uint32_t linear_q_detail::split_scratch_rows(uint32_t max_m, uint32_t n, uint32_t k, uint32_t gs) {
  uint64_t rows = 0;
  const auto target = uint32_t(kGemmSplitWgs.get());  // read once, not per row count
  for (uint32_t m = 1; m <= max_m; ++m)
    rows = std::max<uint64_t>(rows, ceil_div(k, kslice_for(m, n, k, gs, target)) * m);
  return uint32_t(rows);
}

graph::RouteId linear_q_route(const gpu::DeviceCaps& caps, uint32_t n, uint32_t m, int gemv_int8, uint32_t gemv_x,
                              uint32_t gemv_m_from) {
  if (m <= gemv_max_rows()) {
    if (m >= linear_q_detail::node_gemv_m_from(caps, n, gemv_int8, gemv_m_from)) return kLinearQGemvM;
    return m >= 2 && linear_q_detail::gemv_multi_on(caps, gemv_int8, gemv_x) ? kLinearQGemvMulti : kLinearQGemv;
  }
  return m <= 7 ? kLinearQSmallM : kLinearQGemm;
}

namespace linear_q_detail {

namespace {
// In QuantFormat's order (kernel_format checks it).
constexpr KernelFormat kKernelFormats[] = {
    {QuantFormat::Q4gsw, 4, 0}, {QuantFormat::Q8, 8, 0},   {QuantFormat::Q6K, 6, 0},
    {QuantFormat::Q4K, 4, 1},   {QuantFormat::Q5K, 5, 1},  {QuantFormat::Q41, 4, 2},
    {QuantFormat::Q50, 5, 0},   {QuantFormat::Q51, 5, 2},  {QuantFormat::IQ4XS, 4, 3},
    {QuantFormat::Q2K, 2, 0},   {QuantFormat::Q3K, 3, 0},  {QuantFormat::IQ4NL, 4, 0}};
constexpr bool formats_in_order() {
  for (size_t i = 0; i < std::size(kKernelFormats); ++i)
    if (size_t(kKernelFormats[i].format) != i) return false;
  return true;
}
static_assert(formats_in_order() && std::size(kKernelFormats) == size_t(QuantFormat::IQ4NL) + 1);
}  // namespace

const KernelFormat& kernel_format(QuantFormat f) { return kKernelFormats[size_t(f)]; }

constexpr uint32_t kGemvWideRows = 16384;  // gemv_lanes: 32 lanes from here

// Lanes along K per gemv row set (linear_q_gemv.wgsl GV_TK): 64 (8 warps per workgroup) where the
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

// Workgroup memory of the gemv kernels (linear_q_gemv.wgsl's gv_x, gv_red and gv_sum, and
// iq4_grid.wgsl's tables, which every format's kernel holds) at `lanes` lanes per row set and xr
// rows of x per workgroup (tests/ops/workgroup_memory_test.cpp holds it to what Dawn counts).
uint64_t gemv_workgroup_bytes(uint32_t lanes, uint32_t xr) {
  const uint64_t threads = 4ull * lanes;  // GV_WG = GV_SETS * GV_TK
  constexpr uint64_t iq4_tables = 16 * 4 + 256 * 4;  // iq4_grid.wgsl's iq4_f and iq4_pair
  return uint64_t(lanes) * 9 * ((xr + 2) / 3) * 16 + threads * 16 + threads * 4 + iq4_tables;  // GV_XSTRIDE = 9 vec4
}

// Whether the gemv turns q and k itself (gemv_rope): each lane's 4 columns must be two pairs of
// one head (the normal layout, weights of whole 4-row groups) and the device must bind its 9
// storage buffers (10 with rows: gemv_rope_rows reads the positions' table; WebGPU's default
// limit is 8: rope_qkv follows the gemv there). It saves a dispatch per layer and the q|k|v
// round trip through memory, for one sequence and for a batched step alike. WGRT_GEMV_ROPE=0
// turns it off (to measure).
bool gemv_turns_rope(const gpu::DeviceCaps& caps, const RopeQkv& r, std::span<const LinearQPartPlan> parts) {
  if (r.q_norm) return false;  // q/k norms span a head's row sets: rope_qkv normalizes
  if (r.layout != RopeLayout::Normal || caps.limits.maxStorageBuffersPerShaderStage < (r.rows ? 10u : 9u))
    return false;
  for (const LinearQPartPlan& pp : parts)
    if (pp.n % 4 != 0) return false;
  return kGemvRope.get() != "0";
}

}  // namespace linear_q_detail

// Whether the gemv quantizes x to int8 as it stages it (linear_q_gemv_i8.wgsl XI8): on GPUs, where
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
         caps.limits.maxComputeInvocationsPerWorkgroup >= linear_q_detail::kWg;
}

uint32_t gemm_mma_bm(uint32_t n) {
  if (const std::string v = kMmaBm.get(); v != "auto") return uint32_t(std::stoul(v));
  return n >= kLinearQMmaMinN ? kLinearQMmaMaxBM : 0;
}

bool linear_q_takes_xq(const gpu::DeviceCaps& caps, QuantFormat f, int forced_int8) {
  if (kGemvXq.get() == "0") return false;
  return gemv_takes_int8(caps, forced_int8) && linear_q_detail::kernel_format(f).bits > 3;
}


}  // namespace wgrt::ops
