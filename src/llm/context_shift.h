// Context shift for conversations (`wgrt chat`, and `wgrt serve`'s chat completions): when the
// rendered conversation and room for the reply no longer fit the context, its oldest turns
// leave it, whole, while the leading system messages and the turn being answered stay. A turn
// starts at a user message and runs to the next one (the assistant's reply, tool calls and
// tool results with it), so what is left still alternates as templates expect.
//
// The number of turns to drop is searched (fewest first, by bisection: each probe renders and
// tokenizes the conversation once), since a template may render a turn differently once the
// ones before it are gone.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

namespace wgrt::llm {

// The turns of `messages` that may be dropped, oldest first, as [first, end) index ranges:
// every turn after the leading system (or developer) messages but the last.
std::vector<std::pair<size_t, size_t>> droppable_turns(const nlohmann::ordered_json& messages);

// `messages` without its oldest `n` droppable turns.
nlohmann::ordered_json drop_turns(const nlohmann::ordered_json& messages, size_t n);

// The room a reply keeps when turns are dropped: max_tokens (>= 1) when given, at most half the
// context; else a quarter of the context.
size_t reply_room(uint32_t n_ctx, int32_t max_tokens);

struct FittedChat {
  std::vector<int32_t> tokens;    // the prompt of the messages kept
  nlohmann::ordered_json messages;
  size_t dropped_turns = 0, dropped_messages = 0;
  size_t dropped_tokens = 0;      // the whole conversation's prompt tokens less the kept one's
};

// The prompt `tokens_of(messages)`, with the fewest oldest turns dropped so that it and `room`
// fit n_ctx; when no number of drops leaves that room, the fewest that leave room for one
// token. nullopt when even the last turn alone (with the system messages) leaves none.
std::optional<FittedChat> fit_chat(
    const nlohmann::ordered_json& messages, uint32_t n_ctx, size_t room,
    const std::function<std::vector<int32_t>(const nlohmann::ordered_json&)>& tokens_of);

}  // namespace wgrt::llm
