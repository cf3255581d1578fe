// JSON schema (the subset OpenAI's structured outputs take) to a GBNF grammar.
//
// Types object / array / string / number / integer / boolean / null (or a list of them),
// properties, required, enum, const, items, anyOf / oneOf, additionalProperties (false, true
// or a schema; absent means false where properties are given, any value where they are not),
// minItems / maxItems, minLength / maxLength. Properties come in the schema's order; optional
// ones may be left out. Keywords that would change what is valid and are not implemented
// ($ref, pattern, allOf, not, ...) are an error naming them. Whitespace between tokens is
// optional and bounded, numbers have at most 16 digits, so a model cannot loop on them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace wgrt::grammar {

// GBNF text whose root matches the JSON values the schema accepts. Throws GrammarError
// naming the schema path ("schema.properties.a.type") and the keyword.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// The rules of a schema's values, for a grammar of one's own: the top rule is named `name`,
// the others `name_N`; they use the shared rules of json_base_rules(), to be added once.
std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& name);
std::string json_base_rules();
// Any JSON object (response_format json_object).
std::string json_object_gbnf();

}  // namespace wgrt::grammar
