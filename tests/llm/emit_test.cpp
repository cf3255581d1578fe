// llm/emit.h: the emit step every generation loop shares (llm::generate, the chat turn, the C
// API, the server worker), on the demo model's tokenizer alone (no GPU).
#include "llm/emit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "llm/session.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace wgrt::llm {
namespace {

const tokenizer::Tokenizer& tok() {
  static const tokenizer::Tokenizer t =
      tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(model::open_gguf(demo_model_path())));
  return t;
}

std::vector<int32_t> ids_of(const std::string& text) { return tokenizer::tokenize(tok(), text, false, false); }

// Emits `ids` until one ends the generation; returns the text (with emit_end's).
std::string emit_all(Emit& e, const std::vector<int32_t>& ids, size_t* ended_at = nullptr) {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Emitted out = emit_token(e, tok(), ids[i], /*full=*/false);
    text += out.text;
    if (out.end) {
      if (ended_at) *ended_at = i;
      break;
    }
  }
  return text + emit_end(e);
}

TEST(Emit, StreamsTheTextOfEveryToken) {
  const std::vector<int32_t> ids = ids_of("The old man looked at the sea.");
  ASSERT_GT(ids.size(), 3u);
  Emit e = emit_begin(tok(), {}, -1);
  EXPECT_EQ(emit_all(e, ids), tokenizer::detokenize(tok(), ids));
  EXPECT_EQ(e.n_generated, ids.size());
  EXPECT_EQ(e.stop_reason, "");
}

TEST(Emit, AnEndTokenEndsUncounted) {
  ASSERT_GE(tok().vocab.eos_id, 0);
  Emit e = emit_begin(tok(), {}, 1);  // before the budget: an end token is not a token of the output
  const Emitted out = emit_token(e, tok(), tok().vocab.eos_id, /*full=*/true);
  EXPECT_TRUE(out.end);
  EXPECT_FALSE(out.counted);
  EXPECT_EQ(out.text, "");
  EXPECT_EQ(e.stop_reason, "eos");
  EXPECT_EQ(e.n_generated, 0u);
}

TEST(Emit, TheBudgetEndsAfterItsLastToken) {
  const std::vector<int32_t> ids = ids_of("The old man looked at the sea.");
  Emit e = emit_begin(tok(), {}, 2);
  size_t at = 99;
  const std::string text = emit_all(e, ids, &at);
  EXPECT_EQ(at, 1u);
  EXPECT_EQ(text, tokenizer::detokenize(tok(), {ids[0], ids[1]}));
  EXPECT_EQ(e.stop_reason, "length");
  EXPECT_EQ(e.n_generated, 2u);
}

TEST(Emit, AStopStringCutsTheTextAndHoldsItsPrefixBack) {
  const std::vector<int32_t> ids = ids_of("The old man looked at the sea");
  const std::string all = tokenizer::detokenize(tok(), ids);
  ASSERT_NE(all.find("The old man looked at the sea"), std::string::npos) << all;
  Emit e = emit_begin(tok(), {"looked"}, -1);
  EXPECT_EQ(emit_all(e, ids), all.substr(0, all.find("looked")));
  EXPECT_EQ(e.stop_reason, "stop string");
  // A stop string's start that never completes is held back, then comes out at the end.
  Emit held = emit_begin(tok(), {"sea!"}, -1);
  std::string streamed;
  for (int32_t id : ids) streamed += emit_token(held, tok(), id, false).text;
  EXPECT_EQ(streamed, all.substr(0, all.size() - 3));
  EXPECT_EQ(streamed + emit_end(held), all);
  EXPECT_EQ(held.stop_reason, "");
}

TEST(Emit, AFullContextEndsUnlessRoomIsMade) {
  const std::vector<int32_t> ids = ids_of("The old man");
  Emit e = emit_begin(tok(), {}, -1);
  int shifts = 0;
  Emitted out = emit_token(e, tok(), ids[0], /*full=*/true, [&] { return ++shifts, true; });
  EXPECT_FALSE(out.end);
  EXPECT_EQ(shifts, 1);
  out = emit_token(e, tok(), ids[1], /*full=*/true, [&] { return ++shifts, false; });
  EXPECT_TRUE(out.end);
  EXPECT_TRUE(out.counted);  // the token is the output's; only the next has no room
  EXPECT_EQ(e.stop_reason, "context");
  EXPECT_EQ(shifts, 2);
  // The budget goes first: a reply that ends anyway shifts nothing.
  Emit last = emit_begin(tok(), {}, 1);
  emit_token(last, tok(), ids[0], /*full=*/true, [&] { return ++shifts, true; });
  EXPECT_EQ(last.stop_reason, "length");
  EXPECT_EQ(shifts, 2);
}

TEST(Emit, AnInterruptEndsBeforeTheToken) {
  std::atomic<bool> stop{false};
  const std::vector<int32_t> ids = ids_of("The old man");
  Emit e = emit_begin(tok(), {}, -1, &stop);
  EXPECT_FALSE(emit_token(e, tok(), ids[0], false).end);
  stop.store(true);
  const Emitted out = emit_token(e, tok(), tok().vocab.eos_id, false);
  EXPECT_TRUE(out.end);
  EXPECT_FALSE(out.counted);
  EXPECT_EQ(e.stop_reason, "interrupted");
  EXPECT_EQ(e.n_generated, 1u);
}

}  // namespace
}  // namespace wgrt::llm
