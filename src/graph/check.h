// Always-on invariant checks: WGRT_CHECK(cond, fmt, args...) throws InvariantError
// "file:line: check `cond` failed: message" in every build type (an `assert` compiles out of
// release builds, where a broken invariant would then corrupt memory instead of failing).
// For wgrt's own invariants; untrusted input gets its own errors with a hint (STYLE.md 9).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace wgrt {

struct InvariantError : std::logic_error {
  using std::logic_error::logic_error;
};

[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& message) {
  throw InvariantError(fmt::format("{}:{}: check `{}` failed: {}", file, line, cond, message));
}

}  // namespace wgrt

#define WGRT_CHECK(cond, ...)                                                                 \
  do {                                                                                        \
    if (!(cond)) ::wgrt::check_failed(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)
