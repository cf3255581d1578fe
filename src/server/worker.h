// The generation worker: one thread that loads the model once, owns the GPU session and serves
// the scheduler's slots together (continuous batching, llm/batch.h): slot i is sequence i of
// the session, and each step carries the latest token of every decoding slot, then chunks of
// new prompts within the batch. Each job keeps the KV positions of the prefix its slot had
// cached (the prompt cache, scheduler.h), prefills the rest of its prompt, then samples until an
// end token, a stop string or its max_tokens; its text goes to the job's events as it is decoded
// (UTF-8 complete, stop strings cut even across tokens). New jobs join between steps.
//
// Context shift. A chat conversation past the context loses its oldest turns before it is
// queued (fit_prompt). A reply that fills its slot's context, when max_tokens bounds it (else
// the full context ends it, as documented for the field): the tokens after the prompt's first
// n_keep lose their older half, and the newer half is evaluated again right after those (a
// re-prefill, in the next steps like a prompt's chunks: the KV cache stores keys rotated for
// their positions, and a sequence's positions are its cache rows, so keeping them in place
// would mean moving and re-rotating every kept key); then decoding goes on.
//
// Pipelined decode. A step of decode tokens alone, each slot greedy or sampled from the top-k
// with nothing the host must read first (no log-probabilities, penalties, bias or grammar:
// llm::step_readout's Argmax, or llm::can_sample_on_gpu), is followed by steps fed on the GPU:
// each is submitted with the previous step's picks as its tokens (the argmax, or each sampled
// row's draw from its top-k on the GPU, drawn from the slot's generator at submission:
// llm/batch.h submit_fed_seqs, next_gpu_sample) before the host reads those picks, so the host's work (reading,
// emitting, the next step's encoding) overlaps the GPU's. The run ends, back to host-built steps,
// when a slot ends (its token in the step in flight is taken back out of its cache), a queued job
// can take a free slot, a slot nears its context's end, or the server stops. The text is the one
// the unpipelined steps give, token for token: the fed steps compute the same rows (a sampled
// row's draw is the same; its f32 pick on the GPU may differ from the host's double one for a
// draw within rounding of a boundary).
//
// A lost GPU device (gpu::DeviceLostError at a step's sync point) is not recovered: the jobs in
// flight end with a 503 "device_lost" error, the phase becomes DeviceLost, /health answers 503
// with the reason and every later request 503 with it; the process keeps running until it is
// stopped (a supervisor restarts it on a fresh device). Test hook: WGRT_TEST_DESTROY_DEVICE_AFTER=N
// destroys the device (wgpuDeviceDestroy, as a driver reset would) before the worker's N+1-th
// step (a step: one graph execution, whatever it carries).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "gpu/device.h"
#include "model/transformer.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::server {

// What the handlers read once the model is ready (never written after that).
struct ServedModel {
  std::string id;         // --alias, else the file name: what /v1/models lists and responses name
  std::string file_name;  // the model file's name (GET /v1/models/{id} answers to it too)
  std::string path;       // as given to --model
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0;
  uint32_t n_embd = 0;         // embeddings' width
  bool matryoshka = false;     // embeddings may be truncated (ModelConfig::matryoshka)
  std::string embedding_refusal;  // why /v1/embeddings is refused ("": it is served; llm/embed.h)
  size_t max_token_bytes = 1;  // the longest token's text: a prompt past 4 * n_ctx * this cannot fit
  const tokenizer::Tokenizer* tok = nullptr;
  std::optional<chat::Template> tmpl;  // none: /v1/chat/completions answers 400
  std::string template_text;
  std::string template_origin;
  ToolFormat tool_format = ToolFormat::None;  // how the template's tool calls look (tool_calls.h)
  std::optional<std::string> bos_token, eos_token;
};

struct Metrics {
  std::atomic<uint64_t> prompt_tokens{0}, generated_tokens{0};
  std::atomic<uint64_t> prompt_tokens_cached{0};  // reused from a slot's KV cache, not evaluated
  std::atomic<uint64_t> requests_done{0}, requests_cancelled{0}, requests_failed{0}, requests_rejected{0};
  std::atomic<uint64_t> prefill_us{0}, decode_us{0};  // time spent, for the tok/s figures
  std::atomic<uint64_t> fed_steps{0};  // pipelined decode steps (worker.h), warm-up's included
};

enum class Phase : uint8_t { Loading, Ready, Failed, DeviceLost };

struct ServerState {
  std::atomic<Phase> phase{Phase::Loading};
  std::string load_error;  // with Failed
  std::string lost_error;  // with DeviceLost (written before the phase is stored)
  ServedModel model;       // valid once phase is Ready
  Scheduler sched;
  Metrics metrics;
  std::atomic<uint64_t> serial{0};  // response ids
  std::string api_key;              // "": no key needed
  int64_t started = 0;              // Unix seconds
};

struct WorkerOptions {
  std::string model_path;
  std::string chat_template;  // a file; "": the model's own, if any
  model::BuildOptions build;
  gpu::DeviceOptions device;
  // Called once the worker has stopped serving and before it frees the session (the tokenizer
  // the handlers read): returns when no handler can touch it any more.
  std::function<void()> before_release;
  std::string alias;  // the model's id for clients; "": the file name
};

// Loads the model, warms it up (a short generation through the serving loop, so that the first
// request does not pay for the pipelines' compilation), marks st ready (or failed, calling
// on_failed with the reason) and serves jobs until stop_scheduler. Runs on its own thread.
void run_worker(ServerState& st, const WorkerOptions& o, const std::function<void(const std::string&)>& on_failed);

// The prompt's tokens for a request: the chat template's rendering of its messages, or the
// completion prompt (BOS as the vocabulary wants). Throws ApiError (400) when the template
// fails on these messages or the model has none, and before tokenizing a text too long for the
// context whatever its tokens (so a large body costs no tokenizer work or memory).
std::vector<int32_t> prompt_tokens(const ServedModel& m, const CompletionRequest& r);

// The prompt a completion request runs: prompt_tokens, and for chat, when the conversation and
// room for the reply (llm/context_shift.h's reply_room of max_tokens) pass the context, the
// conversation without its fewest oldest turns that make it fit (the context shift; the system
// messages and the last turn stay). Throws ApiError (400 context_length_exceeded) when even
// those leave no room for one generated token.
// n_keep: the tokens a reply that fills the context keeps at its start (the worker's shift): the
// system messages' (chat), or BOS.
struct Prompt {
  std::vector<int32_t> tokens;
  size_t dropped_messages = 0, dropped_tokens = 0;
  size_t n_keep = 0;
};
Prompt fit_prompt(const ServedModel& m, const CompletionRequest& r);

// The 503 "device_lost" error requests get once the device is gone; `why` is its message.
ApiError device_lost_error(const std::string& why);

}  // namespace wgrt::server
