// The values a chat template computes with: JSON-like, with the reference renderer's
// semantics (Hugging Face's JavaScript Jinja), so wgrt's output matches it byte for byte:
//   - objects keep their keys in insertion order;
//   - lists, objects and namespaces are shared by reference (a namespace set inside a loop is
//     seen after it), scalars by value;
//   - undefined and none are distinct values, both print as nothing and compare equal (==);
//   - integers and floats are distinct (2 prints "2", 2.0 prints "2.0"), booleans print
//     "true"/"false".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgrt::chat {

struct Value;
using ValueList = std::vector<Value>;
using ValueMap = std::vector<std::pair<std::string, Value>>;  // insertion order

// Arguments of a call: positional, then keyword (in the order written).
struct CallArgs {
  ValueList pos;
  ValueMap kw;
};
using Function = std::function<Value(CallArgs&)>;

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Object, Namespace, Function };

struct Value {
  Kind kind = Kind::Undefined;
  bool is_tuple = false;  // a List written as (a, b)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<ValueList> list;  // List
  std::shared_ptr<ValueMap> map;    // Object, Namespace
  std::shared_ptr<Function> fn;     // Function
};

Value make_none();
Value make_bool(bool v);
Value make_int(int64_t v);
Value make_float(double v);
Value make_string(std::string v);
Value make_list(ValueList v = {});
Value make_object(ValueMap v = {});
Value make_namespace(ValueMap v = {});
Value make_function(Function f);

const char* kind_name(Kind k);  // "string", "list", ... for error messages
bool truthy(const Value& v);
bool is_number(const Value& v);  // int or float (not bool)
double as_double(const Value& v);  // int, float or bool as a number

// Object / namespace lookup; nullptr when absent.
const Value* find_key(const Value& obj, std::string_view key);
void set_key(Value& obj, const std::string& key, Value v);

// How `{{ v }}` prints it (undefined and none print nothing).
std::string to_output(const Value& v);
// How a value prints when concatenated with `+` or `~`: the reference's host language
// formatting (2.0 is "2", a list is its items joined by ","); a mapping prints as JSON.
std::string to_concat_string(const Value& v);
// JavaScript's Number-to-string: shortest round-trip digits, "1e+21" and "1e-7" style.
std::string js_number(double v);

struct JsonOptions {
  int indent = -1;              // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep, key_sep;  // "" with has_separators false: the defaults
  bool has_separators = false;
  bool undefined_as_null = true;
};
// `tojson`: Python json.dumps separators (", " and ": "; "," with an indent), no HTML
// escaping, keys in insertion order.
std::string to_json_text(const Value& v, const JsonOptions& o = {}, int depth = 0);

// Loose equality (==): numbers and booleans by value, none == undefined, strings by bytes,
// lists/objects by identity.
bool loose_equal(const Value& a, const Value& b);

// JSON input (messages, tools) to values, and back (tests).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace wgrt::chat
