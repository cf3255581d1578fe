// Every WGRT_* environment variable wgrt reads is a knob: declared once, at namespace scope in
// the file that reads it (name, kind, default, meaning), parsed by one function (parse below),
// listed by `wgrt info --knobs` and in README's knob table (tests/knobs/knobs_test.cpp checks
// the table against the declarations, and that no source reads a WGRT_* variable otherwise).
// A knob is read when asked (get), never cached: a test may change it between calls.
//
//   const knobs::Choice kMma{"WGRT_MMA", "auto|0|1", "auto", "the gemm on matrix cores", knobs::Lab};
//   if (kMma.get() == "1") ...
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgrt::knobs {

// User: a setting people use (the device, toggles, paths); Lab: forcing a route or a probe, to
// measure.
enum class Audience { User, Lab };
inline constexpr Audience User = Audience::User, Lab = Audience::Lab;
enum class Kind { Count, Choice, Dims, Text };

// What `wgrt info --knobs` and the doc table show of a knob.
struct Entry {
  std::string_view name;
  Kind kind;
  std::string values;  // "1..65536", "auto|0|1", "AxB, each 0..1024", "text"
  std::string fallback;
  std::string_view meaning;
  Audience audience;
};

// The declared knobs, by name.
std::vector<Entry> all();
// all() as the Markdown table of docs/KNOBS.md and `wgrt info --knobs`.
std::string table();
// A declared knob's value as set, checked (nullopt when unset): std::invalid_argument when it is
// not what the knob takes, std::logic_error for a name no knob declares.
std::optional<std::string> value(std::string_view name);

// An integer in [lo, hi]; `fallback` when unset.
struct Count {
  Count(std::string_view name, int64_t lo, int64_t hi, int64_t fallback, std::string_view meaning,
        Audience audience = User);
  int64_t get() const;
  std::string_view name;
  int64_t lo, hi, fallback;
};

// One of a '|'-separated list of words; `fallback` (one of them) when unset.
struct Choice {
  Choice(std::string_view name, std::string_view choices, std::string_view fallback, std::string_view meaning,
         Audience audience = User);
  std::string get() const;
  std::string_view name, choices, fallback;
};

// Two integers AxB (e.g. 32x16) within [lo, hi] each; (0, 0) when unset.
struct Dims {
  Dims(std::string_view name, int64_t lo, int64_t hi, std::string_view meaning, Audience audience = User);
  std::pair<uint32_t, uint32_t> get() const;
  std::string_view name;
  int64_t lo, hi;
};

// Free text (a path, a list); nullopt when unset. (An empty variable is unset, for every kind.)
struct Text {
  Text(std::string_view name, std::string_view meaning, Audience audience = User);
  std::optional<std::string> get() const;
  std::string_view name;
};

}  // namespace wgrt::knobs
