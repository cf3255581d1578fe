#include "server/http.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "server/request.h"
#include "server/response.h"

namespace wgrt::server {

using nlohmann::ordered_json;
using namespace std::chrono_literals;

namespace {

void send_json(httplib::Response& res, int status, const ordered_json& j) {
  res.status = status;
  res.set_content(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_json(e)); }

// Runs a handler body, turning its ApiError (or any other exception) into the JSON error.
template <class F>
void guarded(httplib::Response& res, F&& body) {
  try {
    body();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, "server_error", "internal_error", fmt::format("internal error: {}", e.what())));
  }
}

bool authorized(const ServerState& st, const httplib::Request& req) {
  if (st.api_key.empty() || req.path == "/health") return true;
  return req.get_header_value("Authorization") == "Bearer " + st.api_key;
}

// Streams one job's events as server-sent events; the client's going away cancels the job.
struct StreamState {
  std::shared_ptr<Job> job;
  ResponseHead head;
  bool include_usage = false;
  bool started = false;
};

bool write(httplib::DataSink& sink, const std::string& s) { return sink.write(s.data(), s.size()); }

bool stream_step(StreamState& ss, httplib::DataSink& sink) {
  Job& job = *ss.job;
  auto gone = [&] {
    job.cancelled.store(true);
    return false;
  };
  if (!ss.started) {
    ss.started = true;
    // The chat API's first chunk carries the role (OpenAI sends it before any text).
    if (ss.head.chat && !write(sink, sse_event(chunk_json(ss.head, "", "", true, ss.include_usage)))) return gone();
  }
  std::optional<Event> e = wait_event(job, 100ms);
  if (!e) return sink.is_writable() ? true : gone();
  if (e->error) {
    // The status is already sent: the error travels as an event, as OpenAI's streams do.
    write(sink, sse_event(error_json(*e->error)));
    write(sink, sse_done());
    sink.done();
    return true;
  }
  if (!e->text.empty() && !write(sink, sse_event(chunk_json(ss.head, e->text, "", false, ss.include_usage))))
    return gone();
  if (!e->done) return true;
  const std::string finish = finish_reason(e->stop_reason);
  if (!write(sink, sse_event(chunk_json(ss.head, "", finish, false, ss.include_usage)))) return gone();
  if (ss.include_usage && !write(sink, sse_event(usage_chunk_json(ss.head, e->usage)))) return gone();
  if (!write(sink, sse_done())) return gone();
  sink.done();
  return true;
}

void complete(ServerState& st, const httplib::Request& req, httplib::Response& res, bool chat) {
  const ServedModel& m = st.model;
  CompletionRequest r = parse_completion(parse_body(req.body), chat);
  check_model(r, m.id);
  auto job = std::make_shared<Job>();
  job->prompt = prompt_tokens(m, r);
  check_prompt_fits(job->prompt.size(), m.n_ctx, chat ? "messages" : "prompt");
  job->req = std::move(r);
  if (!submit(st.sched, job)) {
    st.metrics.requests_rejected += 1;
    throw ApiError(503, "server_error", "queue_full",
                   fmt::format("the server is busy: {} requests are already waiting (hint: retry later, or start "
                               "the server with a larger --queue-size)", st.sched.max_queued));
  }
  const ResponseHead head = make_head(chat, m.id, st.serial++);
  if (job->req.stream) {
    auto ss = std::make_shared<StreamState>(StreamState{job, head, job->req.include_usage, false});
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream", [ss](size_t, httplib::DataSink& sink) { return stream_step(*ss, sink); },
        [ss](bool) { ss->job->cancelled.store(true); });  // a no-op once the job ended
    return;
  }
  std::string text;
  while (true) {
    std::optional<Event> e = wait_event(*job, 1s);
    if (!e) continue;
    text += e->text;
    if (!e->done) continue;
    if (e->error) throw *e->error;
    send_json(res, 200, completion_json(head, text, finish_reason(e->stop_reason), e->usage));
    return;
  }
}

}  // namespace

std::string metrics_text(const Metrics& m, const QueueCounts& q, size_t n_slots) {
  const double prefill_s = double(m.prefill_us.load()) * 1e-6, decode_s = double(m.decode_us.load()) * 1e-6;
  const uint64_t prompt = m.prompt_tokens.load(), generated = m.generated_tokens.load();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP wgrt_{0} {1}\n# TYPE wgrt_{0} {2}\nwgrt_{0} {3}\n", name, help, type, value);
  };
  metric("prompt_tokens_total", "counter", "Prompt tokens evaluated.", prompt);
  metric("generated_tokens_total", "counter", "Tokens generated.", generated);
  metric("prompt_seconds_total", "counter", "Time spent evaluating prompts.", prefill_s);
  metric("generation_seconds_total", "counter", "Time spent generating, prompts excluded.", decode_s);
  metric("prompt_tokens_per_second", "gauge", "Average prompt throughput.", prefill_s > 0 ? prompt / prefill_s : 0.0);
  metric("generated_tokens_per_second", "gauge", "Average generation throughput.",
         decode_s > 0 ? generated / decode_s : 0.0);
  metric("requests_running", "gauge", "Requests generating now.", q.running);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", q.queued);
  metric("slots", "gauge", "Slots (--parallel).", n_slots);
  out += "# HELP wgrt_requests_total Requests that reached the queue or were refused by it, by outcome.\n"
         "# TYPE wgrt_requests_total counter\n";
  out += fmt::format("wgrt_requests_total{{result=\"done\"}} {}\n", m.requests_done.load());
  out += fmt::format("wgrt_requests_total{{result=\"cancelled\"}} {}\n", m.requests_cancelled.load());
  out += fmt::format("wgrt_requests_total{{result=\"failed\"}} {}\n", m.requests_failed.load());
  out += fmt::format("wgrt_requests_total{{result=\"rejected\"}} {}\n", m.requests_rejected.load());
  return out;
}

void add_routes(httplib::Server& svr, ServerState& st, const HttpOptions& o) {
  svr.set_payload_max_length(o.max_body_bytes);

  svr.set_pre_routing_handler([&st](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(st, req)) {
      send_error(res, ApiError(401, "invalid_request_error", "invalid_api_key",
                               "a missing or wrong API key (hint: send `Authorization: Bearer KEY` with the server's "
                               "--api-key)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    const Phase phase = st.phase.load();
    if (req.path != "/health" && phase == Phase::DeviceLost) {
      send_error(res, device_lost_error(st.lost_error));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path != "/health" && phase != Phase::Ready) {
      const bool failed = phase == Phase::Failed;
      send_error(res, ApiError(503, "server_error", failed ? "model_failed" : "loading",
                               failed ? "the model failed to load: " + st.load_error
                                      : "the model is still loading (hint: poll GET /health until it answers 200)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Errors httplib answers itself (unknown path, body too large, bad request line) get a JSON
  // body too; those our handlers answered already have one.
  svr.set_error_handler([max_body = o.max_body_bytes](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message;
    if (res.status == 404)
      message = fmt::format("no route for {} {} (hint: /v1/chat/completions, /v1/completions, /v1/models, /health)",
                            req.method, req.path);
    else if (res.status == 413)
      message = fmt::format("the request body is larger than the server's limit of {} bytes", max_body);
    else
      message = fmt::format("HTTP {}", res.status);
    send_error(res, ApiError(res.status, "invalid_request_error", res.status == 404 ? "not_found" : "", message));
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, ApiError(500, "server_error", "internal_error", "internal error"));
  });

  svr.Get("/health", [&st](const httplib::Request&, httplib::Response& res) {
    switch (st.phase.load()) {
      case Phase::Loading: return send_json(res, 503, {{"status", "loading"}});
      case Phase::Ready: return send_json(res, 200, {{"status", "ok"}});
      case Phase::Failed: return send_json(res, 500, {{"status", "error"}, {"error", st.load_error}});
      case Phase::DeviceLost: return send_json(res, 503, {{"status", "device_lost"}, {"error", st.lost_error}});
    }
  });
  svr.Get("/v1/models", [&st](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_json(st.model.id, st.started, st.model.n_ctx));
  });
  svr.Get("/metrics", [&st](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(st.metrics, queue_counts(st.sched), st.sched.n_slots), "text/plain; version=0.0.4");
  });
  for (const char* path : {"/v1/completions", "/completions", "/v1/chat/completions", "/chat/completions"}) {
    const bool chat = *endpoint_from_path(path) == Endpoint::ChatCompletions;
    svr.Post(path, [&st, chat](const httplib::Request& req, httplib::Response& res) {
      guarded(res, [&] { complete(st, req, res, chat); });
    });
  }
  svr.Post("/tokenize", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      TokenizeRequest r = parse_tokenize(parse_body(req.body));
      std::vector<int32_t> ids = tokenizer::tokenize(*st.model.tok, r.content, r.add_special, /*parse_special=*/true);
      send_json(res, 200, {{"tokens", ids}});
    });
  });
  svr.Post("/detokenize", [&st](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      DetokenizeRequest r = parse_detokenize(parse_body(req.body));
      check_token_ids(r.tokens, st.model.n_vocab);
      send_json(res, 200, {{"content", tokenizer::detokenize(*st.model.tok, r.tokens)}});
    });
  });
}

}  // namespace wgrt::server
