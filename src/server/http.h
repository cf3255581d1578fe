// The HTTP server of `wgrt serve`: an accept loop, a thread per connection, routes, errors as
// OpenAI's JSON, streaming through chunked server-sent events. Framing and the checks made on
// a request's head are http_wire.h's (Boost.Beast's parser), request checks request.h's, the
// generation the worker's (worker.h): a handler parses, tokenizes, queues a job and relays its
// events, and cancels the job as soon as its client goes (streamed or not).
//   GET  /health                 503 {"status": "loading"} while the model loads and warms up,
//                                then 200; 503 {"status": "device_lost", "error"} once the GPU
//                                device is lost (every other path then answers 503 too)
//   GET  /v1/models              the served model (its id: --alias, else the file name)
//   GET  /v1/models/{id}         that model, for its id or file name (else 404 model_not_found)
//   GET  /props, /slots          the server's settings; each slot's state (http.h's props_json)
//   POST /v1/embeddings          OpenAI embeddings (server/embeddings.h), pooled as the model says
//   POST /v1/completions         OpenAI completions (stream or not)
//   POST /v1/chat/completions    OpenAI chat completions, through the model's chat template
//   POST /tokenize, /detokenize  {"content"} <-> {"tokens"}
//   GET  /metrics                Prometheus text: tokens, tok/s, requests running/queued
//   OPTIONS any of them          a CORS preflight (204), for the origins --cors allows
// Every path but /health needs `Authorization: Bearer KEY` when the server has a key; a Host or
// Origin not allowed gets 403 first (http_wire.h's check_access).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/http_wire.h"
#include "server/worker.h"

namespace wgrt::server {

struct HttpOptions {
  HttpLimits limits;
  AccessPolicy access;  // its api_key: the ServerState's
  std::chrono::milliseconds read_timeout{30'000};  // a whole request, head and body (408 past it)
  std::chrono::milliseconds idle_timeout{15'000};  // a kept-alive connection's wait for its next request
  std::chrono::milliseconds write_timeout{60'000}; // a client that reads nothing for this long is dropped
  size_t max_connections = 1024;                   // more at once are answered 503 and closed
};

class HttpServer {
 public:
  HttpServer(ServerState& st, HttpOptions o);
  ~HttpServer();  // stop(), then run()'s end
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (a backlog of SOMAXCONN, no SO_REUSEPORT: a port already served is an
  // error naming it); port 0 takes a free one. Returns the port; throws std::runtime_error.
  int bind(const std::string& host, int port);
  // Accepts until stop(); returns once every connection thread has been joined.
  void run();
  // Any thread: stop accepting; idle connections close, a request being answered ends with its
  // answer (its job cancelled by the scheduler's stop, which the caller does).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// GET /props: the served model (id, path, context, chat template, special tokens), the
// defaults a request gets for the fields it leaves out, the slots, the build.
nlohmann::ordered_json props_json(const ServerState& st);
// GET /slots: per slot, whether it generates, for which response id, and how far: the prompt's
// tokens, those of them reused from the slot's cache, the tokens in its KV cache and those
// generated; a free slot's n_cached is its prompt cache (what the next request may reuse).
nlohmann::ordered_json slots_json(ServerState& st);

// The Prometheus exposition of the server's counters (GET /metrics).
std::string metrics_text(const Metrics& m, const QueueCounts& q, size_t n_slots);

}  // namespace wgrt::server
