// A model ready to run: its file, tokenizer and graph (KV cache included), and how many
// positions of the cache hold the conversation so far.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "llm/sampler.h"
#include "model/model_file.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::grammar {
struct TokenIndex;
}

namespace wgrt::llm {

struct Session {
  gpu::Device* dev = nullptr;
  model::ModelFile model;
  tokenizer::Tokenizer tok;
  model::ModelGraph mg;
  uint32_t n_past = 0;  // positions of the KV cache in use (one sequence)
  std::vector<uint32_t> seq_past;  // several sequences (llm/batch.h): positions in use per sequence
  graph::Snapshot last;  // what the latest step read back
  size_t last_rows = 0;  // its readout rows
  // Several sequences: the sequence of each readout row of the latest step (~0u: a row nobody
  // asked for), what a fed step's parts must follow (llm/batch.h submit_fed_seqs).
  std::vector<uint32_t> last_seqs;
  // Tokens per step when eval runs a prompt (0: max_batch). 1 keeps a prompt on the decode
  // route: `wgrt run` does that for short prompts on a CPU driver, whose first dispatch of a
  // kernel compiles it (docs/perf/demo-model.md, "First run on lavapipe").
  uint32_t prompt_step = 0;
  // The vocabulary indexed for grammars (llm/constrain.h), built by the first constrained request.
  std::shared_ptr<const grammar::TokenIndex> token_index;
  // The next eval / eval_seqs adjusts its logits on the GPU (llm/batch.h stage_adjust set it;
  // the step clears it). Fed steps never adjust.
  bool adjust_next = false;
};

// What a step reads back from the output head: the argmax only (greedy), the top-k candidates
// (sampling; top-k runs only then), the logits, or all of them; or the final normed hidden
// states of the step's tokens alone (embeddings: llm/embed.h, which turns on want_hidden).
enum class Readout : uint8_t { All, Argmax, TopK, Logits, Hidden };

// Loads the tokenizer and builds the graph. `model` "" is wgrt's demo model, trained on
// public-domain English (models/README.md), found beside the program or library
// (demo_model_path(); a ModelError names the paths tried when it is missing); kRandomModel
// names the built-in model of random weights.
inline constexpr const char* kRandomModel = "builtin:random";
Session open_session(gpu::Device& dev, const std::string& model_path, const model::BuildOptions& o);
model::ModelFile open_model_or_default(const std::string& model_path);
std::string demo_model_path();  // PREFIX/share/wgrt/wgrt-demo-q8_0.gguf, "" if missing
bool is_default_model(const Session& s);  // the random-weight model

// Runs `tokens` at positions n_past.. in chunks of at most max_batch (or prompt_step), advancing n_past.
// After each chunk `chunk_done(first, count)` may read the outputs (logits of that chunk's
// rows with all_logits, else of its last token). Throws std::invalid_argument, with nothing
// run, when the tokens would pass the context or an id is outside the vocabulary.
// A token sampled on the GPU from the top-k (ops::PickParams; llm::sample's steps without a
// repetition penalty), landing in next_token like the argmax: sampled decoding pipelines too.
struct GpuSample {
  uint32_t draw = 0;  // u = draw / 2^32, from the sampler (next_draw)
  float temperature = 1, top_p = 1, min_p = 0;
  uint32_t k = 1;     // candidates, <= the graph's top_k
};
bool can_sample_on_gpu(const Session& s, const SamplerParams& p);

// With `sample`, the last chunk's next token is sampled on the GPU (read it with read_argmax).
// With `logprobs`, the last chunk also reads back the top-k and the log-softmax normalizer
// (llm/batch.h: pick_next_row's log-probabilities).
void eval(Session& s, std::span<const int32_t> tokens,
          const std::function<void(size_t first, size_t count)>& chunk_done = {}, Readout readout = Readout::All,
          const GpuSample* sample = nullptr, bool logprobs = false);

// Pipelined greedy decode: one step that embeds the previous step's argmax where the GPU left
// it, at position n_past (advanced), encoded and submitted without waiting, so it can be in
// flight before the token it consumes is read. Reads back the argmax only. Needs a session
// without all_logits whose previous step ran the output head, and n_past < n_ctx.
// With `sample`, the step's token is sampled from its top-k on the GPU instead.
graph::Snapshot submit_fed_step(Session& s, const GpuSample* sample = nullptr);
// The argmax a step's snapshot holds (waits for that step only); one sequence (llm/batch.h
// read_argmax_row for several).
int32_t read_argmax(Session& s, const graph::Snapshot& snap);
bool can_feed(const Session& s);  // the graph has the GPU-fed route

// Outputs of the last chunk (as its Readout asked).
std::vector<float> read_logits(Session& s);  // [rows, n_vocab]
int32_t read_argmax(Session& s);             // of the last row
std::vector<Candidate> read_top_k(Session& s);  // of the last row, best first

void reset(Session& s);  // forget the conversation (the cache is overwritten from 0)

// The outputs a Readout snapshots (graph outputs marked at build), in `buf`; with `logprobs`
// the top-k and logprob_norm too.
using ReadoutBuffer = std::array<graph::TensorId, 5>;
std::span<const graph::TensorId> readout_tensors(const model::ModelGraph& mg, Readout r, ReadoutBuffer& buf,
                                                 bool logprobs = false);

}  // namespace wgrt::llm
