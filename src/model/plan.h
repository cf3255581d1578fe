// How each layer's steps fuse, decided once before anything is built, from the weights' formats,
// the caches' split and the device: the builders read the plan and never look ahead at the next
// layer's weights. The math is the same either way; the plan only says which steps one kernel
// does together and which outputs are also written quantized ahead (linear_q's xq_out) for the
// projection that reads them next.
#pragma once

#include <string>
#include <vector>

#include "model/loader.h"
#include "model/transformer.h"

namespace wgrt::model {

struct AttentionVariant {
  bool qkv_bias = false;  // qwen2
  bool qk_norm = false;   // qwen3: RMS norm over each head of q and k before RoPE
};

struct LayerPlan {
  // attn_norm, the q|k|v projection, RoPE and the cache write as one node (every part quantized,
  // no q/k norm between, the caches in one tensor); else one node each.
  bool fused_qkv = false;
  // The attention writes its output quantized ahead for attn_output's gemv.
  bool attention_xq = false;
  // Non-empty: attn_output's epilogue also writes x + o quantized ahead, times this norm weight
  // (ffn_norm), for the fused gate|up that reads it.
  std::string attn_output_xq_norm;
  // ffn_norm, the gate|up projection and SiLU(gate) * up as one node (gate and up quantized alike).
  bool fused_gate_up = false;
  // The fused gate|up writes its product quantized ahead for down's gemv.
  bool act_xq = false;
  // Non-empty: down's epilogue also writes its sum quantized ahead, times this norm weight (the
  // next layer's attn_norm, or output_norm for the head), for the fused node that reads it.
  std::string down_xq_norm;
};

struct ForwardPlan {
  std::vector<LayerPlan> layers;
  bool fused_head = false;  // head_fuses
};

// The output head is the fused last-row gemv (output_norm, the projection and the argmax in one
// node): one row's logits wanted (one sequence, no all_logits) of a quantized weight, not soft-capped.
bool head_fuses(const graph::Graph& g, const Loader& loader, const ModelConfig& c, const BuildOptions& o,
                bool multi_seq);

// A layer's K and V caches are split into tensors of this many KV heads (all of them: one tensor).
uint32_t cache_heads_per_part(const graph::Graph& g, const ModelConfig& c, const BuildOptions& o);

ForwardPlan plan_forward(const graph::Graph& g, const Loader& loader, const ModelConfig& c, const BuildOptions& o,
                         const AttentionVariant& attention, bool multi_seq);

// A layer's tensor name in the GGUF file: wname(3, "attn_q.weight") is "blk.3.attn_q.weight".
std::string wname(uint32_t layer, const char* what);

}  // namespace wgrt::model
