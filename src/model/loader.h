// Turning a model file's weights into graph tensors: the format each weight gets on the GPU
// (q4gsw, q8, f16 or f32), the tensors it needs, and the deferred writes that fill them after
// the graph is built (converting one weight at a time keeps host memory low).
//
// Formats, per weight (`auto` keeps what the file has where a kernel reads it directly):
//   GGUF Q4_0 -> q4gsw gs 32, Q8_0 -> q8 gs 32, Q4_K -> q4k, Q5_K -> q5k, Q6_K -> q6k,
//   Q4_1 -> q4_1, Q5_0 -> q5_0, Q5_1 -> q5_1, IQ4_NL -> iq4_nl, IQ4_XS -> iq4_xs, Q2_K -> q2k,
//   Q3_K -> q3k, all repacked losslessly (ops/quant/quant.h);
//   F32 -> f32; F16 -> f16; BF16 (and a K-quant whose rows are not whole 256-value blocks)
//   -> f16 of their exact f32 dequantization;
//   --quantize q4gsw|q8 quantizes f32/f16/bf16 weights (Hugging Face checkpoints) at load.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "model/model_file.h"
#include "ops/linear_q/linear_q.h"
#include "ops/quant/quant.h"

namespace wgrt::model {

enum class WeightFormat : uint8_t { Auto, Q4gsw, Q8, None };
WeightFormat parse_weight_format(const std::string& s);  // "q4gsw", "q8", "none", "auto"

struct LoadOptions {
  WeightFormat quantize = WeightFormat::Auto;
  uint32_t group_size = 32;
  bool allow_unused = false;  // a tensor no builder reads is a warning, not an error
  // The most bytes one weight tensor may take: 0 is the device's storage binding limit
  // (maxStorageBufferBindingSize); a matrix past it is split by rows into several tensors
  // (LinearWeight::more / w_more). Tests set it low to split small weights.
  uint64_t max_tensor_bytes = 0;
};

// A matrix [n, k] on the GPU in one of four forms. A matrix past the largest tensor a binding
// takes (LoadOptions::max_tensor_bytes) is several tensors of consecutive rows, each a multiple
// of 16 rows but the last: w or q holds the first rows, w_more or more the rest.
struct LinearWeight {
  enum class Kind : uint8_t { F32, F16, Quant } kind = Kind::F32;
  uint32_t n = 0, k = 0;              // all parts' rows
  graph::TensorId w;                 // F32 / F16
  std::vector<graph::TensorId> w_more;  // F32 / F16 split by rows: further rows
  ops::QuantTensors q;               // Quant
  ops::QuantFormat format = ops::QuantFormat::Q4gsw;
  uint32_t gs = 32;
  std::optional<graph::TensorId> bias;
  // Quant: further weights whose rows continue the first's: q|k|v fused across formats, or
  // a matrix split by rows.
  std::vector<ops::LinearQPart> more;
};

struct Loader {
  const ModelFile* model = nullptr;
  LoadOptions opts;
  std::vector<std::function<void(graph::Graph&)>> writes;  // run after build
  uint64_t gpu_bytes = 0;                                 // weights' size on the GPU
  std::set<std::string, std::less<>> used;                // the tensors the builders read
};

// After the builders ran: every tensor of the file was read (or is host-side metadata such as
// rope_freqs.weight), else ModelError naming the first unread ones (a warning on stderr with
// allow_unused): a file with parts the architecture lacks would otherwise run without them.
void check_every_tensor_used(const Loader& l);

// The most bytes one tensor (a weight, a KV cache part) may take on this graph's device: its
// storage binding limit, or LoadOptions::max_tensor_bytes where lower.
uint64_t tensor_budget(const graph::Graph& g, const LoadOptions& o);

// Declares the tensors of weight `name` ([n, k] row-major; GGUF dims {k, n}) and queues its
// upload. `bias_name`, when the model has it, becomes a [n] f32 bias.
LinearWeight load_linear(graph::Graph& g, Loader& l, const std::string& name, uint32_t n, uint32_t k,
                         const std::string& bias_name = "");
// Several weights [n_i, k] as one fused matrix, so one kernel reads them all:
//   Rows    rows of each in turn (q|k|v: [n_q + n_k + n_v, k]); biases, when every part has
//           one, concatenated the same way;
//   SwiGlu  gate and up [ff, k] as (gate, up) blocks of 16 rows (linear_q's swiglu layout).
// Only when every part is quantized (the fused kernels are linear_q's) and each fused tensor
// fits one binding; Rows parts of different formats become one weight per run of equal format
// (LinearWeight::more), SwiGlu needs one format; otherwise nullopt, and the caller loads the
// parts one by one.
// `row_orders` (Rows only): per part, empty or the file row each of its rows takes (a
// permutation of its rows; neox_pairs_adjacent), the bias the same way.
enum class FuseLayout : uint8_t { Rows, SwiGlu };
std::optional<LinearWeight> load_linear_fused(graph::Graph& g, Loader& l, const std::vector<std::string>& names,
                                              const std::vector<uint32_t>& rows, uint32_t k, FuseLayout layout,
                                              const std::vector<std::string>& bias_names = {},
                                              const std::vector<std::vector<uint32_t>>& row_orders = {});

// A mixture-of-experts weight: GGUF dims {k, n, n_experts}, the experts' [n, k] matrices one after
// another, as one quantized matrix [n_experts * n, k] (linear_q.h add_linear_q_experts). Two
// names (gate, up) fuse into each expert's (gate, up) blocks of 16 rows where both have one
// format and the pair fits one binding (else nullopt: the caller loads them one by one). Weights the file does not hold in
// blocks a kernel reads (F32, F16, BF16) are quantized to q8 (groups of 32) at load, the
// experts' kernels reading quantized rows only; LoadOptions::quantize applies as for any weight.
struct ExpertsWeight {
  ops::QuantFormat format = ops::QuantFormat::Q8;
  uint32_t gs = 32;
  ops::QuantTensors q;
  uint32_t n_expert = 0;  // rows per expert (gate|up fused: 2 * n)
};
std::optional<ExpertsWeight> load_experts(graph::Graph& g, Loader& l, const std::vector<std::string>& names, uint32_t n,
                                          uint32_t k, uint32_t n_experts);

// Whether load_linear_fused makes one fused weight of `names` (without reading or marking them).
bool linear_fuses(const graph::Graph& g, const Loader& l, const std::vector<std::string>& names,
                  const std::vector<uint32_t>& rows, uint32_t k, FuseLayout layout);

// The row order that makes a q or k projection's neox RoPE pairs (j, j + head_dim / 2 of each
// head) adjacent: row h * head_dim + 2j takes file row h * head_dim + j, row 2j + 1 takes
// j + head_dim / 2. Both projections in it, q·k is unchanged and RoPE turns them in the normal
// layout (pairs (2j, 2j + 1), angle j): the K cache then holds each head in that order, which
// only attention's q·k reads.
std::vector<uint32_t> neox_pairs_adjacent(uint32_t n_heads, uint32_t head_dim);

// The format that load_linear gives weight `name` (k columns) on the GPU where it quantizes it;
// none for f32 / f16 or where the model has no such weight. Reads nothing, marks nothing used.
std::optional<ops::QuantFormat> linear_quant_format(const Loader& l, const std::string& name, uint32_t k);

// A vector [n] as f32 (norm weights, biases).
// `add` is added to every value (ModelConfig::norm_offset for norm weights); `order`, where not
// empty, is the file index each value takes (neox_pairs_adjacent for a head's q/k norm weight).
graph::TensorId load_vector(graph::Graph& g, Loader& l, const std::string& name, uint32_t n, float add = 0,
                            const std::vector<uint32_t>& order = {});

// y = x · wᵀ (+ bias) with the kernel family the weight's form needs.
// norm: x RMS-normalized first with that weight and eps, inside the node.
struct LinearNorm {
  graph::TensorId weight;
  float eps = 1e-5f;
};
graph::TensorId apply_linear(graph::Graph& g, const LinearWeight& w, graph::TensorId x, const std::string& out_name,
                             int gemv_int8 = -1, std::optional<LinearNorm> norm = std::nullopt);

// The token embedding table [n_vocab, dim] and its lookup for `ids`.
struct EmbeddingWeight {
  LinearWeight table;  // reused as the output projection when embeddings are tied
};
EmbeddingWeight load_embedding(graph::Graph& g, Loader& l, const std::string& name, uint32_t n_vocab, uint32_t dim);
// fed_ids / feed: the GPU-fed decode route (ops/embedding/embedding.h).
graph::TensorId apply_embedding(graph::Graph& g, const EmbeddingWeight& e, graph::TensorId ids, const std::string& out_name,
                                std::optional<graph::TensorId> fed_ids = {}, graph::SymbolId feed = {});

// Runs the queued writes (after build), then clears them.
void write_weights(graph::Graph& g, Loader& l);

}  // namespace wgrt::model
