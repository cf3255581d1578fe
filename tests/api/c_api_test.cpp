// wgrt's C API (include/wgrt/wgrt.h) and its C++ layer (wgrt.hpp) against the library they
// wrap: the same tokens, the same greedy text as llm::generate and llm::chat_turn, the same
// embeddings as llm::embed (a Qwen3-Embedding-style file's too), stops by the
// callback and by wgrt_cancel from another thread, and statuses with messages for bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"
#include "llm/chat.h"
#include "llm/embed.h"
#include "llm/generate.h"
#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "tokenizer/tokenizer.h"
#include "wgrt/wgrt.h"
#include "wgrt/wgrt.hpp"

namespace wgrt {
namespace {

const char* kTemplate =
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";
constexpr int32_t kTokens = 6;

// What a generation streamed.
struct Collected {
  std::string text;
  std::vector<int32_t> ids;
  int32_t stop_after = -1;  // the callback asks to stop after this many tokens
};

int collect(const char* text, size_t len, int32_t token, void* user) {
  auto* c = static_cast<Collected*>(user);
  EXPECT_EQ(std::strlen(text), len);
  c->text.append(text, len);
  if (token >= 0) c->ids.push_back(token);
  return c->stop_after >= 0 && int32_t(c->ids.size()) >= c->stop_after ? 1 : 0;
}

// Greedy sampling params, passed as the C API (a pointer) or the C++ layer (a reference) takes them.
struct Greedy {
  wgrt_sampling_params sp;
  operator const wgrt_sampling_params*() const { return &sp; }
  operator const wgrt_sampling_params&() const { return sp; }
};
Greedy greedy(int32_t max_tokens = kTokens) {
  Greedy g{wgrt_sampling_default_params()};
  g.sp.temperature = 0;
  g.sp.max_tokens = max_tokens;
  return g;
}

// The demo model, loaded once for the suite, with a chat template of the test's.
class CApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    wgrt_model_params p = wgrt_model_default_params();
    p.chat_template = kTemplate;
    model_ = wgrt_model_load(&p);
    ASSERT_NE(model_, nullptr) << wgrt_last_error();
  }
  static void TearDownTestSuite() {
    wgrt_model_free(model_);
    model_ = nullptr;
  }
  // The library's own session on the same model file.
  static llm::Session& session() {
    static llm::Session s = llm::open_session(test::device(), "", model::BuildOptions{});
    return s;
  }
  static wgrt_model* model_;
};
wgrt_model* CApi::model_ = nullptr;

TEST(CApiPlain, VersionIsTheProjects) {
  EXPECT_STREQ(wgrt_version(), WGRT_VERSION);
  EXPECT_STREQ(wgrt_status_name(WGRT_ERR_IO), "WGRT_ERR_IO");
}

TEST(CApiPlain, LoadReportsNullParamsAndAMissingFile) {
  EXPECT_EQ(wgrt_model_load(nullptr), nullptr);
  EXPECT_EQ(wgrt_last_status(), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("params"), std::string::npos) << wgrt_last_error();

  wgrt_model_params p = wgrt_model_default_params();
  p.model_path = "/nonexistent/wgrt-c-api-test.gguf";
  EXPECT_EQ(wgrt_model_load(&p), nullptr);
  EXPECT_EQ(wgrt_last_status(), WGRT_ERR_IO);
  EXPECT_NE(std::string(wgrt_last_error()).find("/nonexistent/wgrt-c-api-test.gguf"), std::string::npos)
      << wgrt_last_error();
  try {
    api::Model m("/nonexistent/wgrt-c-api-test.gguf");
    ADD_FAILURE() << "no exception";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.status, WGRT_ERR_IO);
    EXPECT_NE(std::string(e.what()).find("wgrt-c-api-test.gguf"), std::string::npos) << e.what();
  }
  wgrt_model_free(nullptr);  // a no-op
}

TEST_F(CApi, TokenizeAndDetokenizeMatchTheLibrary) {
  const std::string text = "The old man looked at the sea. <s> \xc3\xa9t\xc3\xa9!";
  const std::vector<int32_t> want = tokenizer::tokenize(session().tok, text, true, false);
  ASSERT_GT(want.size(), 4u);
  // A short buffer gets the size it needs, and is written only when that fits.
  std::vector<int32_t> ids(2, -7);
  int32_t n = wgrt_tokenize(model_, text.data(), text.size(), 1, 0, ids.data(), 2);
  ASSERT_EQ(n, int32_t(want.size()));
  EXPECT_EQ(ids, std::vector<int32_t>(2, -7));
  ids.resize(size_t(n));
  ASSERT_EQ(wgrt_tokenize(model_, text.data(), text.size(), 1, 0, ids.data(), n), n);
  EXPECT_EQ(ids, want);
  EXPECT_EQ(wgrt_tokenize(model_, text.data(), text.size(), 1, 0, nullptr, 0), n);

  const std::string back = tokenizer::detokenize(session().tok, want);
  char small[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(wgrt_detokenize(model_, ids.data(), n, 0, small, sizeof small), int32_t(back.size()));
  EXPECT_EQ(small[0], 'x');
  std::vector<char> buf(back.size() + 1, 'x');
  ASSERT_EQ(wgrt_detokenize(model_, ids.data(), n, 0, buf.data(), buf.size()), int32_t(back.size()));
  EXPECT_STREQ(buf.data(), back.c_str());
  EXPECT_NE(back.find("The old man looked at the sea."), std::string::npos) << back;
}

TEST_F(CApi, TokenizeRejectsBadArguments) {
  int32_t id = 0;
  EXPECT_EQ(wgrt_tokenize(nullptr, "a", 1, 1, 0, &id, 1), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("model is NULL"), std::string::npos) << wgrt_last_error();
  EXPECT_EQ(wgrt_tokenize(model_, nullptr, 3, 1, 0, &id, 1), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_tokenize(model_, "a", 1, 1, 0, nullptr, 4), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_detokenize(model_, nullptr, 2, 0, nullptr, 0), WGRT_ERR_INVALID_ARGUMENT);
  const int32_t bad = 1 << 30;
  char buf[8];
  EXPECT_EQ(wgrt_detokenize(model_, &bad, 1, 0, buf, sizeof buf), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("tokens[0] = 1073741824"), std::string::npos) << wgrt_last_error();
  EXPECT_EQ(wgrt_tokenize(model_, "", 0, 0, 0, nullptr, 0), 0);  // and success clears the error
  EXPECT_STREQ(wgrt_last_error(), "");
  EXPECT_EQ(wgrt_last_status(), WGRT_OK);
}

TEST_F(CApi, GreedyGenerateIsTheLibrarysText) {
  const std::string prompt = "Once upon a time";
  llm::GenerateOptions o;
  o.prompt = prompt;
  o.n_predict = kTokens;
  o.sampling.temperature = 0;
  std::string want;
  llm::reset(session());
  llm::generate(session(), o, [&](std::string_view t) { want += t; });
  ASSERT_FALSE(want.empty());

  Collected got;
  ASSERT_EQ(wgrt_generate(model_, prompt.c_str(), greedy(), collect, &got), WGRT_OK) << wgrt_last_error();
  EXPECT_EQ(got.text, want);
  EXPECT_EQ(got.ids.size(), size_t(kTokens));
  EXPECT_EQ(tokenizer::detokenize(session().tok, got.ids), want);
  // Each call starts from a fresh context: the same again.
  Collected again;
  ASSERT_EQ(wgrt_generate(model_, prompt.c_str(), greedy(), collect, &again), WGRT_OK);
  EXPECT_EQ(again.ids, got.ids);
}

TEST_F(CApi, CallbackStopsAfterNTokens) {
  Collected got;
  got.stop_after = 2;
  ASSERT_EQ(wgrt_generate(model_, "The sea", greedy(20), collect, &got), WGRT_OK);
  EXPECT_EQ(got.ids.size(), 2u);
}

TEST_F(CApi, CancelFromAnotherThread) {
  // The callback holds the first token until another thread has cancelled: the generation
  // ends before the second.
  struct Ctx {
    int32_t tokens = 0;
  } ctx;
  wgrt_token_callback cb = [](const char*, size_t, int32_t, void* user) -> int {
    auto* c = static_cast<Ctx*>(user);
    if (++c->tokens == 1) std::thread([] { wgrt_cancel(model_); }).join();
    return 0;
  };
  EXPECT_EQ(wgrt_generate(model_, "The sea", greedy(20), cb, &ctx), WGRT_CANCELLED);
  EXPECT_EQ(ctx.tokens, 1);

  // A cancel while none runs stops the next generation at its start, and only that one.
  wgrt_cancel(model_);
  Collected none, some;
  EXPECT_EQ(wgrt_generate(model_, "The sea", greedy(3), collect, &none), WGRT_CANCELLED);
  EXPECT_TRUE(none.ids.empty());
  EXPECT_EQ(wgrt_generate(model_, "The sea", greedy(3), collect, &some), WGRT_OK);
  EXPECT_EQ(some.ids.size(), 3u);
}

TEST_F(CApi, CancelWhileDecodingOnAnotherThread) {
  std::atomic<int32_t> tokens{0};
  std::promise<void> first;
  struct Ctx {
    std::atomic<int32_t>* tokens;
    std::promise<void>* first;
  } ctx{&tokens, &first};
  wgrt_token_callback cb = [](const char*, size_t, int32_t, void* user) -> int {
    auto* c = static_cast<Ctx*>(user);
    if (c->tokens->fetch_add(1) == 0) c->first->set_value();
    return 0;
  };
  std::thread canceller([&] {
    first.get_future().wait();
    wgrt_cancel(model_);
  });
  const wgrt_status st = wgrt_generate(model_, "The sea", greedy(200), cb, &ctx);
  canceller.join();
  EXPECT_EQ(st, WGRT_CANCELLED);
  EXPECT_GE(tokens.load(), 1);
  EXPECT_LT(tokens.load(), 200);
}

TEST_F(CApi, OneGenerationAtATime) {
  struct Ctx {
    wgrt_status inner = WGRT_OK;
  } ctx;
  wgrt_token_callback cb = [](const char*, size_t, int32_t, void* user) -> int {
    Collected unused;
    static_cast<Ctx*>(user)->inner = wgrt_generate(model_, "a", greedy(1), collect, &unused);
    return 1;
  };
  EXPECT_EQ(wgrt_generate(model_, "The sea", greedy(2), cb, &ctx), WGRT_OK);
  EXPECT_EQ(ctx.inner, WGRT_ERR_BUSY);
}

TEST_F(CApi, GenerateRejectsBadArguments) {
  Collected c;
  const wgrt_sampling_params sp = greedy();
  EXPECT_EQ(wgrt_generate(nullptr, "a", &sp, collect, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_generate(model_, nullptr, &sp, collect, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_generate(model_, "a", nullptr, collect, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_generate(model_, "a", &sp, nullptr, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("callback is NULL"), std::string::npos) << wgrt_last_error();
  wgrt_sampling_params bad = sp;
  bad.top_p = 0;
  EXPECT_EQ(wgrt_generate(model_, "a", &bad, collect, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("top_p"), std::string::npos) << wgrt_last_error();
  const std::string long_prompt(40000, 'a');
  EXPECT_EQ(wgrt_generate(model_, long_prompt.c_str(), &sp, collect, &c), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("context"), std::string::npos) << wgrt_last_error();
  EXPECT_TRUE(c.ids.empty());
}

// Penalties, a logit bias and stop strings give llm::generate's text with the same sampler
// settings; the stats say how it ended.
TEST_F(CApi, PenaltiesBiasAndStopsAreTheLibrarys) {
  const std::string prompt = "Once upon a time";
  llm::GenerateOptions o;
  o.prompt = prompt;
  o.n_predict = 12;
  o.sampling.temperature = 0;
  o.sampling.presence_penalty = 0.7f;
  o.sampling.frequency_penalty = 0.4f;
  o.sampling.repeat_penalty = 1.3f;
  std::string plain;
  llm::reset(session());
  llm::generate(session(), o, [&](std::string_view t) { plain += t; });
  ASSERT_GE(plain.size(), 4u);
  // The greedy text's first token banned, its second one favoured.
  const std::vector<int32_t> plain_ids = tokenizer::tokenize(session().tok, plain, false, false);
  o.sampling.logit_bias = {{plain_ids[0], -100.0f}, {plain_ids.size() > 1 ? plain_ids[1] : 7, 3.5f}};
  std::string want;
  llm::reset(session());
  llm::generate(session(), o, [&](std::string_view t) { want += t; });
  ASSERT_NE(want, plain);

  Greedy g = greedy(12);
  g.sp.presence_penalty = 0.7f;
  g.sp.frequency_penalty = 0.4f;
  g.sp.repeat_penalty = 1.3f;
  const wgrt_logit_bias bias[] = {{o.sampling.logit_bias[0].first, -100.0f}, {o.sampling.logit_bias[1].first, 3.5f}};
  g.sp.logit_bias = bias;
  g.sp.n_logit_bias = 2;
  Collected got;
  ASSERT_EQ(wgrt_generate(model_, prompt.c_str(), g, collect, &got), WGRT_OK) << wgrt_last_error();
  EXPECT_EQ(got.text, want);
  wgrt_generate_stats st{.struct_size = sizeof(wgrt_generate_stats)};
  ASSERT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_OK);
  EXPECT_EQ(st.stop_reason, WGRT_STOP_LENGTH);
  EXPECT_EQ(st.n_generated, 12);
  EXPECT_EQ(st.n_prompt, int32_t(tokenizer::tokenize(session().tok, prompt, true, true).size()));
  EXPECT_GT(st.prompt_seconds + st.generate_seconds, 0.0);

  // A stop text from the middle of that reply: the text ends before it, and the stats say why.
  const std::string cut = want.substr(want.size() / 2, 3);
  const size_t at = want.find(cut);
  const char* stops[] = {"a text that never comes", cut.c_str()};
  g.sp.stop = stops;
  g.sp.n_stop = 2;
  Collected stopped;
  ASSERT_EQ(wgrt_generate(model_, prompt.c_str(), g, collect, &stopped), WGRT_OK) << wgrt_last_error();
  EXPECT_EQ(stopped.text, want.substr(0, at));
  ASSERT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_OK);
  EXPECT_EQ(st.stop_reason, WGRT_STOP_STRING);
}

// A JSON schema (and the same as GBNF) holds the reply to its language, ended by the end token.
TEST_F(CApi, GrammarsHoldTheReply) {
  for (const bool gbnf : {false, true}) {
    Greedy g = greedy(16);
    g.sp.temperature = 1;
    g.sp.seed = 5;
    if (gbnf) g.sp.grammar = R"(root ::= "\"" ("yes" | "no") "\"")";
    else g.sp.json_schema = R"({"enum": ["yes", "no"]})";
    Collected got;
    ASSERT_EQ(wgrt_generate(model_, "Is the sea blue?", g, collect, &got), WGRT_OK) << wgrt_last_error();
    EXPECT_TRUE(got.text == "\"yes\"" || got.text == "\"no\"") << got.text;
    wgrt_generate_stats st{.struct_size = sizeof(wgrt_generate_stats)};
    ASSERT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_OK);
    EXPECT_EQ(st.stop_reason, WGRT_STOP_EOS) << (gbnf ? "grammar" : "json_schema");
  }
}

TEST_F(CApi, StatsSayHowItEnded) {
  Collected by_callback;
  by_callback.stop_after = 2;
  ASSERT_EQ(wgrt_generate(model_, "The sea", greedy(20), collect, &by_callback), WGRT_OK);
  wgrt_generate_stats st{.struct_size = sizeof(wgrt_generate_stats)};
  ASSERT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_OK);
  EXPECT_EQ(st.stop_reason, WGRT_STOP_CALLBACK);
  EXPECT_EQ(st.n_generated, 2);
  wgrt_cancel(model_);
  Collected none;
  EXPECT_EQ(wgrt_generate(model_, "The sea", greedy(3), collect, &none), WGRT_CANCELLED);
  ASSERT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_OK);
  EXPECT_EQ(st.stop_reason, WGRT_STOP_CANCELLED);
}

TEST_F(CApi, SamplingParamsAreChecked) {
  Collected c;
  auto refused = [&](const wgrt_sampling_params& sp, const std::string& says) {
    EXPECT_EQ(wgrt_generate(model_, "a", &sp, collect, &c), WGRT_ERR_INVALID_ARGUMENT) << says;
    EXPECT_NE(std::string(wgrt_last_error()).find(says), std::string::npos) << wgrt_last_error();
  };
  // The version field: older than the first versioned layout, or newer than this library.
  Greedy g = greedy();
  g.sp.struct_size = 8;
  refused(g, "struct_size is 8");
  g.sp.struct_size = sizeof(wgrt_sampling_params) + 8;
  refused(g, "newer than the library");
  g = greedy();
  const wgrt_logit_bias outside[] = {{1 << 20, 1.0f}};
  g.sp.logit_bias = outside;
  g.sp.n_logit_bias = 1;
  refused(g, "logit_bias[0]: token 1048576");
  const wgrt_logit_bias twice[] = {{5, 1.0f}, {5, -1.0f}};
  g.sp.logit_bias = twice;
  g.sp.n_logit_bias = 2;
  refused(g, "appears twice");
  g = greedy();
  g.sp.n_logit_bias = 1;
  refused(g, "logit_bias is NULL");
  g = greedy();
  const char* stops[] = {"x", nullptr};
  g.sp.stop = stops;
  g.sp.n_stop = 2;
  refused(g, "stop[1] is NULL");
  g = greedy();
  g.sp.grammar = "root ::= ";
  g.sp.json_schema = "{}";
  refused(g, "both set");
  g.sp.json_schema = nullptr;
  g.sp.grammar = "root ::= undefined_rule";
  refused(g, "wgrt_sampling_params.grammar:");
  g = greedy();
  g.sp.json_schema = "{not json";
  refused(g, "wgrt_sampling_params.json_schema: not valid JSON");
  g = greedy();
  g.sp.presence_penalty = NAN;
  refused(g, "presence_penalty");
  EXPECT_TRUE(c.ids.empty());
  wgrt_generate_stats st{.struct_size = 4};
  EXPECT_EQ(wgrt_last_generate_stats(model_, &st), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_last_generate_stats(model_, nullptr), WGRT_ERR_INVALID_ARGUMENT);
}

TEST_F(CApi, ChatAppliesTheTemplate) {
  chat::ChatTemplateSource src;
  src.text = kTemplate;
  src.origin = "test";
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = kTokens;
  o.system = "Be brief.";
  llm::reset(session());
  llm::Chat c = llm::start_chat(session(), src, o);
  std::string want;
  llm::chat_turn(c, "Tell me of the sea.", [&](std::string_view t) { want += t; });

  const wgrt_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Tell me of the sea."}};
  Collected got;
  ASSERT_EQ(wgrt_chat(model_, msgs, 2, greedy(), collect, &got), WGRT_OK) << wgrt_last_error();
  EXPECT_EQ(got.text, want);

  const wgrt_chat_message bad[] = {{"user", nullptr}};
  EXPECT_EQ(wgrt_chat(model_, bad, 1, greedy(), collect, &got), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("messages[0].content"), std::string::npos) << wgrt_last_error();
  EXPECT_EQ(wgrt_chat(model_, msgs, 0, greedy(), collect, &got), WGRT_ERR_INVALID_ARGUMENT);
}

TEST_F(CApi, EmbedIsTheLibrarysVector) {
  const int32_t n_embd = wgrt_model_n_embd(model_);
  ASSERT_EQ(n_embd, int32_t(session().mg.n_embd));
  const std::string text = "The cat sat on the mat.";
  // Too small a buffer: the size, nothing computed or written.
  float one = 7.f;
  EXPECT_EQ(wgrt_embed(model_, text.data(), text.size(), &one, 1), n_embd);
  EXPECT_EQ(one, 7.f);
  std::vector<float> got(size_t(n_embd) + 3, 9.f);
  ASSERT_EQ(wgrt_embed(model_, text.data(), text.size(), got.data(), got.size()), n_embd) << wgrt_last_error();
  EXPECT_EQ(got[size_t(n_embd)], 9.f) << "nothing written past n_embd";
  got.resize(size_t(n_embd));
  const std::vector<float> want = llm::embed(session(), 0, llm::embedding_tokens(session().tok, text));
  ASSERT_EQ(want.size(), got.size());
  double norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
    norm += double(got[i]) * got[i];
  }
  EXPECT_NEAR(norm, 1.0, 1e-5);
  // Generation after an embedding starts from a fresh context, as always.
  llm::GenerateOptions o;
  o.prompt = "Once upon a time";
  o.n_predict = kTokens;
  o.sampling.temperature = 0;
  std::string want_text;
  llm::reset(session());
  llm::generate(session(), o, [&](std::string_view t) { want_text += t; });
  Collected gen;
  ASSERT_EQ(wgrt_generate(model_, o.prompt.c_str(), greedy(), collect, &gen), WGRT_OK) << wgrt_last_error();
  EXPECT_EQ(gen.text, want_text);
}

TEST_F(CApi, EmbedRejectsBadArguments) {
  float v[4];
  EXPECT_EQ(wgrt_model_n_embd(nullptr), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_embed(nullptr, "a", 1, v, 4), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("model"), std::string::npos) << wgrt_last_error();
  EXPECT_EQ(wgrt_embed(model_, nullptr, 3, v, 4), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(wgrt_embed(model_, "a", 1, nullptr, 4), WGRT_ERR_INVALID_ARGUMENT);
  // A text past the context (2048 positions).
  std::string longer;
  for (int i = 0; i < 3000; ++i) longer += "word ";
  std::vector<float> out(size_t(wgrt_model_n_embd(model_)));
  EXPECT_EQ(wgrt_embed(model_, longer.data(), longer.size(), out.data(), out.size()), WGRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(wgrt_last_error()).find("context"), std::string::npos) << wgrt_last_error();
}

// A model file with its own template (a random-weight model: the text is noise, the tokens
// still match), and the C++ layer over it.
TEST(CApiCpp, ChatWithTheModelsTemplateAndTheCppLayer) {
  const std::string path = test::temp_dir("c_api") + "/chat.gguf";
  model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
  model::gguf_set_string(w, "tokenizer.chat_template", kTemplate);
  model::gguf_write_file(w, path);

  llm::Session s = llm::open_session(test::device(), path, model::BuildOptions{});
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 4;
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(path), o);
  std::string want;
  llm::chat_turn(c, "hi", [&](std::string_view t) { want += t; });

  api::Model m(path);
  std::string got;
  EXPECT_TRUE(m.chat({{"user", "hi"}}, greedy(4), [&](std::string_view t, int32_t) {
    got += t;
    return true;
  }));
  EXPECT_EQ(got, want);

  const std::vector<int32_t> ids = m.tokenize("hello there");
  EXPECT_EQ(ids, tokenizer::tokenize(s.tok, "hello there", true, true));
  EXPECT_EQ(m.detokenize(ids), tokenizer::detokenize(s.tok, ids));

  int32_t n = 0;
  EXPECT_TRUE(m.generate("hello", greedy(10), [&](std::string_view, int32_t) { return ++n < 2; }));
  EXPECT_EQ(n, 2);
  EXPECT_EQ(m.last_stats().stop_reason, WGRT_STOP_CALLBACK);
  EXPECT_EQ(m.last_stats().n_generated, 2);
  // An exception in the callback stops the generation and reaches the caller.
  EXPECT_THROW(m.generate("hello", greedy(10), [](std::string_view, int32_t) -> bool { throw std::domain_error("x"); }),
               std::domain_error);
  wgrt_sampling_params bad = greedy();
  bad.temperature = -1;
  EXPECT_THROW(m.generate("hello", bad, [](std::string_view, int32_t) { return true; }), api::Error);

  // Embeddings through the C++ layer: a Qwen3-Embedding-style file (last token, EOS appended).
  const std::string qwen = test::temp_dir("c_api") + "/qwen3-embedding.gguf";
  model::RandomModelSpec spec;
  spec.arch = model::Arch::Qwen3;
  spec.seed = 4;
  model::GgufWriter qw = model::make_random_model(spec);
  model::gguf_set_u32(qw, "qwen3.pooling_type", 3);
  model::gguf_set_bool(qw, "tokenizer.ggml.add_eos_token", true);
  model::gguf_write_file(qw, qwen);
  llm::Session qs = llm::open_session(test::device(), qwen, model::BuildOptions{});
  api::Model qm(qwen);
  EXPECT_EQ(qm.n_embd(), int32_t(qs.mg.n_embd));
  const std::vector<float> qv = qm.embed("a query");
  const std::vector<float> qwant = llm::embed(qs, 0, llm::embedding_tokens(qs.tok, "a query"));
  ASSERT_EQ(qv.size(), qwant.size());
  for (size_t i = 0; i < qv.size(); ++i) EXPECT_NEAR(qv[i], qwant[i], 1e-5f) << i;

  // The built-in random model has no template.
  api::Model plain(llm::kRandomModel);
  try {
    plain.chat({{"user", "hi"}}, greedy(1), [](std::string_view, int32_t) { return true; });
    ADD_FAILURE() << "no exception";
  } catch (const api::Error& e) {
    EXPECT_EQ(e.status, WGRT_ERR_MODEL);
    EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wgrt
