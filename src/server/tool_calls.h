// Tool calls out of a model's reply, in the format its chat template taught it (the template's
// text says which), as OpenAI's `tool_calls`:
//   Hermes (Qwen, Hermes)  <tool_call>{"name": "f", "arguments": {...}}</tool_call>, one block a
//                          call, anywhere in the reply (the text around them is content)
//   Llama 3.x JSON         the whole reply is {"name": "f", "parameters": {...}} (several may
//                          follow each other, separated by ';' or white space), possibly after
//                          <|python_tag|>
//   Mistral                [TOOL_CALLS] then a JSON list of {"name": "f", "arguments": {...}}
// A reply that does not parse as calls is content, whole: no text is ever dropped. Arguments
// leave as a JSON string (OpenAI's `function.arguments`), compact.
//
// Streaming (ToolStream): text goes out as it comes until a call's opening could be starting
// (the format's marker, or for Llama 3.x a reply that begins with '{'); from there on it is
// held back, and at the end the held text is parsed: calls and any content around them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wgrt::server {

enum class ToolFormat : uint8_t { None, Hermes, Llama3Json, Mistral };

// The format a chat template's text teaches; None when it shows no tool-call syntax wgrt knows.
ToolFormat detect_tool_format(std::string_view template_text);
const char* tool_format_name(ToolFormat f);

struct ToolCall {
  std::string id;         // "call_..." (see parse_tool_calls)
  std::string name;
  std::string arguments;  // a JSON object, as text
};

struct ParsedReply {
  std::string content;          // the text outside the calls ("" when none)
  std::vector<ToolCall> calls;  // empty: the reply is content, unchanged
};

// Splits a finished reply. Call k gets the id `id_base` + "_" + k (id_base: unique per response).
ParsedReply parse_tool_calls(ToolFormat f, std::string_view reply, std::string_view id_base);

// A streamed reply's text, held back from where a call may start.
struct ToolStream {
  ToolFormat format = ToolFormat::None;
  std::string pending;   // text not yet sent: a marker's possible beginning, or everything once held
  bool holding = false;  // a call's opening was seen: the rest waits for the end
  bool started = false;  // some non-space text has gone out (Llama 3.x: a call can no longer start)
};

// The text that may go out now.
std::string tool_stream_push(ToolStream& s, std::string_view text);
// At the end: the remaining content and the calls (none: the held text is content).
ParsedReply tool_stream_finish(ToolStream& s, std::string_view id_base);

}  // namespace wgrt::server
