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
  bool stopping = false;
  uint64_t left_queue = 0;  // queued jobs cancelled (their client went away) before a slot took them
};

void init_scheduler(Scheduler& s, size_t n_slots, size_t max_queued);
// Queues the job; false (nothing queued) when max_queued jobs already wait beyond the free
// slots (so max_queued 0 means: a request runs if a slot is free, else gets 503). Queued jobs
// already cancelled leave the queue first, here and in fill_slots, with a "cancelled" end event.
bool submit(Scheduler& s, std::shared_ptr<Job> job);
// Moves queued jobs into free slots in FIFO order (the lowest free slot first), waiting up to
// `wait` when no slot is busy and nothing is queued. Returns the indices of the busy slots.
std::vector<size_t> fill_slots(Scheduler& s, std::chrono::milliseconds wait);
void free_slot(Scheduler& s, size_t slot);
void stop_scheduler(Scheduler& s);  // wakes the worker; queued jobs get a 503 end event

struct QueueCounts {
  size_t queued = 0, running = 0;
  uint64_t left_queue = 0;
};
QueueCounts queue_counts(Scheduler& s);

}  // namespace wgrt::server
