// Why Boost.Beast under wgrt's own socket loop, and not cpp-httplib: Debian's cpp-httplib 0.11.4
// compiles in a listen backlog of 5 (bursts of connections were reset), times out per recv (a
// client sending a byte every few seconds held a thread forever), buffers header lines without
// a limit, applies the body limit to Content-Length only (not to chunked bodies) and sets
// SO_REUSEPORT (a second server on the same port silently shared it). Beast's parser is the one
// Boost-based servers rely on: it frames requests strictly (pipelined and unread bodies never
// desynchronize), with limits on the head and on the body of every transfer coding that wgrt
// sets. Around it, this file owns what a server must decide itself: an accept loop with a
// backlog of SOMAXCONN, a cap on connections, a deadline per request (head and body) rather
// than per read, writes with a deadline, lingering close after an error, the detection of a
// client gone while its request waits or generates, and an orderly stop that joins every
// connection thread. Synchronous code on a thread per connection: each request waits on its
// job's events anyway, and the threads are few (capped) next to the GPU's slots.
#include "server/http.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "llm/embed.h"
#include "server/embeddings.h"
#include "server/request.h"
#include "server/response.h"
#include "server/tool_grammar.h"

namespace wgrt::server {

using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto kTick = 200ms;  // how often a waiting thread looks at the stop flag
constexpr size_t kTrimBody = 256u << 10;  // bodies from this size on give their memory back after

int millis(Clock::duration d) {
  return int(std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count(), 0, INT32_MAX));
}

// A connection's bytes in: the keep-alive wait for a request's first byte, then one deadline for
// the whole request (http_wire.h), both cut short by the server's stop.
struct SocketSource : ByteSource {
  int fd = -1;
  const std::atomic<bool>* stopping = nullptr;
  std::chrono::milliseconds idle_timeout{}, read_timeout{};
  bool started = false;  // a byte of the current request has arrived
  Clock::time_point deadline;

  void begin_request(bool bytes_buffered) {
    started = bytes_buffered;
    deadline = Clock::now() + (started ? read_timeout : idle_timeout);
  }
  size_t read(char* dst, size_t n, std::error_code& ec) override {
    while (true) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero() || stopping->load()) {
        ec = std::make_error_code(std::errc::timed_out);
        return 0;
      }
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, std::min(millis(left), millis(kTick)));
      if (r < 0 && errno != EINTR) {
        ec = std::error_code(errno, std::system_category());
        return 0;
      }
      if (r <= 0) continue;
      const ssize_t got = ::recv(fd, dst, n, 0);
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        ec = std::error_code(errno, std::system_category());
        return 0;
      }
      if (got > 0 && !started) {
        started = true;
        deadline = Clock::now() + read_timeout;
      }
      return size_t(got);
    }
  }
};

// Whether the peer has closed or reset the connection (without reading anything it sent).
bool peer_gone(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, millis(left)) < 0 && errno != EINTR) return false;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

// One request's answer on its connection: a whole response, or a stream of chunks.
struct Exchange {
  int fd = -1;
  std::chrono::milliseconds write_timeout{};
  unsigned version = 11;
  bool keep_alive = true;
  std::string extra_headers;  // CORS
  bool answered = false, failed = false, chunked = false;

  std::string head(int status, std::string_view type, std::optional<size_t> length) const {
    std::string h = fmt::format("HTTP/1.1 {} {}\r\n", status, reason(status));
    if (!type.empty()) h += fmt::format("Content-Type: {}\r\n", type);
    if (length && status != 204) h += fmt::format("Content-Length: {}\r\n", *length);  // 204: none (RFC 9110)
    h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    return h + extra_headers;
  }
  void send(int status, std::string_view type, std::string_view body, std::string_view headers = {}) {
    answered = true;
    std::string out = head(status, type, body.size());
    out += headers;
    out += "\r\n";
    out += body;
    if (!send_all(fd, out, write_timeout)) failed = true;
  }
  void json(int status, const ordered_json& j) {
    send(status, "application/json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  void error(const ApiError& e) { json(e.status, error_json(e)); }

  // Chunked transfer on HTTP/1.1; HTTP/1.0 gets the bytes raw and the connection's close ends them.
  bool start_stream(std::string_view type) {
    answered = true;
    chunked = version == 11;
    if (!chunked) keep_alive = false;
    std::string out = head(200, type, std::nullopt);
    out += chunked ? "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n" : "Cache-Control: no-cache\r\n\r\n";
    return write_raw(out);
  }
  bool chunk(std::string_view data) {
    if (data.empty()) return !failed;
    return write_raw(chunked ? fmt::format("{:x}\r\n{}\r\n", data.size(), data) : std::string(data));
  }
  bool end_stream() { return chunked ? write_raw("0\r\n\r\n") : !failed; }
  bool write_raw(std::string_view s) {
    if (!failed && !send_all(fd, s, write_timeout)) failed = true;
    return !failed;
  }
};

ApiError to_api_error(const HttpError& e) {
  return ApiError(e.status, e.status >= 500 ? "server_error" : "invalid_request_error", e.code, e.message);
}

// Runs a handler body, turning its ApiError (or any other exception) into the JSON error.
template <class F>
void guarded(Exchange& ex, F&& body) {
  try {
    body();
  } catch (const ApiError& e) {
    if (!ex.answered) ex.error(e);
  } catch (const std::exception& e) {
    if (!ex.answered)
      ex.error(ApiError(500, "server_error", "internal_error", fmt::format("internal error: {}", e.what())));
  }
}

}  // namespace

struct HttpServer::Impl {
  ServerState& st;
  HttpOptions o;
  int listen_fd = -1;
  std::atomic<bool> stopping{false};
  struct Worker {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex m;
  std::list<Worker> conns;

  Impl(ServerState& s, HttpOptions opts) : st(s), o(std::move(opts)) { o.access.api_key = st.api_key; }

  void serve_connection(int fd);
  void handle(const HttpRequest& req, Exchange& ex, int fd);
  void complete(const HttpRequest& req, Exchange& ex, int fd, bool chat);
  void embeddings(const HttpRequest& req, Exchange& ex, int fd);
  void reap(bool all);
};

namespace {

using Jobs = std::vector<std::shared_ptr<Job>>;

void cancel_all(const Jobs& jobs) {
  for (const auto& j : jobs) j->cancelled.store(true);
}

// The next event of any unfinished job (`done[i]` marks the finished), its index in `i`; waits
// up to 100 ms in all.
std::optional<Event> next_event(const Jobs& jobs, const std::vector<bool>& done, size_t& i) {
  for (size_t k = 0; k < jobs.size(); ++k)
    if (!done[k])
      if (std::optional<Event> e = wait_event(*jobs[k], 0ms)) {
        i = k;
        return e;
      }
  for (size_t k = 0; k < jobs.size(); ++k)
    if (!done[k]) {
      i = k;
      return wait_event(*jobs[k], std::chrono::milliseconds(std::max<long>(1, 100 / long(jobs.size()))));
    }
  return std::nullopt;
}

namespace {
// A request's usage from its choices' (n > 1): the prompt counted once, as the first choice
// fitted and reused it; the completions and the shifts' discards of every choice.
void add_choice_usage(Usage& total, const Usage& choice, size_t index) {
  total.completion_tokens += choice.completion_tokens;
  total.discarded_tokens += choice.discarded_tokens;
  if (index != 0) return;
  total.cached_tokens = choice.cached_tokens;
  total.dropped_messages = choice.dropped_messages;
  total.dropped_tokens = choice.dropped_tokens;
}

}  // namespace

// The jobs' events (one job a choice) as server-sent events; the client's going away cancels
// them. `echoed`: the prompt, sent first in each choice (completions' echo). `tools`: how the
// reply's tool calls look (None: the text goes out as it comes).
void relay_stream(const Jobs& jobs, const ResponseHead& head, const std::string& echoed, ToolFormat tools,
                  Exchange& ex, int fd) {
  const CompletionRequest& r = jobs[0]->req;
  auto gone = [&] { cancel_all(jobs); };
  std::vector<StreamState> states;
  for (size_t i = 0; i < jobs.size(); ++i)
    states.push_back({.head = head, .include_usage = r.include_usage, .tools = {.format = tools}, .choice = i,
                      .text_offset = echoed.size()});
  if (!ex.start_stream("text/event-stream")) return gone();
  for (size_t i = 0; i < jobs.size(); ++i) {
    // The chat API's first chunk of a choice carries the role (OpenAI sends it before any text).
    if (head.chat && !ex.chunk(sse_event(chunk_json(head, "", "", true, r.include_usage, i)))) return gone();
    if (!echoed.empty() && !ex.chunk(sse_event(chunk_json(head, echoed, "", false, r.include_usage, i))))
      return gone();
  }
  std::vector<bool> done(jobs.size(), false);
  size_t n_done = 0;
  Usage usage{jobs[0]->prompt.size(), 0};
  auto next_look = Clock::now();
  while (true) {
    size_t i = 0;
    std::optional<Event> e = next_event(jobs, done, i);
    if (Clock::now() >= next_look) {
      next_look = Clock::now() + 100ms;
      if (peer_gone(fd)) return gone();
    }
    if (!e) continue;
    if (e->error) {
      // The status is already sent: the error travels as an event, as OpenAI's streams do.
      cancel_all(jobs);
      ex.chunk(sse_event(error_json(*e->error)));
      ex.chunk(sse_done());
      ex.end_stream();
      return;
    }
    if ((!e->text.empty() || !e->logprobs.empty()) &&
        !ex.chunk(stream_text_events(states[i], e->text, e->logprobs, r.logprobs >= 0)))
      return gone();
    if (!e->done) continue;
    done[i] = true;
    add_choice_usage(usage, e->usage, i);
    const bool last = ++n_done == jobs.size();
    if (!ex.chunk(stream_end_events(states[i], e->stop_reason, usage, last))) return gone();
    if (last) {
      if (!ex.end_stream()) return gone();
      return;
    }
  }
}

}  // namespace

void HttpServer::Impl::complete(const HttpRequest& req, Exchange& ex, int fd, bool chat) {
  const ServedModel& m = st.model;
  // Whatever `model` names: one model is served (as llama-server); responses name it by its id.
  CompletionRequest r = parse_completion(parse_body(req.body), chat);
  Prompt fitted = fit_prompt(m, r);  // chat: the oldest turns leave a conversation past the context
  const std::vector<int32_t>& prompt = fitted.tokens;
  check_prompt_fits(prompt.size(), m.n_ctx, chat ? "messages" : "prompt");
  check_logit_bias(r, m.n_vocab);
  if (r.force_tool_call) r.sampling.grammar = tool_call_grammar(m.tool_format, r.tools, r.forced_tool);
  const ResponseHead head = make_head(chat, m.id, st.serial++);
  // One job a choice, each its own sequence; with a seed, choice i samples with seed + i.
  Jobs jobs;
  for (uint32_t i = 0; i < r.n; ++i) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->dropped_messages = fitted.dropped_messages;
    job->dropped_tokens = fitted.dropped_tokens;
    job->n_keep = fitted.n_keep;
    job->req = r;
    if (r.has_seed) job->req.sampling.seed = r.sampling.seed + i;
    job->id = head.id;
    if (!submit(st.sched, job)) {
      cancel_all(jobs);
      st.metrics.requests_rejected += 1;
      throw ApiError(503, "server_error", "queue_full",
                     fmt::format("the server is busy: its {} slots are generating and {} requests are already waiting "
                                 "(hint: retry later, ask for fewer choices than n = {}, or start the server with a "
                                 "larger --queue-size)", st.sched.n_slots, st.sched.max_queued, r.n));
    }
    jobs.push_back(std::move(job));
  }
  const std::string echoed = r.echo ? r.prompt : std::string();
  // Tool calls are parsed out of the reply when tools were offered (tool_choice "none" drops them).
  const ToolFormat tools = chat && !r.tools.is_null() ? m.tool_format : ToolFormat::None;
  if (r.stream) return relay_stream(jobs, head, echoed, tools, ex, fd);
  std::vector<Choice> choices(jobs.size());
  std::vector<std::vector<TokenLogprobs>> lps(jobs.size());
  std::vector<bool> done(jobs.size(), false);
  for (Choice& c : choices) c.text = echoed;
  Usage usage{prompt.size(), 0};
  size_t n_done = 0;
  auto next_look = Clock::now();
  while (n_done < jobs.size()) {
    size_t i = 0;
    std::optional<Event> e = next_event(jobs, done, i);
    // Nobody to answer: the slots (or the queue places) go to the next requests. Looked at every
    // 100 ms, events or not.
    if (Clock::now() >= next_look) {
      next_look = Clock::now() + 100ms;
      if (peer_gone(fd)) {
        cancel_all(jobs);
        ex.keep_alive = false;
        ex.answered = true;
        return;
      }
    }
    if (!e) continue;
    choices[i].text += e->text;
    for (TokenLogprobs& t : e->logprobs) lps[i].push_back(std::move(t));
    if (!e->done) continue;
    if (e->error) {
      cancel_all(jobs);
      throw *e->error;
    }
    done[i] = true;
    ++n_done;
    add_choice_usage(usage, e->usage, i);
    const ParsedReply reply = parse_tool_calls(tools, choices[i].text, call_id_base(head));
    if (!reply.calls.empty()) {
      choices[i].text = reply.content;
      choices[i].calls = reply.calls;
      choices[i].finish = "tool_calls";
    } else {
      choices[i].finish = finish_reason(e->stop_reason);
    }
    if (r.logprobs >= 0) choices[i].logprobs = logprobs_json(chat, lps[i], echoed.size());
  }
  return ex.json(200, completion_json(head, choices, usage));
}

namespace {

// The inputs' tokens, each checked against the model: ids in the vocabulary, texts tokenized
// (refused first when too long for the context whatever their tokens), none past the context.
std::vector<std::vector<int32_t>> embedding_inputs(const ServedModel& m, const EmbeddingRequest& r) {
  std::vector<std::vector<int32_t>> out = r.token_ids;
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < out[i].size(); ++j)
      if (out[i][j] >= m.n_vocab)
        throw invalid_request(fmt::format("input{} token {} at index {} is outside the vocabulary [0, {})",
                                          r.token_ids.size() > 1 ? fmt::format("[{}]", i) : "", out[i][j], j,
                                          m.n_vocab), "input");
  // Four times the bytes the context's tokens can cover: slack for normalizers that shrink text.
  const size_t most_bytes = 4 * size_t(m.n_ctx) * m.max_token_bytes;
  auto too_long = [&](size_t i, const std::string& what) {
    return ApiError(400, "invalid_request_error", "context_length_exceeded",
                    fmt::format("input {} has {}, more than the context of {} tokens (hint: a shorter text, or start "
                                "the server with a larger --ctx-size)", i, what, m.n_ctx), "input");
  };
  for (const std::string& text : r.texts) {
    if (text.size() > most_bytes) throw too_long(out.size(), fmt::format("{} bytes", text.size()));
    out.push_back(llm::embedding_tokens(*m.tok, text));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].empty()) throw invalid_request(fmt::format("input {} has no tokens (hint: a non-empty text)", i), "input");
    if (out[i].size() > m.n_ctx) throw too_long(i, fmt::format("{} tokens", out[i].size()));
  }
  return out;
}

}  // namespace

void HttpServer::Impl::embeddings(const HttpRequest& req, Exchange& ex, int fd) {
  const ServedModel& m = st.model;
  EmbeddingRequest r = parse_embeddings(parse_body(req.body));
  if (!m.embedding_refusal.empty())
    throw ApiError(400, "invalid_request_error", "model_not_supported", m.embedding_refusal, "model");
  check_dimensions(r, m.n_embd, m.matryoshka);
  auto job = std::make_shared<Job>();
  job->embed_inputs = embedding_inputs(m, r);
  job->id = fmt::format("embd-{}", st.serial++);
  if (!submit(st.sched, job)) {
    st.metrics.requests_rejected += 1;
    throw ApiError(503, "server_error", "queue_full",
                   fmt::format("the server is busy: its {} slots are working and {} requests are already waiting "
                               "(hint: retry later, or start the server with a larger --queue-size)",
                               st.sched.n_slots, st.sched.max_queued));
  }
  auto next_look = Clock::now();
  while (true) {
    std::optional<Event> e = wait_event(*job, 100ms);
    if (Clock::now() >= next_look) {  // nobody to answer: the job leaves the queue
      next_look = Clock::now() + 100ms;
      if (peer_gone(fd)) {
        job->cancelled.store(true);
        ex.keep_alive = false;
        ex.answered = true;
        return;
      }
    }
    if (!e || !e->done) continue;
    if (e->error) throw *e->error;
    if (e->embeddings.size() != job->embed_inputs.size())
      throw ApiError(500, "server_error", "embedding_failed", "the embedding job ended without its vectors");
    if (r.dimensions && *r.dimensions < int64_t(m.n_embd))
      for (std::vector<float>& v : e->embeddings) v = llm::truncate_embedding(v, size_t(*r.dimensions));
    return ex.json(200, embeddings_json(e->embeddings, r.base64, m.id, e->usage.prompt_tokens));
  }
}

void HttpServer::Impl::handle(const HttpRequest& req, Exchange& ex, int fd) {
  const Route route = find_route(req.method, req.path);
  if (route == Route::Preflight) {
    if (cors_allow_origin(req, o.access).empty())
      return ex.error(ApiError(403, "invalid_request_error", "origin_not_allowed",
                               "a CORS preflight needs an Origin the server allows (hint: start it with --cors ORIGIN)"));
    return ex.send(204, "", "",
                   "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"
                   "Access-Control-Allow-Headers: Authorization, Content-Type\r\n"
                   "Access-Control-Max-Age: 600\r\n");
  }
  if (route == Route::NotFound)
    return ex.error(ApiError(404, "invalid_request_error", "not_found",
                             fmt::format("no route for {} {} (hint: /v1/chat/completions, /v1/completions, "
                                         "/v1/models, /health, /props, /slots)", req.method.substr(0, 16),
                                         req.path.substr(0, 128))));
  if (route == Route::MethodNotAllowed)
    return ex.error(ApiError(405, "invalid_request_error", "method_not_allowed",
                             fmt::format("{} is not served on {} (hint: GET for /health, /v1/models, /props, /slots "
                                         "and /metrics, POST for the others)", req.method.substr(0, 16),
                                         req.path.substr(0, 128))));
  const Phase phase = st.phase.load();
  if (route == Route::Health) {
    switch (phase) {
      case Phase::Loading: return ex.json(503, {{"status", "loading"}});
      case Phase::Ready: return ex.json(200, {{"status", "ok"}});
      case Phase::Failed: return ex.json(500, {{"status", "error"}, {"error", st.load_error}});
      case Phase::DeviceLost: return ex.json(503, {{"status", "device_lost"}, {"error", st.lost_error}});
    }
  }
  if (phase == Phase::DeviceLost) return ex.error(device_lost_error(st.lost_error));
  if (phase != Phase::Ready) {
    const bool failed = phase == Phase::Failed;
    return ex.error(ApiError(503, "server_error", failed ? "model_failed" : "loading",
                             failed ? "the model failed to load: " + st.load_error
                                    : "the model is still loading (hint: poll GET /health until it answers 200)"));
  }
  guarded(ex, [&] {
    switch (route) {
      case Route::Models: return ex.json(200, models_json(st.model.id, st.started, st.model.n_ctx));
      case Route::Model: {
        const std::string id = model_path_id(req.path);
        if (id != st.model.id && id != st.model.file_name)
          throw ApiError(404, "invalid_request_error", "model_not_found",
                         fmt::format("no model '{}' here: this server serves '{}' (its file '{}'); hint: GET "
                                     "/v1/models", id.substr(0, 128), st.model.id, st.model.file_name), "model");
        return ex.json(200, model_json(st.model.id, st.started, st.model.n_ctx));
      }
      case Route::Props: return ex.json(200, props_json(st));
      case Route::Slots: return ex.json(200, slots_json(st));
      case Route::Metrics:
        return ex.send(200, "text/plain; version=0.0.4",
                       metrics_text(st.metrics, queue_counts(st.sched), st.sched.n_slots));
      case Route::Completions: return complete(req, ex, fd, false);
      case Route::ChatCompletions: return complete(req, ex, fd, true);
      case Route::Embeddings: return embeddings(req, ex, fd);
      case Route::Tokenize: {
        TokenizeRequest r = parse_tokenize(parse_body(req.body));
        std::vector<int32_t> ids = tokenizer::tokenize(*st.model.tok, r.content, r.add_special, /*parse_special=*/true);
        return ex.json(200, {{"tokens", ids}});
      }
      case Route::Detokenize: {
        DetokenizeRequest r = parse_detokenize(parse_body(req.body));
        check_token_ids(r.tokens, st.model.n_vocab);
        return ex.json(200, {{"content", tokenizer::detokenize(*st.model.tok, r.tokens)}});
      }
      default: throw std::logic_error("unrouted request");
    }
  });
}

void HttpServer::Impl::serve_connection(int fd) {
  RequestReader reader(o.limits);
  SocketSource src;
  src.fd = fd;
  src.stopping = &stopping;
  src.idle_timeout = o.idle_timeout;
  src.read_timeout = o.read_timeout;
  bool linger = false;  // unread bytes may remain: read them off before closing
  while (!stopping.load()) {
    HttpRequest req;
    HttpError err;
    src.begin_request(reader.buffered());
    const ReadStatus rs = reader.read_head(src, req, err);
    if (rs == ReadStatus::Closed) break;
    Exchange ex{.fd = fd, .write_timeout = o.write_timeout, .version = req.version};
    ex.keep_alive = rs == ReadStatus::Head && req.keep_alive;
    if (rs == ReadStatus::Error) {
      ex.keep_alive = false;
      ex.error(to_api_error(err));
      linger = true;
      break;
    }
    if (const std::string allow = cors_allow_origin(req, o.access); !allow.empty())
      ex.extra_headers = fmt::format("Access-Control-Allow-Origin: {}\r\nVary: Origin\r\n", allow);
    // Refused before its body is read: the answer closes the connection, so the body is never
    // taken for a next request.
    if (auto e = check_access(req, o.access)) {
      ex.keep_alive = false;
      ex.error(to_api_error(*e));
      linger = true;
      break;
    }
    if (req.expect_continue && req.version == 11 && !send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", o.write_timeout))
      break;
    if (!reader.read_body(src, req, err)) {
      ex.keep_alive = false;
      ex.error(to_api_error(err));
      linger = true;
      break;
    }
    if (stopping.load()) ex.keep_alive = false;
    handle(req, ex, fd);
    // A large body's memory, freed, stays in this thread's malloc arena unless handed back: the
    // server's footprint then follows the bodies in flight, not the largest ever seen.
    if (req.body.size() >= kTrimBody) {
      req = HttpRequest{};
      ::malloc_trim(0);
    }
    if (!ex.keep_alive || ex.failed) break;
  }
  ::shutdown(fd, SHUT_WR);
  if (linger) {
    // Closing with unread input resets the connection, which can destroy the answer before the
    // client reads it: read (and drop) what it still sends, briefly.
    char sink[16384];
    const auto until = Clock::now() + 1s;
    size_t drained = 0;
    while (drained < (4u << 20) && Clock::now() < until) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, millis(until - Clock::now())) <= 0) break;
      const ssize_t n = ::recv(fd, sink, sizeof sink, 0);
      if (n <= 0) break;
      drained += size_t(n);
    }
  }
  ::close(fd);
}

void HttpServer::Impl::reap(bool all) {
  std::list<Worker> finished;
  {
    std::lock_guard lock(m);
    for (auto it = conns.begin(); it != conns.end();) {
      auto next = std::next(it);
      if (all || it->done->load()) finished.splice(finished.end(), conns, it);
      it = next;
    }
  }
  for (Worker& w : finished) w.t.join();
}

HttpServer::HttpServer(ServerState& st, HttpOptions o) : impl_(std::make_unique<Impl>(st, std::move(o))) {}

HttpServer::~HttpServer() {
  stop();
  impl_->reap(true);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

int HttpServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    throw std::runtime_error(fmt::format("cannot resolve --host '{}': {}", host, gai_strerror(rc)));
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR lets a restarted server bind while old connections linger in TIME_WAIT; on
    // Linux it never lets two sockets listen on one port (SO_REUSEPORT would: not set).
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = errno == EADDRINUSE ? "the port is already in use (another server listens on it)" : std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot listen on {}:{}: {} (hint: stop the other server, pick another "
                                         "--port, or --port 0 for a free one)", host, port, why));
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  impl_->listen_fd = fd;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void HttpServer::run() {
  Impl& im = *impl_;
  while (!im.stopping.load()) {
    pollfd p{im.listen_fd, POLLIN, 0};
    if (::poll(&p, 1, millis(kTick)) <= 0) {
      im.reap(false);
      continue;
    }
    const int fd = ::accept4(im.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the connection waits in the backlog while others close (no spinning).
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) std::this_thread::sleep_for(50ms);
      continue;  // else the client gave up already
    }
    im.reap(false);
    std::lock_guard lock(im.m);
    if (im.conns.size() >= im.o.max_connections) {
      const std::string body = error_json(ApiError(503, "server_error", "too_many_connections",
                                                   "the server has too many open connections (hint: retry later)"))
                                   .dump();
      send_all(fd, fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                               "Content-Length: {}\r\nConnection: close\r\n\r\n{}", body.size(), body), 100ms);
      ::close(fd);
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    try {
      im.conns.push_back({std::thread([&im, fd, done] {
                            try {
                              im.serve_connection(fd);
                            } catch (...) {  // out of memory mid-request: this connection ends, not the server
                              ::close(fd);
                            }
                            done->store(true);
                          }),
                          done});
    } catch (const std::system_error&) {
      ::close(fd);  // no thread to be had now: this client retries, the server goes on
    }
  }
  ::close(im.listen_fd);
  im.listen_fd = -1;
  im.reap(true);
}

void HttpServer::stop() { impl_->stopping.store(true); }

std::string metrics_text(const Metrics& m, const QueueCounts& q, size_t n_slots) {
  const double prefill_s = double(m.prefill_us.load()) * 1e-6, decode_s = double(m.decode_us.load()) * 1e-6;
  const uint64_t prompt = m.prompt_tokens.load(), generated = m.generated_tokens.load();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP wgrt_{0} {1}\n# TYPE wgrt_{0} {2}\nwgrt_{0} {3}\n", name, help, type, value);
  };
  metric("prompt_tokens_total", "counter", "Prompt tokens evaluated.", prompt);
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's KV cache, not evaluated.",
         m.prompt_tokens_cached.load());
  metric("generated_tokens_total", "counter", "Tokens generated.", generated);
  metric("prompt_seconds_total", "counter", "Time spent evaluating prompts.", prefill_s);
  metric("generation_seconds_total", "counter", "Time spent generating, prompts excluded.", decode_s);
  metric("prompt_tokens_per_second", "gauge", "Average prompt throughput.", prefill_s > 0 ? prompt / prefill_s : 0.0);
  metric("generated_tokens_per_second", "gauge", "Average generation throughput.",
         decode_s > 0 ? generated / decode_s : 0.0);
  metric("decode_steps_fed_total", "counter", "Decode steps fed on the GPU (pipelined, a step late).",
         m.fed_steps.load());
  metric("requests_running", "gauge", "Requests generating now.", q.running);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", q.queued);
  metric("slots", "gauge", "Slots (--parallel).", n_slots);
  out += "# HELP wgrt_requests_total Requests that reached the queue or were refused by it, by outcome.\n"
         "# TYPE wgrt_requests_total counter\n";
  out += fmt::format("wgrt_requests_total{{result=\"done\"}} {}\n", m.requests_done.load());
  out += fmt::format("wgrt_requests_total{{result=\"cancelled\"}} {}\n", m.requests_cancelled.load() + q.left_queue);
  out += fmt::format("wgrt_requests_total{{result=\"failed\"}} {}\n", m.requests_failed.load());
  out += fmt::format("wgrt_requests_total{{result=\"rejected\"}} {}\n", m.requests_rejected.load());
  return out;
}

}  // namespace wgrt::server
