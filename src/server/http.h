// The HTTP glue of `wgrt serve` on cpp-httplib: routes, the API key check, errors as OpenAI's
// JSON, streaming through chunked server-sent events. Request checks are request.h's, the
// generation is the worker's (worker.h): a handler parses, tokenizes, queues a job and relays
// its events.
//   GET  /health                 503 {"status": "loading"} while the model loads, then 200;
//                                503 {"status": "device_lost", "error"} once the GPU device is lost
//                                (every other path then answers 503 "device_lost" too)
//   GET  /v1/models              the served model
//   POST /v1/completions         OpenAI completions (stream or not)
//   POST /v1/chat/completions    OpenAI chat completions, through the model's chat template
//   POST /tokenize, /detokenize  {"content"} <-> {"tokens"}
//   GET  /metrics                Prometheus text: tokens, tok/s, requests running/queued
// Every path but /health needs `Authorization: Bearer KEY` when the server has a key.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

#include "server/worker.h"

namespace wgrt::server {

struct HttpOptions {
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
};

void add_routes(httplib::Server& svr, ServerState& st, const HttpOptions& o = {});

// The Prometheus exposition of the server's counters (GET /metrics).
std::string metrics_text(const Metrics& m, const QueueCounts& q, size_t n_slots);

}  // namespace wgrt::server
