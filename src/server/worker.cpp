#include "server/worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "llm/batch.h"
#include "llm/chat.h"
#include "llm/embed.h"
#include "llm/generate.h"
#include "llm/sampler.h"
#include "llm/session.h"
#include "support/knobs.h"

namespace wgrt::server {

using Clock = std::chrono::steady_clock;

namespace {

uint64_t micros_since(Clock::time_point t) {
  return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// One job's generation state while it holds a slot (slot i is sequence i of the session).
struct Slot {
  std::shared_ptr<Job> job;
  llm::Sampler sampler;
  llm::StopFilter filter;
  tokenizer::StreamDecoder dec;
  llm::Readout readout = llm::Readout::All;
  size_t prefilled = 0;  // prompt tokens in the slot's KV region
  bool decoding = false; // the prompt is in; `next` holds the latest sampled token
  int32_t next = -1;
  size_t n_generated = 0;
  Clock::time_point t_decode;
};

void finish(ServerState& st, Slot& slot, const std::string& reason) {
  Event e;
  e.text = llm::stop_filter_push(slot.filter, tokenizer::decode_flush(slot.dec)) + llm::stop_filter_flush(slot.filter);
  e.done = true;
  e.stop_reason = reason;
  e.usage = {slot.job->prompt.size(), slot.n_generated};
  if (!slot.job->warm_up) {
    st.metrics.decode_us += micros_since(slot.t_decode);
    (reason == "cancelled" ? st.metrics.requests_cancelled : st.metrics.requests_done) += 1;
  }
  push_event(*slot.job, std::move(e));
  slot.job.reset();
}

// A fresh context for the job in its slot's sequence: the prompt goes in with the next steps.
void start(llm::Session& s, Slot& slot, uint32_t seq, std::shared_ptr<Job> job) {
  slot = Slot{};
  slot.job = std::move(job);
  const CompletionRequest& r = slot.job->req;
  llm::SamplerParams p = r.sampling;
  if (!r.has_seed) p.seed = std::random_device{}();
  slot.sampler = llm::make_sampler(p);
  slot.filter = llm::StopFilter{r.stop, {}, false};
  slot.dec = tokenizer::make_stream_decoder(s.tok, /*sequence_start=*/false);
  slot.readout = llm::step_readout(s, p);
  if (slot.job->prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
  for (int32_t id : slot.job->prompt) llm::accept_token(slot.sampler, id);
  llm::reset_seq(s, seq);
  slot.t_decode = Clock::now();
}

// An embedding job in its slot: each input through the graph on the slot's sequence, one after
// another, before the next step (llm/embed.h); its end event carries the vectors.
void run_embed_job(ServerState& st, llm::Session& s, Slot& slot, uint32_t seq) {
  Job& job = *slot.job;
  Event e;
  e.done = true;
  if (job.cancelled.load()) {
    e.stop_reason = "cancelled";
    st.metrics.requests_cancelled += 1;
  } else {
    const auto t0 = Clock::now();
    size_t n_tokens = 0;
    for (const std::vector<int32_t>& in : job.embed_inputs) {
      e.embeddings.push_back(llm::embed(s, seq, in));
      n_tokens += in.size();
    }
    e.stop_reason = "embedded";
    e.usage = {n_tokens, 0};
    st.metrics.prefill_us += micros_since(t0);
    st.metrics.prompt_tokens += n_tokens;
    st.metrics.requests_done += 1;
  }
  push_event(job, std::move(e));
  slot.job.reset();
}

// Emits the latest sampled token, which the next step then feeds; false once the job has ended
// (its end event sent).
bool emit(ServerState& st, const llm::Session& s, Slot& slot, uint32_t seq) {
  const CompletionRequest& r = slot.job->req;
  if (slot.job->cancelled.load()) {
    finish(st, slot, "cancelled");
    return false;
  }
  if (!slot.decoding) return true;  // its prompt goes into the next step
  if (llm::is_end_token(s, slot.next)) {
    finish(st, slot, "eos");
    return false;
  }
  ++slot.n_generated;
  slot.job->n_decoded.store(uint32_t(slot.n_generated));
  if (!slot.job->warm_up) st.metrics.generated_tokens += 1;
  Event e;
  e.text = llm::stop_filter_push(slot.filter, tokenizer::decode_next(slot.dec, slot.next));
  if (!e.text.empty()) push_event(*slot.job, std::move(e));
  if (slot.filter.stopped) {
    finish(st, slot, "stop string");
    return false;
  }
  if (r.max_tokens >= 0 && slot.n_generated >= size_t(r.max_tokens)) {
    finish(st, slot, "length");
    return false;
  }
  if (llm::seq_pos(s, seq) >= s.mg.n_ctx) {
    finish(st, slot, "context");
    return false;
  }
  return true;
}

void fail(ServerState& st, Slot& slot, const std::exception& ex) {
  Event e;
  e.done = true;
  if (dynamic_cast<const gpu::DeviceLostError*>(&ex))
    e.error = device_lost_error(ex.what());
  else
    e.error = ApiError(500, "server_error", "generation_failed", fmt::format("generation failed: {}", ex.what()));
  st.metrics.requests_failed += 1;
  push_event(*slot.job, std::move(e));
  slot.job.reset();
}

// WGRT_TEST_DESTROY_DEVICE_AFTER (worker.h): steps before the device is destroyed; -1: never.
const knobs::Count kDestroyDeviceAfter{"WGRT_TEST_DESTROY_DEVICE_AFTER", -1, int64_t(1) << 40, -1,
                                       "wgrt serve destroys the device after the worker's first N steps (tests)",
                                       knobs::Lab};

int64_t destroy_device_after() { return kDestroyDeviceAfter.get(); }

ServedModel describe(const llm::Session& s, const WorkerOptions& o) {
  ServedModel m;
  m.path = o.model_path;
  m.file_name = o.model_path.empty() ? "wgrt-default" : std::filesystem::path(o.model_path).filename().string();
  if (m.file_name.empty()) m.file_name = std::filesystem::path(o.model_path).parent_path().filename().string();
  m.id = o.alias.empty() ? m.file_name : o.alias;
  m.n_ctx = s.mg.n_ctx;
  m.n_vocab = s.tok.vocab.n_vocab();
  m.n_embd = s.mg.n_embd;
  m.matryoshka = s.model.config.matryoshka;
  m.embedding_refusal = llm::embedding_refusal(s.model.config);
  m.tok = &s.tok;
  for (const std::string& piece : s.tok.pieces) m.max_token_bytes = std::max(m.max_token_bytes, piece.size());
  chat::ChatTemplateSource src;
  bool have = false;
  if (!o.chat_template.empty()) {
    src = chat::template_from_file(o.chat_template);
    if (!o.model_path.empty()) chat::model_special_texts(o.model_path, src);
    have = true;
  } else if (!o.model_path.empty()) {
    try {
      src = chat::find_chat_template(o.model_path);
      have = true;
    } catch (const std::runtime_error&) {
      // No template: completions still work; chat requests are refused with a hint.
    }
  }
  if (have) {
    m.tmpl = chat::parse_template(src.text, src.origin);
    m.template_text = src.text;
    m.template_origin = src.origin;
    m.tool_format = detect_tool_format(src.text);
    m.bos_token = src.bos_token;
    m.eos_token = src.eos_token;
  }
  return m;
}

// Two short generations, greedy and sampled (the two readout routes), that go through the
// serving loop before /health says ok.
std::vector<std::shared_ptr<Job>> warm_up_jobs(Scheduler& sched, const ServedModel& m) {
  std::vector<std::shared_ptr<Job>> jobs;
  for (float temperature : {0.0f, 1.0f}) {
    auto job = std::make_shared<Job>();
    job->prompt = tokenizer::tokenize(*m.tok, "Hello", /*add_special=*/true, /*parse_special=*/false);
    if (job->prompt.empty()) job->prompt.push_back(0);
    job->req.sampling.temperature = temperature;
    job->req.max_tokens = 2;
    job->warm_up = true;
    if (!submit(sched, job)) break;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Whether every warm-up job has ended; `error` gets the first failure's message.
bool warmed_up(const std::vector<std::shared_ptr<Job>>& jobs, std::string& error) {
  for (const auto& j : jobs) {
    std::lock_guard lock(j->m);
    if (j->events.empty() || !j->events.back().done) return false;
    if (j->events.back().error && error.empty()) error = j->events.back().error->what();
  }
  return true;
}

}  // namespace

ApiError device_lost_error(const std::string& why) {
  return ApiError(503, "server_error", "device_lost",
                  fmt::format("the GPU device was lost, so this server cannot generate any more: {} (hint: restart "
                              "`wgrt serve`)", why));
}

namespace {

// Four times the bytes the context's tokens can cover, as slack for normalizers that shrink text.
void check_prompt_bytes(const ServedModel& m, size_t bytes, const char* param) {
  const size_t most = 4 * size_t(m.n_ctx) * m.max_token_bytes;
  if (bytes > most)
    throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                   fmt::format("the prompt has {} bytes, more than a context of {} tokens can hold (its longest token "
                               "has {} bytes); hint: a shorter prompt, or start the server with a larger --ctx-size",
                               bytes, m.n_ctx, m.max_token_bytes), param);
}

}  // namespace

std::vector<int32_t> prompt_tokens(const ServedModel& m, const CompletionRequest& r) {
  if (!r.chat) {
    check_prompt_bytes(m, r.prompt.size(), "prompt");
    return tokenizer::tokenize(*m.tok, r.prompt, /*add_special=*/true, /*parse_special=*/true);
  }
  if (!m.tmpl)
    throw ApiError(400, "invalid_request_error", "no_chat_template",
                   "the served model has no chat template (hint: restart `wgrt serve` with --chat-template FILE, or "
                   "use /v1/completions)");
  chat::ChatInputs in;
  in.messages = r.messages;
  in.tools = r.tools;
  in.add_generation_prompt = true;
  in.enable_thinking = r.enable_thinking;
  in.bos_token = m.bos_token;
  in.eos_token = m.eos_token;
  std::string text;
  try {
    text = chat::render_chat(*m.tmpl, in);
  } catch (const chat::TemplateError& e) {
    throw invalid_request(fmt::format("the chat template ({}) fails on these messages: {}", m.template_origin,
                                      e.what()), "messages");
  }
  check_prompt_bytes(m, text.size(), "messages");
  // As `wgrt chat`: the template's markers are special tokens, the messages' text is not.
  return llm::tokenize_chat(*m.tok, text, in);
}

void run_worker(ServerState& st, const WorkerOptions& o, const std::function<void(const std::string&)>& on_failed) {
  std::optional<gpu::Device> dev;
  std::optional<llm::Session> s;
  int64_t destroy_after = -1, steps = 0;
  try {
    destroy_after = destroy_device_after();
    dev.emplace(gpu::create_device(o.device));
    s.emplace(llm::open_session(*dev, o.model_path, o.build));
    st.model = describe(*s, o);
  } catch (const std::exception& e) {
    st.load_error = e.what();
    st.phase.store(Phase::Failed);
    stop_scheduler(st.sched);
    on_failed(st.load_error);
    if (o.before_release) o.before_release();
    return;
  }
  // Handlers refuse requests while loading, so the queue holds the warm-up jobs alone.
  std::vector<std::shared_ptr<Job>> warm = warm_up_jobs(st.sched, st.model);

  std::vector<Slot> slots(st.sched.n_slots);
  auto lost = [&](const gpu::DeviceLostError& e) {
    if (st.phase.load() == Phase::DeviceLost) return;
    st.lost_error = e.what();
    st.phase.store(Phase::DeviceLost);
    fmt::print(stderr, "wgrt serve: {}; answering 503 from now on (hint: restart `wgrt serve`)\n", e.what());
  };
  auto drop = [&](size_t i, const std::exception& e) {
    fail(st, slots[i], e);
    free_slot(st.sched, i);
  };
  while (true) {
    if (st.phase.load() == Phase::Loading) {
      std::string why;
      if (warmed_up(warm, why) && why.empty()) {
        fmt::print(stderr, "wgrt: warmed up (the kernels of a short generation are compiled)\n");
        st.phase.store(Phase::Ready);
      } else if (!why.empty()) {
        st.load_error = "the warm-up generation failed: " + why;
        st.phase.store(Phase::Failed);
        stop_scheduler(st.sched);
        on_failed(st.load_error);
        break;
      }
    }
    const std::vector<size_t> busy = fill_slots(st.sched, std::chrono::milliseconds(200));
    {
      std::lock_guard lock(st.sched.m);
      if (st.sched.stopping) break;
    }
    // New jobs take their slots; every slot emits its pending token (or ends).
    std::vector<size_t> live;
    for (size_t i : busy) {
      Slot& slot = slots[i];
      try {
        // Nothing runs on a lost device: jobs in flight and queued end at once with its error.
        if (st.phase.load() == Phase::DeviceLost) throw gpu::DeviceLostError(st.lost_error);
        if (!slot.job) {
          std::shared_ptr<Job> job;
          {
            std::lock_guard lock(st.sched.m);
            job = st.sched.slots[i];
          }
          if (!job->embed_inputs.empty()) {
            slot = Slot{};  // the slot's sequence is overwritten: nothing of an earlier job stays
            slot.job = std::move(job);
            run_embed_job(st, *s, slot, uint32_t(i));
            free_slot(st.sched, i);
            continue;
          }
          start(*s, slot, uint32_t(i), std::move(job));
        }
        if (emit(st, *s, slot, uint32_t(i)))
          live.push_back(i);
        else
          free_slot(st.sched, i);
      } catch (const std::exception& e) {
        drop(i, e);
      }
    }
    if (live.empty()) continue;
    // One step: a token of every decoding slot first, then prompt chunks in slot order, within
    // the graph's batch. A slot's readout row comes with its token or its prompt's last chunk.
    std::vector<llm::SeqPart> parts;
    std::vector<size_t> part_slot;
    std::vector<llm::Readout> readouts;
    size_t budget = s->mg.max_batch, n_prompt = 0;
    for (size_t i : live)
      if (slots[i].decoding) {
        parts.push_back({uint32_t(i), {&slots[i].next, 1}, true});
        part_slot.push_back(i);
        readouts.push_back(slots[i].readout);
        --budget;
      }
    for (size_t i : live) {
      Slot& slot = slots[i];
      if (slot.decoding || budget == 0) continue;
      const std::vector<int32_t>& prompt = slot.job->prompt;
      const size_t n = std::min(budget, prompt.size() - slot.prefilled);
      const bool done = slot.prefilled + n == prompt.size();
      parts.push_back({uint32_t(i), {prompt.data() + slot.prefilled, n}, done});
      part_slot.push_back(i);
      if (done) readouts.push_back(slot.readout);
      budget -= n;
      n_prompt += n;
    }
    const auto t0 = Clock::now();
    try {
      if (st.phase.load() == Phase::Ready && steps++ == destroy_after) wgpuDeviceDestroy(dev->get());
      llm::eval_seqs(*s, parts, llm::merge_readouts(readouts));
      size_t row = 0;
      for (size_t k = 0; k < parts.size(); ++k) {
        Slot& slot = slots[part_slot[k]];
        if (!slot.decoding) slot.prefilled += parts[k].tokens.size();
        slot.job->n_cached.store(uint32_t(llm::seq_pos(*s, parts[k].seq)));
        if (!parts[k].output) continue;
        slot.next = llm::pick_next_row(*s, slot.sampler, row++);
        slot.decoding = true;
      }
    } catch (const std::exception& e) {
      // The step is lost for every slot in it; a lost device ends them with its error.
      if (const auto* dl = dynamic_cast<const gpu::DeviceLostError*>(&e)) lost(*dl);
      for (size_t i : part_slot) drop(i, e);
      continue;
    }
    if (n_prompt && st.phase.load() == Phase::Ready) {
      st.metrics.prefill_us += micros_since(t0);
      st.metrics.prompt_tokens += n_prompt;
    }
  }
  // Jobs still in a slot at shutdown end with what they have.
  for (Slot& slot : slots)
    if (slot.job) finish(st, slot, "cancelled");
  // The session (and its tokenizer) outlives every handler.
  if (o.before_release) o.before_release();
}

}  // namespace wgrt::server
