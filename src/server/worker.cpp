#include "server/worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <span>

#include "llm/batch.h"
#include "llm/chat.h"
#include "llm/constrain.h"
#include "llm/context_shift.h"
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
  llm::Emit emit;  // the reply's text, stop strings, budget and context (llm/emit.h)
  llm::Readout readout = llm::Readout::All;
  size_t prefilled = 0;  // prompt tokens in the slot's KV region
  std::vector<int32_t> kv;  // the tokens at the sequence's KV positions 0.. (its prompt cache, after)
  bool decoding = false; // the prompt is in; `next` holds the latest sampled token
  int32_t next = -1;
  bool fresh = false;    // `next` is not emitted yet
  // A context shift's re-prefill (shift_context): tokens to evaluate again before `next`.
  std::vector<int32_t> refill;
  size_t refilled = 0;
  size_t discarded = 0;  // tokens the shifts took out of the cache
  llm::PickLogprobs next_lp;           // req.logprobs >= 0: next's log-probabilities
  std::vector<TokenLogprobs> lp;       // emitted tokens' not yet sent with an event
  Clock::time_point t_decode;
};

void finish(ServerState& st, Slot& slot, const std::string& reason) {
  Event e;
  e.text = llm::emit_end(slot.emit);
  e.logprobs = std::move(slot.lp);
  e.done = true;
  e.stop_reason = reason;
  e.usage = {.prompt_tokens = slot.job->prompt.size(),
             .completion_tokens = slot.emit.n_generated,
             .cached_tokens = slot.job->n_reused,
             .dropped_messages = slot.job->dropped_messages,
             .dropped_tokens = slot.job->dropped_tokens,
             .discarded_tokens = slot.discarded};
  if (!slot.job->warm_up) {
    st.metrics.decode_us += micros_since(slot.t_decode);
    (reason == "cancelled" ? st.metrics.requests_cancelled : st.metrics.requests_done) += 1;
  }
  push_event(*slot.job, std::move(e));
  slot.job.reset();
}

// The job's context in its slot's sequence: the KV positions of the prefix the scheduler found
// cached stay (n_reused), the rest of the prompt goes in with the next steps.
void start(ServerState& st, llm::Session& s, Slot& slot, uint32_t seq, std::shared_ptr<Job> job) {
  slot = Slot{};
  slot.job = std::move(job);
  const CompletionRequest& r = slot.job->req;
  llm::SamplerParams p = r.sampling;
  if (!r.has_seed) p.seed = std::random_device{}();
  slot.sampler = llm::make_sampler(p);
  llm::constrain(s, slot.sampler);
  slot.emit = llm::emit_begin(s.tok, r.stop, r.max_tokens);
  slot.readout = llm::step_readout(s, p);
  if (slot.job->prompt.empty()) throw std::invalid_argument("the prompt has no tokens");
  for (int32_t id : slot.job->prompt) llm::accept_token(slot.sampler, id);
  const std::vector<int32_t>& prompt = slot.job->prompt;
  const size_t reused = slot.job->n_reused;
  if (reused >= prompt.size()) throw std::logic_error("the prompt cache reuses the whole prompt");
  llm::truncate_seq(s, seq, uint32_t(reused));
  slot.kv.assign(prompt.begin(), prompt.begin() + ptrdiff_t(reused));
  slot.prefilled = reused;
  slot.job->n_cached.store(uint32_t(reused));
  if (!slot.job->warm_up) st.metrics.prompt_tokens_cached += reused;
  slot.t_decode = Clock::now();
}

// A reply that filled its context, when max_tokens bounds it: the older half of the tokens after
// the job's first n_keep leave the slot's cache, the newer half waits in `refill` for the next
// steps (worker.h says why a re-prefill). False when nothing can be shifted.
bool shift_context(llm::Session& s, Slot& slot, uint32_t seq) {
  if (slot.job->req.max_tokens < 0) return false;
  const size_t pos = slot.kv.size(), keep = std::min(slot.job->n_keep, pos);
  if (keep + 2 > pos) return false;
  const size_t discard = (pos - keep) / 2;
  slot.refill.assign(slot.kv.begin() + ptrdiff_t(keep + discard), slot.kv.end());
  slot.refilled = 0;
  slot.kv.resize(keep);
  llm::truncate_seq(s, seq, uint32_t(keep));
  slot.discarded += discard;
  return true;
}

// A pick's log-probabilities with the tokens' text.
TokenLogprobs token_logprobs(const llm::Session& s, const llm::PickLogprobs& p) {
  TokenLogprobs t{tokenizer::token_to_piece(s.tok, p.chosen.id), p.chosen.logprob, {}};
  for (const llm::TokenLogprob& a : p.top) t.top.emplace_back(tokenizer::token_to_piece(s.tok, a.id), a.logprob);
  return t;
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
bool emit(ServerState& st, llm::Session& s, Slot& slot, uint32_t seq) {
  const CompletionRequest& r = slot.job->req;
  if (slot.job->cancelled.load()) {
    finish(st, slot, "cancelled");
    return false;
  }
  if (!slot.decoding) return true;  // its prompt goes into the next step
  if (!slot.fresh) return true;     // a shift's re-prefill goes on; `next` went out already
  slot.fresh = false;
  const llm::Emitted out = llm::emit_token(slot.emit, s.tok, slot.next, /*full=*/llm::seq_pos(s, seq) >= s.mg.n_ctx,
                                           [&] { return shift_context(s, slot, seq); });
  if (out.counted) {
    slot.job->n_decoded.store(uint32_t(slot.emit.n_generated));
    if (!slot.job->warm_up) st.metrics.generated_tokens += 1;
    if (r.logprobs >= 0) slot.lp.push_back(token_logprobs(s, slot.next_lp));
  }
  if (!out.text.empty()) {
    Event e;
    e.text = out.text;
    e.logprobs = std::move(slot.lp);
    slot.lp.clear();
    push_event(*slot.job, std::move(e));
  }
  if (out.end) {
    finish(st, slot, slot.emit.stop_reason);
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

// Whether the slot's next pick is one a fed step embeds on the GPU: the argmax (greedy) or a
// draw from the top-k (llm/batch.h next_gpu_sample), with nothing the host must see first
// (log-probabilities; a penalty or a bias reads the whole row; a grammar's mask would depend on
// the pick before).
bool picks_on_gpu(const llm::Session& s, const Slot& slot) {
  return (slot.readout == llm::Readout::Argmax || llm::can_sample_on_gpu(s, slot.sampler.params)) &&
         slot.job->req.logprobs < 0;
}

// The GPU picks of a pipelined step, one per row's slot; none when every slot is greedy (the
// argmax lands in next_token by itself).
std::vector<llm::GpuSample> gpu_samples(std::vector<Slot>& slots, std::span<const uint32_t> row_slots) {
  bool any = false;
  for (uint32_t i : row_slots) any |= slots[i].sampler.params.temperature > 0;
  std::vector<llm::GpuSample> v;
  if (any)
    for (uint32_t i : row_slots) v.push_back(llm::next_gpu_sample(slots[i].sampler));
  return v;
}

// Bias, penalties and a grammar's mask on the GPU (llm/batch.h stage_adjust) for the step's
// readout rows whose slots ask for them and can be served so (without log-probabilities, which
// are the model's, before adjustment): those rows read their top-k (readouts[r] becomes TopK);
// the other rows keep their readout, the CPU adjusting the whole rows it reads.
void stage_gpu_adjust(llm::Session& s, std::vector<Slot>& slots, std::span<const llm::SeqPart> parts,
                      std::span<const size_t> part_slot, std::vector<llm::Readout>& readouts) {
  std::vector<llm::Sampler*> rows;
  bool any = false;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].output) continue;
    Slot& slot = slots[part_slot[k]];
    const bool gpu = slot.job->req.logprobs < 0 && llm::can_adjust_on_gpu(s, slot.sampler);
    rows.push_back(gpu ? &slot.sampler : nullptr);
    any |= gpu;
  }
  if (!any || !llm::stage_adjust(s, rows)) return;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r]) readouts[r] = llm::Readout::TopK;
}

// The picks of the step just run, one per output part (its readout row), each by its slot's
// sampler; the host path, a step at a time.
void read_picks(llm::Session& s, std::vector<Slot>& slots, std::span<const llm::SeqPart> parts,
                std::span<const size_t> part_slot) {
  size_t row = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].output) continue;
    Slot& slot = slots[part_slot[k]];
    const int32_t n_top = std::min<int32_t>(slot.job->req.logprobs, int32_t(s.mg.top_k));
    slot.next = llm::pick_next_row(s, slot.sampler, row++, n_top >= 0 ? &slot.next_lp : nullptr,
                                   uint32_t(std::max(n_top, 0)));
    slot.decoding = true;
    slot.fresh = true;
  }
}

// Pipelined decode (worker.h; greedy, or sampled on the GPU): after the step that gave `snap`,
// whose readout row r is slot seqs[r]'s pick, each next step is submitted before the host reads
// the picks it embeds (llm/batch.h submit_fed_seqs, a draw per sampled row), and the host emits
// those picks a step late. A slot that ends on a pick had that pick in the step in flight: its
// position there is taken back (truncate_seq) and its pick from that step never read. Returns when a step cannot be fed (a slot ended, a job
// waits for a free slot, a slot nears its context's end, the server stops), every slot of `seqs`
// still running left as an unpipelined step leaves it: its latest pick in `next`, not emitted.
// `before_step` runs before each step is submitted.
void decode_pipelined(ServerState& st, llm::Session& s, std::vector<Slot>& slots, std::vector<uint32_t> seqs,
                      graph::Snapshot snap, const std::function<void()>& before_step) {
  std::vector<size_t> rows(seqs.size());  // each slot's row of `snap`
  for (size_t r = 0; r < rows.size(); ++r) rows[r] = r;
  while (!seqs.empty()) {
    // Fed only as the unpipelined path would step: the same slots, in the rows' order, each with
    // room for this token and the next (emit's context check sees the position after this step).
    bool feed = !slots_would_change(st.sched);
    for (size_t r = 0; r < seqs.size(); ++r)
      feed = feed && rows[r] == r && llm::seq_pos(s, seqs[r]) + 1 < s.mg.n_ctx;
    graph::Snapshot ahead;
    if (feed) {
      before_step();
      ahead = llm::submit_fed_seqs(s, seqs, gpu_samples(slots, seqs));
      st.metrics.fed_steps += 1;
    }
    // `snap`'s picks, read while `ahead` runs.
    for (size_t r = 0; r < seqs.size(); ++r) {
      Slot& slot = slots[seqs[r]];
      slot.next = llm::read_argmax_row(s, snap, rows[r]);
      llm::accept_token(slot.sampler, slot.next);
      slot.fresh = true;
    }
    if (!feed) return;
    // Each pick is its sequence's token in `ahead` already.
    std::vector<uint32_t> going;
    std::vector<size_t> going_rows;
    for (size_t r = 0; r < seqs.size(); ++r) {
      const uint32_t q = seqs[r];
      Slot& slot = slots[q];
      const int32_t fed = slot.next;
      if (emit(st, s, slot, q)) {
        slot.kv.push_back(fed);
        slot.job->n_cached.store(llm::seq_pos(s, q));
        going.push_back(q);
        going_rows.push_back(r);
      } else {
        llm::truncate_seq(s, q, uint32_t(slot.kv.size()));
        free_slot(st.sched, q, std::move(slot.kv));
      }
    }
    snap = ahead;
    seqs = std::move(going);
    rows = std::move(going_rows);
  }
}

// WGRT_TEST_DESTROY_DEVICE_AFTER (worker.h): steps before the device is destroyed; -1: never.
const knobs::Count kDestroyDeviceAfter{"WGRT_TEST_DESTROY_DEVICE_AFTER", -1, int64_t(1) << 40, -1,
                                       "wgrt serve destroys the device after the worker's first N steps (tests)",
                                       knobs::Lab};

int64_t destroy_device_after() { return kDestroyDeviceAfter.get(); }

// WGRT_SERVE_PIPELINE=0: every step's picks are read before the next step (to measure, and to
// compare the texts).
const knobs::Choice kServePipeline{"WGRT_SERVE_PIPELINE", "0|1", "1",
                                   "0: wgrt serve reads each decode step's picks before the next (no fed steps)",
                                   knobs::Lab};

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

// The tokens of `messages` rendered by the template with the request's tools and settings.
std::vector<int32_t> chat_tokens(const ServedModel& m, const CompletionRequest& r,
                                 const nlohmann::ordered_json& messages) {
  chat::ChatInputs in;
  in.messages = messages;
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

// The prompt's first tokens that render the leading system messages alone (what a context
// shift keeps); 0 when there are none, or the template cannot render them alone.
size_t system_prompt_tokens(const ServedModel& m, const CompletionRequest& r, const std::vector<int32_t>& prompt) {
  nlohmann::ordered_json system = nlohmann::ordered_json::array();
  for (const auto& msg : r.messages) {
    if (msg.value("role", "") != "system" && msg.value("role", "") != "developer") break;
    system.push_back(msg);
  }
  if (system.empty()) return 0;
  chat::ChatInputs in;
  in.messages = system;
  in.tools = r.tools;
  in.add_generation_prompt = false;
  in.enable_thinking = r.enable_thinking;
  in.bos_token = m.bos_token;
  in.eos_token = m.eos_token;
  std::vector<int32_t> alone;
  try {
    alone = llm::tokenize_chat(*m.tok, chat::render_chat(*m.tmpl, in), in);
  } catch (const chat::TemplateError&) {
    return 0;  // e.g. a template that insists on a user message
  }
  size_t n = 0;
  while (n < alone.size() && n < prompt.size() && alone[n] == prompt[n]) ++n;
  return n;
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
  return chat_tokens(m, r, r.messages);
}

Prompt fit_prompt(const ServedModel& m, const CompletionRequest& r) {
  Prompt p{.tokens = prompt_tokens(m, r)};
  p.n_keep = !p.tokens.empty() && p.tokens[0] == m.tok->vocab.bos_id ? 1 : 0;
  if (r.chat) p.n_keep = std::max(p.n_keep, system_prompt_tokens(m, r, p.tokens));
  const size_t room = llm::reply_room(m.n_ctx, r.max_tokens);
  if (!r.chat || p.tokens.size() + room <= m.n_ctx) return p;
  const auto tokens_of = [&](const nlohmann::ordered_json& messages) { return chat_tokens(m, r, messages); };
  std::optional<llm::FittedChat> fit = llm::fit_chat(r.messages, m.n_ctx, room, tokens_of);
  if (!fit) {
    const size_t last = tokens_of(llm::drop_turns(r.messages, r.messages.size())).size();
    throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                   fmt::format("the conversation has {} tokens; without its older turns (the system messages and "
                               "the last turn alone) still {}, but the context holds {} with room for at least one "
                               "generated token; hint: a shorter last message, or start the server with a larger "
                               "--ctx-size", p.tokens.size(), last, m.n_ctx), "messages");
  }
  p.tokens = std::move(fit->tokens);
  p.dropped_messages = fit->dropped_messages;
  p.dropped_tokens = fit->dropped_tokens;
  return p;
}

void run_worker(ServerState& st, const WorkerOptions& o, const std::function<void(const std::string&)>& on_failed) {
  std::optional<gpu::Device> dev;
  std::optional<llm::Session> s;
  int64_t destroy_after = -1, steps = 0;
  bool pipeline = true;
  try {
    destroy_after = destroy_device_after();
    pipeline = kServePipeline.get() == "1";
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
        clear_caches(st.sched);  // no request reuses the warm-up's tokens
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
          start(st, *s, slot, uint32_t(i), std::move(job));
        }
        if (emit(st, *s, slot, uint32_t(i)))
          live.push_back(i);
        else
          free_slot(st.sched, i, std::move(slot.kv));  // what its KV cache holds stays for the next job
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
    bool logprobs = false;  // a row of the step needs log-probabilities
    size_t budget = s->mg.max_batch, n_prompt = 0;
    for (size_t i : live)
      if (slots[i].decoding && slots[i].refill.empty()) {
        parts.push_back({uint32_t(i), {&slots[i].next, 1}, true});
        part_slot.push_back(i);
        readouts.push_back(slots[i].readout);
        logprobs |= slots[i].job->req.logprobs >= 0;
        --budget;
      }
    for (size_t i : live) {
      Slot& slot = slots[i];
      if ((slot.decoding && slot.refill.empty()) || budget == 0) continue;
      // A prompt's chunk (its last one reads out the first pick), or a shift's re-prefill.
      const bool refill = slot.decoding;
      const std::vector<int32_t>& src = refill ? slot.refill : slot.job->prompt;
      const size_t at = refill ? slot.refilled : slot.prefilled;
      const size_t n = std::min(budget, src.size() - at);
      const bool output = !refill && at + n == src.size();
      parts.push_back({uint32_t(i), {src.data() + at, n}, output});
      part_slot.push_back(i);
      if (output) readouts.push_back(slot.readout);
      logprobs |= output && slot.job->req.logprobs >= 0;
      budget -= n;
      n_prompt += n;
    }
    // A step of decode tokens alone, every running slot's and each picked on the GPU, is followed
    // by pipelined steps (decode_pipelined); any other step is read back before the next.
    bool pipelined = pipeline && n_prompt == 0 && parts.size() == live.size() && llm::can_feed_seqs(*s);
    for (size_t i : part_slot) pipelined = pipelined && picks_on_gpu(*s, slots[i]);
    auto before_step = [&] {
      if (st.phase.load() == Phase::Ready && steps++ == destroy_after) wgpuDeviceDestroy(dev->get());
    };
    const auto t0 = Clock::now();
    try {
      before_step();
      std::vector<uint32_t> rows;  // a pipelined step's rows: its parts' slots
      if (pipelined) rows.assign(part_slot.begin(), part_slot.end());
      if (!pipelined) stage_gpu_adjust(*s, slots, parts, part_slot, readouts);
      // A pipelined step's picks are all in next_token (sampled ones too): its argmax readout.
      llm::eval_seqs(*s, parts, pipelined ? llm::Readout::Argmax : llm::merge_readouts(readouts), nullptr, logprobs,
                     gpu_samples(slots, rows));
      for (size_t k = 0; k < parts.size(); ++k) {
        Slot& slot = slots[part_slot[k]];
        slot.kv.insert(slot.kv.end(), parts[k].tokens.begin(), parts[k].tokens.end());
        if (!slot.decoding) {
          slot.prefilled += parts[k].tokens.size();
        } else if (!slot.refill.empty()) {
          slot.refilled += parts[k].tokens.size();
          if (slot.refilled == slot.refill.size()) slot.refill.clear();  // `next` goes in with the next step
        }
        slot.job->n_cached.store(uint32_t(llm::seq_pos(*s, parts[k].seq)));
      }
      if (pipelined) {
        std::vector<uint32_t> seqs(part_slot.begin(), part_slot.end());
        decode_pipelined(st, *s, slots, std::move(seqs), s->last, before_step);
      } else {
        read_picks(*s, slots, parts, part_slot);
      }
    } catch (const std::exception& e) {
      // The step is lost for every slot in it (that a pipelined run did not end already); a lost
      // device ends them with its error. Adjustments staged for it must not reach the next step.
      s->adjust_next = false;
      if (const auto* dl = dynamic_cast<const gpu::DeviceLostError*>(&e)) lost(*dl);
      for (size_t i : part_slot)
        if (slots[i].job) drop(i, e);
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
