#include "chat/builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "chat/ast.h"

namespace wgrt::chat {

namespace {

bool is_word(unsigned char c) { return std::isalnum(c) || c == '_'; }

std::string ascii_upper(std::string s) {
  for (char& c : s) c = char(std::toupper((unsigned char)c));
  return s;
}
std::string ascii_lower(std::string s) {
  for (char& c : s) c = char(std::tolower((unsigned char)c));
  return s;
}
// Upper-cases the first word character after a non-word one (the rest stays as written).
std::string title_case(std::string s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (is_word(s[i]) && (i == 0 || !is_word(s[i - 1]))) s[i] = char(std::toupper((unsigned char)s[i]));
  return s;
}

// Code points of UTF-8 text, each as its bytes.
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}
// Length as JavaScript counts it (UTF-16 code units).
int64_t js_length(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xc0) == 0x80) continue;
    n += c >= 0xf0 ? 2 : 1;
  }
  return n;
}

const Value* arg(const CallArgs& a, size_t i, std::string_view key) {
  if (i < a.pos.size()) return &a.pos[i];
  for (const auto& [k, v] : a.kw)
    if (k == key) return &v;
  return nullptr;
}
const Value* kwarg(const CallArgs& a, std::string_view key) { return arg(a, size_t(-1), key); }

bool bool_arg(const CallArgs& a, size_t i, std::string_view key, bool def) {
  const Value* v = arg(a, i, key);
  if (!v) return def;
  if (v->kind != Kind::Bool) throw EvalError(fmt::format("'{}' must be a boolean, got {}", key, kind_name(v->kind)));
  return v->b;
}

std::string join_piece(const Value& v) {
  if (v.kind == Kind::None || v.kind == Kind::Undefined) return "";
  return to_concat_string(v);
}

// Order for sort and dictsort: numbers (and booleans) together, strings (case-folded unless
// case_sensitive), none with none; anything else cannot be compared.
int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  auto numeric = [](const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool; };
  if (a.kind == Kind::None && b.kind == Kind::None) return 0;
  if (a.kind == Kind::Undefined && b.kind == Kind::Undefined) return 0;
  if (numeric(a) && numeric(b)) {
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind == Kind::String && b.kind == Kind::String) {
    std::string x = case_sensitive ? a.s : ascii_lower(a.s), y = case_sensitive ? b.s : ascii_lower(b.s);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  throw EvalError(fmt::format("cannot compare {} with {}", kind_name(a.kind), kind_name(b.kind)));
}

bool is_container(const Value& v) { return v.kind == Kind::Object || v.kind == Kind::Namespace; }

// "a.b.0": keys of objects, indexes of lists.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t b = 0;
  while (true) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (is_container(v)) {
      const Value* f = find_key(v, part);
      if (!f) return Value{};
      v = *f;
    } else if (v.kind == Kind::List) {
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || size_t(idx) >= v.list->size()) return Value{};
      v = (*v.list)[size_t(idx)];
    } else {
      return Value{};
    }
    if (e == std::string::npos) return v;
    b = e + 1;
  }
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (count == 0) return s;
  int64_t left = count < 0 ? INT64_MAX : count;
  std::string out;
  if (from.empty()) {  // between every code point, and at both ends
    std::vector<std::string> cps = code_points(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (left > 0) {
        out += to;
        --left;
      }
      if (i < cps.size()) out += cps[i];
    }
    return out;
  }
  size_t p = 0;
  while (left > 0) {
    size_t at = s.find(from, p);
    if (at == std::string::npos) break;
    out += s.substr(p, at - p) + to;
    p = at + from.size();
    --left;
  }
  return out + s.substr(p);
}

Value split(const std::string& s, const CallArgs& a) {
  const Value* sep = arg(a, 0, "sep");
  const Value* maxv = arg(a, 1, "maxsplit");
  int64_t maxsplit = -1;
  if (maxv) {
    if (maxv->kind != Kind::Int) throw EvalError("split(): maxsplit must be an integer");
    maxsplit = maxv->i;
  }
  ValueList out;
  if (!sep || sep->kind == Kind::None) {  // runs of whitespace, no empty pieces
    size_t p = 0;
    while (true) {
      while (size_t n = js_space_at(s, p)) p += n;
      if (p >= s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
        out.push_back(make_string(s.substr(p)));
        break;
      }
      size_t e = p;
      while (e < s.size() && !js_space_at(s, e)) ++e;
      out.push_back(make_string(s.substr(p, e - p)));
      p = e;
    }
    return make_list(std::move(out));
  }
  if (sep->kind != Kind::String) throw EvalError("split(): the separator must be a string or none");
  if (sep->s.empty()) throw EvalError("split(): empty separator");
  size_t p = 0;
  while (true) {
    size_t at = s.find(sep->s, p);
    if (at == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) >= maxsplit)) {
      out.push_back(make_string(s.substr(p)));
      break;
    }
    out.push_back(make_string(s.substr(p, at - p)));
    p = at + sep->s.size();
  }
  return make_list(std::move(out));
}

bool affix(const std::string& s, const Value& pat, bool start, const char* name) {
  auto one = [&](const std::string& x) {
    return x.size() <= s.size() && (start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
  };
  if (pat.kind == Kind::String) return one(pat.s);
  if (pat.kind == Kind::List) {
    for (const Value& x : *pat.list) {
      if (x.kind != Kind::String) throw EvalError(fmt::format("{}(): tuple elements must be strings", name));
      if (one(x.s)) return true;
    }
    return false;
  }
  throw EvalError(fmt::format("{}() takes a string or a tuple of strings", name));
}

Value string_method(const Value& self, const std::string& name) {
  const std::string s = self.s;
  auto fn = [](auto f) { return make_function(f); };
  if (name == "upper") return fn([s](CallArgs&) { return make_string(ascii_upper(s)); });
  if (name == "lower") return fn([s](CallArgs&) { return make_string(ascii_lower(s)); });
  // Like the reference, strip() and friends ignore a `chars` argument: they trim whitespace.
  if (name == "strip") return fn([s](CallArgs&) { return make_string(js_trim(s, true, true)); });
  if (name == "lstrip") return fn([s](CallArgs&) { return make_string(js_trim(s, true, false)); });
  if (name == "rstrip") return fn([s](CallArgs&) { return make_string(js_trim(s, false, true)); });
  if (name == "title") return fn([s](CallArgs&) { return make_string(title_case(s)); });
  if (name == "capitalize")
    return fn([s](CallArgs&) { return make_string(s.empty() ? s : ascii_upper(s.substr(0, 1)) + s.substr(1)); });
  if (name == "length") return make_int(js_length(s));
  if (name == "startswith" || name == "endswith")
    return fn([s, name](CallArgs& a) {
      if (a.pos.empty()) throw EvalError(name + "() requires an argument");
      return make_bool(affix(s, a.pos[0], name == "startswith", name.c_str()));
    });
  if (name == "split") return fn([s](CallArgs& a) { return split(s, a); });
  if (name == "replace")
    return fn([s](CallArgs& a) {
      if (a.pos.size() < 2 || a.pos[0].kind != Kind::String || a.pos[1].kind != Kind::String)
        throw EvalError("replace() takes two strings");
      const Value* count = arg(a, 2, "count");
      if (count && count->kind != Kind::Int && count->kind != Kind::None)
        throw EvalError("replace(): count must be an integer");
      return make_string(replace_all(s, a.pos[0].s, a.pos[1].s, count && count->kind == Kind::Int ? count->i : -1));
    });
  return Value{};
}

Value items_of(const Value& obj) {
  ValueList out;
  for (const auto& [k, v] : *obj.map) out.push_back(make_list({make_string(k), v}));
  return make_list(std::move(out));
}

Value dictsort(const Value& obj, const CallArgs& a) {
  bool cs = bool_arg(a, 0, "case_sensitive", false);
  const Value* by = arg(a, 1, "by");
  if (by && (by->kind != Kind::String || (by->s != "key" && by->s != "value")))
    throw EvalError("dictsort(): 'by' must be 'key' or 'value'");
  size_t idx = by && by->s == "value" ? 1 : 0;
  bool reverse = bool_arg(a, 2, "reverse", false);
  Value items = items_of(obj);
  std::stable_sort(items.list->begin(), items.list->end(), [&](const Value& x, const Value& y) {
    int c = compare_values((*x.list)[idx], (*y.list)[idx], cs);
    return reverse ? c > 0 : c < 0;
  });
  return items;
}

Value object_method(const Value& self, const std::string& name) {
  if (name == "get")
    return make_function([self](CallArgs& a) {
      if (a.pos.empty() || a.pos[0].kind != Kind::String) throw EvalError("get() takes a string key");
      if (const Value* v = find_key(self, a.pos[0].s)) return *v;
      return a.pos.size() > 1 ? a.pos[1] : make_none();
    });
  if (name == "items") return make_function([self](CallArgs&) { return items_of(self); });
  if (name == "keys")
    return make_function([self](CallArgs&) {
      ValueList out;
      for (const auto& kv : *self.map) out.push_back(make_string(kv.first));
      return make_list(std::move(out));
    });
  if (name == "values")
    return make_function([self](CallArgs&) {
      ValueList out;
      for (const auto& kv : *self.map) out.push_back(kv.second);
      return make_list(std::move(out));
    });
  if (name == "dictsort") return make_function([self](CallArgs& a) { return dictsort(self, a); });
  return Value{};
}

Value tojson(const Value& v, const CallArgs& a) {
  JsonOptions o;
  if (const Value* ind = kwarg(a, "indent")) {
    if (ind->kind != Kind::Int && ind->kind != Kind::None) throw EvalError("tojson(): indent must be an integer");
    if (ind->kind == Kind::Int) o.indent = int(ind->i);
  }
  o.ensure_ascii = bool_arg(a, size_t(-1), "ensure_ascii", false);
  o.sort_keys = bool_arg(a, size_t(-1), "sort_keys", false);
  if (const Value* sep = kwarg(a, "separators"); sep && sep->kind != Kind::None) {
    if (sep->kind != Kind::List || sep->list->size() != 2 || (*sep->list)[0].kind != Kind::String ||
        (*sep->list)[1].kind != Kind::String)
      throw EvalError("tojson(): separators must be two strings");
    o.has_separators = true;
    o.item_sep = (*sep->list)[0].s;
    o.key_sep = (*sep->list)[1].s;
  }
  return make_string(to_json_text(v, o));
}

Value select_attr(const Value& v, const CallArgs& a, bool select) {
  ValueList out;
  for (const Value& item : *v.list)
    if (!is_container(item)) throw EvalError("selectattr/rejectattr need a list of mappings");
  if (a.pos.empty() || a.pos[0].kind != Kind::String) throw EvalError("selectattr/rejectattr take an attribute name");
  for (const Value& item : *v.list) {
    const Value* f = find_key(item, a.pos[0].s);
    bool r = false;
    if (f) {
      if (a.pos.size() > 1) {
        if (a.pos[1].kind != Kind::String) throw EvalError("selectattr/rejectattr: the test name must be a string");
        ValueList rest(a.pos.begin() + 2, a.pos.end());
        r = apply_test(a.pos[1].s, *f, rest);
      } else {
        r = truthy(*f);
      }
    }
    if (r == select) out.push_back(item);
  }
  return make_list(std::move(out));
}

bool known_filter(std::string_view name) {
  static const char* const names[] = {
      "tojson", "safe", "list", "first", "last", "length", "count", "reverse", "sort", "join", "string", "unique",
      "upper", "lower", "title", "capitalize", "trim", "indent", "int", "float", "abs", "items", "keys", "values",
      "dictsort", "default", "selectattr", "rejectattr", "select", "reject", "map", "replace", "bool"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

[[noreturn]] void no_filter(std::string_view name, const Value& v) {
  if (!known_filter(name))
    throw EvalError(fmt::format("unknown filter '{}' (hint: supported filters: tojson, trim, length, items, join, "
                                "string, lower, upper, default, selectattr, map, safe, replace, first, last, ...)",
                                name));
  throw EvalError(fmt::format("the filter '{}' does not apply to a {}", name, kind_name(v.kind)));
}

Value to_int(const Value& v, const CallArgs& a, bool is_int) {
  const Value* def = arg(a, 0, "default");
  Value fallback = def ? *def : is_int ? make_int(0) : make_float(0);
  switch (v.kind) {
    case Kind::String: {
      std::string t = js_trim(v.s, true, false);
      char* end = nullptr;
      if (is_int) {
        long long x = std::strtoll(t.c_str(), &end, 10);
        return end == t.c_str() ? fallback : make_int(x);
      }
      double x = std::strtod(t.c_str(), &end);
      return end == t.c_str() ? fallback : make_float(x);
    }
    case Kind::Int: return is_int ? v : make_float(double(v.i));
    case Kind::Float: return is_int ? make_int(int64_t(std::floor(v.f))) : v;
    case Kind::Bool: return is_int ? make_int(v.b) : make_float(v.b);
    default: no_filter(is_int ? "int" : "float", v);
  }
}

}  // namespace

Value apply_filter(std::string_view name, const Value& v, CallArgs& a, bool called) {
  if (name == "safe") return v;
  if (name == "tojson") return tojson(v, a);
  if (name == "default") {
    const Value* def = arg(a, 0, "default_value");
    bool boolean = bool_arg(a, 1, "boolean", false);
    if (v.kind == Kind::Undefined || (boolean && !truthy(v))) return def ? *def : make_string("");
    return v;
  }
  if (name == "int" || name == "float") return to_int(v, a, name == "int");
  if (name == "join") {
    std::vector<std::string> parts;
    if (v.kind == Kind::String) parts = code_points(v.s);
    else if (v.kind == Kind::List) for (const Value& x : *v.list) parts.push_back(join_piece(x));
    else no_filter(name, v);
    const Value* sep = arg(a, 0, "d");
    if (sep && sep->kind != Kind::String) throw EvalError("join(): the separator must be a string");
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i && sep ? sep->s : "") + parts[i];
    return make_string(out);
  }
  switch (v.kind) {
    case Kind::List: {
      const ValueList& l = *v.list;
      if (name == "list") return v;
      if (name == "first") return l.empty() ? Value{} : l.front();
      if (name == "last") return l.empty() ? Value{} : l.back();
      if (name == "length" || name == "count") return make_int(int64_t(l.size()));
      if (name == "reverse") return make_list(ValueList(l.rbegin(), l.rend()));
      if (name == "string") return make_string(to_output(v));
      if (name == "unique") {
        ValueList out;
        for (const Value& x : l)
          if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return apply_test("sameas", x, {y}); }))
            out.push_back(x);
        return make_list(std::move(out));
      }
      if (name == "sort") {
        bool reverse = bool_arg(a, 0, "reverse", false), cs = bool_arg(a, 1, "case_sensitive", false);
        const Value* attr = arg(a, 2, "attribute");
        std::string path = !attr || attr->kind == Kind::None ? "" : to_concat_string(*attr);
        ValueList out = l;
        std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
          int c = path.empty() ? compare_values(x, y, cs)
                               : compare_values(attribute_path(x, path), attribute_path(y, path), cs);
          return reverse ? c > 0 : c < 0;
        });
        return make_list(std::move(out));
      }
      if (name == "selectattr" || name == "rejectattr") return select_attr(v, a, name == "selectattr");
      if (name == "select" || name == "reject") {
        if (!a.pos.empty() && a.pos[0].kind != Kind::String) throw EvalError(fmt::format("{}(): the test name must be a string", name));
        ValueList rest(a.pos.size() > 1 ? a.pos.begin() + 1 : a.pos.end(), a.pos.end()), out;
        for (const Value& x : l)
          if ((a.pos.empty() ? truthy(x) : apply_test(a.pos[0].s, x, rest)) == (name == "select")) out.push_back(x);
        return make_list(std::move(out));
      }
      if (name == "map") {
        const Value* attr = kwarg(a, "attribute");
        if (!attr || attr->kind != Kind::String)
          throw EvalError("map() needs attribute='name' (mapping a filter over a list is not supported)");
        const Value* def = kwarg(a, "default");
        ValueList out;
        for (const Value& x : l) {
          if (!is_container(x)) throw EvalError("map(attribute=...) needs a list of mappings");
          Value got = attribute_path(x, attr->s);
          out.push_back(got.kind == Kind::Undefined && def ? *def : got);
        }
        return make_list(std::move(out));
      }
      break;
    }
    case Kind::String: {
      if (name == "length" || name == "count") return make_int(js_length(v.s));
      if (name == "upper") return make_string(ascii_upper(v.s));
      if (name == "lower") return make_string(ascii_lower(v.s));
      if (name == "title") return make_string(title_case(v.s));
      if (name == "capitalize") return make_string(v.s.empty() ? v.s : ascii_upper(v.s.substr(0, 1)) + v.s.substr(1));
      if (name == "trim") return make_string(js_trim(v.s, true, true));
      if (name == "string") return v;
      if (name == "indent") {
        const Value* w = arg(a, 0, "width");
        if (w && (w->kind != Kind::Int || w->i < 0 || w->i > 1000)) throw EvalError("indent(): width must be an integer in [0, 1000]");
        bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
        std::string pad(size_t(w ? std::max<int64_t>(0, w->i) : 4), ' '), out;
        size_t p = 0;
        for (size_t line = 0;; ++line) {
          size_t e = v.s.find('\n', p);
          std::string piece = v.s.substr(p, e == std::string::npos ? std::string::npos : e - p);
          if ((first || line > 0) && (blank || !piece.empty())) out += pad;
          out += piece;
          if (e == std::string::npos) break;
          out += '\n';
          p = e + 1;
        }
        return make_string(out);
      }
      if (name == "replace") {
        if (!called) break;
        CallArgs b = a;
        Value fn = string_method(v, "replace");
        return (*fn.fn)(b);
      }
      break;
    }
    case Kind::Int:
    case Kind::Float:
      if (name == "abs") return v.kind == Kind::Int ? make_int(std::llabs(v.i)) : make_float(std::fabs(v.f));
      if (name == "string") return make_string(to_output(v));
      break;
    case Kind::Object:
      if (name == "items") return items_of(v);
      if (name == "length" || name == "count") return make_int(int64_t(v.map->size()));
      if (Value m = object_method(v, std::string(name)); m.kind == Kind::Function) return (*m.fn)(a);
      break;
    case Kind::Bool:
      if (name == "bool") return v;
      if (name == "string") return make_string(v.b ? "true" : "false");
      break;
    default: break;
  }
  no_filter(name, v);
}

bool apply_test(std::string_view name, const Value& v, const ValueList& args) {
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) throw EvalError(fmt::format("the test '{}' needs an argument", name));
    return args[0];
  };
  if (name == "defined") return v.kind != Kind::Undefined;
  if (name == "undefined") return v.kind == Kind::Undefined;
  if (name == "none") return v.kind == Kind::None;
  if (name == "boolean") return v.kind == Kind::Bool;
  if (name == "true") return v.kind == Kind::Bool && v.b;
  if (name == "false") return v.kind == Kind::Bool && !v.b;
  if (name == "string") return v.kind == Kind::String;
  if (name == "number") return is_number(v);
  if (name == "integer") return v.kind == Kind::Int;
  if (name == "float") return v.kind == Kind::Float;
  if (name == "iterable") return v.kind == Kind::List || v.kind == Kind::String;
  if (name == "mapping") return v.kind == Kind::Object;
  if (name == "sequence") return v.kind == Kind::List || v.kind == Kind::Object || v.kind == Kind::String;
  if (name == "callable") return v.kind == Kind::Function;
  if (name == "lower") return v.kind == Kind::String && v.s == ascii_lower(v.s);
  if (name == "upper") return v.kind == Kind::String && v.s == ascii_upper(v.s);
  if (name == "odd" || name == "even") {
    if (v.kind != Kind::Int) throw EvalError(fmt::format("the test '{}' needs an integer, got {}", name, kind_name(v.kind)));
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "sameas" || name == "equalto" || name == "eq") {
    const Value& b = need_arg();
    if (v.kind != b.kind) return false;
    switch (v.kind) {
      case Kind::Undefined:
      case Kind::None: return true;
      case Kind::Bool: return v.b == b.b;
      case Kind::Int: return v.i == b.i;
      case Kind::Float: return v.f == b.f;
      case Kind::String: return v.s == b.s;
      default: return loose_equal(v, b);
    }
  }
  throw EvalError(fmt::format("unknown test '{}' (hint: supported tests: defined, none, string, mapping, iterable, "
                              "number, sameas, ...)", name));
}

Value get_member(const Value& obj, const Value& key) {
  if (is_container(obj)) {
    if (key.kind != Kind::String) throw EvalError(fmt::format("a {} key must be a string, got {}", kind_name(obj.kind), kind_name(key.kind)));
    if (const Value* v = find_key(obj, key.s)) return *v;
    return obj.kind == Kind::Object ? object_method(obj, key.s) : Value{};
  }
  if (obj.kind == Kind::List || obj.kind == Kind::String) {
    if (key.kind == Kind::Int) {
      if (obj.kind == Kind::List) {
        int64_t n = int64_t(obj.list->size()), i = key.i < 0 ? key.i + n : key.i;
        return i >= 0 && i < n ? (*obj.list)[size_t(i)] : Value{};
      }
      std::vector<std::string> cps = code_points(obj.s);
      int64_t n = int64_t(cps.size()), i = key.i < 0 ? key.i + n : key.i;
      return i >= 0 && i < n ? make_string(cps[size_t(i)]) : Value{};
    }
    if (key.kind == Kind::String) {
      if (obj.kind == Kind::String) return string_method(obj, key.s);
      return key.s == "length" ? make_int(int64_t(obj.list->size())) : Value{};
    }
    throw EvalError(fmt::format("a {} index must be an integer, got {}", kind_name(obj.kind), kind_name(key.kind)));
  }
  if (key.kind != Kind::String) throw EvalError(fmt::format("cannot index a {} with a {}", kind_name(obj.kind), kind_name(key.kind)));
  return Value{};
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  for (const Value* v : {&start, &stop, &step})
    if (v->kind != Kind::Int && v->kind != Kind::Undefined && v->kind != Kind::None)
      throw EvalError(fmt::format("slice bounds must be integers, got {}", kind_name(v->kind)));
  if (obj.kind != Kind::List && obj.kind != Kind::String)
    throw EvalError(fmt::format("only lists and strings can be sliced, not a {}", kind_name(obj.kind)));
  std::vector<std::string> cps;
  if (obj.kind == Kind::String) cps = code_points(obj.s);
  const int64_t n = obj.kind == Kind::List ? int64_t(obj.list->size()) : int64_t(cps.size());
  auto given = [](const Value& v) { return v.kind == Kind::Int; };
  int64_t st = given(step) ? step.i : 1;
  if (st == 0) throw EvalError("slice step cannot be zero");
  int64_t b, e;
  if (st > 0) {
    b = given(start) ? (start.i < 0 ? std::max<int64_t>(n + start.i, 0) : std::min(start.i, n)) : 0;
    e = given(stop) ? (stop.i < 0 ? std::max<int64_t>(n + stop.i, 0) : std::min(stop.i, n)) : n;
  } else {
    b = given(start) ? (start.i < 0 ? std::max<int64_t>(n + start.i, -1) : std::min(start.i, n - 1)) : n - 1;
    e = given(stop) ? (stop.i < -1 ? std::max<int64_t>(n + stop.i, -1) : std::min(stop.i, n - 1)) : -1;
  }
  ValueList items;
  std::string text;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.kind == Kind::List) items.push_back((*obj.list)[size_t(i)]);
    else text += cps[size_t(i)];
  }
  return obj.kind == Kind::List ? make_list(std::move(items)) : make_string(text);
}

Value builtin_range(CallArgs& a) {
  for (const Value& v : a.pos)
    if (v.kind != Kind::Int) throw EvalError(fmt::format("range() takes integers, got {}", kind_name(v.kind)));
  if (a.pos.empty() || a.pos.size() > 3) throw EvalError("range() takes 1 to 3 integers");
  int64_t start = a.pos.size() > 1 ? a.pos[0].i : 0, stop = a.pos.size() > 1 ? a.pos[1].i : a.pos[0].i;
  int64_t step = a.pos.size() > 2 ? a.pos[2].i : 1;
  if (step == 0) throw EvalError("range() step cannot be zero");
  if ((stop - start) / step > 1000000) throw EvalError("range() of more than a million items");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(make_int(i));
  return make_list(std::move(out));
}

Value builtin_namespace(CallArgs& a) {
  ValueMap m;
  if (a.pos.size() > 1) throw EvalError("namespace() takes at most one positional argument");
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.kind == Kind::Object) {
      m = *src.map;
    } else if (src.kind == Kind::List) {
      for (const Value& pair : *src.list) {
        if (pair.kind != Kind::List || pair.list->size() != 2 || (*pair.list)[0].kind != Kind::String)
          throw EvalError("namespace() takes a mapping or a list of [key, value] pairs");
        m.emplace_back((*pair.list)[0].s, (*pair.list)[1]);
      }
    } else {
      throw EvalError(fmt::format("namespace() cannot take a {}", kind_name(src.kind)));
    }
  }
  Value ns = make_namespace(std::move(m));
  for (auto& [k, v] : a.kw) set_key(ns, k, v);
  return ns;
}

std::string strftime_now(const std::string& format, std::time_t now) {
  static const char* const months[] = {"January", "February", "March",     "April",   "May",      "June",
                                       "July",    "August",   "September", "October", "November", "December"};
  std::tm tm{};
  localtime_r(&now, &tm);
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    char c = format[++i];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += fmt::format("{:02d}", tm.tm_mon + 1); break;
      case 'd': out += fmt::format("{:02d}", tm.tm_mday); break;
      case 'b': out += std::string(months[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += months[tm.tm_mon]; break;
      case 'H': out += fmt::format("{:02d}", tm.tm_hour); break;
      case 'M': out += fmt::format("{:02d}", tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; out += c;  // as the reference: other directives stay as written
    }
  }
  return out;
}

}  // namespace wgrt::chat
