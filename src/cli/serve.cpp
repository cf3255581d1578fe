// `wgrt serve`: an OpenAI-compatible HTTP server (src/server/). The port is bound first, so
// /health answers 503 while the worker thread loads and warms up the model; Ctrl-C or SIGTERM
// stops it in order (stop accepting, end the requests, join the connections, free the model).
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/flags.h"
#include "server/http.h"
#include "server/worker.h"

namespace wgrt::cli {
namespace {

struct ServeFlags {
  ModelFlags model;
  std::string chat_template;
  std::string alias;
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t parallel = 4;
  size_t queue_size = 64;
  std::string api_key;
  size_t max_body = 8u << 20;
  double read_timeout = 30;
  std::vector<std::string> cors;
  std::vector<std::string> allowed_hosts;
};

// Set once the HTTP server has joined its last connection thread: the worker may free the session.
struct Latch {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard lock(m);
      open = true;
    }
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return open; });
  }
};

server::HttpOptions http_options(const ServeFlags& f) {
  server::HttpOptions ho;
  ho.limits.max_body = f.max_body;
  ho.read_timeout = std::chrono::milliseconds(int64_t(f.read_timeout * 1000));
  ho.access.cors_origins = f.cors;
  ho.access.allowed_hosts = f.allowed_hosts.empty() ? server::default_allowed_hosts(f.host) : f.allowed_hosts;
  if (std::find(f.allowed_hosts.begin(), f.allowed_hosts.end(), "*") != f.allowed_hosts.end())
    ho.access.allowed_hosts.clear();
  return ho;
}

int run_serve(const gpu::DeviceOptions& dev_opts, const ServeFlags& f) {
  server::ServerState st;
  st.api_key = f.api_key;
  st.started = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  server::init_scheduler(st.sched, f.parallel, f.queue_size);

  // Signals go to one thread that waits for them; every other thread (the connections', the
  // worker) inherits the blocked mask. A client gone mid-write must not kill the process.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // A descriptor per connection (up to HttpOptions::max_connections): the soft limit up to the hard one.
  if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  server::HttpServer http(st, http_options(f));
  const int port = http.bind(f.host, f.port);
  fmt::print(stderr, "wgrt: listening on http://{}:{} ({} slots batched in each step; queue of {})\n",
             f.host, port, st.sched.n_slots, f.queue_size);

  std::atomic<bool> failed{false}, done{false};
  Latch http_joined;
  // Slot i is sequence i of the graph: every slot generates in the same steps.
  model::BuildOptions bo = build_options(f.model, false);
  bo.n_seqs = uint32_t(f.parallel);
  server::WorkerOptions wo{f.model.model, f.chat_template, bo, dev_opts, [&] { http_joined.wait(); }, f.alias};
  std::thread worker([&] {
    server::run_worker(st, wo, [&](const std::string& why) {
      fmt::print(stderr, "wgrt: error: the model failed to load: {}\n", why);
      failed.store(true);
      http.stop();
    });
  });
  // The orderly stop: no new connections, queued requests answered 503 and running ones ended
  // (the scheduler's stop), connection threads joined (run() returns), then the session freed.
  std::thread waiter([&] {
    const timespec tick{0, 200'000'000};
    while (!done.load()) {
      if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) {
        fmt::print(stderr, "wgrt: stopping\n");
        break;
      }
    }
    http.stop();
    server::stop_scheduler(st.sched);
  });
  std::thread announce([&] {
    while (st.phase.load() == server::Phase::Loading && !done.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (st.phase.load() == server::Phase::Ready)
      fmt::print(stderr, "wgrt: serving {} (context {}, chat template: {})\n", st.model.id, st.model.n_ctx,
                 st.model.tmpl ? st.model.template_origin : "none, /v1/chat/completions answers 400");
  });

  http.run();
  done.store(true);
  server::stop_scheduler(st.sched);
  http_joined.release();
  waiter.join();
  worker.join();
  announce.join();
  return failed.load() ? 1 : 0;
}

}  // namespace

Run add_serve(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand(
      "serve",
      "an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /tokenize, "
      "/detokenize, /health, /metrics). Requests wait in a fair FIFO queue for one of --parallel slots; "
      "all slots generate together (continuous batching: each step carries a token of every decoding slot "
      "and chunks of new prompts), each with its own --ctx-size positions of KV cache");
  auto f = std::make_shared<ServeFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("--chat-template", f->chat_template, "a Jinja template file (or a tokenizer_config.json) to use "
                                                       "instead of the model's");
  cmd->add_option("--alias", f->alias, "the model's id for clients (GET /v1/models; responses' \"model\"); default: "
                                       "the file name. Requests may name any model: the one served answers");
  cmd->add_option("--host", f->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "port to listen on (0: a free one, printed at start)")
      ->check(integer_in(0, 65535))
      ->capture_default_str();
  cmd->add_option("--parallel", f->parallel, "request slots, generating together (each its own context)")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--queue-size", f->queue_size,
                  "requests that may wait for a slot beyond the free ones; more get 503 (0: no waiting, a request "
                  "runs if a slot is free)")
      ->check(integer_in(0, 4096))
      ->capture_default_str();
  cmd->add_option("--api-key", f->api_key, "require `Authorization: Bearer KEY` (all paths but /health)");
  cmd->add_option("--max-body", f->max_body, "largest request body in bytes (larger: 413)")
      ->check(integer_in(1024, int64_t(1) << 30))
      ->capture_default_str();
  cmd->add_option("--read-timeout", f->read_timeout,
                  "seconds a client has to send a whole request, headers and body (slower: 408)")
      ->check(number_in(0.1, 3600))
      ->capture_default_str();
  cmd->add_option("--cors", f->cors,
                  "an Origin allowed to call the API from a browser (repeatable; \"*\": any). Default: none but the "
                  "server's own; a request from another Origin gets 403");
  cmd->add_option("--allowed-hosts", f->allowed_hosts,
                  "Host header names the server answers to (repeatable; \"*\": any). Default: localhost, "
                  "127.0.0.1 and ::1 when bound to a loopback address (against DNS rebinding), else any; others get 403");
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_serve(dev_opts, *f); };
}

}  // namespace wgrt::cli
