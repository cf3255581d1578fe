// `wgrt serve`: an OpenAI-compatible HTTP server (src/server/). The port is bound first, so
// /health answers 503 while the worker thread loads the model; Ctrl-C or SIGTERM stops it.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
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
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t parallel = 4;
  size_t queue_size = 64;
  std::string api_key;
  size_t max_body = 8u << 20;
};

int run_serve(const gpu::DeviceOptions& dev_opts, const ServeFlags& f) {
  server::ServerState st;
  st.api_key = f.api_key;
  st.started = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch()).count();
  server::init_scheduler(st.sched, f.parallel, f.queue_size);

  // Signals go to one thread that waits for them; every other thread (httplib's, the
  // worker) inherits the blocked mask. A client gone mid-write must not kill the process.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  httplib::Server svr;
  // A thread per connection being served: every queued request holds one while it waits.
  const size_t n_threads = f.parallel + f.queue_size + 8;
  svr.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  server::add_routes(svr, st, {.max_body_bytes = f.max_body});
  int port = f.port;
  if (f.port == 0) {
    port = svr.bind_to_any_port(f.host);
    if (port < 0) throw std::runtime_error(fmt::format("cannot bind {} to a free port", f.host));
  } else if (!svr.bind_to_port(f.host, f.port)) {
    throw std::runtime_error(fmt::format("cannot listen on {}:{} (hint: is the port in use? --port 0 picks a free one)",
                                         f.host, f.port));
  }
  fmt::print(stderr, "wgrt: listening on http://{}:{} ({} slots batched in each step; queue of {})\n",
             f.host, port, st.sched.n_slots, f.queue_size);

  std::atomic<bool> failed{false}, done{false};
  // Slot i is sequence i of the graph: every slot generates in the same steps.
  model::BuildOptions bo = build_options(f.model, false);
  bo.n_seqs = uint32_t(f.parallel);
  server::WorkerOptions wo{f.model.model, f.chat_template, bo, dev_opts};
  std::thread worker([&] {
    server::run_worker(st, wo, [&](const std::string& why) {
      fmt::print(stderr, "wgrt: error: the model failed to load: {}\n", why);
      failed.store(true);
      svr.stop();
    });
  });
  std::thread waiter([&] {
    const timespec tick{0, 200'000'000};
    while (!done.load()) {
      if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) {
        fmt::print(stderr, "wgrt: stopping\n");
        break;
      }
    }
    server::stop_scheduler(st.sched);
    svr.stop();
  });
  std::thread announce([&] {
    while (st.phase.load() == server::Phase::Loading && !done.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (st.phase.load() == server::Phase::Ready)
      fmt::print(stderr, "wgrt: serving {} (context {}, chat template: {})\n", st.model.id, st.model.n_ctx,
                 st.model.tmpl ? st.model.template_origin : "none, /v1/chat/completions answers 400");
  });

  svr.listen_after_bind();
  done.store(true);
  server::stop_scheduler(st.sched);
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
  cmd->add_option("--host", f->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "port to listen on (0: a free one, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--parallel", f->parallel, "request slots, generating together (each its own context)")
      ->check(CLI::Range(size_t(1), size_t(256)))
      ->capture_default_str();
  cmd->add_option("--queue-size", f->queue_size, "requests that may wait for a slot; more get 503")
      ->check(CLI::Range(size_t(0), size_t(4096)))
      ->capture_default_str();
  cmd->add_option("--api-key", f->api_key, "require `Authorization: Bearer KEY` (all paths but /health)");
  cmd->add_option("--max-body", f->max_body, "largest request body in bytes (larger: 413)")
      ->check(CLI::Range(size_t(1024), size_t(1) << 30))
      ->capture_default_str();
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_serve(dev_opts, *f); };
}

}  // namespace wgrt::cli
