// JSON schema to grammar: strings drawn by constrained random sampling parse as JSON and
// satisfy the schema (checked by a small validator written apart from the converter).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <random>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_index.h"

using namespace wgrt::grammar;
using nlohmann::json;

namespace {

bool utf8_length_in(const std::string& s, size_t lo, size_t hi) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n >= lo && n <= hi;
}

// Whether `v` satisfies `s` (the subset the converter takes).
bool valid(const json& v, const json& s) {
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (s.contains("anyOf")) {
    for (const json& x : s["anyOf"])
      if (valid(v, x)) return true;
    return false;
  }
  if (!s.contains("type")) return true;
  if (s["type"].is_array()) {
    for (const json& t : s["type"]) {
      json one = s;
      one["type"] = t;
      if (valid(v, one)) return true;
    }
    return false;
  }
  const std::string t = s["type"];
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "string")
    return v.is_string() && utf8_length_in(v.get<std::string>(), s.value("minLength", 0u), s.value("maxLength", ~0u));
  if (t == "array") {
    if (!v.is_array() || v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", ~0u)) return false;
    for (const json& x : v)
      if (s.contains("items") && !valid(x, s["items"])) return false;
    return true;
  }
  if (t != "object" || !v.is_object()) return false;
  const json props = s.value("properties", json::object());
  for (const json& r : s.value("required", json::array()))
    if (!v.contains(r.get<std::string>())) return false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (props.contains(it.key())) {
      if (!valid(it.value(), props[it.key()])) return false;
    } else if (s.contains("additionalProperties") && s["additionalProperties"].is_object()) {
      if (!valid(it.value(), s["additionalProperties"])) return false;
    } else if (!s.value("additionalProperties", props.empty())) {
      return false;
    }
  }
  return true;
}

// Token pieces a JSON writer might be split into, single bytes included so anything is reachable.
std::shared_ptr<const TokenIndex> json_vocab() {
  std::vector<std::string> p;
  for (int c = 32; c < 127; ++c) p.push_back(std::string(1, char(c)));
  for (const char* s : {"{\"", "\":", "\": ", "\",", "\"}", ", ", "true", "false", "null", "name", "age", "tags",
                        "red", "green", " {", "\n", "  ", "12", "3.5", "é", "\xE2", "\x82\xAC", "\\n", "\\\"", "e+"})
    p.push_back(s);
  p.push_back("");  // the end token
  const int32_t end = int32_t(p.size() - 1);
  return std::make_shared<const TokenIndex>(build_token_index(std::move(p), {end}));
}

// Draws tokens uniformly among the allowed ones until the end token (or `max_tokens`).
std::string sample(const std::string& gbnf, std::mt19937& rng, size_t max_tokens, bool* ended) {
  static const auto index = json_vocab();
  Constraint c{make_matcher(std::make_shared<const Grammar>(parse_gbnf(gbnf))), index};
  std::string out;
  std::vector<uint32_t> w(mask_words(index->n_vocab()));
  *ended = false;
  for (size_t step = 0; step < max_tokens; ++step) {
    allowed_mask(c, w);
    std::vector<int32_t> ok;
    for (size_t i = 0; i < index->n_vocab(); ++i)
      if (mask_bit(w, i)) ok.push_back(int32_t(i));
    if (ok.empty()) break;
    // Favour the end token so values close: half the time when it is allowed.
    const int32_t end = int32_t(index->n_vocab() - 1);
    const bool can_end = mask_bit(w, size_t(end));
    const int32_t id = can_end && rng() % 2 ? end : ok[rng() % ok.size()];
    EXPECT_TRUE(accept_token(c, id));
    if (id == end) {
      *ended = true;
      break;
    }
    out += index->pieces[size_t(id)];
  }
  return out;
}

}  // namespace

TEST(GrammarJsonSchema, SampledValuesParseAndSatisfyTheSchema) {
  const json schemas[] = {
      json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
                      "age":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name","age"],
                      "additionalProperties":false})"),
      json::parse(R"({"type":"object","properties":{"color":{"enum":["red","green",3,null]},
                      "tags":{"type":"array","items":{"type":"string","maxLength":3},"minItems":1,"maxItems":3},
                      "n":{"type":["number","null"]},"c":{"const":{"k":[1,"é"]}}},"required":["color","c"]})"),
      json::parse(R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"object","properties":{
                      "x":{"type":"object","properties":{"y":{"type":"null"}},"required":["y"]}}}]},"maxItems":4})"),
      json::parse(R"({"type":"object","properties":{"a":{"type":"boolean"}},
                      "additionalProperties":{"type":"string","minLength":2,"maxLength":4}})"),
      json::parse(R"({"type":"string","minLength":3,"maxLength":5})"),
  };
  std::mt19937 rng(7);
  for (const json& schema : schemas) {
    const std::string gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()));
    size_t n_ended = 0;
    for (int i = 0; i < 40; ++i) {
      bool ended = false;
      const std::string s = sample(gbnf, rng, 4000, &ended);
      if (!ended) continue;
      ++n_ended;
      json v;
      ASSERT_NO_THROW(v = json::parse(s)) << s << "\nschema " << schema.dump();
      EXPECT_TRUE(valid(v, schema)) << s << "\nschema " << schema.dump();
    }
    EXPECT_GE(n_ended, 30u) << schema.dump();
  }
}

TEST(GrammarJsonSchema, JsonObjectIsAnyObject) {
  Matcher m = make_matcher(std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf())));
  EXPECT_TRUE(accept_bytes(m, R"({"a": [1, -2.5e+3, {"b": null}], "c" : "\u00e9\n"})") && is_complete(m.state));
  Matcher m2 = make_matcher(std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf())));
  EXPECT_FALSE(accept_bytes(m2, "[1]"));
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAndBadSchemasNameTheirPath) {
  const auto err = [](const char* s) {
    try {
      json_schema_to_gbnf(nlohmann::ordered_json::parse(s));
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err(R"({"type":"object","properties":{"a":{"$ref":"#/x"}}})").find("schema.properties.a: the keyword '$ref'"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"a+"})").find("schema.pattern"), std::string::npos);
  EXPECT_NE(err(R"({"type":"decimal"})").find("unknown type 'decimal'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"object","properties":{},"required":["z"]})").find("'z' is not among"), std::string::npos);
  EXPECT_NE(err(R"({"type":"array","minItems":3,"maxItems":1})").find("maxItems < minItems"), std::string::npos);
  EXPECT_NE(err("[1]").find("must be an object"), std::string::npos);
  json deep = json::object();
  for (int i = 0; i < 40; ++i) deep = json{{"type", "array"}, {"items", deep}};
  EXPECT_NE(err(deep.dump().c_str()).find("deeper than 32"), std::string::npos);
}
