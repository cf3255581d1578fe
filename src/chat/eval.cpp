// Syntax tree → text. Scopes as the reference has them: a for loop gets one scope for the
// whole loop (a `set` inside it lasts across iterations, not after); if-blocks share the
// enclosing scope; a macro body runs in a scope under the caller's. break/continue drop the
// output of the unfinished iteration.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "chat/ast.h"
#include "chat/builtins.h"

namespace wgrt::chat {

namespace {

struct Scope {
  Scope* parent = nullptr;
  std::unordered_map<std::string, Value> vars;

  const Value* find(const std::string& k) const {
    for (const Scope* s = this; s; s = s->parent)
      if (auto it = s->vars.find(k); it != s->vars.end()) return &it->second;
    return nullptr;
  }
};

struct BreakSignal {};
struct ContinueSignal {};

// Rendering more than this is a runaway template (a loop over a huge range, ...).
constexpr size_t kMaxOutput = size_t(64) << 20;
constexpr int kMaxDepth = 200;

struct Interp {
  const Template& t;
  std::time_t now;
  Scope* call_site = nullptr;  // scope of the call being made (macros run under it)
  int depth = 0;
  uint64_t iterations = 0, max_iterations = 0;

  [[noreturn]] void fail(const Node& n, const std::string& what) const { throw TemplateError(where(t.name, n.pos) + what); }

  // ---- statements ----
  void block(const std::vector<NodePtr>& body, Scope& sc, std::string& out) {
    for (const NodePtr& n : body) {
      statement(*n, sc, out);
      if (out.size() > kMaxOutput) fail(*n, "the rendered prompt passes 64 MiB (hint: a runaway loop?)");
    }
  }

  void statement(const Node& n, Scope& sc, std::string& out) {
    switch (n.kind) {
      case NodeKind::Text: out += n.literal.s; return;
      case NodeKind::Output: out += to_output(eval(*n.a, sc)); return;
      case NodeKind::If: block(truthy(eval(*n.a, sc)) ? n.body : n.alt, sc, out); return;
      case NodeKind::For: for_loop(n, sc, out); return;
      case NodeKind::Set: set(n, sc); return;
      case NodeKind::Macro: define_macro(n, sc); return;
      case NodeKind::Break: throw BreakSignal{};
      case NodeKind::Continue: throw ContinueSignal{};
      default: fail(n, "internal: an expression in statement position");
    }
  }

  void bind(const Node& n, const std::vector<std::string>& names, bool tuple, const Value& v, Scope& sc) {
    if (!tuple) {
      sc.vars[names[0]] = v;
      return;
    }
    if (v.kind != Kind::List) fail(n, fmt::format("cannot unpack a {} into {} names", kind_name(v.kind), names.size()));
    if (v.list->size() != names.size())
      fail(n, fmt::format("cannot unpack {} items into {} names", v.list->size(), names.size()));
    for (size_t i = 0; i < names.size(); ++i) sc.vars[names[i]] = (*v.list)[i];
  }

  void for_loop(const Node& n, Scope& outer, std::string& out) {
    Scope sc{&outer, {}};
    Value it = eval(*n.a, sc);
    if (it.kind == Kind::Object) {
      ValueList keys;
      for (const auto& kv : *it.map) keys.push_back(make_string(kv.first));
      it = make_list(std::move(keys));
    }
    if (it.kind != Kind::List) fail(*n.a, fmt::format("a for loop needs a list or a mapping, got a {}", kind_name(it.kind)));
    ValueList items;
    if (n.b) {
      for (const Value& v : *it.list) {
        Scope test{&sc, {}};
        bind(n, n.targets, n.flag, v, test);
        if (truthy(eval(*n.b, test))) items.push_back(v);
      }
    } else {
      items = *it.list;
    }
    bool ran = false;
    const int64_t len = int64_t(items.size());
    for (int64_t i = 0; i < len; ++i) {
      if (++iterations > max_iterations)
        fail(n, fmt::format("more than {} loop iterations (hint: a runaway loop?)", max_iterations));
      ValueMap loop = {
          {"index", make_int(i + 1)},          {"index0", make_int(i)},
          {"revindex", make_int(len - i)},     {"revindex0", make_int(len - i - 1)},
          {"first", make_bool(i == 0)},        {"last", make_bool(i == len - 1)},
          {"length", make_int(len)},           {"previtem", i > 0 ? items[size_t(i - 1)] : Value{}},
          {"nextitem", i + 1 < len ? items[size_t(i + 1)] : Value{}},
      };
      sc.vars["loop"] = make_object(std::move(loop));
      bind(n, n.targets, n.flag, items[size_t(i)], sc);
      std::string piece;
      try {
        block(n.body, sc, piece);
      } catch (const ContinueSignal&) {
        continue;
      } catch (const BreakSignal&) {
        break;
      }
      out += piece;
      ran = true;
    }
    if (!ran) block(n.alt, sc, out);
  }

  void set(const Node& n, Scope& sc) {
    Value v;
    if (n.b) {
      v = eval(*n.b, sc);
    } else {
      std::string text;
      block(n.body, sc, text);
      v = make_string(std::move(text));
    }
    const Node& target = *n.a;
    if (target.kind == NodeKind::Ident) {
      sc.vars[target.name] = std::move(v);
    } else if (target.kind == NodeKind::Tuple) {
      std::vector<std::string> names;
      for (const NodePtr& x : target.items) names.push_back(x->name);
      bind(n, names, true, v, sc);
    } else {
      Value obj = eval(*target.a, sc);
      if (obj.kind != Kind::Namespace)
        fail(n, fmt::format("cannot set an attribute of a {} (hint: only namespace() objects can be changed)",
                            kind_name(obj.kind)));
      set_key(obj, target.name, std::move(v));
    }
  }

  void define_macro(const Node& n, Scope& sc) {
    const Node* node = &n;
    sc.vars[n.name] = make_function([this, node](CallArgs& a) {
      Scope body{call_site, {}};
      const auto& params = node->kw;
      // Every parameter is bound before any default is evaluated, so a default never sees
      // an outer variable of a parameter's name.
      std::vector<bool> given(params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        const std::string& p = params[i].first;
        const Value* v = i < a.pos.size() ? &a.pos[i] : nullptr;
        for (auto& [k, kv] : a.kw)
          if (!v && k == p) v = &kv;
        given[i] = v != nullptr;
        body.vars[p] = v ? *v : Value{};
      }
      ValueMap extra_kw;
      for (auto& [k, v] : a.kw)
        if (std::none_of(params.begin(), params.end(), [&](const auto& p) { return p.first == k; })) extra_kw.emplace_back(k, v);
      body.vars["kwargs"] = make_object(std::move(extra_kw));
      body.vars["varargs"] = make_list(a.pos.size() > params.size() ? ValueList(a.pos.begin() + long(params.size()), a.pos.end()) : ValueList{});
      for (size_t i = 0; i < params.size(); ++i)
        if (!given[i] && params[i].second) body.vars[params[i].first] = eval(*params[i].second, body);
      if (++depth > kMaxDepth) {
        --depth;
        fail(*node, fmt::format("macro '{}' recursed more than {} deep", node->name, kMaxDepth));
      }
      std::string out;
      try {
        block(node->body, body, out);
      } catch (...) {
        --depth;
        throw;
      }
      --depth;
      return make_string(std::move(out));
    });
  }

  // ---- expressions ----
  CallArgs args_of(const Node& n, Scope& sc) {
    CallArgs a;
    for (const NodePtr& x : n.items) a.pos.push_back(eval(*x, sc));
    for (const auto& [k, x] : n.kw) a.kw.emplace_back(k, eval(*x, sc));
    return a;
  }

  Value eval(const Node& n, Scope& sc) {
    try {
      return eval_inner(n, sc);
    } catch (const EvalError& e) {
      fail(n, e.what());
    }
  }

  Value eval_inner(const Node& n, Scope& sc) {
    switch (n.kind) {
      case NodeKind::Literal: return n.literal;
      case NodeKind::Ident: {
        if (const Value* v = sc.find(n.name)) return *v;
        return global(n.name);
      }
      case NodeKind::List:
      case NodeKind::Tuple: {
        ValueList l;
        for (const NodePtr& x : n.items) l.push_back(eval(*x, sc));
        Value v = make_list(std::move(l));
        v.is_tuple = n.kind == NodeKind::Tuple;
        return v;
      }
      case NodeKind::Dict: {
        Value obj = make_object();
        for (size_t i = 0; i + 1 < n.items.size(); i += 2) {
          Value k = eval(*n.items[i], sc);
          if (k.kind != Kind::String) fail(*n.items[i], fmt::format("dict keys must be strings, got a {}", kind_name(k.kind)));
          set_key(obj, k.s, eval(*n.items[i + 1], sc));
        }
        return obj;
      }
      case NodeKind::Member: {
        Value obj = eval(*n.a, sc);
        return get_member(obj, n.flag ? eval(*n.b, sc) : make_string(n.name));
      }
      case NodeKind::Slice: {
        Value obj = eval(*n.a, sc);
        Value parts[3];
        for (int k = 0; k < 3; ++k)
          if (n.items[size_t(k)]) parts[k] = eval(*n.items[size_t(k)], sc);
        return slice_value(obj, parts[0], parts[1], parts[2]);
      }
      case NodeKind::Call: {
        CallArgs a = args_of(n, sc);
        Value fn = eval(*n.a, sc);
        if (fn.kind != Kind::Function) {
          std::string what = n.a->kind == NodeKind::Ident ? "'" + n.a->name + "'"
                             : n.a->kind == NodeKind::Member && !n.a->flag ? "'." + n.a->name + "'" : "this";
          fail(n, fmt::format("{} is a {}, not something to call", what, kind_name(fn.kind)));
        }
        Scope* saved = call_site;
        call_site = &sc;
        try {
          Value r = (*fn.fn)(a);
          call_site = saved;
          return r;
        } catch (...) {
          call_site = saved;
          throw;
        }
      }
      case NodeKind::Filter: {
        Value v = eval(*n.a, sc);
        CallArgs a = args_of(n, sc);
        return apply_filter(n.name, v, a, n.flag);
      }
      case NodeKind::Test: {
        Value v = eval(*n.a, sc);
        ValueList args;
        for (const NodePtr& x : n.items) args.push_back(eval(*x, sc));
        return make_bool(apply_test(n.name, v, args) != n.flag);
      }
      case NodeKind::Unary: {
        Value v = eval(*n.a, sc);
        if (n.name == "not") return make_bool(!truthy(v));
        double sign = n.name == "-" ? -1 : 1;
        if (v.kind == Kind::Float) return make_float(sign * v.f);
        if (v.kind == Kind::Int) return make_int(sign < 0 ? -v.i : v.i);
        if (v.kind == Kind::Bool) return make_int(sign < 0 ? -int64_t(v.b) : int64_t(v.b));
        fail(n, fmt::format("unary '{}' needs a number, got a {}", n.name, kind_name(v.kind)));
      }
      case NodeKind::Binary: return binary(n, sc);
      case NodeKind::Ternary:
        if (truthy(eval(*n.a, sc))) return eval(*n.b, sc);
        return n.c ? eval(*n.c, sc) : Value{};
      default: fail(n, "internal: a statement in expression position");
    }
  }

  Value global(const std::string& name) {
    if (name == "true" || name == "True") return make_bool(true);
    if (name == "false" || name == "False") return make_bool(false);
    if (name == "none" || name == "None") return make_none();
    if (name == "range") return make_function(builtin_range);
    if (name == "namespace") return make_function(builtin_namespace);
    if (name == "raise_exception")
      return make_function([](CallArgs& a) -> Value {
        throw EvalError("the template raised an error: " + (a.pos.empty() ? std::string() : to_concat_string(a.pos[0])));
      });
    if (name == "strftime_now")
      return make_function([this](CallArgs& a) {
        if (a.pos.empty() || a.pos[0].kind != Kind::String) throw EvalError("strftime_now() takes a format string");
        return make_string(strftime_now(a.pos[0].s, now ? now : std::time(nullptr)));
      });
    return Value{};
  }

  // Strings and lists built by + and ~ are bounded like the output (a doubling loop, ...).
  Value bounded(const Node& n, Value v) {
    size_t size = v.kind == Kind::String ? v.s.size() : v.kind == Kind::List ? v.list->size() * 1024 : 0;
    if (size > kMaxOutput) fail(n, "a value past 64 MiB (hint: a runaway loop?)");
    return v;
  }

  Value binary(const Node& n, Scope& sc) { return bounded(n, binary_inner(n, sc)); }

  Value binary_inner(const Node& n, Scope& sc) {
    const std::string& op = n.name;
    Value l = eval(*n.a, sc);
    if (op == "and") return truthy(l) ? eval(*n.b, sc) : l;
    if (op == "or") return truthy(l) ? l : eval(*n.b, sc);
    Value r = eval(*n.b, sc);
    if (op == "==") return make_bool(loose_equal(l, r));
    if (op == "!=") return make_bool(!loose_equal(l, r));
    auto bad = [&]() -> Value {
      fail(n, fmt::format("'{}' cannot combine a {} and a {}", op, kind_name(l.kind), kind_name(r.kind)));
    };
    if (l.kind == Kind::Undefined || r.kind == Kind::Undefined) {
      if (r.kind == Kind::Undefined && (op == "in" || op == "not in")) return make_bool(op == "not in");
      fail(n, fmt::format("'{}' on an undefined value (hint: check the variable names, or test with 'is defined')", op));
    }
    if (l.kind == Kind::None || r.kind == Kind::None) fail(n, fmt::format("'{}' on a none value", op));
    if (op == "~") return make_string(to_concat_string(l) + to_concat_string(r));
    auto numeric = [](const Value& v) { return v.kind == Kind::Int || v.kind == Kind::Float || v.kind == Kind::Bool; };
    if (op == "**" && numeric(l) && numeric(r)) {
      double a = as_double(l), b = as_double(r);
      if (a == 0 && b < 0) fail(n, "0 cannot be raised to a negative power");
      double p = std::pow(a, b);
      if (!std::isfinite(p)) fail(n, "the power is not a finite number");
      bool f = l.kind == Kind::Float || r.kind == Kind::Float || b < 0;
      return f ? make_float(p) : make_int(int64_t(p));
    }
    if (is_number(l) && is_number(r)) {
      const bool f = l.kind == Kind::Float || r.kind == Kind::Float;
      const double a = as_double(l), b = as_double(r);
      auto num = [&](double x, int64_t xi) { return f ? make_float(x) : make_int(xi); };
      if (op == "+") return num(a + b, l.i + r.i);
      if (op == "-") return num(a - b, l.i - r.i);
      if (op == "*") return num(a * b, l.i * r.i);
      if (op == "/") return make_float(a / b);
      if (op == "//") {
        if (!f && r.i == 0) fail(n, "integer division by zero");
        return num(std::floor(a / b), int64_t(std::floor(a / b)));
      }
      if (op == "%") {
        if (!f && r.i == 0) fail(n, "modulo by zero");
        return num(std::fmod(a, b), f ? 0 : l.i % r.i);
      }
      if (op == "<") return make_bool(a < b);
      if (op == ">") return make_bool(a > b);
      if (op == "<=") return make_bool(a <= b);
      if (op == ">=") return make_bool(a >= b);
    }
    if (l.kind == Kind::List && r.kind == Kind::List && op == "+") {
      ValueList out = *l.list;
      out.insert(out.end(), r.list->begin(), r.list->end());
      return make_list(std::move(out));
    }
    if (r.kind == Kind::List && (op == "in" || op == "not in")) {
      bool found = false;
      for (const Value& x : *r.list) found = found || apply_test("sameas", l, {x});
      return make_bool(found == (op == "in"));
    }
    if ((l.kind == Kind::String || r.kind == Kind::String) && op == "+")
      return make_string(to_concat_string(l) + to_concat_string(r));
    if (l.kind == Kind::String && r.kind == Kind::String && (op == "in" || op == "not in"))
      return make_bool((r.s.find(l.s) != std::string::npos) == (op == "in"));
    if (l.kind == Kind::String && r.kind == Kind::Object && (op == "in" || op == "not in"))
      return make_bool((find_key(r, l.s) != nullptr) == (op == "in"));
    if (l.kind == Kind::String && r.kind == Kind::String && (op == "<" || op == ">" || op == "<=" || op == ">=")) {
      int c = l.s.compare(r.s);
      return make_bool(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    return bad();
  }
};

}  // namespace

std::string render(const Template& t, const Value& context, const RenderOptions& o) {
  Interp in{t, o.now};
  in.max_iterations = o.max_iterations;
  Scope top;
  if (context.map)
    for (const auto& [k, v] : *context.map) top.vars[k] = v;
  std::string out;
  try {
    in.block(t.body, top, out);
  } catch (const BreakSignal&) {
    throw TemplateError(t.name + ": 'break' outside a for loop");
  } catch (const ContinueSignal&) {
    throw TemplateError(t.name + ": 'continue' outside a for loop");
  }
  return out;
}

}  // namespace wgrt::chat
