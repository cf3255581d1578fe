// tool_choice "required" or a named function: a grammar that holds the reply to tool calls in
// the format the model's template taught it (server/tool_calls.h reads them back), the
// arguments held to each tool's parameter schema.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <string>

#include "grammar/gbnf.h"
#include "server/tool_calls.h"

namespace wgrt::server {

// GBNF for one or more calls (`only` non-empty: of that function alone). Throws ApiError 400
// when the format has no grammar (None, Mistral: its marker is a control token) or a schema
// cannot be converted.
std::string tool_call_gbnf(ToolFormat f, const nlohmann::ordered_json& tools, const std::string& only);
std::shared_ptr<const grammar::Grammar> tool_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools,
                                                          const std::string& only);

}  // namespace wgrt::server
