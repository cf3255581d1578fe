// `wgrt serve`'s per-slot prompt cache and the chat context shift, end to end on loopback with
// the tiny byte-level test model (one token per byte, so prefix lengths follow from the text):
//   - the same ~180-token prompt thrice is prefilled once (usage's cached_tokens and /metrics'
//     prompt token counters), and greedy text is the same with and without the cache;
//   - a prompt that diverges mid-way reuses the shared prefix exactly;
//   - two clients at once, each on its own slot, reuse their own caches and get their texts;
//   - a chat conversation past the context drops its oldest turns and says so in usage.
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_support.h"

namespace wgrt {
namespace {

using nlohmann::json;
using test::ServerProcess;

// Counters of GET /metrics by name.
std::map<std::string, double> metrics(const ServerProcess& s) {
  std::map<std::string, double> m;
  httplib::Client c = s.client();
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) {
    ADD_FAILURE() << "GET /metrics failed";
    return m;
  }
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    m[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return m;
}

json post(const ServerProcess& s, const std::string& path, const json& body) {
  httplib::Client c = s.client();
  auto r = c.Post(path, body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << path << ": no response";
    return json();
  }
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body, nullptr, false);
}

json complete(const ServerProcess& s, const std::string& prompt, int max_tokens, bool cache_prompt = true) {
  return post(s, "/v1/completions", {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
                                     {"cache_prompt", cache_prompt}});
}

size_t cached_tokens(const json& r) { return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(); }
std::string text_of(const json& r) { return r["choices"][0]["text"].get<std::string>(); }

// 179 bytes: with BOS, a prompt of 180 tokens.
const std::string kLong =
    "The lighthouse keeper climbed the stairs each night, counting the steps out loud, and the gulls "
    "circled the lamp while ships far out at sea blinked back their answers in the dark.";

TEST(ServePromptCache, TheSamePromptThriceIsPrefilledOnce) {
  ASSERT_EQ(kLong.size(), 179u);
  ServerProcess s({"--parallel", "1"});
  ASSERT_GT(s.port, 0);
  std::vector<json> r;
  std::vector<double> prefilled, reused;
  for (int i = 0; i < 3; ++i) {
    const auto before = metrics(s);
    r.push_back(complete(s, kLong, 12));
    const auto after = metrics(s);
    prefilled.push_back(after.at("wgrt_prompt_tokens_total") - before.at("wgrt_prompt_tokens_total"));
    reused.push_back(after.at("wgrt_prompt_tokens_cached_total") - before.at("wgrt_prompt_tokens_cached_total"));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i]["usage"]["prompt_tokens"], 180) << r[i].dump();
  EXPECT_EQ(cached_tokens(r[0]), 0u) << "the warm-up leaves no cache behind: " << r[0].dump();
  EXPECT_EQ(prefilled[0], 180);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(cached_tokens(r[i]), 179u) << "all but the last prompt token: " << r[i].dump();
    EXPECT_EQ(prefilled[i], 1) << "request " << i;
    EXPECT_EQ(reused[i], 179) << "request " << i;
    EXPECT_EQ(text_of(r[i]), text_of(r[0])) << "greedy text with the cache = without";
    EXPECT_EQ(r[i]["usage"]["completion_tokens"], r[0]["usage"]["completion_tokens"]);
  }
  // cache_prompt false prefills the whole prompt, and gives the same text.
  const auto before = metrics(s);
  const json off = complete(s, kLong, 12, false);
  EXPECT_EQ(cached_tokens(off), 0u);
  EXPECT_EQ(metrics(s).at("wgrt_prompt_tokens_total") - before.at("wgrt_prompt_tokens_total"), 180);
  EXPECT_EQ(text_of(off), text_of(r[0]));
  // The idle slot shows what it keeps: the prompt and the reply's tokens that were evaluated.
  httplib::Client c = s.client();
  const json slots = json::parse(c.Get("/slots")->body);
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_FALSE(slots[0]["is_processing"]);
  const size_t n_generated = off["usage"]["completion_tokens"].get<size_t>();
  EXPECT_GE(slots[0]["n_cached"].get<size_t>(), 180 + n_generated - 1) << slots.dump();
  EXPECT_LE(slots[0]["n_cached"].get<size_t>(), 180 + n_generated) << slots.dump();
}

TEST(ServePromptCache, APromptThatDivergesMidWayReusesThePrefix) {
  ServerProcess s({"--parallel", "1"});
  ASSERT_GT(s.port, 0);
  const json a = complete(s, kLong, 8);
  EXPECT_EQ(cached_tokens(a), 0u);
  const std::string b = kLong.substr(0, 99) + " and then the storm came, and nobody slept that night at all.";
  const json with = complete(s, b, 16);
  EXPECT_EQ(cached_tokens(with), 100u) << "BOS and the 99 shared bytes: " << with.dump();
  const json without = complete(s, b, 16, false);
  EXPECT_EQ(cached_tokens(without), 0u);
  EXPECT_EQ(text_of(with), text_of(without));
  // The chat route reuses its cache too: the template's text before the last message is shared.
  const json msgs = json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", kLong}}});
  const json c1 = post(s, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0}});
  const json c2 = post(s, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 8}, {"temperature", 0}});
  EXPECT_EQ(cached_tokens(c2), c2["usage"]["prompt_tokens"].get<size_t>() - 1) << c2.dump();
  EXPECT_EQ(c1["choices"][0]["message"]["content"], c2["choices"][0]["message"]["content"]);
}

// Two clients at once, three requests each: each request finds its client's cache on its own
// slot (the other slot holds the other client's), and every text is its prompt's alone.
TEST(ServePromptCache, TwoConcurrentClientsKeepTheirOwnCaches) {
  ServerProcess s({"--parallel", "2"});
  ASSERT_GT(s.port, 0);
  const std::vector<std::string> prompts = {kLong, "Under the old bridge the river ran slow and brown, carrying leaves, "
                                                   "and a boy sat fishing there from noon until the first stars."};
  std::vector<json> ref;
  for (const std::string& p : prompts) ref.push_back(complete(s, p, 24, false));
  std::vector<std::vector<json>> got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      for (int k = 0; k < 3; ++k) got[i].push_back(complete(s, prompts[i], 24));
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i)
    for (const json& r : got[i]) {
      EXPECT_EQ(text_of(r), text_of(ref[i])) << "client " << i;
      EXPECT_EQ(cached_tokens(r), prompts[i].size()) << "client " << i << ": BOS and all its bytes but the last";
    }
  httplib::Client c = s.client();
  const json slots = json::parse(c.Get("/slots")->body);
  for (const json& sl : slots) EXPECT_GE(sl["n_cached"].get<size_t>(), prompts[1].size()) << slots.dump();
}

// The prompt tokens of `messages` through the test template: BOS, then one token per byte.
size_t rendered_tokens(const json& messages) {
  size_t n = 1 + std::string("<|start_header_id|>assistant<|end_header_id|>\n\n").size();
  for (const json& m : messages)
    n += fmt::format("<|start_header_id|>{}<|end_header_id|>\n\n{}<|eot_id|>", m["role"].get<std::string>(),
                     m["content"].get<std::string>()).size();
  return n;
}

// A conversation of ~2,700 tokens for a context of 1,024: the oldest turns leave, whole, the
// system message stays, and usage says what was dropped; the reply is the one the kept
// conversation gets when sent as is.
TEST(ServeContextShift, AChatPastTheContextDropsItsOldestTurns) {
  ServerProcess s;
  ASSERT_GT(s.port, 0);
  json msgs = json::array({{{"role", "system"}, {"content", "Be brief."}}});
  for (int t = 0; t < 6; ++t) {
    msgs.push_back({{"role", "user"}, {"content", fmt::format("Question {}: {}", t, std::string(180, 'a' + t))}});
    msgs.push_back({{"role", "assistant"}, {"content", fmt::format("Answer {}: {}", t, std::string(180, 'k' + t))}});
  }
  msgs.push_back({{"role", "user"}, {"content", "And now?"}});
  const json r = post(s, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 16}, {"temperature", 0}});
  ASSERT_TRUE(r["usage"].contains("context_shift")) << r.dump();
  const json& shift = r["usage"]["context_shift"];
  const size_t dropped = shift["dropped_messages"].get<size_t>();
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(dropped % 2, 0u) << "whole user/assistant pairs";
  EXPECT_LT(dropped, 12u);
  json kept = json::array({msgs[0]});
  for (size_t i = 1 + dropped; i < msgs.size(); ++i) kept.push_back(msgs[i]);
  const size_t prompt = r["usage"]["prompt_tokens"].get<size_t>();
  EXPECT_EQ(prompt, rendered_tokens(kept));
  EXPECT_EQ(shift["dropped_tokens"].get<size_t>(), rendered_tokens(msgs) - prompt);
  EXPECT_LE(prompt + 16, 1024u) << "the prompt leaves room for the reply";
  const json last_pair = json::array({msgs[dropped - 1], msgs[dropped]});
  EXPECT_GT(prompt + rendered_tokens(last_pair) - rendered_tokens(json::array()) + 16, 1024u)
      << "one pair fewer dropped would not have left that room";

  const json same = post(s, "/v1/chat/completions",
                         {{"messages", kept}, {"max_tokens", 16}, {"temperature", 0}, {"cache_prompt", false}});
  EXPECT_FALSE(same["usage"].contains("context_shift")) << same.dump();
  EXPECT_EQ(same["usage"]["prompt_tokens"], prompt);
  EXPECT_EQ(same["choices"][0]["message"]["content"], r["choices"][0]["message"]["content"]);

  // A last message that alone passes the context is still refused, naming the sizes.
  json big = json::array({{{"role", "user"}, {"content", std::string(1100, 'z')}}});
  httplib::Client c = s.client();
  auto e = c.Post("/v1/chat/completions", json({{"messages", big}, {"max_tokens", 4}}).dump(), "application/json");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400) << e->body;
  EXPECT_EQ(json::parse(e->body)["error"]["code"], "context_length_exceeded") << e->body;
}

// A reply bounded by max_tokens that fills the context goes on after a shift: BOS stays, the
// older half of the rest leaves the cache, and usage says how many tokens left. Without
// max_tokens the full context ends the reply, as before.
TEST(ServeContextShift, AReplyThatFillsTheContextGoesOn) {
  ServerProcess s({"--parallel", "1"});
  ASSERT_GT(s.port, 0);
  const std::string prompt(950, 'p');  // 951 tokens of a context of 1,024
  const json r = complete(s, prompt, 100);
  if (r["choices"][0]["finish_reason"] == "stop") GTEST_SKIP() << "the random model ended early: " << r.dump();
  EXPECT_EQ(r["usage"]["completion_tokens"], 100) << r.dump();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  ASSERT_TRUE(r["usage"].contains("context_shift")) << r.dump();
  EXPECT_EQ(r["usage"]["context_shift"]["discarded_tokens"], (1024 - 1) / 2) << "half of all but BOS";
  EXPECT_EQ(r["usage"]["context_shift"]["dropped_messages"], 0);
  httplib::Client c = s.client();
  const json slots = json::parse(c.Get("/slots")->body);
  EXPECT_LE(slots[0]["n_cached"].get<size_t>(), 1024u) << slots.dump();
  EXPECT_GE(slots[0]["n_cached"].get<size_t>(), 1024u - 511) << slots.dump();

  const json unbounded = post(s, "/v1/completions", {{"prompt", prompt}, {"temperature", 0}});
  if (unbounded["choices"][0]["finish_reason"] == "stop") return;
  EXPECT_EQ(unbounded["choices"][0]["finish_reason"], "length");
  EXPECT_LE(unbounded["usage"]["completion_tokens"].get<size_t>(), 1024u - 951 + 1) << unbounded.dump();
  EXPECT_FALSE(unbounded["usage"].contains("context_shift")) << unbounded.dump();
}

}  // namespace
}  // namespace wgrt
