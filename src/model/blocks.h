// The pieces the architecture builders assemble, each naming its intermediate tensors by
// layer ("attn_norm.3") so dumps can be diffed against a reference by name.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "graph/graph.h"
#include "model/loader.h"
#include "model/transformer.h"
#include "ops/kv_cache/kv_cache.h"

namespace wgrt::model {

struct BuildContext {
  graph::Graph& g;
  Loader& loader;
  const ModelConfig& c;
  const BuildOptions& o;
  graph::TensorId tokens;
  graph::SymbolId pos;
  graph::TensorId rope_freqs;
  EmbeddingWeight embedding;  // set by embed_tokens; the output projection when tied
  std::optional<graph::TensorId> next_token;  // State u32 [1]: the greedy pick, fed to the next step
  graph::SymbolId feed;                       // 1: the embedding reads next_token
  graph::SymbolId want_top_k;
  std::optional<ops::KvRows> rows;         // several sequences per step (BuildOptions::n_seqs > 1)
  std::optional<graph::TensorId> out_rows; // with rows: the step rows the output head keeps
  // The residual stream's int8 blocks (times the norm weight of the projection that reads it
  // next), where the projection that wrote it wrote them too (linear_q xq_out): the next fused
  // projection reads its x from them at one row (xq_in). Taken by that projection.
  std::optional<graph::TensorId> hidden_xq;
  std::map<std::string, graph::TensorId> vectors;  // layer_vector's, by weight name
};

// A [n] f32 weight (a norm weight), loaded once however many blocks ask for it.
graph::TensorId layer_vector(BuildContext& b, const std::string& name, uint32_t n);

// Whether the fused projections write their outputs quantized for the projection that reads
// them next: BuildOptions::quantize_ahead, else where this device's one-row gemvs read that
// (linear_q_takes_xq).
bool quantizes_ahead(const BuildContext& b);

// "blk.3.attn_q.weight" style weight names and "attn_q.3" style tensor names.
std::string wname(uint32_t layer, const char* what);
std::string tname(const char* what, uint32_t layer);

graph::TensorId embed_tokens(BuildContext& b);
graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out);

struct AttentionVariant {
  bool qkv_bias = false;  // qwen2
  bool qk_norm = false;   // qwen3: RMS norm over each head of q and k before RoPE
};
// x + attention(attn_norm(x)): grouped-query self-attention with RoPE over the layer's KV
// cache. Where the q, k and v weights share one quantized format, attn_norm runs inside one
// fused q|k|v projection and RoPE and the cache write are one kernel; the output projection
// adds the residual in its epilogue.
graph::TensorId attention_block(BuildContext& b, uint32_t layer, graph::TensorId x, const AttentionVariant& v);

// x + down(silu(gate(h)) * up(h)), h = ffn_norm(x): with quantized gate and up, the norm, one
// fused gate|up projection and SiLU * up are one kernel; down adds the residual. `next`: the
// next layer's attention (none after the last), whose fused q|k|v reads down's output
// quantized ahead.
graph::TensorId ffn_block(BuildContext& b, uint32_t layer, graph::TensorId x, const AttentionVariant* next);

// x + w(in), fused into linear_q's epilogue for quantized weights. `next_norm`: the norm weight
// of the fused projection that reads the sum next; the epilogue then also writes it quantized
// ahead (b.hidden_xq) where the device reads that.
graph::TensorId apply_linear_residual(BuildContext& b, const LinearWeight& w, graph::TensorId in, graph::TensorId x,
                                      const std::string& out,
                                      std::optional<graph::TensorId> next_norm = std::nullopt);

// Final norm, the last position's row (unless all_logits; with several sequences the rows of
// out_rows), output projection and GPU sampling reductions; fills the graph outputs of `mg`.
void output_head(BuildContext& b, graph::TensorId x, ModelGraph& mg);

// The architecture builders (one file each): embeddings to the last hidden state.
graph::TensorId build_llama(BuildContext& b);
graph::TensorId build_mistral(BuildContext& b);
graph::TensorId build_qwen2(BuildContext& b);
graph::TensorId build_qwen3(BuildContext& b);

}  // namespace wgrt::model
