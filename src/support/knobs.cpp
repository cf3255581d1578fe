#include "support/knobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace wgrt::knobs {
namespace {

struct Spec {
  std::string_view name;
  Kind kind;
  int64_t lo = 0, hi = 0;        // Count, Dims
  std::string_view choices;      // Choice
  std::string fallback;          // as text
  std::string_view meaning;
  Audience audience;
};

// Filled by the knobs' constructors during static initialization (one file's knobs at a time),
// read afterwards; the mutex keeps a late declaration (a function-local knob) safe, and a deque
// keeps the entries where they are as it grows (find hands out references).
std::deque<Spec>& registry() {
  static std::deque<Spec> specs;
  return specs;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

void declare(Spec s) {
  if (!s.name.starts_with("WGRT_")) throw std::logic_error(fmt::format("knob {}: not a WGRT_ name", s.name));
  std::lock_guard lock(registry_mutex());
  for (const Spec& have : registry())
    if (have.name == s.name) throw std::logic_error(fmt::format("knob {} declared twice", s.name));
  registry().push_back(std::move(s));
}

const Spec& find(std::string_view name) {
  std::lock_guard lock(registry_mutex());
  for (const Spec& s : registry())
    if (s.name == name) return s;
  throw std::logic_error(fmt::format("knob {} is not declared (support/knobs.h)", name));
}

std::optional<int64_t> to_int(std::string_view t) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> words(std::string_view list) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t bar = list.find('|', at);
    out.push_back(list.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
    if (bar == std::string_view::npos) return out;
    at = bar + 1;
  }
}

std::string values_of(const Spec& s) {
  switch (s.kind) {
    case Kind::Count: return fmt::format("{}..{}", s.lo, s.hi);
    case Kind::Choice: return std::string(s.choices);
    case Kind::Dims: return fmt::format("AxB, each {}..{}", s.lo, s.hi);
    case Kind::Text: return "text";
  }
  return "";
}

// The one parser: the knob's value checked against its declaration, or std::invalid_argument
// naming the variable, the value and what it takes.
void validate(const Spec& s, std::string_view v) {
  auto bad = [&](std::string_view what) {
    return std::invalid_argument(fmt::format("{}='{}': {} (hint: {}; unset it for the default, {})", s.name, v, what,
                                             values_of(s), s.fallback.empty() ? "none" : s.fallback));
  };
  switch (s.kind) {
    case Kind::Count: {
      const auto n = to_int(v);
      if (!n) throw bad("not a number");
      if (*n < s.lo || *n > s.hi) throw bad("out of range");
      return;
    }
    case Kind::Choice: {
      const auto ws = words(s.choices);
      if (std::find(ws.begin(), ws.end(), v) == ws.end()) throw bad("not one of the choices");
      return;
    }
    case Kind::Dims: {
      const size_t x = v.find('x');
      const auto a = x == std::string_view::npos ? std::nullopt : to_int(v.substr(0, x));
      const auto b = x == std::string_view::npos ? std::nullopt : to_int(v.substr(x + 1));
      if (!a || !b) throw bad("not AxB");
      if (*a < s.lo || *a > s.hi || *b < s.lo || *b > s.hi) throw bad("out of range");
      return;
    }
    case Kind::Text: return;
  }
}

// The declared knob's value, checked; nullopt when unset or empty.
std::optional<std::string> checked(std::string_view name) {
  const Spec& s = find(name);
  const char* env = std::getenv(std::string(name).c_str());
  if (!env || !*env) return std::nullopt;
  validate(s, env);
  return std::string(env);
}

}  // namespace

std::vector<Entry> all() {
  std::lock_guard lock(registry_mutex());
  std::vector<Entry> out;
  for (const Spec& s : registry()) out.push_back({s.name, s.kind, values_of(s), s.fallback, s.meaning, s.audience});
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

std::string table() {
  std::string out = "| variable | values | default | for | meaning |\n|---|---|---|---|---|\n";
  for (const Entry& e : all()) {
    std::string values = e.values;  // a '|' would end the table's cell
    for (size_t at; (at = values.find('|')) != std::string::npos;) values.replace(at, 1, ", ");
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", e.name, values,
                       e.fallback.empty() ? "unset" : "`" + e.fallback + "`",
                       e.audience == Audience::User ? "users" : "labs", e.meaning);
  }
  return out;
}

std::optional<std::string> value(std::string_view name) { return checked(name); }

Count::Count(std::string_view n, int64_t l, int64_t h, int64_t f, std::string_view meaning, Audience audience)
    : name(n), lo(l), hi(h), fallback(f) {
  declare({n, Kind::Count, l, h, {}, std::to_string(f), meaning, audience});
}
int64_t Count::get() const {
  const auto v = checked(name);
  return v ? *to_int(*v) : fallback;
}

Choice::Choice(std::string_view n, std::string_view c, std::string_view f, std::string_view meaning,
               Audience audience)
    : name(n), choices(c), fallback(f) {
  const auto ws = words(c);
  if (std::find(ws.begin(), ws.end(), f) == ws.end())
    throw std::logic_error(fmt::format("knob {}: default '{}' is not one of {}", n, f, c));
  declare({n, Kind::Choice, 0, 0, c, std::string(f), meaning, audience});
}
std::string Choice::get() const { return checked(name).value_or(std::string(fallback)); }

Dims::Dims(std::string_view n, int64_t l, int64_t h, std::string_view meaning, Audience audience)
    : name(n), lo(l), hi(h) {
  declare({n, Kind::Dims, l, h, {}, "0x0", meaning, audience});
}
std::pair<uint32_t, uint32_t> Dims::get() const {
  const auto v = checked(name);
  if (!v) return {0, 0};
  const size_t x = v->find('x');
  return {uint32_t(*to_int(std::string_view(*v).substr(0, x))), uint32_t(*to_int(std::string_view(*v).substr(x + 1)))};
}

Text::Text(std::string_view n, std::string_view meaning, Audience audience) : name(n) {
  declare({n, Kind::Text, 0, 0, {}, {}, meaning, audience});
}
std::optional<std::string> Text::get() const { return checked(name); }

}  // namespace wgrt::knobs
