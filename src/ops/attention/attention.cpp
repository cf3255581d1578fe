#include "ops/attention/attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "ops/linear_q/linear_q.h"
#include "support/knobs.h"

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(AttentionParams, n_tokens)},
                                  {"n_heads", offsetof(AttentionParams, n_heads)},
                                  {"n_kv_heads", offsetof(AttentionParams, n_kv_heads)},
                                  {"pos_sym", offsetof(AttentionParams, pos_sym)},
                                  {"n_ctx", offsetof(AttentionParams, n_ctx)},
                                  {"n_chunks", offsetof(AttentionParams, n_chunks)},
                                  {"chunk_blocks", offsetof(AttentionParams, chunk_blocks)},
                                  {"ml_offset", offsetof(AttentionParams, ml_offset)},
                                  {"scale", offsetof(AttentionParams, scale)},
                                  {"kv_off", offsetof(AttentionParams, kv_off)},
                                  {"window", offsetof(AttentionParams, window)},
                                  {"softcap", offsetof(AttentionParams, softcap)}};
// decode_sg's register budget per lane (attention_decode_sg.wgsl DLD, DACC, DSC): K (and V) words loaded
// per turn, vec4 accumulators, scores per turn; and its largest workgroup.
constexpr uint32_t kSgLoads = 4, kSgAcc = 8, kSgScores = 16, kSgMaxThreads = 128;
constexpr uint32_t kVecHeads = 4;  // decode_vec: query heads per workgroup, the components of a vec4

// attention's knobs (support/knobs.h): each forces a kernel or a tile, to measure.
const knobs::Choice kDecodeBlock{"WGRT_DECODE_BLOCK", "auto|64|128|256", "auto",
                                 "keys per decode_vec / decode_sg chunk", knobs::Lab};
const knobs::Count kDecodeWgs{"WGRT_DECODE_WGS", 1, 65536, kDecodeWorkgroups,
                              "the flash-decoding split's target workgroups", knobs::Lab};
const knobs::Choice kPrefillQreg{"WGRT_PREFILL_QREG", "0|1", "1", "0: prefill reads q from workgroup memory",
                                 knobs::Lab};
const knobs::Dims kPrefillTile{"WGRT_PREFILL_TILE", 0, 1024, "ROWSxKEYS: prefill's only tile (0x0: any)",
                               knobs::Lab};
const knobs::Choice kDecodeKernel{"WGRT_DECODE_KERNEL", "best|vec|sg|split", "best", "the decode kernel",
                                  knobs::Lab};
const knobs::Choice kPrefillKernel{"WGRT_PREFILL_KERNEL", "best|rt|sg|tile", "best", "the prefill kernel",
                                   knobs::Lab};
const knobs::Count kPrefillRt{"WGRT_PREFILL_RT", 0, 1024, 0,
                              "prefill_rt's threads, a power of two from 8 (0: the largest that fits)", knobs::Lab};
const knobs::Dims kPrefillSg{"WGRT_PREFILL_SG", 0, 1024,
                             "THREADSxKEYS of prefill_sg: powers of two, 4..64 keys (0x0: the defaults)", knobs::Lab};
const knobs::Choice kPrefillRth{"WGRT_PREFILL_RTH", "0|1", "1", "0: prefill_rt converts f16 caches to f32 tiles",
                                knobs::Lab};
const knobs::Choice kAttnXq{"WGRT_ATTN_XQ", "auto|0|1", "auto", "attention quantizes its output ahead for the gemv",
                            knobs::Lab};

// decode_vec's and decode_sg's chunks are whole blocks of this many keys: a context of up to one
// block runs in one dispatch. WGRT_DECODE_BLOCK forces one (to measure).
uint32_t decode_sg_block() {
  const std::string b = kDecodeBlock.get();
  return b == "auto" ? kAttnKeyBlock : uint32_t(std::stoul(b));
}

// The flash-decoding split's target workgroups over all KV heads (kDecodeWorkgroups);
// WGRT_DECODE_WGS=N sets another (to measure).
uint32_t decode_workgroups() { return uint32_t(kDecodeWgs.get()); }

// WGRT_PREFILL_QREG=0 has prefill read q from workgroup memory in the score phase even where
// a row fits the registers (to measure).
bool prefill_q_in_registers() { return kPrefillQreg.get() == "1"; }

// WGRT_PREFILL_TILE=ROWSxKEYS (e.g. 32x16) narrows prefill's tiles to one (to measure); 0x0: any.
std::pair<uint32_t, uint32_t> prefill_tile_wanted() { return kPrefillTile.get(); }

// WGRT_DECODE_KERNEL=vec|sg|split narrows `best` to one kernel (to measure).
DecodeKernel decode_kernel_wanted(DecodeKernel want) {
  const std::string k = kDecodeKernel.get();
  if (want != DecodeKernel::best || k == "best") return want;
  return k == "vec" ? DecodeKernel::vec : k == "sg" ? DecodeKernel::sg : DecodeKernel::split;
}

// WGRT_PREFILL_KERNEL=rt|sg|tile narrows `best` to one prefill kernel (to measure).
PrefillKernel prefill_kernel_wanted(PrefillKernel want) {
  const std::string k = kPrefillKernel.get();
  if (want != PrefillKernel::best || k == "best") return want;
  return k == "rt" ? PrefillKernel::rt : k == "sg" ? PrefillKernel::sg : PrefillKernel::tile;
}

bool pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

// WGRT_PREFILL_RT=THREADS (e.g. 64) sets prefill_rt's workgroup (to measure); 0: the largest
// that fits.
uint32_t prefill_rt_wanted() {
  const auto threads = uint32_t(kPrefillRt.get());
  if (threads != 0 && (threads < 8 || !pow2(threads)))
    throw std::invalid_argument(
        fmt::format("WGRT_PREFILL_RT='{}' (hint: a thread count, a power of two from 8 to 1024)", threads));
  return threads;
}

// WGRT_PREFILL_SG=THREADSxKEYS (e.g. 128x16) sets prefill_sg's workgroup and tile keys (to
// measure); 0x0: the defaults.
std::pair<uint32_t, uint32_t> prefill_sg_wanted() {
  const auto [threads, keys] = kPrefillSg.get();
  if ((threads || keys) && (!pow2(threads) || keys < 4 || keys > 64 || !pow2(keys)))
    throw std::invalid_argument(fmt::format("WGRT_PREFILL_SG='{}x{}' (hint: THREADSxKEYS, e.g. 128x16: powers of "
                                            "two, up to 1024 threads, 4..64 keys)", threads, keys));
  return {threads, keys};
}

// WGRT_PREFILL_RTH=0 has prefill_rt convert f16 caches into f32 tiles (prefill_rt) instead of
// keeping them f16 (prefill_rth), to measure.
bool prefill_rth_wanted() { return kPrefillRth.get() == "1"; }

// Query heads per decode workgroup to try, most first: the group spread evenly over 1, 2, 4, 8
// workgroups (8: 8, 4, 2, 1; 7: 7, 4, 2, 1; 6: 6, 3, 2, 1).
std::vector<uint32_t> heads_per_workgroup(uint32_t group) {
  std::vector<uint32_t> hs;
  for (uint32_t w = 1; w <= group; w *= 2) {
    const uint32_t h = uint32_t(ceil_div(group, w));
    if (hs.empty() || h < hs.back()) hs.push_back(h);
  }
  if (hs.back() != 1) hs.push_back(1);
  return hs;
}

// Scratch: per query head and chunk, head_dim weighted-V sums, then (max, sum) pairs.
uint32_t ml_offset(uint32_t n_heads, uint32_t max_chunks, uint32_t head_dim) {
  return n_heads * max_chunks * head_dim;
}
}  // namespace

const ParamLayout kAttentionLayout{"attention", sizeof(AttentionParams), kFields};

const char* decode_kernel_name(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::vec: return "decode_vec";
    case DecodeKernel::sg: return "decode_sg";
    case DecodeKernel::split: return "decode_split";
    case DecodeKernel::best: break;
  }
  return "best";
}

const char* prefill_kernel_name(PrefillKernel k) {
  switch (k) {
    case PrefillKernel::rt: return "prefill_rt";
    case PrefillKernel::sg: return "prefill_sg";
    case PrefillKernel::tile: return "prefill";
    case PrefillKernel::best: break;
  }
  return "best";
}

const char* prefill_entry(const AttentionVariants& v) {
  return v.prefill_kernel == PrefillKernel::rt && v.prt.f16_tiles ? "prefill_rth" : prefill_kernel_name(v.prefill_kernel);
}

// Footprints from the WGSL declarations (attention.wgsl), each variable rounded to 16 bytes.
AttentionVariants attention_variants(const WGPULimits& limits, const std::string& name, uint32_t head_dim,
                                     uint32_t group, bool f16, uint32_t sg_lanes, DecodeKernel want,
                                     PrefillKernel want_prefill, bool xq_out) {
  constexpr uint32_t wg = kAttnWorkgroup, reduce_wg = kAttnReduceWorkgroup, max_kpl = kAttnMaxKeysPerLane;
  const uint32_t row_words = head_dim / (f16 ? 8 : 4), d4 = head_dim / 4;
  // xo, the outputs the self-merging kernels and decode_reduce stage (XO values; 1 without xq_out).
  auto xo_bytes = [&](uint32_t heads) { return wg_var_bytes(uint64_t(xq_out ? heads * head_dim : 1) * 4); };
  AttentionVariants v{};
  // decode_split: a block of 64 keys unless a row has more than 32 words, so that every P*V
  // lane (WG / row_words of them) holds at most MAX_KPL keys of a block.
  const uint32_t split_block = wg / row_words >= kAttnKeyBlock / max_kpl ? kAttnKeyBlock : kAttnKeyBlock / 2;
  // Candidates fastest first. decode_vec (up to 4 of the group's heads per workgroup, a lane per
  // row word; larger groups over several workgroups, K/V read once per 4 heads): on the H200 it
  // beat decode_sg by 5-30% in the lab at GQA 4 (head dim 64 and 128) and by 4% / 11% in tg128 at
  // depth 0 / 4096 (docs/perf/2026-12-02.md, "decode_vec against decode_sg"); on an H100 at GQA 8
  // and head dim 128 (Qwen3-30B-A3B's) by 2.1x / 2.6x in the lab at 128 / 4,096 keys and by 9% / 44%
  // in that model's tg128 at depth 0 / 4096 (docs/perf/2026-12-07.md, "Twenty-first session").
  // Then decode_sg with all of the group's heads (K/V read once per group) down to one, then
  // decode_split likewise.
  struct Decode {
    DecodeKernel kernel;
    DecodeSgShape sg;
    DecodeVecShape vec;
    uint32_t heads;
  };
  std::vector<Decode> decode;
  std::vector<WorkgroupFootprint> footprint;
  want = decode_kernel_wanted(want);
  const bool any = want == DecodeKernel::best;
  auto add_vec = [&] {
    uint32_t lanes = 1;
    while (lanes < row_words) lanes *= 2;
    // Fewer subgroups per workgroup need less workgroup memory for the merge.
    for (uint32_t threads = std::min<uint32_t>(kSgMaxThreads, 4 * sg_lanes); lanes <= sg_lanes && threads >= sg_lanes;
         threads /= 2) {
      // As many heads per workgroup as evenly spread over the fewest workgroups (8: 4 + 4, 7: 4 + 3).
      const uint32_t hpw = uint32_t(ceil_div(group, ceil_div(group, kVecHeads)));
      const uint64_t subgroups = threads / sg_lanes;
      decode.push_back({DecodeKernel::vec, {}, {lanes, threads}, hpw});
      footprint.push_back(
          {wg_var_bytes(subgroups * 2 * 16) + wg_var_bytes(subgroups * head_dim * 16) + xo_bytes(hpw), threads});
    }
  };
  if (sg_lanes >= 4 && (any || want == DecodeKernel::vec)) add_vec();
  if (sg_lanes >= 4 && (any || want == DecodeKernel::sg)) {
    uint32_t lanes = 1;
    while (lanes * 2 <= std::min(row_words, sg_lanes)) lanes *= 2;
    const uint32_t wpl = uint32_t(ceil_div(row_words, lanes)), e4 = f16 ? 2 : 1;
    if (wpl <= kSgLoads && wpl * e4 <= kSgAcc) {
      const DecodeSgShape sh{lanes, wpl, kSgLoads / wpl, std::min<uint32_t>(kSgMaxThreads, 4 * sg_lanes)};
      const uint32_t subgroups = sh.threads / sg_lanes;
      for (uint32_t hpw : heads_per_workgroup(group)) {
        if (hpw * wpl * e4 > kSgAcc || hpw * sh.keys > kSgScores) continue;
        decode.push_back({DecodeKernel::sg, sh, {}, hpw});
        footprint.push_back({wg_var_bytes(uint64_t(subgroups) * hpw * 8) +
                                 wg_var_bytes(uint64_t(subgroups) * hpw * head_dim * 4) + xo_bytes(hpw),
                             sh.threads});
      }
    }
  }
  if (any || want == DecodeKernel::split) {
    for (uint32_t hpw : heads_per_workgroup(group)) {
      decode.push_back({DecodeKernel::split, {}, {}, hpw});
      footprint.push_back({wg_var_bytes(uint64_t(hpw) * d4 * 16) + wg_var_bytes(uint64_t(hpw) * wg * 4) +
                               wg_var_bytes(uint64_t(hpw) * split_block * 4) + 2 * wg_var_bytes(kAttnMaxGroup * 4) +
                               wg_var_bytes(uint64_t(wg) * (f16 ? 2 : 1) * 16),
                           wg});
    }
  }
  if (decode.empty())
    throw std::invalid_argument(fmt::format(
        "{}: attention decode: {} cannot run head_dim {} ({} cache) with {} subgroup lanes (hint: another "
        "decode kernel, or none forced: WGRT_DECODE_KERNEL)",
        name, decode_kernel_name(want), head_dim, f16 ? "f16" : "f32", sg_lanes));
  const size_t di = pick_variant(limits, name + ": attention decode", footprint);
  v.decode_kernel = decode[di].kernel;
  v.sg = decode[di].sg;
  v.vec = decode[di].vec;
  v.decode_heads = decode[di].heads;
  v.key_block = v.decode_kernel == DecodeKernel::split ? split_block : decode_sg_block();
  v.one_chunk_keys =
      v.decode_kernel == DecodeKernel::vec
          ? std::max(v.key_block, kVecOneChunkTurns * (v.vec.threads / v.vec.lanes) * kVecKeysPerTurn)
          : v.key_block;
  v.decode = footprint[di];
  v.reduce = {wg_var_bytes(kMaxDecodeChunks * 4) + wg_var_bytes(reduce_wg * 4) + wg_var_bytes(reduce_wg * 16) +
                  xo_bytes(1),
              reduce_wg};
  require_fits(limits, name + ": attention decode_reduce", v.reduce);

  // prefill_rt where the head dim is a multiple of 32 up to 128 (a thread's output columns: one to
  // four vec4s) and the device's subgroups hold the 8 key lanes of a row group: the most threads
  // (rows per workgroup, each K/V tile shared by more rows) whose q rows and K/V tile fit the
  // workgroup storage, up to 128 (64 rows at head dim 128: 32 KiB of q, 16 KiB of tiles).
  want_prefill = prefill_kernel_wanted(want_prefill);
  const bool rt_shape = head_dim % 32 == 0 && head_dim <= 128 && sg_lanes >= 8;
  if (want_prefill == PrefillKernel::rt && !rt_shape)
    throw std::invalid_argument(fmt::format(
        "{}: attention prefill: prefill_rt cannot run head_dim {} with {} subgroup lanes (hint: head dims "
        "32..128 in steps of 32 on a device with subgroups of 8 or more; another prefill kernel, or none "
        "forced: WGRT_PREFILL_KERNEL)",
        name, head_dim, sg_lanes));
  if (rt_shape && (want_prefill == PrefillKernel::rt || want_prefill == PrefillKernel::best)) {
    const uint32_t want_threads = prefill_rt_wanted();
    std::vector<uint32_t> threads;
    std::vector<WorkgroupFootprint> rt;
    for (uint32_t n : want_threads ? std::vector<uint32_t>{want_threads} : std::vector<uint32_t>{128, 64, 32}) {
      if (n < sg_lanes) continue;
      threads.push_back(n);
      rt.push_back({wg_var_bytes(uint64_t(n / 2) * d4 * 16) + 2 * wg_var_bytes(uint64_t(kPrefillRtKeys) * d4 * 16), n});
    }
    const size_t ri = first_fit(limits, rt);
    if (ri < rt.size()) {
      v.prefill_kernel = PrefillKernel::rt;
      // f16 caches keep their halves in the tiles (prefill_rth): twice the keys in the same bytes.
      // Up to 4 words of K and of V per thread are loaded a tile ahead; past that (f32 rows, few
      // threads) a tile is copied after its barrier (RTF 0).
      const bool f16_tiles = f16 && prefill_rth_wanted();
      const uint32_t tile_words = (f16_tiles ? kPrefillRthKeys : kPrefillRtKeys) * row_words;
      const uint32_t fetch = uint32_t(ceil_div(tile_words, threads[ri]));
      v.prt = {f16_tiles, threads[ri], fetch <= 4 ? fetch : 0};
      v.prefill_rows = threads[ri] / 2;
      v.prefill = rt[ri];
      return v;
    }
    if (want_prefill == PrefillKernel::rt)
      throw std::invalid_argument(fmt::format(
          "{}: attention prefill_rt: no workgroup holds head_dim {}'s q rows and K/V tile in {} bytes of workgroup "
          "storage (hint: WGRT_PREFILL_RT, or another prefill kernel: WGRT_PREFILL_KERNEL)",
          name, head_dim, limits.maxComputeWorkgroupStorageSize));
  }

  // prefill_sg for head dims from 128 where a key group (a lane per up to 4 vec4s of a row) fits
  // the subgroup: on the H200 (lab, 512 queries, f16) it took 2,247 µs against the tiles' 2,609 at
  // head dim 128 and 4,608 keys, 256 against 211 at 512 keys, and lost at head dim 64 (1,345
  // against 1,143); docs/perf/2026-12-03.md, "Prefill attention by key groups". 32 key groups per workgroup (at most 256 threads: 128
  // rows at head dim 128); tiles of as many keys (up to 32) as the workgroup storage holds for K
  // and V in f32 and 4 words per thread load.
  uint32_t ps_lanes = 1;
  while (ps_lanes * 4 < d4) ps_lanes *= 2;  // ceil(d4 / 4), a power of two
  const bool sg_fits = sg_lanes >= 4 && ps_lanes <= sg_lanes;
  if (want_prefill == PrefillKernel::sg && !sg_fits)
    throw std::invalid_argument(fmt::format(
        "{}: attention prefill: prefill_sg cannot run head_dim {} with {} subgroup lanes (hint: another "
        "prefill kernel, or none forced: WGRT_PREFILL_KERNEL)",
        name, head_dim, sg_lanes));
  const bool sg_first = head_dim >= 128;  // below, the tiles measured faster (head dim 64)
  if (sg_fits && (want_prefill == PrefillKernel::sg || (want_prefill == PrefillKernel::best && sg_first))) {
    const auto [want_threads, want_keys] = prefill_sg_wanted();
    const uint32_t threads = std::max(sg_lanes, want_threads ? want_threads : std::min(256u, 32 * ps_lanes));
    std::vector<uint32_t> keys;
    std::vector<WorkgroupFootprint> ps;
    for (uint32_t k : want_keys ? std::vector<uint32_t>{want_keys} : std::vector<uint32_t>{32, 16, 8, 4}) {
      if (k * row_words > 4 * threads) continue;  // PNF <= 4
      keys.push_back(k);
      ps.push_back({2 * wg_var_bytes(uint64_t(k) * head_dim * 4), threads});
    }
    if (keys.empty())
      throw std::invalid_argument(fmt::format("{}: attention prefill_sg: no tile of {} threads holds head_dim {} "
                                              "(hint: WGRT_PREFILL_SG)", name, threads, head_dim));
    const size_t pi = pick_variant(limits, name + ": attention prefill_sg", ps);
    v.prefill_kernel = PrefillKernel::sg;
    v.psg = {ps_lanes, uint32_t(ceil_div(d4, ps_lanes)), keys[pi], threads,
             uint32_t(ceil_div(keys[pi] * row_words, threads))};
    v.prefill_rows = 4 * threads / ps_lanes;
    v.prefill = ps[pi];
    return v;
  }

  // prefill (tiles): more rows per tile share each K/V tile, more keys per tile mean fewer
  // barriers. Thread columns (WG / rows of them) hold at most 4 keys and 4 output vec4s each.
  v.prefill_kernel = PrefillKernel::tile;
  struct Tile {
    uint32_t rows, keys;
  };
  std::vector<Tile> tiles;
  std::vector<WorkgroupFootprint> prefill;
  const auto [want_rows, want_keys] = prefill_tile_wanted();
  for (Tile t : {Tile{32, 32}, {32, 16}, {16, 16}, {16, 8}, {8, 16}, {8, 8}, {8, 4}}) {
    const uint32_t columns = wg / t.rows;
    if (t.rows < group || ceil_div(d4, columns) > 4 || ceil_div(t.keys, columns) > 4) continue;
    if (want_rows && (t.rows != want_rows || t.keys != want_keys)) continue;
    tiles.push_back(t);
    prefill.push_back({wg_var_bytes(uint64_t(t.rows) * (d4 + 1) * 16) + wg_var_bytes(uint64_t(t.keys) * d4 * 16) +
                           wg_var_bytes(uint64_t(t.rows) * (t.keys + 1) * 4) + 2 * wg_var_bytes(wg * 4),
                       wg});
  }
  size_t pi = pick_variant(limits, name + ": attention prefill", prefill);
  v.prefill_rows = tiles[pi].rows;
  v.prefill_keys = tiles[pi].keys;
  v.prefill = prefill[pi];
  return v;
}

DecodeSplit decode_split(uint32_t n_keys, uint32_t max_chunks, uint32_t key_block, uint32_t one_chunk_keys) {
  uint32_t blocks = uint32_t(ceil_div(n_keys, key_block));
  if (n_keys <= one_chunk_keys) return {1, blocks};
  uint32_t per = uint32_t(ceil_div(blocks, max_chunks));
  return {uint32_t(ceil_div(blocks, per)), per};
}

graph::Shape infer_attention(const AttentionInferCtx& c) {
  if (c.q.rank != 2 || c.cache.rank != 3 || c.n_heads == 0 || c.q[1] != c.n_heads * c.cache[2])
    throw std::invalid_argument(fmt::format(
        "attention: q {} must be [n_tokens, {} heads x head_dim {}]", graph::to_string(c.q),
        c.n_heads, c.cache.rank == 3 ? c.cache[2] : 0));
  return c.q;
}

void plan_attention(const AttentionPlanCtx& c, graph::Plan& plan) {
  if (c.rows) {
    check_max_keys("attention", c.pos, c.n_ctx);
  } else if (c.pos < 0 || c.pos + c.n_tokens > c.n_ctx) {
    throw std::out_of_range(fmt::format(
        "attention: {} tokens at pos {} need keys past the context of {}", c.n_tokens, c.pos, c.n_ctx));
  }
  uint32_t n_kv = 0;
  for (uint32_t h : c.part_heads) n_kv += h;
  AttentionParams p{};
  p.n_tokens = c.n_tokens;
  p.n_heads = c.n_heads;
  p.pos_sym = c.pos_sym;
  p.n_ctx = c.n_ctx;
  p.scale = c.scale;
  p.window = c.window;
  p.softcap = c.softcap;
  const uint32_t group = c.n_heads / n_kv;
  const size_t parts = c.part_heads.size();
  DecodeSplit s{};
  if (c.decode) {
    // The longest context of the step (rows: max_keys) sets the split; each token's own keys end
    // at or before it.
    s = decode_split(c.rows ? uint32_t(c.pos) : uint32_t(c.pos) + 1, c.max_chunks, c.key_block, c.one_chunk_keys);
    p.n_chunks = s.n_chunks;
    p.chunk_blocks = s.chunk_blocks;
    p.ml_offset = ml_offset(c.n_heads * c.decode_tokens, c.max_chunks, c.head_dim);
  }
  const uint32_t tokens = c.rows && c.decode ? c.n_tokens : 1;
  // A decode or prefill kernel per cache part, over that part's KV heads.
  for (size_t i = 0; i < parts; ++i) {
    p.n_kv_heads = c.part_heads[i];
    plan.params[i].set(p);
    plan.grids[i] = c.decode ? graph::Grid{s.n_chunks, c.part_heads[i] * uint32_t(ceil_div(group, c.decode_heads)),
                                           tokens}
                 : c.prefill_by_rows
                     ? graph::Grid{uint32_t(ceil_div(c.n_tokens * group, c.prefill_rows)), c.part_heads[i], 1}
                     : graph::Grid{uint32_t(ceil_div(c.n_tokens, c.prefill_rows / group)), c.part_heads[i], 1};
    p.kv_off += c.part_heads[i];
  }
  if (c.decode) {
    p.kv_off = 0;
    p.n_kv_heads = n_kv;
    plan.params[parts].set(p);
    // decode_vec and decode_sg write a single chunk's output themselves: no merge (chunk 0 holds
    // every token's first key, so no token's only chunk is empty).
    plan.grids[parts] =
        c.decode_merges_itself && s.n_chunks == 1 ? graph::Grid{0, 0, 0} : graph::Grid{c.n_heads, tokens, 1};
  }
}

graph::TensorId add_attention(graph::Graph& g, const AttentionDesc& d) {
  const graph::Tensor& q = graph::tensor_info(g, d.q);
  const graph::Tensor& kc = graph::tensor_info(g, d.k_cache);
  if (q.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: attention takes f32 q", d.name));
  const std::vector<uint32_t> part_heads = kv_part_heads(g, d.name, d.k_cache, d.v_cache, d.more_caches);
  if (part_heads.size() + 1 > size_t(graph::kMaxDispatches))
    throw std::invalid_argument(fmt::format("{}: {} cache parts, past the {} a route's kernels allow", d.name,
                                            part_heads.size(), graph::kMaxDispatches - 1));
  graph::Shape out_shape = infer_attention({q.max_shape, kc.max_shape, d.n_heads});
  uint32_t n_kv = 0;
  for (uint32_t h : part_heads) n_kv += h;
  const uint32_t n_ctx = kc.max_shape[1], head_dim = kc.max_shape[2];
  const uint32_t max_tokens = q.max_shape[0];  // copied: add_tensor below may add tensors
  const bool rows = d.rows.has_value();
  if (rows) {
    check_kv_rows(g, d.name, *d.rows, max_tokens);
    if (d.decode_max_tokens < 1 || d.decode_max_tokens > max_tokens)
      throw std::invalid_argument(fmt::format("{}: decode_max_tokens {} is outside 1..{} (max_tokens)", d.name,
                                              d.decode_max_tokens, max_tokens));
  }
  const uint32_t decode_tokens = rows ? d.decode_max_tokens : 1;  // the flash-decoding route's top
  if (head_dim % 8 != 0 || head_dim < kMinHeadDim || head_dim > kMaxHeadDim)
    throw std::invalid_argument(fmt::format("{}: head_dim {} (supported: multiples of 8 from {} to {})", d.name,
                                            head_dim, kMinHeadDim, kMaxHeadDim));
  if (d.n_heads % n_kv != 0 || d.n_heads / n_kv > kAttnMaxGroup)
    throw std::invalid_argument(fmt::format(
        "{}: {} query heads over {} KV heads (supported GQA ratios: 1 to 8)", d.name, d.n_heads, n_kv));
  uint32_t max_chunks = d.decode_max_chunks ? d.decode_max_chunks
                                             : std::clamp<uint32_t>(decode_workgroups() / n_kv, 1, kMaxDecodeChunks);
  if (max_chunks > kMaxDecodeChunks)
    throw std::invalid_argument(fmt::format("{}: decode_max_chunks {} past {}", d.name, max_chunks, kMaxDecodeChunks));
  const uint32_t group = d.n_heads / n_kv;
  // q8_0 caches are read as f16 words dequantized in registers (attention.wgsl q8_word): F16 set.
  const graph::DType kt = kc.dtype, vt = graph::tensor_info(g, d.v_cache).dtype;
  if ((kt == graph::DType::F32) != (vt == graph::DType::F32))
    throw std::invalid_argument(fmt::format(
        "{}: a k cache of {} with a v cache of {}: an f32 cache pairs only with an f32 one (hint: f16 or q8_0 for both)",
        d.name, graph::dtype_name(kt), graph::dtype_name(vt)));
  const bool f16 = kt != graph::DType::F32;
  auto value_bytes = [](graph::DType t) { return t == graph::DType::F32 ? 4.0 : t == graph::DType::F16 ? 2.0 : 34.0 / 32; };
  const double kv_value_bytes = value_bytes(kt) + value_bytes(vt);  // a K and a V value
  if ((kt == graph::DType::Q8_0 || vt == graph::DType::Q8_0) && head_dim % kQ8Block != 0)
    throw std::invalid_argument(fmt::format("{}: a q8_0 cache needs a head_dim that is a multiple of {}, got {}",
                                            d.name, kQ8Block, head_dim));
  if (d.xq_out && head_dim % 16 != 0)
    throw std::invalid_argument(fmt::format("{}: xq_out writes blocks of 16 values within a head; head_dim {} is not a "
                                            "multiple of 16 (hint: no xq_out)", d.name, head_dim));
  const AttentionVariants var = attention_variants(graph::device_caps(g).limits, d.name, head_dim, group, f16,
                                                   gpu::subgroup_lanes(graph::device_caps(g)), d.decode_kernel,
                                                   d.prefill_kernel, d.xq_out);
  const bool merges_itself = var.decode_kernel != DecodeKernel::split;
  max_chunks = std::min<uint32_t>(max_chunks, uint32_t(ceil_div(n_ctx, var.key_block)));
  const float scale = d.scale.value_or(1.0f / std::sqrt(float(head_dim)));
  if (!(d.softcap >= 0) || !std::isfinite(d.softcap))
    throw std::invalid_argument(fmt::format("{}: softcap {} is not a finite number >= 0 (0: none)", d.name, d.softcap));
  const uint32_t window = d.window;
  const float softcap = d.softcap;

  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, out_shape);
  // Per query row (token * n_heads + head, a token per decode token) and chunk.
  const uint32_t split_rows = d.n_heads * decode_tokens;
  graph::TensorId scratch =
      graph::add_tensor(g, d.name + ".split", graph::DType::F32,
                        {ml_offset(split_rows, max_chunks, head_dim) + split_rows * max_chunks * 2});
  const graph::TensorId table = kv_rows_binding(d.rows, d.q);  // never read without rows
  std::optional<graph::TensorId> xq;  // the output quantized ahead (one token)
  if (d.xq_out)
    xq = graph::add_tensor(g, d.name + ".xq_ahead", graph::DType::U32, {linear_q_xq_words(d.n_heads * head_dim)});

  std::vector<gpu::OverrideConstant> consts = {
      {"HEAD_DIM", double(head_dim)}, {"GROUP", double(group)}, {"F16", f16 ? 1.0 : 0.0}};
  if (rows) consts.push_back({"TABLE", 1.0});
  std::vector<gpu::OverrideConstant> decode_consts = consts, prefill_consts = consts;
  // The kernels that read the caches (not decode_reduce): q8_0 words through q8_word.
  for (auto* c : {&decode_consts, &prefill_consts}) {
    if (kt == graph::DType::Q8_0) c->push_back({"K_Q8", 1.0});
    if (vt == graph::DType::Q8_0) c->push_back({"V_Q8", 1.0});
  }
  decode_consts.push_back({"HPW", double(var.decode_heads)});
  decode_consts.push_back({"KB", double(var.key_block)});
  if (var.decode_kernel == DecodeKernel::vec) {
    decode_consts.push_back({"SG", double(gpu::subgroup_lanes(graph::device_caps(g)))});
    decode_consts.push_back({"VKL", double(var.vec.lanes)});
    decode_consts.push_back({"VWG", double(var.vec.threads)});
  }
  if (d.xq_out) decode_consts.push_back({"XO", double(var.decode_heads * head_dim)});
  if (var.decode_kernel == DecodeKernel::sg) {
    decode_consts.push_back({"SG", double(gpu::subgroup_lanes(graph::device_caps(g)))});
    decode_consts.push_back({"DKL", double(var.sg.lanes)});
    decode_consts.push_back({"DWPL", double(var.sg.row_words)});
    decode_consts.push_back({"DKPI", double(var.sg.keys)});
    decode_consts.push_back({"DWG", double(var.sg.threads)});
  }
  // Every entry point of attention.wgsl is compiled with the subgroup prelude (the decode kernels' sg_xor).
  auto key = [](const char* entry, std::vector<gpu::OverrideConstant> c) {
    gpu::PipelineKey k = gpu::make_key("attention", entry, std::move(c));
    k.sg_shim = true;
    return k;
  };
  const bool prefill_by_rows = var.prefill_kernel != PrefillKernel::tile;
  if (var.prefill_kernel == PrefillKernel::rt) {
    prefill_consts.push_back({"RTW", double(var.prt.threads)});
    prefill_consts.push_back({"RTF", double(var.prt.fetch)});
  } else if (var.prefill_kernel == PrefillKernel::sg) {
    prefill_consts.push_back({"SG", double(gpu::subgroup_lanes(graph::device_caps(g)))});
    prefill_consts.push_back({"PL", double(var.psg.lanes)});
    prefill_consts.push_back({"PV4", double(var.psg.vec4s)});
    prefill_consts.push_back({"PBK", double(var.psg.keys)});
    prefill_consts.push_back({"PWG", double(var.psg.threads)});
    prefill_consts.push_back({"PNF", double(var.psg.fetch)});
  } else {
    prefill_consts.push_back({"ROWS", double(var.prefill_rows)});
    prefill_consts.push_back({"BK", double(var.prefill_keys)});
    if (!prefill_q_in_registers()) prefill_consts.push_back({"Q_IN_REGS", 0.0});
  }
  // A decode (or prefill) kernel per cache part, each over its KV heads; one merge for all.
  std::vector<KvCachePart> parts = {{d.k_cache, d.v_cache}};
  parts.insert(parts.end(), d.more_caches.begin(), d.more_caches.end());
  std::vector<graph::KernelSpec> decode_kernels, prefill_kernels;
  // xq_out: the kernels that write the output take their _xq entry points, binding the xq row.
  auto entry = [&](const char* name) { return d.xq_out ? std::string(name) + "_xq" : std::string(name); };
  auto with_xq = [&](std::vector<graph::Binding> b) {
    if (xq) b.push_back(graph::Binding::of(9, *xq));
    return b;
  };
  for (const KvCachePart& part : parts) {
    decode_kernels.push_back(
        merges_itself ? graph::KernelSpec{key(entry(decode_kernel_name(var.decode_kernel)).c_str(), decode_consts),
                                          with_xq({graph::Binding::of(0, d.q), graph::Binding::of(1, part.k),
                                                   graph::Binding::of(2, part.v), graph::Binding::of(3, out),
                                                   graph::Binding::of(4, scratch), graph::Binding::params(5),
                                                   graph::Binding::of(6, table), graph::Binding::symbol_block(7)})}
                      : graph::KernelSpec{key("decode_split", decode_consts),
                                          {graph::Binding::of(0, d.q), graph::Binding::of(1, part.k),
                                           graph::Binding::of(2, part.v), graph::Binding::of(4, scratch),
                                           graph::Binding::params(5), graph::Binding::of(6, table),
                                           graph::Binding::symbol_block(7)}});
    prefill_kernels.push_back({key(prefill_entry(var), prefill_consts),
                               {graph::Binding::of(0, d.q), graph::Binding::of(1, part.k),
                                graph::Binding::of(2, part.v), graph::Binding::of(3, out), graph::Binding::params(5),
                                graph::Binding::of(6, table), graph::Binding::symbol_block(7)}});
  }
  // decode_reduce shuffles across the subgroup where there is one (SG 1: workgroup memory alone).
  std::vector<gpu::OverrideConstant> reduce_consts = consts;
  reduce_consts.push_back({"SG", double(gpu::subgroup_lanes(graph::device_caps(g)))});
  if (d.xq_out) reduce_consts.push_back({"XO", double(head_dim)});
  decode_kernels.push_back({key(entry("decode_reduce").c_str(), reduce_consts),
                            with_xq({graph::Binding::of(3, out), graph::Binding::of(8, scratch), graph::Binding::params(5)}),
                            /*optional=*/merges_itself});
  graph::RouteSet routes{graph::RouteKey::of_dim(d.q, 0), {}};
  routes.routes.push_back({kAttentionDecode, "flash_decode", 1, decode_tokens, std::move(decode_kernels)});
  if (max_tokens > decode_tokens)
    routes.routes.push_back({kAttentionPrefill, "prefill", decode_tokens + 1, max_tokens, std::move(prefill_kernels)});

  const uint32_t n_heads = d.n_heads;
  const uint32_t xq_words = xq ? linear_q_xq_words(n_heads * head_dim) : 0;
  std::vector<graph::TensorId> inputs = {d.q};
  for (const KvCachePart& part : parts) inputs.insert(inputs.end(), {part.k, part.v});
  const size_t table_input = inputs.size();
  if (rows) inputs.push_back(d.rows->table);
  const std::string name = d.name;
  const graph::SymbolId sym = rows ? d.rows->max_keys : d.pos;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "attention",
      .inputs = inputs,
      .outputs = xq ? std::vector<graph::TensorId>{out, scratch, *xq} : std::vector<graph::TensorId>{out, scratch},
      .dynamic = true,
      .routes = std::move(routes),
      .infer =
          [n_heads, rows, name, table_input, xq_words](const graph::InferArgs& a) {
            a.out[0] = infer_attention({a.in[0], a.in[1], n_heads});
            if (xq_words) a.out[2] = graph::Shape{xq_words};  // one row, whatever the step's tokens
            if (rows) check_kv_rows_live(name, a.in[table_input], a.in[0][0]);
          },
      .plan =
          [=](const graph::PlanArgs& a, graph::Plan& p) {
            plan_attention({a.in[0][0], n_heads, part_heads, head_dim, n_ctx, a.sym[sym], sym.v, scale, window, softcap, max_chunks,
                            a.route_is(kAttentionDecode), var.decode_heads, var.key_block, var.one_chunk_keys, var.prefill_rows,
                            prefill_by_rows, merges_itself, rows, decode_tokens},
                           p);
          },
      .cost =
          [=](const graph::PlanArgs& a) {
            // Keys 0..pos + m - 1 of K and V, q in, out: the decode route reads every key once per
            // decode workgroup row (once per KV head unless the group is split); prefill (causal)
            // scores each of its m queries against the keys before the step and its own keys up to
            // itself: m x before + m (m + 1) / 2 pairs. With rows, max_keys bounds every token's
            // keys: a decode token reads up to max_keys of its own region, a prefill tile the
            // region(s) of its tokens (counted as one of max_keys, the one-sequence case).
            const uint64_t m = a.in[0][0];
            const bool decode = rows ? m <= decode_tokens : m == 1;
            const uint64_t max_keys = uint64_t(a.sym[sym]);
            const uint64_t keys = !rows ? max_keys + m : decode ? m * max_keys : max_keys;
            const uint64_t reads = decode ? ceil_div(group, var.decode_heads) : 1;
            const uint64_t kv = uint64_t(double(reads * uint64_t(n_kv) * keys * head_dim) * kv_value_bytes);
            const double before = !rows ? double(max_keys) : std::max(0.0, double(max_keys) - double(m));
            const double pairs = decode ? double(keys) : double(m) * before + double(m) * double(m + 1) / 2;
            return graph::NodeCost{kv + 2 * m * n_heads * head_dim * 4, 4.0 * n_heads * head_dim * pairs};
          },
  });
  return out;
}

graph::TensorId attention_xq(const graph::Graph& g, const std::string& name) {
  return graph::find_tensor(g, name + ".xq_ahead");
}

bool attention_xq_wanted(uint32_t width) {
  const std::string v = kAttnXq.get();
  return v == "auto" ? width >= kAttnXqMinWidth : v == "1";
}

}  // namespace wgrt::ops
