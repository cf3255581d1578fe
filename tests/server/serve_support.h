// What the `wgrt serve` tests share: a tiny random-weight GGUF with a chat template (byte-level
// vocabulary: one token per byte), a `wgrt serve` child on a free loopback port, and a raw
// socket client that sends exact bytes (pipelined requests, bad framing, slow writers) and reads
// HTTP/1.1 responses back. Loopback only; every wait is bounded.
#pragma once

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"

namespace wgrt::test {

inline const char* kKey = "test-key-123";
inline const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

inline const std::string& serve_model_path() {
  static const std::string path = [] {
    model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
    model::gguf_set_string(w, "tokenizer.chat_template", kTemplate);
    std::string p = temp_dir("serve") + "/tiny-chat.gguf";
    model::gguf_write_file(w, p);
    return p;
  }();
  return path;
}

inline std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A `wgrt serve` child on a free loopback port, ready (GET /health 200) when constructed.
struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
  std::string err_path;

  // `model`: a file other than serve_model_path().
  explicit ServerProcess(std::vector<std::string> extra = {}, bool wait_ready = true, std::string model = {}) {
    using namespace std::chrono_literals;
    err_path = temp_dir("serve-run") + "/stderr";
    std::vector<std::string> args = {WGRT_BINARY, "serve", "-m", model.empty() ? serve_model_path() : model, "--port",
                                     "0", "-c", "1024",
                                     "--api-key", kKey};
    args.insert(args.end(), extra.begin(), extra.end());
    pid = fork();
    if (pid == 0) {
      FILE* f = std::freopen(err_path.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    static const std::regex re(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string err = slurp(err_path);
      if (port == 0 && std::regex_search(err, m, re)) port = std::stoi(m[1]);
      if (port != 0 && !wait_ready) return;
      if (port != 0) {
        httplib::Client c("127.0.0.1", port);
        if (auto r = c.Get("/health"); r && r->status == 200) return;
      }
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        ADD_FAILURE() << "wgrt serve exited at start:\n" << err;
        return;
      }
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "wgrt serve not ready after 120 s:\n" << slurp(err_path);
  }
  // `sig`, then the exit status (-1: it was not running, or a signal ended it; -2: no exit in time).
  int stop(int sig = SIGTERM, std::chrono::seconds within = std::chrono::seconds(60)) {
    if (pid < 0) return -1;
    kill(pid, sig);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
        return -2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~ServerProcess() { stop(); }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(std::chrono::seconds(120));
    c.set_bearer_token_auth(kKey);
    return c;
  }
  size_t rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.starts_with("VmRSS:")) return std::stoul(line.substr(6));
    return 0;
  }
};

inline bool healthy(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(std::chrono::seconds(30));
  auto r = c.Get("/health");
  return r && r->status == 200;
}

// ---- raw sockets ----------------------------------------------------------------------------

inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_bytes(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(size_t(n));
  }
  return true;
}

struct RawResponse {
  int status = 0;  // 0: none (closed or timed out before a whole response)
  std::string head, body;
  bool has(std::string_view field_line) const { return head.find(field_line) != std::string::npos; }
};

// Reads HTTP/1.1 responses off one connection, keeping bytes past each one (pipelining).
struct RawReader {
  int fd = -1;
  std::string buf;
  bool eof = false;

  bool fill(std::chrono::steady_clock::time_point deadline) {
    if (eof) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) <= 0) return false;
    char tmp[65536];
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) {
      eof = true;
      return false;
    }
    buf.append(tmp, size_t(n));
    return true;
  }
  // The next response, or status 0 when none came whole within `timeout`.
  RawResponse next(std::chrono::milliseconds timeout = std::chrono::milliseconds(30000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    RawResponse r;
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos)
      if (!fill(deadline)) return r;
    r.head = buf.substr(0, end + 2);
    size_t at = end + 4;
    const int status = std::stoi(r.head.substr(9, 3));
    if (status == 204 || status == 304 || status / 100 == 1) {  // no body, whatever the fields say
      buf.erase(0, at);
      r.status = status;
      return r;
    }
    std::smatch m;
    static const std::regex cl(R"(Content-Length: (\d+)\r\n)", std::regex::icase);
    if (std::regex_search(r.head, m, cl)) {
      const size_t n = std::stoul(m[1]);
      while (buf.size() < at + n)
        if (!fill(deadline)) return r;
      r.body = buf.substr(at, n);
      at += n;
    } else if (r.head.find("Transfer-Encoding: chunked") != std::string::npos) {
      while (true) {
        size_t eol;
        while ((eol = buf.find("\r\n", at)) == std::string::npos)
          if (!fill(deadline)) return r;
        const size_t n = std::stoul(buf.substr(at, eol - at), nullptr, 16);
        while (buf.size() < eol + 2 + n + 2)
          if (!fill(deadline)) return r;
        r.body += buf.substr(eol + 2, n);
        at = eol + 2 + n + 2;
        if (n == 0) break;
      }
    } else {
      while (fill(deadline)) {
      }
      r.body = buf.substr(at);
      at = buf.size();
    }
    buf.erase(0, at);
    r.status = status;
    return r;
  }
};

inline std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: "
                     "application/json\r\nContent-Length: {}\r\n{}\r\n{}",
                     path, kKey, body.size(), extra, body);
}

inline std::string get(const std::string& path) {
  return fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n", path, kKey);
}

// One request on a fresh connection; the response (status 0: none).
inline RawResponse roundtrip(int port, const std::string& bytes,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
  const int fd = connect_to(port);
  if (fd < 0) return {};
  RawReader rd{fd};
  RawResponse r;
  if (send_bytes(fd, bytes)) r = rd.next(timeout);
  ::close(fd);
  return r;
}

}  // namespace wgrt::test
