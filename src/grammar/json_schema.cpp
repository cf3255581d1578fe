#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"

namespace wgrt::grammar {

namespace {

using json = nlohmann::ordered_json;

// Rules every schema grammar shares.
constexpr const char* kBase = R"(ws ::= [ \t\n]{0,6}
char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
string ::= "\"" char* "\""
digits ::= "0" | [1-9] [0-9]{0,15}
integer ::= "-"? digits
number ::= "-"? digits ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
member ::= string ws ":" ws value
object ::= "{" ws (member (ws "," ws member)*)? ws "}"
array ::= "[" ws (value (ws "," ws value)*)? ws "]"
)";

// A GBNF string literal for `s` (UTF-8 passes through).
std::string literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  }
  return out + "\"";
}

struct Converter {
  std::string prefix = "s";
  std::string rules;
  size_t n = 0;

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw GrammarError(fmt::format("json schema at {}: {}", path, what));
  }
  std::string add(const std::string& body) {
    if (++n > 10000) throw GrammarError("json schema: more than 10000 rules (hint: a smaller schema)");
    std::string name = fmt::format("{}{}", prefix, n);
    rules += name + " ::= " + body + "\n";
    return name;
  }
  static size_t count(const json& s, const char* key, const std::string& path, size_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 10000)
      fail(path + "." + key, "must be an integer in [0, 10000]");
    return v.get<size_t>();
  }
  // "x" repeated [lo, hi] times (hi == SIZE_MAX: unbounded), separated by `sep`.
  static std::string repeat(const std::string& x, const std::string& sep, size_t lo, size_t hi) {
    if (hi == 0) return "";
    std::string tail = "(" + sep + " " + x + ")";
    std::string rest = hi == SIZE_MAX ? tail + (lo > 1 ? fmt::format("{{{},}}", lo - 1) : "*")
                                      : tail + fmt::format("{{{},{}}}", lo > 0 ? lo - 1 : 0, hi - 1);
    std::string one = x + " " + rest;
    return lo == 0 ? "(" + one + ")?" : one;
  }

  std::string object(const json& s, const std::string& path, int depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) fail(path + ".properties", "must be an object");
    std::vector<std::string> req;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path + ".required", "must be an array of names");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail(path + ".required", "must be an array of names");
        if (!props.contains(r.get<std::string>()))
          fail(path + ".required", fmt::format("'{}' is not among the properties", r.get<std::string>()));
        req.push_back(r.get<std::string>());
      }
    }
    std::string extra;  // rule of an additional member, empty when none are allowed
    const json ap = s.contains("additionalProperties") ? s["additionalProperties"] : json(props.empty());
    if (ap.is_boolean()) {
      if (ap.get<bool>()) extra = "member";
    } else if (ap.is_object()) {
      extra = add("string ws \":\" ws " + gen(ap, path + ".additionalProperties", depth + 1));
    } else {
      fail(path + ".additionalProperties", "must be a boolean or a schema");
    }
    // F_i: members from i on with none written yet; T_i: the same after one was written.
    std::vector<std::string> kv, F, T;
    std::vector<bool> required;
    for (auto it = props.begin(); it != props.end(); ++it) {
      kv.push_back(literal(json(it.key()).dump()) + " ws \":\" ws " +
                   gen(it.value(), path + ".properties." + it.key(), depth + 1));
      required.push_back(std::find(req.begin(), req.end(), it.key()) != req.end());
    }
    const size_t np = kv.size();
    F.resize(np + 1);
    T.resize(np + 1);
    T[np] = extra.empty() ? "\"\"" : add("(ws \",\" ws " + extra + ")*");
    F[np] = extra.empty() ? "\"\"" : add("(" + extra + " " + T[np] + ")?");
    for (size_t i = np; i-- > 0;) {
      T[i] = add("ws \",\" ws " + kv[i] + " " + T[i + 1] + (required[i] ? "" : " | " + T[i + 1]));
      F[i] = add(kv[i] + " " + T[i + 1] + (required[i] ? "" : " | " + F[i + 1]));
    }
    return add("\"{\" ws " + F[0] + " ws \"}\"");
  }

  std::string array(const json& s, const std::string& path, int depth) {
    const std::string item = s.contains("items") ? gen(s["items"], path + ".items", depth + 1) : "value";
    const size_t lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, SIZE_MAX);
    if (hi < lo) fail(path, "maxItems < minItems");
    return add("\"[\" ws " + repeat(item, "ws \",\" ws", lo, hi) + " ws \"]\"");
  }

  std::string string(const json& s, const std::string& path) {
    if (s.contains("pattern")) fail(path + ".pattern", "patterns are not implemented (hint: use enum)");
    const size_t lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, SIZE_MAX);
    if (hi < lo) fail(path, "maxLength < minLength");
    if (lo == 0 && hi == SIZE_MAX) return "string";
    return add("\"\\\"\" char" + (hi == SIZE_MAX ? fmt::format("{{{},}}", lo) : fmt::format("{{{},{}}}", lo, hi)) +
               " \"\\\"\"");
  }

  std::string type(const std::string& t, const json& s, const std::string& path, int depth) {
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    if (t == "string") return string(s, path);
    if (t == "number" || t == "integer" || t == "boolean" || t == "null") return t;
    fail(path + ".type", fmt::format("unknown type '{}' (hint: object, array, string, number, integer, boolean, "
                                     "null)", t));
  }

  std::string gen(const json& s, const std::string& path, int depth) {
    if (depth > 32) fail(path, "nested deeper than 32 levels");
    if (s.is_boolean()) {
      if (s.get<bool>()) return "value";
      fail(path, "the schema false accepts nothing");
    }
    if (!s.is_object()) fail(path, "a schema must be an object");
    for (const char* k : {"$ref", "allOf", "not", "if", "then", "else", "patternProperties", "dependentRequired",
                          "dependentSchemas", "prefixItems", "contains", "uniqueItems", "propertyNames",
                          "minProperties", "maxProperties", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "multipleOf", "format"})
      if (s.contains(k)) fail(path, fmt::format("the keyword '{}' is not implemented", k));
    if (s.contains("const")) return add(literal(s["const"].dump()));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail(path + ".enum", "must be a non-empty array");
      std::string body;
      for (const json& v : s["enum"]) body += (body.empty() ? "" : " | ") + literal(v.dump());
      return add(body);
    }
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) {
        if (!s[k].is_array() || s[k].empty()) fail(path + "." + k, "must be a non-empty array of schemas");
        std::string body;
        for (size_t i = 0; i < s[k].size(); ++i)
          body += (body.empty() ? "" : " | ") + gen(s[k][i], fmt::format("{}.{}[{}]", path, k, i), depth + 1);
        return add(body);
      }
    if (!s.contains("type")) return s.contains("properties") ? object(s, path, depth) : "value";
    const json& t = s["type"];
    if (t.is_string()) return type(t.get<std::string>(), s, path, depth);
    if (!t.is_array() || t.empty()) fail(path + ".type", "must be a type name or a list of them");
    std::string body;
    for (const json& x : t) {
      if (!x.is_string()) fail(path + ".type", "must be a type name or a list of them");
      body += (body.empty() ? "" : " | ") + type(x.get<std::string>(), s, path, depth);
    }
    return add(body);
  }
};

}  // namespace

std::string json_schema_to_gbnf(const json& schema) {
  Converter c;
  std::string top = c.gen(schema, "schema", 0);
  return "root ::= " + top + "\n" + c.rules + kBase;
}

std::string json_schema_rules(const json& schema, const std::string& name) {
  Converter c;
  c.prefix = name + "_";
  std::string top = c.gen(schema, "schema", 0);
  return name + " ::= " + top + "\n" + c.rules;
}

std::string json_base_rules() { return kBase; }

std::string json_object_gbnf() { return std::string("root ::= object\n") + kBase; }

}  // namespace wgrt::grammar
