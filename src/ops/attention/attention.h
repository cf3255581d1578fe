// Scaled dot-product attention over the KV cache, causal, with GQA.
//
//   q    [n_tokens, n_heads * head_dim] f32 (post-RoPE), token i at absolute position pos + i
//   k/v  caches [n_kv_heads, n_ctx, head_dim] f32 or f16 (ops/kv_cache), already holding
//        positions 0 .. pos + n_tokens - 1
//   out  [n_tokens, n_heads * head_dim]; query i attends keys 0 .. pos + i, query head h
//        reads KV head h / (n_heads / n_kv_heads); scale 1/sqrt(head_dim) unless given.
//        With a sliding window (AttentionDesc::window) only keys pos + i - window + 1 .. pos + i;
//        with softcap each scaled score s is softcap * tanh(s / softcap). Every route below
//        applies both (the decode kernels start a chunk's keys at the window, the prefill
//        kernels mask where they mask the causal limit).
//
// Routes on n_tokens:
//   [1, 1]    decode, flash-decoding: each (KV head, chunk of the pos + 1 keys) gets a
//             workgroup that handles the query heads of the group (all of them where
//             registers and workgroup memory allow) and writes (max, sum, weighted V) per
//             query head and chunk to a scratch tensor; `decode_reduce` merges the chunks (a
//             workgroup per query head: the chunks' (max, sum) by shuffles, the weighted
//             partials as vec4s over chunk groups, their loads four chunks at a time).
//             On a device with subgroups, `decode_sg`: key groups of lanes, each with its own
//             online softmax, merged by shuffles at the end (one barrier in all); a context of
//             one chunk is written normalized and the plan skips decode_reduce (one dispatch).
//             `decode_vec`, taken first where a row fits one subgroup (any group: up to 4 of
//             its heads a workgroup), is the same with a lane per row word, up to 4 query
//             heads as vec4 components, every lane value a named register and the next turn's
//             K/V loaded ahead; it takes a context of up to 4 of its turns in one chunk
//             (AttentionVariants::one_chunk_keys: 256 keys at head dim 64, 128 at 128). Elsewhere
//             `decode_split`: an online softmax over blocks of 64 keys (32 for f32 rows past
//             128) through workgroup memory. plan picks the chunk count from the live context
//             (whole key blocks, up to kDecodeWorkgroups workgroups over all KV heads).
//   [2, max]  prefill. Head dims 32..128 (multiples of 32) on a device with subgroups of 8 lanes
//             or more, `prefill_rt`: the workgroup's rows of q staged once, each thread a register
//             tile of 4 rows x 2 keys for the scores and 4 rows x head_dim / 32 vec4s of the output,
//             K/V tiles of 16 keys in workgroup memory, the weights passed between lanes by shuffles.
//             Elsewhere from head dim 128 on a device with subgroups, `prefill_sg`: key groups
//             of lanes each own 4 rows (tokens x the group's query heads) as vec4 components and
//             a share of every row's elements, walk K/V tiles staged in workgroup memory as f32,
//             sum each score by shuffles and keep the rows' online softmax in registers.
//             Elsewhere `prefill`: tiles of up to 32 rows against tiles of up to 32 keys in
//             workgroup memory, online softmax, causal mask; a K/V tile is loaded once for all
//             query heads of its group.
// With AttentionDesc::rows (a step of several sequences, KvRows in kv_cache.h) query i attends
// cache rows b_i .. b_i + p_i of its own region (causal within its sequence) and the routes are
//   [1, decode_max_tokens]               flash-decoding, each token on its own (grid z = token,
//                                        the scratch a region per token, the chunk count from
//                                        max_keys; chunks past a token's keys are empty and
//                                        merge as nothing), decode_reduce per (head, token)
//   [decode_max_tokens + 1, max_tokens]  prefill: a tile takes the runs of tokens of one
//                                        sequence in turn (one run when the tile is one sequence)
// The kernels are the same entry points with the override TABLE; without rows they are built
// as before and read nothing more.
// head_dim (any multiple of 8 in 16..256), the GQA ratio (1 to 8) and the cache dtype are
// override constants; so are the tile sizes, picked at build as the fastest variant that fits
// the device's workgroup memory (attention_variants). A GQA group no power of two divides (3,
// 5, 6, 7) leaves the last decode workgroup of a KV head fewer heads and prefill tile rows past
// whole tokens idle. Caches split by KV heads (AttentionDesc::more_caches: a cache past the
// storage binding limit) run the decode or prefill kernel once per part, each over its heads
// (params kv_off), and one decode_reduce for all.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/kv_cache/kv_cache.h"

namespace wgrt::ops {

// The flash-decoding kernels; `best` takes decode_vec (up to 4 of the group's heads a workgroup),
// decode_sg, else decode_split, whichever fits the device (its subgroups, workgroup memory and
// invocations) first.
// WGRT_DECODE_KERNEL=vec|sg|split forces one (to measure).
enum class DecodeKernel : uint8_t { best, vec, sg, split };
const char* decode_kernel_name(DecodeKernel k);  // the entry point: "decode_vec", ...; "best"
// The prefill kernels: `best` takes prefill_rt (register tiles) where the head dim is a multiple
// of 32 up to 128, the device has subgroups of 8 lanes or more and its workgroup storage holds the
// rows' q and a K/V tile; else prefill_sg from head dim 128 where the device's subgroups hold its key
// groups; else prefill (tiles). WGRT_PREFILL_KERNEL=rt|sg|tile forces one (to measure).
enum class PrefillKernel : uint8_t { best, rt, sg, tile };
const char* prefill_kernel_name(PrefillKernel k);  // the entry point: "prefill_rt", "prefill_sg", "prefill"; "best"

struct AttentionDesc {
  std::string name;  // node and output name, e.g. "attn.3"
  graph::TensorId q;        // [n_tokens, n_heads * head_dim] f32
  graph::TensorId k_cache;  // [n_kv_heads, n_ctx, head_dim] F32 or F16 (State)
  graph::TensorId v_cache;
  std::vector<KvCachePart> more_caches;  // the caches' further KV heads (a cache split by heads), in order
  graph::SymbolId pos;      // absolute position of q's first token
  uint32_t n_heads = 0;
  std::optional<float> scale;     // default 1 / sqrt(head_dim)
  // Sliding window: query at position p attends keys at positions p - window + 1 .. p only (keys
  // with p - k >= window are masked; 0: no window). The cache stays full-length: older keys are
  // masked, not dropped, so every kernel route takes it (decode chunks before the window are empty).
  uint32_t window = 0;
  // Logit soft-capping: each scaled score s becomes softcap * tanh(s / softcap) (Gemma 2); 0: none.
  float softcap = 0;
  uint32_t decode_max_chunks = 0;  // flash-decoding split cap, 1..kMaxDecodeChunks; 0: default
  DecodeKernel decode_kernel = DecodeKernel::best;  // the flash-decoding kernel (tests force each)
  PrefillKernel prefill_kernel = PrefillKernel::best;  // likewise the prefill kernel
  // Per-token positions and cache regions (a step mixing sequences) instead of pos + i. With
  // rows, steps of 1 .. decode_max_tokens tokens take the flash-decoding route, each token on its
  // own (one decode token per sequence), longer steps the prefill route.
  std::optional<KvRows> rows;
  uint32_t decode_max_tokens = 1;  // with rows: 1 .. max_tokens
  // The output quantized ahead for the output projection's gemv (linear_q.h LinearQDesc::xq_in):
  // at one token the decode route also writes it as an xq row, `<name>.xq_ahead` (u32
  // linear_q_xq_words(n_heads * head_dim), xq_row.wgsl): the kernel that writes the output
  // (decode_vec or decode_sg at one chunk, else decode_reduce) takes its _xq entry point, which
  // stages the workgroup's outputs in workgroup memory and writes their blocks of 16 after them.
  // Needs a head_dim that is a multiple of 16.
  bool xq_out = false;
};

// Written into the kernels as WGSL constants (ops/kernel_constants.cpp): attention.wgsl's WG
// (threads of most entry points), RWG (decode_reduce's), MAX_GROUP (query heads per KV head),
// MAX_CHUNKS (decode chunks per head) and MAX_KPL (keys per P*V lane and block: the planner keeps
// KB / (WG / row words) at most that).
constexpr uint32_t kAttnWorkgroup = 256, kAttnReduceWorkgroup = 128, kAttnMaxGroup = 8, kMaxDecodeChunks = 256,
                   kAttnMaxKeysPerLane = 8;
constexpr uint32_t kAttnKeyBlock = 64;      // attention.wgsl KB (an override, 64 by default): keys per decode block
// Default split: up to kDecodeWorkgroups workgroups over all KV heads, whole 64-key blocks each.
// Measured on the H200 (132 SMs, 3 decode_vec workgroups resident per SM): 33-43 chunks per KV
// head of a Llama model (264-344 workgroups, one wave) beat 17-22 (too few to fill the GPU) and
// 64 (a second wave); 384 lands there past 3,072 keys (docs/perf/2026-12-04.md, "Flash-decoding: the merge in fewer round trips").
constexpr uint32_t kDecodeWorkgroups = 384;
// decode_vec runs a context in one chunk (no merge dispatch) while it takes at most this many of
// its workgroup's turns: on the H200 one chunk of 4 turns beat two chunks and their merge (head dim
// 64, 256 keys: 6.7 against 7.4 µs; head dim 128, 128 keys: 7.2 against 9.0), 8 turns lost
// (head dim 128, 256 keys: 11.8 against 9.7; docs/perf/2026-12-04.md, "What each node costs").
constexpr uint32_t kVecOneChunkTurns = 4;
constexpr uint32_t kVecKeysPerTurn = 4;  // attention_decode_vec.wgsl VKEYS: keys per key group and turn (k0..k3)
constexpr uint32_t kMinHeadDim = 16, kMaxHeadDim = 256;  // a multiple of 8 between
constexpr uint32_t kPrefillRtKeys = 16;   // attention_prefill_rt.wgsl RK: keys per f32 tile, 2 per key lane
constexpr uint32_t kPrefillRthKeys = 32;  // attention_prefill_rth.wgsl RHK: keys per f16 tile (the same bytes), 4 per lane

// The tile sizes of one node's kernels (override constants of attention.wgsl), and what they
// ask of the device.
struct DecodeSgShape {
  uint32_t lanes;       // DKL: lanes per key group, a power of two <= the subgroup
  uint32_t row_words;   // DWPL: K/V row words per lane
  uint32_t keys;        // DKPI: keys per key group and turn
  uint32_t threads;     // DWG
};
struct PrefillSgShape {
  uint32_t lanes;    // PL: lanes per key group, a power of two <= the subgroup
  uint32_t vec4s;    // PV4: vec4s of a row per lane (1..4)
  uint32_t keys;     // PBK: keys per tile
  uint32_t threads;  // PWG
  uint32_t fetch;    // PNF: a tile's K (and V) words per thread, 1..4
};
struct PrefillRtShape {
  bool f16_tiles;    // prefill_rth: f16 K/V tiles of 32 keys (f16 caches), else prefill_rt's f32 tiles of 16
  uint32_t threads;  // RTW: threads / 2 rows per workgroup
  uint32_t fetch;    // RTF: a tile's K (and V) words per thread loaded a tile ahead, 1..4; 0: copied after the barrier
};
struct DecodeVecShape {
  uint32_t lanes;    // VKL: lanes per key group, the row's words rounded up to a power of two
  uint32_t threads;  // VWG
};
struct AttentionVariants {
  DecodeKernel decode_kernel;  // vec, sg or split (never best)
  DecodeSgShape sg;       // decode_sg's shape (decode_sg only)
  DecodeVecShape vec;     // decode_vec's shape (decode_vec only)
  uint32_t decode_heads;  // HPW: query heads per decode workgroup, divides the group
  uint32_t key_block;     // KB: keys per decode block (the chunks are whole blocks)
  uint32_t one_chunk_keys;  // contexts up to this many keys decode in one chunk (at least key_block)
  PrefillKernel prefill_kernel;  // sg or tile (never best)
  PrefillSgShape psg;     // prefill_sg's shape (prefill_sg only)
  PrefillRtShape prt;     // prefill_rt's shape (prefill_rt only)
  uint32_t prefill_rows;  // (token, head) rows per prefill workgroup (tile: ROWS, whole tokens)
  uint32_t prefill_keys;  // BK: keys per prefill tile (tile only)
  WorkgroupFootprint decode, reduce, prefill;
};
// The prefill entry point of these variants: prefill_kernel_name, but "prefill_rth" where
// prefill_rt keeps f16 tiles.
const char* prefill_entry(const AttentionVariants& v);
// The fastest variants of each kernel that fit `limits` for this shape; throws
// std::invalid_argument naming `name`, the kernel and the limit when none does. `sg_lanes`:
// the subgroup lanes kernels may shuffle across (gpu::subgroup_lanes; 1: none, decode_split).
// `want` other than best restricts the decode kernel to that one (an error if it cannot run);
// `want_prefill` likewise the prefill kernel. `xq_out`: AttentionDesc::xq_out's (the decode
// kernels then stage their outputs in workgroup memory).
AttentionVariants attention_variants(const WGPULimits& limits, const std::string& name, uint32_t head_dim,
                                     uint32_t group, bool f16, uint32_t sg_lanes = 1,
                                     DecodeKernel want = DecodeKernel::best,
                                     PrefillKernel want_prefill = PrefillKernel::best, bool xq_out = false);

graph::TensorId add_attention(graph::Graph& g, const AttentionDesc& d);
// The xq output of the attention node named `name` (AttentionDesc::xq_out).
graph::TensorId attention_xq(const graph::Graph& g, const std::string& name);
// Whether the model builders ask for xq_out where the output projection reads it, for an
// attention output of `width` values (n_heads x head_dim): from kAttnXqMinWidth on. On the H200
// the epilogue costs the attention 0.5-0.9 µs a layer and saves the output projection 1.1 at
// 4,096 values but 0.4 at 2,048 (docs/perf/2026-12-05.md, "The L2 prefetch measured and removed"). WGRT_ATTN_XQ=1 asks for it at
// any width, 0 never (to measure); anything else throws naming it.
constexpr uint32_t kAttnXqMinWidth = 4096;
bool attention_xq_wanted(uint32_t width);

struct AttentionParams {
  uint32_t n_tokens, n_heads, n_kv_heads, pos_sym;  // n_heads: all parts'; n_kv_heads: this part's; pos's symbol
  uint32_t n_ctx, n_chunks, chunk_blocks, ml_offset;
  float scale;
  uint32_t kv_off;  // the cache part's first KV head
  uint32_t window;  // AttentionDesc::window (0: none)
  float softcap;    // AttentionDesc::softcap (0: none)
};
static_assert(sizeof(AttentionParams) == 48);
extern const ParamLayout kAttentionLayout;

struct AttentionInferCtx {
  graph::Shape q, cache;
  uint32_t n_heads;
};
graph::Shape infer_attention(const AttentionInferCtx& c);

// Route ids (graph/routes.h): flash_decode [1, 1], prefill [2, max] on q's rows (with rows:
// [1, decode_max_tokens] and past it).
inline constexpr graph::RouteId kAttentionDecode{1}, kAttentionPrefill{2};
struct AttentionPlanCtx {
  uint32_t n_tokens, n_heads;
  std::span<const uint32_t> part_heads;  // each cache part's KV heads: a decode / prefill kernel each
  uint32_t head_dim, n_ctx;
  int64_t pos;  // with rows: the max_keys symbol's value (checked; kernels read pos from the symbol block)
  uint32_t pos_sym;  // that symbol
  float scale;
  uint32_t window;  // AttentionDesc::window
  float softcap;    // AttentionDesc::softcap
  uint32_t max_chunks;  // the split cap
  bool decode;  // the active route: flash_decode (else prefill)
  uint32_t decode_heads, key_block, one_chunk_keys, prefill_rows;  // AttentionVariants
  bool prefill_by_rows;  // prefill_rt, prefill_sg: workgroups of prefill_rows rows (tile: of prefill_rows / group tokens)
  bool decode_merges_itself;  // decode_vec / decode_sg: one chunk is written normalized, no merge
  bool rows = false;              // AttentionDesc::rows
  uint32_t decode_tokens = 1;     // tokens the decode scratch holds (rows: decode_max_tokens)
};
// Throws std::out_of_range when pos + n_tokens > n_ctx (with rows: max_keys outside 1..n_ctx).
void plan_attention(const AttentionPlanCtx& c, graph::Plan& plan);

// Flash-decoding split for a context of `n_keys`: chunks of whole key blocks, as many
// chunks as blocks up to `max_chunks`; one chunk up to `one_chunk_keys` keys
// (AttentionVariants::one_chunk_keys; 0: up to one block).
struct DecodeSplit {
  uint32_t n_chunks, chunk_blocks;
};
DecodeSplit decode_split(uint32_t n_keys, uint32_t max_chunks, uint32_t key_block = kAttnKeyBlock,
                         uint32_t one_chunk_keys = 0);

}  // namespace wgrt::ops
