// The context shift's choice of turns (llm/context_shift.h), without a model: a "tokenizer"
// that counts a fixed overhead per message plus its content's bytes.
#include "llm/context_shift.h"

#include <gtest/gtest.h>

namespace wgrt {
namespace {

using nlohmann::ordered_json;
using Turns = std::vector<std::pair<size_t, size_t>>;

ordered_json msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

// 1 (BOS) + 4 per message + its bytes, as tokens of value 0.
std::vector<int32_t> count_tokens(const ordered_json& messages) {
  size_t n = 1;
  for (const auto& m : messages) n += 4 + m["content"].get<std::string>().size();
  return std::vector<int32_t>(n, 0);
}

TEST(ContextShift, TurnsStartAtUserMessagesAndTheLastNeverDrops) {
  const ordered_json chat = {msg("system", "s"), msg("user", "u1"), msg("assistant", "a1"), msg("user", "u2"),
                             msg("assistant", "call"), msg("tool", "result"), msg("assistant", "a2"),
                             msg("user", "u3")};
  EXPECT_EQ(llm::droppable_turns(chat), (Turns{{1, 3}, {3, 7}})) << "a turn carries its tool calls and results";
  EXPECT_EQ(llm::drop_turns(chat, 1), (ordered_json{msg("system", "s"), msg("user", "u2"), msg("assistant", "call"),
                                                     msg("tool", "result"), msg("assistant", "a2"), msg("user", "u3")}));
  EXPECT_EQ(llm::drop_turns(chat, 2), (ordered_json{msg("system", "s"), msg("user", "u3")}));
  EXPECT_EQ(llm::drop_turns(chat, 99), llm::drop_turns(chat, 2)) << "more than there are: all that can drop";
  EXPECT_EQ(llm::drop_turns(chat, 0), chat);
  // No system message, a developer message, a conversation of one turn.
  EXPECT_EQ(llm::droppable_turns(ordered_json{msg("user", "a"), msg("assistant", "b"), msg("user", "c")}),
            (Turns{{0, 2}}));
  EXPECT_EQ(llm::droppable_turns(ordered_json{msg("developer", "d"), msg("user", "a"), msg("assistant", "b"),
                                              msg("user", "c")}),
            (Turns{{1, 3}}));
  EXPECT_TRUE(llm::droppable_turns(ordered_json{msg("system", "s"), msg("user", "only")}).empty());
  EXPECT_TRUE(llm::droppable_turns(ordered_json::array()).empty());
}

TEST(ContextShift, ReplyRoom) {
  EXPECT_EQ(llm::reply_room(1024, -1), 256u) << "no max_tokens: a quarter of the context";
  EXPECT_EQ(llm::reply_room(1024, 16), 16u);
  EXPECT_EQ(llm::reply_room(1024, 5000), 512u) << "at most half the context";
  EXPECT_EQ(llm::reply_room(2, -1), 1u);
}

TEST(ContextShift, FitDropsTheFewestOldestTurns) {
  ordered_json chat = {msg("system", std::string(10, 's'))};
  for (int t = 0; t < 10; ++t) {
    chat.push_back(msg("user", std::string(20, 'u')));
    chat.push_back(msg("assistant", std::string(30, 'a')));
  }
  chat.push_back(msg("user", "last"));
  // 1 + 14 + 10 * 58 + 8 = 603 tokens; each turn is 58.
  ASSERT_EQ(count_tokens(chat).size(), 603u);
  size_t probes = 0;
  auto counted = [&](const ordered_json& m) {
    ++probes;
    return count_tokens(m);
  };
  // Fits as it is: nothing dropped, one render.
  std::optional<llm::FittedChat> f = llm::fit_chat(chat, 1000, 100, counted);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dropped_turns, 0u);
  EXPECT_EQ(f->tokens.size(), 603u);
  EXPECT_EQ(f->messages, chat);
  EXPECT_EQ(probes, 1u);
  // 603 + 100 > 500: 4 turns must go (603 - 4 * 58 = 371 <= 400; 3 would leave 429).
  probes = 0;
  f = llm::fit_chat(chat, 500, 100, counted);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dropped_turns, 4u);
  EXPECT_EQ(f->dropped_messages, 8u);
  EXPECT_EQ(f->tokens.size(), 371u);
  EXPECT_EQ(f->dropped_tokens, 232u);
  EXPECT_EQ(f->messages, llm::drop_turns(chat, 4));
  EXPECT_EQ(f->messages[0], chat[0]) << "the system message stays";
  EXPECT_EQ(f->messages.back(), chat.back()) << "the last message stays";
  EXPECT_LE(probes, 6u) << "bisection, not one render per turn";
  // No number of drops leaves the room: the fewest that leave one token.
  f = llm::fit_chat(chat, 60, 40, counted);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dropped_turns, 10u);
  EXPECT_EQ(f->tokens.size(), 23u);
  f = llm::fit_chat(chat, 200, 190, counted);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dropped_turns, 7u) << "603 - 7 * 58 = 197 leaves one token of 200; 6 drops would leave none";
  // Even the system message and the last turn pass the context: nothing fits.
  EXPECT_FALSE(llm::fit_chat(chat, 23, 1, counted));
}

}  // namespace
}  // namespace wgrt
