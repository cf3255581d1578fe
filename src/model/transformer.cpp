#include "model/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "model/blocks.h"
#include "ops/rope/rope.h"

namespace wgrt::model {

uint32_t default_ctx(const ModelConfig& c) {
  // The attention kernels apply sliding windows (layer_window): they do not bound the context.
  return c.n_ctx_train ? std::min(c.n_ctx_train, kDefaultMaxCtx) : kDefaultMaxCtx;
}

ModelGraph build_model(gpu::Device& dev, const ModelFile& m, const BuildOptions& opts) {
  BuildOptions o = opts;
  if (o.n_ctx == 0) o.n_ctx = default_ctx(m.config);
  // The file's config with the rope divisors this context takes (LongRoPE's short or long set).
  ModelConfig c = m.config;
  c.rope_freq_factors = rope_factors_for(m.config, o.n_ctx);
  if (o.n_ctx < 1 || o.max_batch < 1 || o.n_seqs < 1)
    throw std::invalid_argument(fmt::format("context size {}, batch {} and sequences {} must be at least 1", o.n_ctx,
                                            o.max_batch, o.n_seqs));
  if (o.n_seqs > 1 && o.all_logits)
    throw std::invalid_argument("several sequences per step and all_logits do not go together (hint: one sequence)");
  if (uint64_t(o.n_ctx) * o.n_seqs > (uint64_t(1) << 31))
    throw std::invalid_argument(fmt::format("{} sequences of {} positions pass 2^31 cache rows (hint: fewer slots or "
                                            "a smaller context)", o.n_seqs, o.n_ctx));
  ModelGraph mg;
  mg.graph = std::make_unique<graph::Graph>(dev);
  mg.n_vocab = c.n_vocab;
  mg.n_embd = c.dim;
  mg.n_ctx = o.n_ctx;
  mg.n_seqs = o.n_seqs;
  // A step holds at most n_ctx tokens of each sequence, and one decode token of each.
  mg.max_batch = o.n_seqs > 1 ? std::max(std::min(o.max_batch, o.n_ctx * o.n_seqs), o.n_seqs)
                              : std::min(o.max_batch, o.n_ctx);
  mg.all_logits = o.all_logits;
  if (o.all_logits) {
    // Every row's logits in one binding: a batch past the device's binding limit steps in fewer
    // rows (the session chunks prompts by max_batch).
    const uint64_t rows_fit = dev.caps.limits.maxStorageBufferBindingSize / (uint64_t(c.n_vocab) * 4);
    if (rows_fit == 0)
      throw std::invalid_argument(fmt::format("one row of {} logits is past this device's storage binding limit of {} "
                                              "bytes (hint: run without all logits)", c.n_vocab,
                                              dev.caps.limits.maxStorageBufferBindingSize));
    mg.max_batch = uint32_t(std::min<uint64_t>(mg.max_batch, rows_fit));
  }
  mg.top_k = std::clamp<uint32_t>(o.top_k, 1, std::min<uint32_t>(c.n_vocab, 256));
  graph::Graph& g = *mg.graph;

  Loader loader{.model = &m, .opts = o.load};
  mg.tokens = graph::add_input(g, {.name = "tokens", .dtype = graph::DType::U32, .max_shape = {mg.max_batch},
                                   .dynamic_dims = 1});
  mg.pos = graph::add_symbol(g, {.name = "pos", .lo = 0, .hi = int64_t(o.n_ctx) - 1});
  const bool single = o.n_seqs == 1, fed = !o.all_logits;
  mg.feed = graph::add_symbol(g, {.name = "feed", .lo = 0, .hi = fed ? 1 : 0});
  mg.want_top_k = graph::add_symbol(g, {.name = "want_top_k", .lo = 0, .hi = 1});
  mg.want_logprobs = graph::add_symbol(g, {.name = "want_logprobs", .lo = 0, .hi = 1});
  mg.want_sample = graph::add_symbol(g, {.name = "want_sample", .lo = 0, .hi = fed ? 1 : 0});
  mg.want_hidden = graph::add_symbol(g, {.name = "want_hidden", .lo = 0, .hi = 1});
  mg.pick = graph::add_input(g, {.name = "pick", .dtype = graph::DType::U32, .max_shape = {o.n_seqs, 8}});
  graph::TensorId freqs = ops::add_rope_freqs(g, "rope_freqs", c.head_dim);
  BuildContext b{g, loader, c, o, mg.tokens, mg.pos, freqs, {}};
  // Gemma's local layers turn at their own base without the global layers' scaling.
  std::optional<graph::TensorId> freqs_local;
  if (c.rope_theta_local > 0) b.rope_freqs_local = *(freqs_local = ops::add_rope_freqs(g, "rope_freqs_local", c.head_dim));
  b.feed = mg.feed;
  b.want_top_k = mg.want_top_k;
  if (!single) {
    mg.kv_rows = graph::add_input(g, {.name = "kv_rows", .dtype = graph::DType::U32, .max_shape = {mg.max_batch, 2},
                                      .dynamic_dims = 1});
    mg.max_keys = graph::add_symbol(g, {.name = "max_keys", .lo = 1, .hi = int64_t(o.n_ctx)});
    mg.out_rows = graph::add_input(g, {.name = "out_rows", .dtype = graph::DType::U32, .max_shape = {o.n_seqs},
                                       .dynamic_dims = 1});
    b.rows = ops::KvRows{mg.kv_rows, mg.max_keys};
    b.out_rows = mg.out_rows;
  }
  if (fed)
    // Carried: the embedding reads the previous step's tokens before this step's head writes
    // them. A row per readout row: one, or one per sequence (row r feeds a fed step's token r).
    b.next_token = mg.argmax = graph::add_weight(g, {.name = "next_token", .dtype = graph::DType::U32,
                                                     .shape = {o.n_seqs}, .role = graph::TensorRole::State,
                                                     .carried = true});

  Hidden x;
  switch (c.arch) {
    case Arch::Llama: x = build_llama(b); break;
    case Arch::Mistral: x = build_mistral(b); break;
    case Arch::Qwen2: x = build_qwen2(b); break;
    case Arch::Qwen3: x = build_qwen3(b); break;
    case Arch::Qwen3Moe: x = build_qwen3moe(b); break;
    case Arch::Qwen2Moe: x = build_qwen2moe(b); break;
    case Arch::Phi3: x = build_phi3(b); break;
    case Arch::Gemma2:
    case Arch::Gemma3: x = build_gemma(b); break;
  }
  output_head(b, x, mg);
  check_every_tensor_used(loader);

  graph::build(g);
  ops::RopeFreqs rf{.n_rot = c.head_dim, .theta = c.rope_theta, .freq_factors = c.rope_freq_factors};
  std::vector<uint32_t> table = ops::rope_freq_table(rf);
  graph::write_tensor(g, freqs, table.data(), table.size() * 4);
  if (freqs_local) {
    std::vector<uint32_t> local = ops::rope_freq_table({.n_rot = c.head_dim, .theta = c.rope_theta_local});
    graph::write_tensor(g, *freqs_local, local.data(), local.size() * 4);
  }
  write_weights(g, loader);
  mg.weight_bytes = loader.gpu_bytes;
  return mg;
}

}  // namespace wgrt::model
