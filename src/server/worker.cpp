#include "server/worker.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "llm/generate.h"
#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::server {

using Clock = std::chrono::steady_clock;

namespace {

uint64_t micros_since(Clock::time_point t) {
  return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count());
}

// One job's generation state while it holds a slot.
struct Slot {
  std::shared_ptr<Job> job;
  llm::Sampler sampler;
  llm::StopFilter filter;
  tokenizer::StreamDecoder dec;
  llm::Readout readout = llm::Readout::All;
  int32_t next = -1;  // sampled, not yet emitted
  size_t n_generated = 0;
  Clock::time_point t_decode;
};

void finish(ServerState& st, Slot& slot, const std::string& reason) {
  Event e;
  e.text = llm::stop_filter_push(slot.filter, tokenizer::decode_flush(slot.dec)) + llm::stop_filter_flush(slot.filter);
  e.done = true;
  e.stop_reason = reason;
  e.usage = {slot.job->prompt.size(), slot.n_generated};
  st.metrics.decode_us += micros_since(slot.t_decode);
  (reason == "cancelled" ? st.metrics.requests_cancelled : st.metrics.requests_done) += 1;
  push_event(*slot.job, std::move(e));
  slot.job.reset();
}

// A fresh context for the job: its prompt from KV position 0, then the first token sampled.
void start(ServerState& st, llm::Session& s, Slot& slot, std::shared_ptr<Job> job) {
  slot = Slot{};
  slot.job = std::move(job);
  const CompletionRequest& r = slot.job->req;
  llm::SamplerParams p = r.sampling;
  if (!r.has_seed) p.seed = std::random_device{}();
  slot.sampler = llm::make_sampler(p);
  slot.filter = llm::StopFilter{r.stop, {}, false};
  slot.dec = tokenizer::make_stream_decoder(s.tok, /*sequence_start=*/false);
  slot.readout = llm::step_readout(s, p);
  slot.t_decode = Clock::now();
  if (slot.job->cancelled.load()) return;  // gone while queued: step() ends it
  const auto t0 = Clock::now();
  llm::reset(s);
  llm::eval(s, slot.job->prompt, {}, slot.readout);
  for (int32_t id : slot.job->prompt) llm::accept_token(slot.sampler, id);
  slot.next = llm::pick_next(s, slot.sampler);
  st.metrics.prefill_us += micros_since(t0);
  st.metrics.prompt_tokens += slot.job->prompt.size();
  slot.t_decode = Clock::now();
}

// Emits the pending token and computes the next; false once the job has ended.
bool step(ServerState& st, llm::Session& s, Slot& slot) {
  const CompletionRequest& r = slot.job->req;
  if (slot.job->cancelled.load()) {
    finish(st, slot, "cancelled");
    return false;
  }
  if (llm::is_end_token(s, slot.next)) {
    finish(st, slot, "eos");
    return false;
  }
  ++slot.n_generated;
  st.metrics.generated_tokens += 1;
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
  if (s.n_past >= s.mg.n_ctx) {
    finish(st, slot, "context");
    return false;
  }
  llm::eval(s, std::span<const int32_t>(&slot.next, 1), {}, slot.readout);
  slot.next = llm::pick_next(s, slot.sampler);
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
int64_t destroy_device_after() {
  const char* env = std::getenv("WGRT_TEST_DESTROY_DEVICE_AFTER");
  if (!env || !*env) return -1;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 0)
    throw std::invalid_argument(fmt::format(
        "WGRT_TEST_DESTROY_DEVICE_AFTER='{}' is not a step count (hint: a number >= 0, or unset it)", env));
  return int64_t(v);
}

ServedModel describe(const llm::Session& s, const WorkerOptions& o) {
  ServedModel m;
  m.id = o.model_path.empty() ? "wgrt-default" : std::filesystem::path(o.model_path).filename().string();
  if (m.id.empty()) m.id = std::filesystem::path(o.model_path).parent_path().filename().string();
  m.n_ctx = s.mg.n_ctx;
  m.n_vocab = s.tok.vocab.n_vocab();
  m.tok = &s.tok;
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
    m.template_origin = src.origin;
    m.bos_token = src.bos_token;
    m.eos_token = src.eos_token;
  }
  return m;
}

}  // namespace

ApiError device_lost_error(const std::string& why) {
  return ApiError(503, "server_error", "device_lost",
                  fmt::format("the GPU device was lost, so this server cannot generate any more: {} (hint: restart "
                              "`wgrt serve`)", why));
}

std::vector<int32_t> prompt_tokens(const ServedModel& m, const CompletionRequest& r) {
  if (!r.chat) return tokenizer::tokenize(*m.tok, r.prompt, /*add_special=*/true, /*parse_special=*/true);
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
  // As `wgrt chat`: templates usually write the BOS text themselves; add BOS only when not.
  const bool has_bos = m.bos_token && !m.bos_token->empty() && text.starts_with(*m.bos_token);
  return tokenizer::tokenize(*m.tok, text, /*add_special=*/!has_bos, /*parse_special=*/true);
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
    return;
  }
  st.phase.store(Phase::Ready);

  std::vector<Slot> slots(st.sched.n_slots);
  while (true) {
    const std::vector<size_t> busy = fill_slots(st.sched, std::chrono::milliseconds(200));
    {
      std::lock_guard lock(st.sched.m);
      if (st.sched.stopping) break;
    }
    // One step per busy slot, in slot order: each gets a token before any gets a second.
    for (size_t i : busy) {
      Slot& slot = slots[i];
      try {
        const bool fresh = !slot.job;
        if (fresh) {
          slot = Slot{};
          std::lock_guard lock(st.sched.m);
          slot.job = st.sched.slots[i];
        }
        // Nothing runs on a lost device: jobs in flight and queued end at once with its error.
        if (st.phase.load() == Phase::DeviceLost) throw gpu::DeviceLostError(st.lost_error);
        if (fresh) {
          if (steps++ == destroy_after) wgpuDeviceDestroy(dev->get());
          start(st, *s, slot, std::move(slot.job));
        }
        if (steps++ == destroy_after) wgpuDeviceDestroy(dev->get());
        if (!step(st, *s, slot)) free_slot(st.sched, i);
      } catch (const gpu::DeviceLostError& e) {
        if (st.phase.load() != Phase::DeviceLost) {
          st.lost_error = e.what();
          st.phase.store(Phase::DeviceLost);
          fmt::print(stderr, "wgrt serve: {}; answering 503 from now on (hint: restart `wgrt serve`)\n", e.what());
        }
        fail(st, slot, e);
        free_slot(st.sched, i);
      } catch (const std::exception& e) {
        fail(st, slot, e);
        free_slot(st.sched, i);
      }
    }
  }
  // Jobs still in a slot at shutdown end with what they have.
  for (Slot& slot : slots)
    if (slot.job) finish(st, slot, "cancelled");
}

}  // namespace wgrt::server
