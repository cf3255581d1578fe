// Requests waiting for the GPU: a fair FIFO queue of jobs, the slots that hold the jobs being
// generated, and each job's channel of events back to its HTTP handler. No GPU here, so the
// queue's rules are tested on their own.
//
// A handler submits a job (refused when the queue is full: 503), then waits on the job's
// events; the worker (worker.h) moves jobs from the queue into free slots, in arrival order,
// and pushes text and the end. A handler whose client went away sets `cancelled`; the worker
// ends that job at its next step and frees the slot.
//
// Slots: `--parallel N` makes N, all generating at once: slot i is sequence i of the worker's
// session (continuous batching, llm/batch.h), so one step carries a token of every decoding
// slot and prefill chunks of the new ones.
//
// Prompt cache: a slot keeps the tokens its KV cache holds when its job ends. A queued job goes
// to the free slot whose cached tokens share the longest prefix with its prompt (ties: the slot
// idle longest), and only the rest of its prompt is prefilled; at least its last token is, for
// the logits of the first pick. A job with cache_prompt false reuses nothing (its slot's cache
// is then overwritten from position 0).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/request.h"
#include "server/response.h"

namespace wgrt::server {

struct Event {
  std::string text;           // generated text (UTF-8 complete, stop strings cut)
  bool done = false;          // the last event of the job
  std::string stop_reason;    // with done: "eos", "stop string", "length", "context", "cancelled"
  Usage usage;                // with done
  std::optional<ApiError> error;  // with done: the job failed
  std::vector<TokenLogprobs> logprobs;  // req.logprobs >= 0: the tokens generated since the last event
  std::vector<std::vector<float>> embeddings;  // with done, for an embedding job: a vector per input
};

struct Job {
  CompletionRequest req;
  std::vector<int32_t> prompt;  // tokenized by the handler
  // An embedding job (POST /v1/embeddings) instead: its inputs' tokens, embedded one after
  // another on the slot's sequence when it takes a slot (llm/embed.h); `prompt` stays empty.
  std::vector<std::vector<int32_t>> embed_inputs;
  std::string id;               // the response's id ("chatcmpl-..."), set before submit
  std::atomic<bool> cancelled{false};
  // Progress, written by the worker, read by GET /slots.
  std::atomic<uint32_t> n_cached{0};   // tokens in the slot's KV cache (prompt and generated)
  std::atomic<uint32_t> n_decoded{0};  // tokens generated
  // Set before the job's last event goes out (push_event, an event with done): from then on
  // GET /slots shows its slot free, though the worker frees it in the scheduler a moment later
  // (a client that reads /slots after its response finds no job of its own in progress).
  std::atomic<bool> ended{false};
  // The prompt's first tokens that its slot's KV cache already held (the prompt cache): set by
  // fill_slots when a slot takes the job, before the worker sees it.
  size_t n_reused = 0;
  // Context shift (worker.h's fit_prompt): chat's oldest messages left out so that the
  // conversation fits, and the prompt's first tokens a reply that fills the context keeps.
  size_t dropped_messages = 0, dropped_tokens = 0;
  size_t n_keep = 0;
  bool warm_up = false;  // the worker's own (worker.h): not counted in the metrics
  std::mutex m;
  std::condition_variable cv;
  std::deque<Event> events;
};

void push_event(Job& j, Event e);
// The next event, or nullopt when none came within `timeout`.
std::optional<Event> wait_event(Job& j, std::chrono::milliseconds timeout);

struct Scheduler {
  size_t n_slots = 1;
  size_t max_queued = 64;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::shared_ptr<Job>> queue;
  std::vector<std::shared_ptr<Job>> slots;  // [n_slots], null: free
  // [n_slots]: the tokens at KV positions 0.. of each free slot's sequence (the prompt cache);
  // a busy slot's entry is stale until free_slot hands its tokens back.
  std::vector<std::vector<int32_t>> cached;
  std::vector<uint64_t> last_used;  // [n_slots]: when the slot last took a job (fill_slots' count)
  uint64_t n_filled = 0;
  bool stopping = false;
  uint64_t left_queue = 0;  // queued jobs cancelled (their client went away) before a slot took them
};

void init_scheduler(Scheduler& s, size_t n_slots, size_t max_queued);
// Queues the job; false (nothing queued) when max_queued jobs already wait beyond the free
// slots (so max_queued 0 means: a request runs if a slot is free, else gets 503). Queued jobs
// already cancelled leave the queue first, here and in fill_slots, with a "cancelled" end event.
bool submit(Scheduler& s, std::shared_ptr<Job> job);
// Moves queued jobs into free slots in FIFO order, each to the free slot whose cache shares the
// longest prefix with its prompt (ties, and jobs with cache_prompt false: the slot idle longest,
// then the lowest), setting the job's n_reused; waits up to `wait` when no slot is busy and
// nothing is queued. Returns the indices of the busy slots.
std::vector<size_t> fill_slots(Scheduler& s, std::chrono::milliseconds wait);
// Whether fill_slots would change something now: a queued job and a free slot, or stopping
// (the worker's pipelined decode ends its run of steps for it).
bool slots_would_change(Scheduler& s);
// Frees the slot; `kv_tokens`: the tokens its KV cache now holds, what a later job may reuse
// (empty when its state is unknown, after a failed step).
void free_slot(Scheduler& s, size_t slot, std::vector<int32_t> kv_tokens = {});
// Forgets every free slot's cache (after the warm-up, so that requests never see its tokens).
void clear_caches(Scheduler& s);
// The tokens at the start of `prompt` a slot caching `cached` can keep: their common prefix, less
// the prompt's last token (always evaluated, for its logits).
size_t reusable_prefix(const std::vector<int32_t>& cached, const std::vector<int32_t>& prompt);

void stop_scheduler(Scheduler& s);  // wakes the worker; queued jobs get a 503 end event

struct QueueCounts {
  size_t queued = 0, running = 0;
  uint64_t left_queue = 0;
};
QueueCounts queue_counts(Scheduler& s);

}  // namespace wgrt::server
