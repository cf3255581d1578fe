#include "server/http_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>

namespace wgrt::server {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(uint8_t(x)) == std::tolower(uint8_t(y)); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(uint8_t(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Beast's SyncReadStream over a ByteSource: a timeout becomes beast::error::timeout, the end of
// the stream net::error::eof.
class SourceStream {
 public:
  explicit SourceStream(ByteSource& s) : src_(s) {}

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, beast::error_code& ec) {
    ec = {};
    for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers); ++it) {
      net::mutable_buffer b = *it;
      if (b.size() == 0) continue;
      std::error_code e;
      const size_t n = src_.read(static_cast<char*>(b.data()), b.size(), e);
      if (e == std::errc::timed_out)
        ec = beast::error::timeout;
      else if (e)
        ec = beast::error_code(e.value(), boost::system::system_category());
      else if (n == 0)
        ec = net::error::eof;
      return n;
    }
    return 0;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    beast::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

 private:
  ByteSource& src_;
};

HttpError framing_error(const beast::error_code& ec, const HttpLimits& lim, bool in_head) {
  if (ec == http::error::header_limit || (in_head && ec == http::error::buffer_overflow))
    return {431, "request_header_too_large",
            fmt::format("the request line and headers pass the server's limit of {} bytes (hint: send fewer or "
                        "shorter headers)", lim.max_header_bytes)};
  if (ec == http::error::body_limit)
    return {413, "request_too_large",
            fmt::format("the request body is larger than the server's limit of {} bytes (hint: a shorter request, "
                        "or start the server with a larger --max-body)", lim.max_body)};
  if (ec == beast::error::timeout)
    return {408, "request_timeout",
            "the request was not received in time: the server reads a whole request (headers and body) within "
            "its --read-timeout"};
  return {400, "bad_request", fmt::format("malformed HTTP {}: {}", in_head ? "request head" : "body", ec.message())};
}

// Whether the request line ends in a version of the right form ("HTTP/2.0"), one Beast does not
// read: 505 for it, 400 for a line that is not HTTP at all.
bool well_formed_version(const beast::flat_buffer& buf) {
  const std::string_view data(static_cast<const char*>(buf.data().data()), buf.size());
  const std::string_view line = data.substr(0, data.find("\r\n"));
  if (line.size() < 9) return false;
  const std::string_view v = line.substr(line.size() - 9);
  return v.starts_with(" HTTP/") && std::isdigit(uint8_t(v[6])) && v[7] == '.' && std::isdigit(uint8_t(v[8]));
}

// The rules on a parsed head (http_wire.h); nullopt when it may go on.
std::optional<HttpError> check_head(const HttpRequest& req, const HttpLimits& lim) {
  if (req.version != 10 && req.version != 11)
    return HttpError{505, "http_version_not_supported",
                     fmt::format("HTTP/{}.{} is not supported (hint: HTTP/1.1)", req.version / 10, req.version % 10)};
  if (req.target.size() > lim.max_target)
    return HttpError{414, "uri_too_long",
                     fmt::format("the request target has {} bytes, over the limit of {}", req.target.size(),
                                 lim.max_target)};
  if (req.fields.size() > lim.max_fields)
    return HttpError{431, "request_header_too_large",
                     fmt::format("the request has {} header fields, over the limit of {}", req.fields.size(),
                                 lim.max_fields)};
  for (const auto& [name, value] : req.fields)
    if (name.size() + 2 + value.size() > lim.max_field_bytes)
      return HttpError{431, "request_header_too_large",
                       fmt::format("the header field '{}' has {} bytes, over the limit of {} per field",
                                   name.substr(0, 64), name.size() + 2 + value.size(), lim.max_field_bytes)};
  const std::string_view te = req.header("Transfer-Encoding");
  if (!te.empty() && !iequals(trim(te), "chunked"))
    return HttpError{501, "unsupported_transfer_encoding",
                     fmt::format("Transfer-Encoding '{}' is not supported (hint: chunked, or a Content-Length)",
                                 te.substr(0, 64))};
  if (!te.empty() && !req.header("Content-Length").empty())
    return HttpError{400, "bad_request", "a request must not carry both Transfer-Encoding and Content-Length"};
  if (const std::string_view ce = trim(req.header("Content-Encoding")); !ce.empty() && !iequals(ce, "identity"))
    return HttpError{415, "unsupported_content_encoding",
                     fmt::format("Content-Encoding '{}' is not accepted (hint: send the body uncompressed)",
                                 ce.substr(0, 64))};
  if (const std::string_view ex = trim(req.header("Expect")); !ex.empty() && !iequals(ex, "100-continue"))
    return HttpError{417, "expectation_failed", fmt::format("Expect '{}' is not supported", ex.substr(0, 64))};
  return std::nullopt;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [n, v] : fields)
    if (iequals(n, name)) return v;
  return {};
}

struct RequestReader::Impl {
  HttpLimits lim;
  beast::flat_buffer buf;
  std::optional<http::request_parser<http::string_body>> parser;
  explicit Impl(const HttpLimits& l) : lim(l), buf(l.max_header_bytes + 1024) {}
};

RequestReader::RequestReader(const HttpLimits& limits) : impl_(std::make_unique<Impl>(limits)) {}
RequestReader::~RequestReader() = default;

bool RequestReader::buffered() const { return impl_->buf.size() > 0; }

ReadStatus RequestReader::read_head(ByteSource& src, HttpRequest& req, HttpError& error) {
  Impl& im = *impl_;
  auto& p = im.parser.emplace();
  p.header_limit(uint32_t(std::min<size_t>(im.lim.max_header_bytes, UINT32_MAX)));
  p.body_limit(uint64_t(im.lim.max_body));
  SourceStream s(src);
  beast::error_code ec;
  const bool had_bytes = im.buf.size() > 0;
  http::read_header(s, im.buf, p, ec);
  if (ec) {
    // Nothing of a request yet: the client left, or stayed idle past the keep-alive wait.
    const bool started = had_bytes || p.got_some() || im.buf.size() > 0;
    if (!started && (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout))
      return ReadStatus::Closed;
    if (ec == http::error::partial_message || ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset)
      return ReadStatus::Closed;  // gone mid-request: nobody to answer
    error = framing_error(ec, im.lim, /*in_head=*/true);
    if (ec == http::error::bad_version && well_formed_version(im.buf))
      error = {505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served (hint: HTTP/1.1)"};
    return ReadStatus::Error;
  }
  const auto& m = p.get();
  req = HttpRequest{};
  req.method = std::string(m.method_string());
  req.target = std::string(m.target());
  req.path = req.target.substr(0, req.target.find('?'));
  req.version = m.version();
  req.keep_alive = m.keep_alive();
  for (const auto& f : m) req.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
  if (auto e = check_head(req, im.lim)) {
    error = *e;
    return ReadStatus::Error;
  }
  req.expect_continue = !req.header("Expect").empty();
  return ReadStatus::Head;
}

bool RequestReader::read_body(ByteSource& src, HttpRequest& req, HttpError& error) {
  Impl& im = *impl_;
  auto& p = *im.parser;
  SourceStream s(src);
  beast::error_code ec;
  if (!p.is_done()) http::read(s, im.buf, p, ec);
  if (ec) {
    error = framing_error(ec, im.lim, /*in_head=*/false);
    return false;
  }
  req.body = std::move(p.get().body());
  im.parser.reset();
  return true;
}

Route find_route(std::string_view method, std::string_view path) {
  struct Entry {
    std::string_view path, method;
    Route route;
  };
  static constexpr Entry kRoutes[] = {
      {"/health", "GET", Route::Health},
      {"/v1/models", "GET", Route::Models},
      {"/metrics", "GET", Route::Metrics},
      {"/props", "GET", Route::Props},
      {"/slots", "GET", Route::Slots},
      {"/v1/embeddings", "POST", Route::Embeddings},
      {"/embeddings", "POST", Route::Embeddings},
      {"/v1/completions", "POST", Route::Completions},
      {"/completions", "POST", Route::Completions},
      {"/v1/chat/completions", "POST", Route::ChatCompletions},
      {"/chat/completions", "POST", Route::ChatCompletions},
      {"/tokenize", "POST", Route::Tokenize},
      {"/detokenize", "POST", Route::Detokenize},
  };
  for (const Entry& e : kRoutes) {
    if (e.path != path) continue;
    if (method == "OPTIONS") return Route::Preflight;
    // HEAD is not served: every answer here has a body worth reading.
    return method == e.method ? e.route : Route::MethodNotAllowed;
  }
  if (path.starts_with(kModelPathPrefix) && path.size() > kModelPathPrefix.size()) {
    if (method == "OPTIONS") return Route::Preflight;
    return method == "GET" ? Route::Model : Route::MethodNotAllowed;
  }
  return Route::NotFound;
}

std::string model_path_id(std::string_view path) {
  if (!path.starts_with(kModelPathPrefix)) return {};
  path.remove_prefix(kModelPathPrefix.size());
  std::string id;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '%') {
      id += path[i];
      continue;
    }
    auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                                   : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
    if (i + 2 >= path.size() || hex(path[i + 1]) < 0 || hex(path[i + 2]) < 0) return {};
    id += char(hex(path[i + 1]) * 16 + hex(path[i + 2]));
    i += 2;
  }
  return id;
}

std::vector<std::string> default_allowed_hosts(std::string_view bind_host) {
  const bool loopback = bind_host == "localhost" || bind_host == "::1" || bind_host.starts_with("127.");
  if (!loopback) return {};
  return {"localhost", "127.0.0.1", "::1"};
}

namespace {

// "host:port", "[v6]:port", "host" → the host, lower-case, without brackets.
std::string host_name(std::string_view authority) {
  authority = trim(authority);
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    return lower(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  const size_t colon = authority.find(':');
  if (colon != std::string_view::npos && authority.find(':', colon + 1) == std::string_view::npos)
    authority = authority.substr(0, colon);
  return lower(authority);
}

bool key_matches(std::string_view got, std::string_view want) {
  // Constant time in the key's bytes: a timing probe learns nothing of a prefix.
  const std::string_view prefix = "Bearer ";
  if (got.size() != prefix.size() + want.size() || !got.starts_with(prefix)) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff |= uint8_t(got[prefix.size() + i] ^ want[i]);
  return diff == 0;
}

bool origin_allowed(const HttpRequest& req, const AccessPolicy& p, std::string_view origin) {
  for (const std::string& o : p.cors_origins)
    if (o == "*" || iequals(o, origin)) return true;
  // The server's own pages: the Origin's authority is the Host the request was sent to.
  const size_t scheme = origin.find("://");
  const std::string_view host = req.header("Host");
  return scheme != std::string_view::npos && !host.empty() && iequals(origin.substr(scheme + 3), trim(host));
}

}  // namespace

std::optional<HttpError> check_access(const HttpRequest& req, const AccessPolicy& p) {
  if (!p.allowed_hosts.empty()) {
    const std::string_view host = req.header("Host");
    const std::string name = host_name(host);
    if (!host.empty() && std::find(p.allowed_hosts.begin(), p.allowed_hosts.end(), name) == p.allowed_hosts.end())
      return HttpError{403, "host_not_allowed",
                       fmt::format("the Host '{}' is not one this server answers to (hint: start it with "
                                   "--allowed-hosts {})", host.substr(0, 128), name.substr(0, 128))};
  }
  if (const std::string_view origin = req.header("Origin"); !origin.empty() && !origin_allowed(req, p, origin))
    return HttpError{403, "origin_not_allowed",
                     fmt::format("cross-origin requests from '{}' are not allowed (hint: start the server with "
                                 "--cors {})", origin.substr(0, 128), origin.substr(0, 128))};
  if (p.api_key.empty() || req.path == "/health" || req.method == "OPTIONS") return std::nullopt;
  if (!key_matches(req.header("Authorization"), p.api_key))
    return HttpError{401, "invalid_api_key",
                     "a missing or wrong API key (hint: send `Authorization: Bearer KEY` with the server's --api-key)"};
  return std::nullopt;
}

std::string cors_allow_origin(const HttpRequest& req, const AccessPolicy& p) {
  const std::string_view origin = req.header("Origin");
  if (origin.empty()) return {};
  for (const std::string& o : p.cors_origins)
    if (o == "*" || iequals(o, origin)) return std::string(origin);
  return {};
}

}  // namespace wgrt::server
