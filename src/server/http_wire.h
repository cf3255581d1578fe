// HTTP/1.1 request framing for `wgrt serve`, apart from sockets so that it can be fuzzed: the
// bytes of a connection go through Boost.Beast's request parser with wgrt's limits, one request
// at a time (pipelined requests stay in the reader's buffer for the next call), and the checks
// that come before any body is read (key, Host, Origin) are pure functions of the head.
//
// Limits (HttpLimits): the request line and header fields together (431), one field line (431),
// the number of fields (431), the target (414), the body whatever its transfer coding (413:
// Content-Length and chunked alike, counted as it arrives), and a deadline for the whole
// request, head and body (408), not per read. Refused outright: a Transfer-Encoding other than
// "chunked" (501), Content-Length with Transfer-Encoding (400, the smuggling pattern), any
// Content-Encoding but identity (415: no decoder, so no decompression bomb), an Expect other
// than 100-continue (417), HTTP versions other than 1.0 and 1.1 (505). Any framing error closes
// the connection after its answer, so nothing unread is ever taken for a next request.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace wgrt::server {

struct HttpLimits {
  size_t max_body = 8u << 20;          // bytes after transfer decoding
  size_t max_header_bytes = 32u << 10; // request line + all fields
  size_t max_field_bytes = 8u << 10;   // one "Name: value" line
  size_t max_fields = 100;
  size_t max_target = 8u << 10;
};

// An error answered before (or instead of) routing; the connection closes after it.
struct HttpError {
  int status = 400;
  std::string code;     // OpenAI-style error code: "request_header_too_large", ...
  std::string message;  // what, where, and a hint
};

struct HttpRequest {
  std::string method;
  std::string target;  // as sent
  std::string path;    // target without the query
  unsigned version = 11;
  std::vector<std::pair<std::string, std::string>> fields;  // names as sent
  std::string body;
  bool keep_alive = true;
  bool expect_continue = false;
  // The first value of a field (case-insensitive name), "" when absent.
  std::string_view header(std::string_view name) const;
};

// Where bytes come from: a socket (with its deadline) or, for the fuzz target, memory. read()
// returns the byte count, 0 with no error at the end of the stream, or sets `ec` (a timeout is
// std::errc::timed_out).
struct ByteSource {
  virtual ~ByteSource() = default;
  virtual size_t read(char* dst, size_t n, std::error_code& ec) = 0;
};

enum class ReadStatus : uint8_t {
  Head,    // a request head was read; read_body() next
  Closed,  // the client closed (or timed out) between requests: nothing to answer
  Error,   // answer `error`, then close
};

// Reads one connection's requests in order; its buffer keeps bytes past the current request.
class RequestReader {
 public:
  explicit RequestReader(const HttpLimits& limits);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Whether bytes of a next request are already buffered (pipelining).
  bool buffered() const;
  // The head of the next request, checked against the limits and the rules above.
  ReadStatus read_head(ByteSource& src, HttpRequest& req, HttpError& error);
  // Its body (de-chunked), into req.body; false with `error` set (the connection then closes).
  bool read_body(ByteSource& src, HttpRequest& req, HttpError& error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The routes of `wgrt serve` (http.h lists them).
enum class Route : uint8_t {
  Health, Models, Model, Metrics, Props, Slots, Completions, ChatCompletions, Tokenize, Detokenize,
  Embeddings,        // POST /v1/embeddings (server/embeddings.h)
  Preflight,         // OPTIONS: a browser's CORS preflight
  NotFound,          // 404
  MethodNotAllowed,  // 405: a known path with another method
};
// Model: GET /v1/models/{id}, the id being the rest of the path (model_path_id).
Route find_route(std::string_view method, std::string_view path);
inline constexpr std::string_view kModelPathPrefix = "/v1/models/";
// The id in /v1/models/{id}, percent-decoded ("" when it is malformed).
std::string model_path_id(std::string_view path);

// Who may talk to the server, checked on the head before the body is read.
struct AccessPolicy {
  std::string api_key;                     // "": none needed
  std::vector<std::string> cors_origins;   // Origins allowed besides the server's own; "*": any
  std::vector<std::string> allowed_hosts;  // Host names (no port) allowed; empty: any
};

// The Host names a server bound to `bind_host` accepts by default: the loopback names when it
// is bound to a loopback address (so a DNS-rebinding page cannot reach it), else any.
std::vector<std::string> default_allowed_hosts(std::string_view bind_host);

// nullopt when the request may go on; else the error to answer: 401 for a missing or wrong key
// (not for /health or a CORS preflight), 403 for a Host or Origin not allowed.
std::optional<HttpError> check_access(const HttpRequest& req, const AccessPolicy& p);

// The Access-Control-Allow-Origin value for a request's Origin, "" for none.
std::string cors_allow_origin(const HttpRequest& req, const AccessPolicy& p);

}  // namespace wgrt::server
