// An environment variable set (or unset) for a test's scope, restored after.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace wgrt::test {

struct ScopedEnv {
  std::string name;
  std::optional<std::string> was;
  // value nullptr: unset for the scope.
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) {
    if (const char* e = std::getenv(name.c_str())) was = e;
    set(value);
  }
  ~ScopedEnv() { set(was ? was->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) const {
    if (value) setenv(name.c_str(), value, 1);
    else unsetenv(name.c_str());
  }
};

}  // namespace wgrt::test
