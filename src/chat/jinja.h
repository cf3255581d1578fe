// A Jinja engine for the subset chat templates use: lexer → parser (AST) → evaluator over
// chat::Value. Semantics follow the reference renderer of chat templates (Hugging Face's
// JavaScript Jinja), including its whitespace rules (trim_blocks and lstrip_blocks on, one
// trailing newline of the template dropped).
//
// Supported: text, {{ expr }}, {# comments #}, whitespace control ({%- -%} {{- -}} {#- -#});
// statements if/elif/else, for (tuple targets, `if` filter, else, loop.*), set (also to a
// namespace attribute, tuple targets, block set), macro (defaults, keyword arguments),
// break/continue, generation/endgeneration (ignored); expressions: literals (strings, ints,
// floats, lists, tuples, dicts), member/subscript/slices, calls with keyword arguments,
// filters, tests (`is`, `is not`), unary + - not, ** * / // % + - ~, comparisons, in /
// not in, and/or, ternaries (`a if c else b`, `a if c`).
// Anything else (call/filter blocks, include, extends, ...) is a TemplateError naming it
// and its line and column.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace wgrt::chat {

struct SourcePos {
  uint32_t line = 1, col = 1;
};

// Both syntax errors (at parse) and errors while rendering (raise_exception, wrong types).
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Template {
  std::string name;  // for messages: a file name or "GGUF tokenizer.chat_template"
  std::vector<NodePtr> body;
  Template();
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
};

// Throws TemplateError "NAME:LINE:COL: what (hint)".
Template parse_template(std::string_view source, const std::string& name);

struct RenderOptions {
  std::time_t now = 0;  // strftime_now's clock (local time); 0: the current time
  uint64_t max_iterations = 20'000'000;  // loop iterations per render: past it, a runaway loop
};

// `context` is an object of the template's variables. Throws TemplateError.
std::string render(const Template& t, const Value& context, const RenderOptions& o = {});

}  // namespace wgrt::chat
