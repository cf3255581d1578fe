// peer_bench: the tests of `wgrt bench`, run by llama.cpp (its Vulkan backend from npm) on the
// same GGUF file, printing the same JSON fields, so the two can be set side by side.
// All layers on the GPU, flash attention on; matrix cores follow llama.cpp's own switches
// (GGML_VK_DISABLE_COOPMAT=1 GGML_VK_DISABLE_COOPMAT2=1 turn them off).
//
//   peer_bench -m FILE.gguf [-p 512] [-n 128] [-d 0,4096] [-r 5] [-b 512] [-o jsonl|json]
//              [--no-warmup] [--threads N]
//
// As in wgrt bench: random token ids; each depth's KV is prefilled once (untimed) and every
// repetition first drops the cache past the depth; warm-up runs per test adding up to a
// second (at least one, as wgrt bench) unless --no-warmup; pp = the prompt decoded in batches
// of -b then a synchronize; tg = n_gen single-token decodes, each synchronized (its next token
// is random: reading llama.cpp's logits back to pick an argmax would add host work wgrt does on
// the GPU).
// Built by bench/peers/setup.sh with g++ against the release's llama.h; not part of wgrt.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

// The backend its llama.cpp libraries were built with: Vulkan (bench/peers/setup.sh), or CUDA
// where bench/peers/cuda-build.sh compiles it with -DPEER_BACKEND='"CUDA"'.
#ifndef PEER_BACKEND
#define PEER_BACKEND "Vulkan"
#endif
constexpr const char* kBackend = PEER_BACKEND;

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string model;
  std::vector<uint32_t> n_prompt{512}, n_gen{128}, depth{0, 4096};  // as wgrt bench
  uint32_t reps = 5, batch = 512, threads = 0;
  std::string output = "jsonl";
  bool warmup = true;
};

struct Test {
  uint32_t n_prompt = 0, n_gen = 0, depth = 0;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "peer_bench: %s\nhint: peer_bench -m FILE.gguf [-p 512] [-n 128] [-d 0,4096] [-r 5] [-b 512] "
                       "[-o jsonl|json] [--no-warmup] [--threads N]\n", what.c_str());
  std::exit(2);
}

uint32_t parse_uint(const std::string& s, const char* flag) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end || errno || v > (1u << 21) || s[0] == '-')
    usage_error(std::string(flag) + ": '" + s + "' is not a count");
  return uint32_t(v);
}

std::vector<uint32_t> parse_list(const std::string& s, const char* flag) {
  std::vector<uint32_t> v;
  size_t at = 0;
  while (true) {
    size_t comma = s.find(',', at);
    v.push_back(parse_uint(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at), flag));
    if (comma == std::string::npos) return v;
    at = comma + 1;
  }
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") f.model = value();
    else if (a == "-p") f.n_prompt = parse_list(value(), "-p");
    else if (a == "-n") f.n_gen = parse_list(value(), "-n");
    else if (a == "-d") f.depth = parse_list(value(), "-d");
    else if (a == "-r") f.reps = parse_uint(value(), "-r");
    else if (a == "-b") f.batch = parse_uint(value(), "-b");
    else if (a == "--threads") f.threads = parse_uint(value(), "--threads");
    else if (a == "-o") f.output = value();
    else if (a == "--no-warmup") f.warmup = false;
    else usage_error("unknown flag " + a);
  }
  if (f.model.empty()) usage_error("-m FILE.gguf is required");
  if (f.output != "jsonl" && f.output != "json") usage_error("-o takes jsonl or json");
  if (f.reps == 0 || f.batch == 0) usage_error("-r and -b must be at least 1");
  return f;
}

std::vector<Test> plan_tests(const Flags& f) {
  std::vector<Test> tests;
  for (uint32_t d : f.depth) {
    for (uint32_t p : f.n_prompt)
      if (p) tests.push_back({p, 0, d});
    for (uint32_t n : f.n_gen)
      if (n) tests.push_back({0, n, d});
  }
  return tests;
}

std::string test_name(const Test& t) {
  std::string n = t.n_prompt ? "pp" + std::to_string(t.n_prompt) : "tg" + std::to_string(t.n_gen);
  return t.depth ? n + " @ d" + std::to_string(t.depth) : n;
}

// ---- llama.cpp ----

struct Peer {
  llama_model* model = nullptr;
  llama_context* ctx = nullptr;
  int32_t n_vocab = 0;
  int offloaded = -1, offloadable = -1;  // from the loader's "offloaded N/M layers" line
};

Peer* g_peer_for_log = nullptr;

void log_to_stderr(ggml_log_level level, const char* text, void*) {
  const char* off = std::strstr(text, "offloaded ");
  if (off && g_peer_for_log) std::sscanf(off, "offloaded %d/%d", &g_peer_for_log->offloaded, &g_peer_for_log->offloadable);
  if (level >= GGML_LOG_LEVEL_WARN || std::getenv("PEER_VERBOSE")) std::fputs(text, stderr);
}

std::string dir_of_this_program() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string p = n > 0 ? std::string(buf.data(), size_t(n)) : ".";
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

std::string gpu_names() {
  std::string names;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_GPU) continue;
    names += (names.empty() ? "" : ", ") + std::string(ggml_backend_dev_description(d));
  }
  return names;
}

std::vector<llama_token> random_tokens(std::mt19937& rng, int32_t n_vocab, uint32_t n) {
  std::uniform_int_distribution<llama_token> id(0, n_vocab - 1);
  std::vector<llama_token> t(n);
  for (auto& x : t) x = id(rng);
  return t;
}

void decode(Peer& p, std::vector<llama_token>& tokens, uint32_t batch) {
  for (size_t at = 0; at < tokens.size(); at += batch) {
    int32_t n = int32_t(std::min<size_t>(batch, tokens.size() - at));
    if (int rc = llama_decode(p.ctx, llama_batch_get_one(tokens.data() + at, n)); rc != 0)
      throw std::runtime_error("llama_decode failed with " + std::to_string(rc));
  }
}

// One repetition of `t` on a cache holding t.depth positions (wall ns), as in wgrt bench.
uint64_t time_repetition(Peer& p, const Test& t, std::vector<llama_token>& prompt, std::vector<llama_token>& gen,
                         uint32_t batch) {
  const auto t0 = Clock::now();
  if (!prompt.empty()) {
    decode(p, prompt, batch);
    llama_synchronize(p.ctx);
  }
  for (uint32_t i = 0; i < t.n_gen; ++i) {
    if (int rc = llama_decode(p.ctx, llama_batch_get_one(&gen[i], 1)); rc != 0)
      throw std::runtime_error("llama_decode failed with " + std::to_string(rc));
    llama_synchronize(p.ctx);
  }
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// ---- output ----

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += char(c);
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += char(c);
  }
  return o + "\"";
}

std::string json_number(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  return "";
}

struct Info {
  std::string type, gpu, cpu;
  uint64_t size = 0, n_params = 0;
  uint32_t n_ctx = 0;
};

std::string row_json(const Info& m, const Flags& f, const Test& t, const std::string& time,
                     const std::vector<uint64_t>& ns) {
  std::vector<double> ts;
  double mean_ns = 0, mean_ts = 0;
  for (uint64_t x : ns) ts.push_back((t.n_prompt + t.n_gen) * 1e9 / double(x));
  for (size_t i = 0; i < ns.size(); ++i) mean_ns += double(ns[i]) / ns.size(), mean_ts += ts[i] / ns.size();
  double ss_ns = 0, ss_ts = 0;
  for (size_t i = 0; i < ns.size(); ++i)
    ss_ns += (ns[i] - mean_ns) * (ns[i] - mean_ns), ss_ts += (ts[i] - mean_ts) * (ts[i] - mean_ts);
  const double sd_ns = ns.size() > 1 ? std::sqrt(ss_ns / (ns.size() - 1)) : 0;
  const double sd_ts = ns.size() > 1 ? std::sqrt(ss_ts / (ns.size() - 1)) : 0;
  std::string samples_ns, samples_ts;
  for (size_t i = 0; i < ns.size(); ++i) {
    samples_ns += (i ? ", " : "") + std::to_string(ns[i]);
    samples_ts += (i ? ", " : "") + json_number(ts[i]);
  }
  const char* coopmat = std::getenv("GGML_VK_DISABLE_COOPMAT") ? "off" : "on";
  std::string r = "{";
  auto field = [&](const char* k, const std::string& v) { r += (r.size() > 1 ? ", " : "") + json_string(k) + ": " + v; };
  field("build_commit", json_string(std::string("llama.cpp ") + llama_version()));
  field("build_number", "0");
  field("cpu_info", json_string(m.cpu));
  field("gpu_info", json_string(m.gpu));
  field("backends", json_string(kBackend));
  field("model_filename", json_string(f.model));
  field("model_type", json_string(m.type));
  field("model_size", std::to_string(m.size));
  field("model_n_params", std::to_string(m.n_params));
  field("n_batch", std::to_string(f.batch));
  field("n_ubatch", std::to_string(f.batch));
  field("type_k", json_string("f16"));
  field("type_v", json_string("f16"));
  field("n_gpu_layers", "99");
  field("flash_attn", "1");
  field("n_prompt", std::to_string(t.n_prompt));
  field("n_gen", std::to_string(t.n_gen));
  field("n_depth", std::to_string(t.depth));
  field("test_time", json_string(time));
  field("avg_ns", std::to_string(std::llround(mean_ns)));
  field("stddev_ns", std::to_string(std::llround(sd_ns)));
  field("avg_ts", json_number(mean_ts));
  field("stddev_ts", json_number(sd_ts));
  field("samples_ns", "[" + samples_ns + "]");
  field("samples_ts", "[" + samples_ts + "]");
  field("n_ctx", std::to_string(m.n_ctx));
  field("coopmat", json_string(coopmat));
  return r + "}";
}

int run(const Flags& f) {
  const std::vector<Test> tests = plan_tests(f);
  if (tests.empty()) usage_error("no test to run: every -p and -n value is 0");
  uint32_t n_ctx = 0;
  for (const Test& t : tests) n_ctx = std::max(n_ctx, t.depth + t.n_prompt + t.n_gen);

  Peer p;
  g_peer_for_log = &p;
  llama_log_set(log_to_stderr, nullptr);
  ggml_backend_load_all_from_path(dir_of_this_program().c_str());  // the libs sit beside this program
  llama_backend_init();
  Info info;
  info.gpu = gpu_names();
  if (info.gpu.empty())
    throw std::runtime_error("llama.cpp sees no GPU (hint: on lavapipe set GGML_VK_VISIBLE_DEVICES=0; check "
                             "VK_DRIVER_FILES)");

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 999;  // every layer
  mp.progress_callback = [](float, void*) { return true; };  // no progress dots
  const auto t0 = Clock::now();
  p.model = llama_model_load_from_file(f.model.c_str(), mp);
  if (!p.model) throw std::runtime_error(f.model + ": llama.cpp could not load it");
  if (p.offloaded < 0 || p.offloaded != p.offloadable)
    throw std::runtime_error("not every layer is on the GPU (" + std::to_string(p.offloaded) + "/" +
                             std::to_string(p.offloadable) + ")");
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = f.batch;
  cp.n_ubatch = f.batch;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
  cp.no_perf = true;
  const int32_t threads = int32_t(f.threads ? f.threads : std::max(1u, std::min(16u, unsigned(sysconf(_SC_NPROCESSORS_ONLN)))));
  cp.n_threads = cp.n_threads_batch = threads;
  p.ctx = llama_init_from_model(p.model, cp);
  if (!p.ctx) throw std::runtime_error("llama.cpp could not make a context of " + std::to_string(n_ctx));
  p.n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(p.model));

  char desc[256];
  llama_model_desc(p.model, desc, sizeof desc);
  info.type = desc;
  info.size = llama_model_size(p.model);
  info.n_params = llama_model_n_params(p.model);
  info.n_ctx = llama_n_ctx(p.ctx);
  info.cpu = cpu_name();
  std::fprintf(stderr, "peer_bench: %s (%s, %.2f MiB) on %s, %d/%d layers on the GPU, loaded in %.2f s; context %u, "
                       "batch %u, coopmat %s, %zu tests x %u repetitions\n",
               f.model.c_str(), info.type.c_str(), info.size / 1048576.0, info.gpu.c_str(), p.offloaded,
               p.offloadable, std::chrono::duration<double>(Clock::now() - t0).count(), info.n_ctx, f.batch,
               std::getenv("GGML_VK_DISABLE_COOPMAT") ? "off" : "on", tests.size(), f.reps);

  llama_memory_t mem = llama_get_memory(p.ctx);
  std::mt19937 rng(1234);
  uint32_t filled_depth = 0;
  llama_memory_clear(mem, true);
  if (f.output == "json") std::printf("[\n");
  for (size_t i = 0; i < tests.size(); ++i) {
    const Test& t = tests[i];
    if (t.depth != filled_depth && t.depth > 0) {
      llama_memory_clear(mem, true);
      const auto d0 = Clock::now();
      std::vector<llama_token> d = random_tokens(rng, p.n_vocab, t.depth);
      decode(p, d, f.batch);
      llama_synchronize(p.ctx);
      std::fprintf(stderr, "peer_bench: depth %u: KV prefilled (untimed) in %.2f s\n", t.depth,
                   std::chrono::duration<double>(Clock::now() - d0).count());
    }
    filled_depth = t.depth;
    auto once = [&] {
      if (!llama_memory_seq_rm(mem, 0, llama_pos(t.depth), -1)) throw std::runtime_error("llama_memory_seq_rm failed");
      std::vector<llama_token> prompt = random_tokens(rng, p.n_vocab, t.n_prompt);
      std::vector<llama_token> gen = random_tokens(rng, p.n_vocab, t.n_gen);
      return time_repetition(p, t, prompt, gen, f.batch);
    };
    const std::string time = utc_now(), name = test_name(t);
    if (f.warmup) {  // as wgrt bench: runs adding up to a second (the GPU's clocks leave idle), at least one
      uint64_t warm_ns = 0;
      int runs = 0;
      do {
        warm_ns += once();
        ++runs;
      } while (double(warm_ns) < 1e9);
      std::fprintf(stderr, "peer_bench: [%zu/%zu] %s: warm-up (%d runs, %.2f s)\n", i + 1, tests.size(),
                   name.c_str(), runs, double(warm_ns) * 1e-9);
    }
    std::vector<uint64_t> ns;
    for (uint32_t r = 0; r < f.reps; ++r) {
      ns.push_back(once());
      std::fprintf(stderr, "peer_bench: [%zu/%zu] %s: repetition %u/%u: %.2f tok/s\n", i + 1, tests.size(),
                   name.c_str(), r + 1, f.reps, (t.n_prompt + t.n_gen) * 1e9 / double(ns.back()));
    }
    const std::string row = row_json(info, f, t, time, ns);
    if (f.output == "json") std::printf("%s  %s", i ? ",\n" : "", row.c_str());
    else std::printf("%s\n", row.c_str());
    std::fflush(stdout);
  }
  if (f.output == "json") std::printf("\n]\n");
  llama_free(p.ctx);
  llama_model_free(p.model);
  llama_backend_free();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse_flags(argc, argv);
  try {
    return run(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "peer_bench: error: %s\n", e.what());
    return 1;
  }
}
