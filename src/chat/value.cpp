#include "chat/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace wgrt::chat {

Value make_none() { return Value{.kind = Kind::None}; }
Value make_bool(bool v) { return Value{.kind = Kind::Bool, .b = v}; }
Value make_int(int64_t v) { return Value{.kind = Kind::Int, .i = v}; }
Value make_float(double v) { return Value{.kind = Kind::Float, .f = v}; }
Value make_string(std::string v) { return Value{.kind = Kind::String, .s = std::move(v)}; }
Value make_list(ValueList v) {
  return Value{.kind = Kind::List, .list = std::make_shared<ValueList>(std::move(v))};
}
Value make_object(ValueMap v) { return Value{.kind = Kind::Object, .map = std::make_shared<ValueMap>(std::move(v))}; }
Value make_namespace(ValueMap v) {
  return Value{.kind = Kind::Namespace, .map = std::make_shared<ValueMap>(std::move(v))};
}
Value make_function(Function f) { return Value{.kind = Kind::Function, .fn = std::make_shared<Function>(std::move(f))}; }

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Object: return "mapping";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0 && !std::isnan(v.f);
    case Kind::String: return !v.s.empty();
    case Kind::List: return !v.list->empty();
    case Kind::Object: return !v.map->empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

bool is_number(const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Float; }

double as_double(const Value& v) {
  if (v.kind == Kind::Int) return double(v.i);
  if (v.kind == Kind::Bool) return v.b ? 1 : 0;
  return v.f;
}

const Value* find_key(const Value& obj, std::string_view key) {
  if (!obj.map) return nullptr;
  for (const auto& [k, v] : *obj.map)
    if (k == key) return &v;
  return nullptr;
}

void set_key(Value& obj, const std::string& key, Value v) {
  for (auto& [k, old] : *obj.map)
    if (k == key) {
      old = std::move(v);
      return;
    }
  obj.map->emplace_back(key, std::move(v));
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-Infinity" : "Infinity";
  if (v == 0) return "0";
  // Shortest round-trip digits and decimal exponent, then JavaScript's layout rules.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  int n = std::atoi(sci.c_str() + e + 1) + 1;  // the point goes after n digits
  const int k = int(digits.size());
  std::string out = v < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(size_t(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, size_t(n)) + "." + digits.substr(size_t(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(size_t(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{}", n - 1 >= 0 ? "+" : "-", std::abs(n - 1));
  }
  return out;
}

std::string to_concat_string(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "null";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return js_number(v.f);
    case Kind::String: return v.s;
    case Kind::List: {
      // As the reference's host language joins an array: the items' own printing, by ",".
      std::string out;
      for (size_t k = 0; k < v.list->size(); ++k) {
        const Value& x = (*v.list)[k];
        if (k) out += ',';
        out += x.kind == Kind::None ? "null" : x.kind == Kind::Undefined ? "undefined" : to_output(x);
      }
      return out;
    }
    default: return to_output(v);
  }
}

std::string to_output(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None:
    case Kind::Function: return "";
    case Kind::Float:
      if (v.f == 0 && std::signbit(v.f)) return "-0.0";
      if (std::isfinite(v.f) && v.f == std::floor(v.f) && std::fabs(v.f) < 1e21) return fmt::format("{:.1f}", v.f);
      return js_number(v.f);
    case Kind::List:
    case Kind::Object:
    case Kind::Namespace: {
      JsonOptions o;
      o.undefined_as_null = false;
      return to_json_text(v, o);
    }
    default: return to_concat_string(v);
  }
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else if (ensure_ascii && c >= 0x7f) {
          // Decode one UTF-8 sequence and write it as UTF-16 escapes.
          uint32_t cp = c;
          int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
          if (extra) cp = c & (0x3f >> extra);
          for (int k = 0; k < extra && i + 1 < s.size(); ++k) cp = (cp << 6) | (uint8_t(s[++i]) & 0x3f);
          if (cp >= 0x10000) {
            cp -= 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

}  // namespace

std::string to_json_text(const Value& v, const JsonOptions& o, int depth) {
  std::string item_sep = o.has_separators ? o.item_sep : o.indent > 0 ? "," : ", ";
  std::string key_sep = o.has_separators ? o.key_sep : ": ";
  const bool pretty = o.indent > 0;
  const std::string pad = pretty ? std::string(size_t(o.indent), ' ') : "";
  auto padding = [&](int d) {
    std::string p = "\n";
    for (int k = 0; k < d; ++k) p += pad;
    return p;
  };
  switch (v.kind) {
    case Kind::None: return "null";
    case Kind::Undefined: return o.undefined_as_null ? "null" : "undefined";
    case Kind::Bool: return v.b ? "true" : "false";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return std::isfinite(v.f) ? js_number(v.f) : "null";
    case Kind::String: {
      std::string out;
      json_string(out, v.s, o.ensure_ascii);
      return out;
    }
    case Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        if (pretty) out += padding(depth + 1);
        out += to_json_text((*v.list)[k], o, depth + 1);
      }
      if (pretty && !v.list->empty()) out += padding(depth);
      return out + "]";
    }
    case Kind::Object:
    case Kind::Namespace: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : *v.map) entries.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      std::string out = "{";
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += item_sep;
        if (pretty) out += padding(depth + 1);
        json_string(out, entries[k]->first, o.ensure_ascii);
        out += key_sep + to_json_text(entries[k]->second, o, depth + 1);
      }
      if (pretty && !entries.empty()) out += padding(depth);
      return out + "}";
    }
    case Kind::Function: throw std::invalid_argument("a function cannot be converted to JSON");
  }
  return "";
}

namespace {

// JavaScript's Number(string) for the loose comparisons of a string with a number.
double js_string_to_number(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r\f\v"), e = s.find_last_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return 0;
  std::string t = s.substr(b, e - b + 1);
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() ? d : NAN;
}

}  // namespace

bool loose_equal(const Value& a, const Value& b) {
  auto nullish = [](const Value& v) { return v.kind == Kind::None || v.kind == Kind::Undefined; };
  if (nullish(a) || nullish(b)) return nullish(a) && nullish(b);
  auto numeric = [](const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool; };
  if (a.kind == Kind::String && b.kind == Kind::String) return a.s == b.s;
  if (numeric(a) && numeric(b)) return as_double(a) == as_double(b);
  if (a.kind == Kind::String && numeric(b)) return js_string_to_number(a.s) == as_double(b);
  if (numeric(a) && b.kind == Kind::String) return as_double(a) == js_string_to_number(b.s);
  if (a.kind != b.kind) return false;
  if (a.list) return a.list == b.list;
  if (a.map) return a.map == b.map;
  if (a.fn) return a.fn == b.fn;
  return false;
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return make_none();
    case nlohmann::ordered_json::value_t::boolean: return make_bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return make_int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return make_int(int64_t(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      // JavaScript has one number type: an integral float arrives as an integer.
      double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.007199254740992e15) return make_int(int64_t(d));
      return make_float(d);
    }
    case nlohmann::ordered_json::value_t::string: return make_string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList l;
      for (const auto& e : j) l.push_back(from_json(e));
      return make_list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueMap m;
      for (auto it = j.begin(); it != j.end(); ++it) m.emplace_back(it.key(), from_json(it.value()));
      return make_object(std::move(m));
    }
    default: return Value{};
  }
}

}  // namespace wgrt::chat
