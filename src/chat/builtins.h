// Filters, tests, attributes and methods of values, and the global functions (internal to
// src/chat). Errors are EvalError without a position; the evaluator adds the node's.
#pragma once

#include <ctime>
#include <stdexcept>
#include <string>
#include <string_view>

#include "chat/value.h"

namespace wgrt::chat {

struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `v | name` (called: written `v | name(args)`).
Value apply_filter(std::string_view name, const Value& v, CallArgs& args, bool called);
// `v is name args...`.
bool apply_test(std::string_view name, const Value& v, const ValueList& args);
// `obj.key` / `obj[key]`: items, then the type's methods (bound to obj); undefined if absent.
Value get_member(const Value& obj, const Value& key);
// Elements of a list, or the items of a slice of a list or string.
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);

// range(), namespace(), strftime_now() and raise_exception(): the template's globals.
Value builtin_range(CallArgs& a);
Value builtin_namespace(CallArgs& a);
std::string strftime_now(const std::string& format, std::time_t now);

}  // namespace wgrt::chat
