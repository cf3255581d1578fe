// `wgrt serve` end to end on loopback, with a tiny random-weight GGUF that carries a chat
// template (byte-level vocabulary: one token per byte):
//   - the real OpenAI client (tests/server/client_test.js, npm openai@6.49.0);
//   - greedy output equal to the library's own greedy decode of the same prompt, with the prompt
//     cache serving the second request (tests/server/prompt_cache_test.cpp has the cache's own),
//     and with the decode pipelined (fed steps, read a step late) as requests end and join;
//   - malformed requests (bad JSON, wrong types, a huge body, an over-long prompt, ...): 4xx
//     with OpenAI's error JSON, the server still up after each; a full queue answers 503;
//   - a bounded load: 16 concurrent clients x 8 requests, every response complete and valid,
//     the server's memory flat after warm-up;
//   - SIGTERM stops it cleanly (exit 0).
// And in-process, without a model: /health and the API answer 503 while the model loads.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "llm/generate.h"
#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "server/http.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "server/serve_support.h"

namespace wgrt {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

using test::kKey;
using test::ServerProcess;
using test::slurp;
const std::string& model_path() { return test::serve_model_path(); }
bool healthy(const ServerProcess& s) { return test::healthy(s.port); }

// OpenAI's error object, with the code we expect.
void expect_error(const httplib::Result& r, int status, const std::string& code, const std::string& what) {
  ASSERT_TRUE(r) << what << ": no response";
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json") << what;
  json j = json::parse(r->body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << what << ": not JSON: " << r->body;
  ASSERT_TRUE(j.contains("error") && j["error"].is_object()) << what << ": " << r->body;
  EXPECT_EQ(j["error"]["code"], code) << what << ": " << r->body;
  EXPECT_TRUE(j["error"]["message"].is_string() && !j["error"]["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(j["error"]["type"].is_string()) << what;
}

TEST(ServeE2E, OpenAIClient) {
  const std::string modules = WGRT_SOURCE_DIR "/.deps/server-openai/node_modules";
  if (!std::filesystem::exists(modules + "/openai/package.json"))
    GTEST_SKIP() << "npm openai is absent (hint: run tools/setup-test-data.sh)";
  ServerProcess s({"--alias", "gpt-4o-mini"});
  ASSERT_GT(s.port, 0);
  const std::string out = test::temp_dir("serve-node") + "/out";
  const std::string cmd = "NODE_PATH=" + modules + " node " WGRT_SOURCE_DIR "/tests/server/client_test.js http://127.0.0.1:" +
                          std::to_string(s.port) + " " + kKey + " gpt-4o-mini >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(out);
  EXPECT_EQ(rc, 0) << log << "\nserver:\n" << slurp(s.err_path);
  EXPECT_NE(log.find("all ok"), std::string::npos) << log;
  EXPECT_TRUE(healthy(s));
  EXPECT_EQ(s.stop(), 0) << "SIGTERM ends the server cleanly:\n" << slurp(s.err_path);
}

// Sampling fields through the OpenAI client (tests/server/sampling_client_test.js): logprobs,
// logit_bias, penalties, n > 1; two slots, so a request's choices run side by side.
TEST(ServeE2E, OpenAIClientSampling) {
  const std::string modules = WGRT_SOURCE_DIR "/.deps/server-openai/node_modules";
  if (!std::filesystem::exists(modules + "/openai/package.json"))
    GTEST_SKIP() << "npm openai is absent (hint: run tools/setup-test-data.sh)";
  ServerProcess s({"--parallel", "2"});
  ASSERT_GT(s.port, 0);
  const std::string out = test::temp_dir("serve-node-sampling") + "/out";
  const std::string cmd = "NODE_PATH=" + modules + " node " WGRT_SOURCE_DIR
                          "/tests/server/sampling_client_test.js http://127.0.0.1:" + std::to_string(s.port) + " " +
                          kKey + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(out);
  EXPECT_EQ(rc, 0) << log << "\nserver:\n" << slurp(s.err_path);
  EXPECT_NE(log.find("all ok"), std::string::npos) << log;
  EXPECT_EQ(s.stop(), 0) << slurp(s.err_path);
}

// The library's greedy decode of the same tokens, streamed through the same UTF-8 decoder.
struct Greedy {
  std::string text;
  size_t n_tokens = 0;
};
Greedy library_greedy(const std::string& prompt, int n) {
  model::BuildOptions o;
  o.n_ctx = 1024;
  llm::Session s = llm::open_session(test::device(), model_path(), o);
  std::vector<int32_t> ids = tokenizer::tokenize(s.tok, prompt, true, true);
  llm::eval(s, ids);
  tokenizer::StreamDecoder d = tokenizer::make_stream_decoder(s.tok, false);
  Greedy out;
  for (int i = 0; i < n; ++i) {
    const int32_t id = llm::read_argmax(s);
    if (llm::is_end_token(s, id)) break;
    out.text += tokenizer::decode_next(d, id);
    ++out.n_tokens;
    if (i + 1 < n) llm::eval(s, std::span<const int32_t>(&id, 1));
  }
  out.text += tokenizer::decode_flush(d);
  return out;
}

TEST(ServeE2E, GreedyIsTheLibrarysGreedyWithAndWithoutThePromptCache) {
  ServerProcess s;
  ASSERT_GT(s.port, 0);
  httplib::Client c = s.client();
  const Greedy want = library_greedy("The quick brown fox", 20);
  ASSERT_GE(want.n_tokens, 10u) << "the reference stopped early: " << want.text;
  for (int round = 0; round < 2; ++round) {  // the second reuses the first's cache: same text
    auto r = c.Post("/v1/completions", R"({"prompt": "The quick brown fox", "max_tokens": 20, "temperature": 0})",
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["text"], want.text) << r->body;
    EXPECT_EQ(j["usage"]["completion_tokens"], want.n_tokens) << r->body;
    EXPECT_EQ(j["usage"]["prompt_tokens"], 1 + 19) << "BOS and one token per byte";
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], round == 0 ? 0 : 19) << r->body;
  }
  // /tokenize and /detokenize agree with the byte-level vocabulary.
  auto t = c.Post("/tokenize", R"({"content": "Hi!", "add_special": false})", "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(json::parse(t->body)["tokens"], json::array({'H', 'i', '!'}));
  auto d = c.Post("/detokenize", R"({"tokens": [72, 105, 33]})", "application/json");
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["content"], "Hi!");
}

// Continuous batching: four clients at once, their prompts of different lengths joining at
// different steps, share each step; each gets the text its prompt gets alone.
TEST(ServeE2E, ConcurrentGreedyRequestsEachGetTheirOwnText) {
  ServerProcess s;
  ASSERT_GT(s.port, 0);
  const std::vector<std::string> prompts = {"The quick brown fox", "Once upon a time, far away",
                                            "A", "Stop and think about it, then say"};
  std::vector<Greedy> want;
  for (const std::string& p : prompts) want.push_back(library_greedy(p, 16));
  std::vector<std::string> got(prompts.size()), errors(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = s.client();
      json body = {{"prompt", prompts[i]}, {"max_tokens", 16}, {"temperature", 0}};
      auto r = c.Post("/v1/completions", body.dump(), "application/json");
      if (!r || r->status != 200) {
        errors[i] = r ? r->body : "no response";
        return;
      }
      got[i] = json::parse(r->body)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "client " << i;
    EXPECT_EQ(got[i], want[i].text) << "client " << i << ": " << prompts[i];
  }
}

// Pipelined decode (worker.h): greedy slots step on the GPU's own picks, read a step late. Five
// clients on four slots, ending at different steps (max_tokens, a stop string), the fifth joining
// when a slot frees: each gets the library's greedy text, cut where the unpipelined server cuts
// it, and the server ran fed steps.
TEST(ServeE2E, PipelinedDecodeEndsEachRequestWhereTheLibraryDoes) {
  ServerProcess s;
  ASSERT_GT(s.port, 0);
  const std::vector<std::string> prompts = {"The quick brown fox", "Once upon a time, far away", "A",
                                            "Stop and think about it, then say", "Late again"};
  const std::vector<int> max_tokens = {3, 24, 9, 20, 12};
  std::vector<std::string> want, stop(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) want.push_back(library_greedy(prompts[i], max_tokens[i]).text);
  // Client 3 stops at a string its text holds, two printable ASCII characters past its start
  // (cut there, the string left out).
  auto letter = [](char ch) { return ch > ' ' && ch < 0x7f; };
  for (size_t k = 4; k + 1 < want[3].size() && stop[3].empty(); ++k)
    if (letter(want[3][k]) && letter(want[3][k + 1])) stop[3] = want[3].substr(k, 2);
  ASSERT_FALSE(stop[3].empty()) << "no two printable characters in a row: " << want[3];
  want[3] = want[3].substr(0, want[3].find(stop[3]));
  std::vector<std::string> got(prompts.size()), errors(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i)
    clients.emplace_back([&, i] {
      if (i == 4) std::this_thread::sleep_for(50ms);  // queued behind the four slots' jobs
      httplib::Client c = s.client();
      json body = {{"prompt", prompts[i]}, {"max_tokens", max_tokens[i]}, {"temperature", 0}};
      if (!stop[i].empty()) body["stop"] = stop[i];
      auto r = c.Post("/v1/completions", body.dump(), "application/json");
      if (!r || r->status != 200) {
        errors[i] = r ? r->body : "no response";
        return;
      }
      got[i] = json::parse(r->body)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(errors[i], "") << "client " << i;
    EXPECT_EQ(got[i], want[i]) << "client " << i << ": " << prompts[i];
  }
  // Alone, a greedy request steps fed until it ends.
  httplib::Client c = s.client();
  auto r = c.Post("/v1/completions", R"({"prompt": "The quick brown fox", "max_tokens": 20, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], library_greedy("The quick brown fox", 20).text);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  const std::string key = "\nwgrt_decode_steps_fed_total ";
  const size_t at = m->body.find(key);
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GE(std::stod(m->body.substr(at + key.size())), 15.0) << m->body;
}

TEST(ServeE2E, MalformedRequestsGet4xxAndTheServerStaysUp) {
  ServerProcess s({"--max-body", "65536"});
  ASSERT_GT(s.port, 0);
  httplib::Client c = s.client();
  const char* chat = "/v1/chat/completions";
  struct Case {
    const char* what;
    const char* path;
    std::string body;
    int status;
    const char* code;
  };
  const std::string long_prompt(3000, 'a');  // 3001 tokens, past the context of 1024
  const std::vector<Case> cases = {
      {"bad JSON", chat, "{\"messages\": [", 400, "invalid_json"},
      {"not an object", chat, "[]", 400, "invalid_json"},
      {"messages a string", chat, R"({"messages": "hi"})", 400, "invalid_type"},
      {"temperature a string", chat, R"({"messages": [{"role": "user", "content": "x"}], "temperature": "0"})", 400,
       "invalid_type"},
      {"max_tokens negative", "/v1/completions", R"({"prompt": "x", "max_tokens": -5})", 400, "invalid_value"},
      {"unknown field", "/v1/completions", R"({"prompt": "x", "mirostat": 2})", 400, "unknown_parameter"},
      {"logit_bias past the vocabulary", chat,
       R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"99999": 10}})", 400, "invalid_value"},
      {"predicted outputs", chat,
       R"({"messages": [{"role": "user", "content": "x"}], "prediction": {"type": "content", "content": "x"}})", 400,
       "unsupported_parameter"},
      {"a schema keyword wgrt does not constrain", chat,
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
          "json_schema": {"name": "s", "schema": {"type": "string", "pattern": "a+"}}}})", 400, "invalid_value"},
      {"unknown model id", "/v1/models/gpt-4", "", 404, "model_not_found"},
      {"over-long prompt", "/v1/completions", json{{"prompt", long_prompt}}.dump(), 400, "context_length_exceeded"},
      {"huge body", "/v1/completions", json{{"prompt", std::string(100000, 'b')}}.dump(), 413, ""},
      {"detokenize out of range", "/detokenize", R"({"tokens": [99999]})", 400, "invalid_value"},
      {"embeddings of nothing", "/v1/embeddings", R"({"input": ""})", 400, "invalid_value"},
      {"embedding dimensions without Matryoshka metadata", "/v1/embeddings", R"({"input": "x", "dimensions": 8})", 400,
       "invalid_value"},
      {"unknown path", "/v1/audio/speech", R"({"input": "x"})", 404, "not_found"},
  };
  for (const Case& k : cases) {
    auto r = k.body.empty() ? c.Get(k.path) : c.Post(k.path, k.body, "application/json");
    if (*k.code)
      expect_error(r, k.status, k.code, k.what);
    else {
      ASSERT_TRUE(r) << k.what;
      EXPECT_EQ(r->status, k.status) << k.what;
      EXPECT_TRUE(json::parse(r->body, nullptr, false).contains("error")) << k.what << ": " << r->body;
    }
    EXPECT_TRUE(healthy(s)) << "after " << k.what;
  }
  // The over-long prompt's message names both sizes.
  auto r = c.Post("/v1/completions", json{{"prompt", long_prompt}}.dump(), "application/json");
  ASSERT_TRUE(r);
  const std::string msg = json::parse(r->body)["error"]["message"];
  EXPECT_NE(msg.find("3001 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1024"), std::string::npos) << msg;
  // No key, a wrong key: 401; /health needs none.
  httplib::Client anon("127.0.0.1", s.port);
  expect_error(anon.Post("/v1/completions", R"({"prompt": "x"})", "application/json"), 401, "invalid_api_key", "no key");
  httplib::Client wrong("127.0.0.1", s.port);
  wrong.set_bearer_token_auth("wrong");
  expect_error(wrong.Get("/metrics"), 401, "invalid_api_key", "wrong key");
  // Still serving, streamed too.
  auto ok = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2, "stream": true})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_TRUE(ok->body.ends_with("data: [DONE]\n\n")) << ok->body;
}

// --alias names the model; any name in a request is served; /v1/models/{id} answers for the
// alias and the file name; /props tells the settings; /slots shows a request as it generates.
TEST(ServeE2E, AliasPropsAndSlots) {
  ServerProcess s({"--alias", "gpt-4o-mini", "--parallel", "2"});
  ASSERT_GT(s.port, 0);
  httplib::Client c = s.client();
  auto get_json = [&](const std::string& path, int status = 200) {
    auto r = c.Get(path);
    EXPECT_TRUE(r) << path;
    if (!r) return json();
    EXPECT_EQ(r->status, status) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  };
  EXPECT_EQ(get_json("/v1/models")["data"][0]["id"], "gpt-4o-mini");
  EXPECT_EQ(get_json("/v1/models/gpt-4o-mini")["id"], "gpt-4o-mini");
  EXPECT_EQ(get_json("/v1/models/tiny-chat.gguf")["id"], "gpt-4o-mini") << "the file name is an id too";
  EXPECT_EQ(get_json("/v1/models/tiny%2Dchat.gguf")["object"], "model") << "percent-encoded";
  EXPECT_EQ(get_json("/v1/models/llama-3", 404)["error"]["code"], "model_not_found");

  // Any model name: the served one answers, and the response names it.
  auto r = c.Post("/v1/completions", R"({"model": "gpt-4", "prompt": "The quick", "max_tokens": 4, "temperature": 0})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json plain = json::parse(r->body);
  EXPECT_EQ(plain["model"], "gpt-4o-mini");
  // echo: the prompt, then the same generated text.
  r = c.Post("/v1/completions", R"({"prompt": "The quick", "max_tokens": 4, "temperature": 0, "echo": true})",
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "The quick" + plain["choices"][0]["text"].get<std::string>());

  const json props = get_json("/props");
  EXPECT_EQ(props["total_slots"], 2);
  EXPECT_EQ(props["model_alias"], "gpt-4o-mini");
  EXPECT_EQ(props["model_path"], model_path());
  EXPECT_EQ(props["n_ctx"], 1024);
  EXPECT_EQ(props["default_generation_settings"]["n_ctx"], 1024);
  EXPECT_EQ(props["default_generation_settings"]["params"]["temperature"], 1.0);
  EXPECT_EQ(props["default_generation_settings"]["params"]["top_k"], 40);
  EXPECT_EQ(props["chat_template"], test::kTemplate);
  EXPECT_TRUE(props["build_info"].get<std::string>().starts_with("wgrt ")) << props.dump();

  json slots = get_json("/slots");
  ASSERT_EQ(slots.size(), 2u) << slots.dump();
  for (const json& sl : slots) EXPECT_FALSE(sl["is_processing"]) << slots.dump();
  // A long stream on a raw connection: while it generates, /slots shows it under its id.
  const int fd = test::connect_to(s.port);
  ASSERT_GE(fd, 0);
  const std::string long_stream = R"({"prompt": "x", "max_tokens": 1000, "temperature": 1, "seed": 3, "stream": true})";
  ASSERT_TRUE(test::send_bytes(fd, test::post("/v1/completions", long_stream)));
  test::RawReader rd{fd};
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  auto events = [&] {
    size_t n = 0;
    for (size_t at = rd.buf.find("data: "); at != std::string::npos; at = rd.buf.find("data: ", at + 1)) ++n;
    return n;
  };
  while (events() < 3 && rd.fill(deadline)) {
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(rd.buf, m, std::regex(R"re("id":"(cmpl-[0-9a-f]+)")re"))) << rd.buf;
  const std::string id = m[1];
  slots = get_json("/slots");
  const json* busy = nullptr;
  for (const json& sl : slots)
    if (sl["is_processing"]) busy = &sl;
  ASSERT_TRUE(busy) << slots.dump();
  EXPECT_EQ((*busy)["request_id"], id);
  EXPECT_EQ((*busy)["n_prompt_tokens"], 2) << "BOS and 'x'";
  EXPECT_GE((*busy)["n_decoded"].get<int>(), 1) << slots.dump();
  // The prompt, then the generated tokens as the steps feed them (the latest waits for the next
  // step; the two counts are read a moment apart).
  EXPECT_GE((*busy)["n_cached"].get<int>(), 2) << slots.dump();
  EXPECT_LE((*busy)["n_cached"].get<int>(), 2 + (*busy)["n_decoded"].get<int>()) << slots.dump();
  EXPECT_EQ((*busy)["n_ctx"], 1024);
  ::close(fd);  // the client goes: the slot is freed
  bool idle = false;
  for (int i = 0; i < 200 && !idle; ++i) {
    slots = get_json("/slots");
    idle = std::none_of(slots.begin(), slots.end(), [](const json& sl) { return sl["is_processing"].get<bool>(); });
    if (!idle) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(idle) << slots.dump();
}

TEST(ServeE2E, AFullQueueAnswers503) {
  ServerProcess s({"--queue-size", "1"});
  ASSERT_GT(s.port, 0);
  // Long requests at once: one generates, one waits, the others find the queue full.
  std::vector<int> status(6, 0);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < status.size(); ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = s.client();
      auto r = c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 150, "temperature": 0})", "application/json");
      if (!r) return;
      status[i] = r->status;
      if (r->status == 503) expect_error(r, 503, "queue_full", "queue full");
    });
  for (auto& t : clients) t.join();
  const size_t ok = std::count(status.begin(), status.end(), 200), busy = std::count(status.begin(), status.end(), 503);
  EXPECT_EQ(ok + busy, status.size());
  EXPECT_GE(ok, 1u);
  EXPECT_GE(busy, 1u);
  EXPECT_TRUE(healthy(s));
}

// Whether a response is complete: valid JSON (each event, when streamed) in OpenAI's schema,
// ending with a finish_reason (and [DONE]), within its max_tokens.
std::string check_response(const httplib::Result& r, bool stream, int max_tokens) {
  if (!r) return "no response: " + httplib::to_string(r.error());
  if (r->status != 200) return "status " + std::to_string(r->status) + ": " + r->body;
  if (!stream) {
    json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return "not JSON: " + r->body;
    if (j["object"] != "text_completion" || !j["choices"][0]["text"].is_string()) return "not a completion: " + r->body;
    if (j["choices"][0]["finish_reason"] != "length" && j["choices"][0]["finish_reason"] != "stop")
      return "no finish_reason: " + r->body;
    if (j["usage"]["completion_tokens"] > max_tokens) return "over budget: " + r->body;
    return "";
  }
  if (!r->body.ends_with("data: [DONE]\n\n")) return "stream without [DONE]: " + r->body;
  std::string finish;
  size_t events = 0;
  for (size_t b = 0; b < r->body.size();) {
    const size_t e = r->body.find("\n\n", b);
    if (e == std::string::npos || r->body.compare(b, 6, "data: ") != 0) return "not an SSE event at " + std::to_string(b);
    const std::string data = r->body.substr(b + 6, e - b - 6);
    b = e + 2;
    if (data == "[DONE]") break;
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded()) return "an event is not JSON: " + data;
    ++events;
    if (j["choices"][0]["finish_reason"].is_string()) finish = j["choices"][0]["finish_reason"];
  }
  if (finish != "length" && finish != "stop") return "stream without a finish_reason: " + r->body;
  if (events < 1) return "no events";
  return "";
}

TEST(ServeE2E, LoadSixteenClientsEightRequestsEach) {
  ServerProcess s;
  ASSERT_GT(s.port, 0);
  const int kClients = 16, kRequests = 8, kMaxTokens = 4;
  std::atomic<int> done{0}, warm{0};
  std::atomic<size_t> rss_warm{0};
  std::vector<std::string> failures(kClients);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&, i] {
      httplib::Client c = s.client();
      for (int k = 0; k < kRequests; ++k) {
        const bool stream = (i + k) % 2 == 1;
        json body = {{"prompt", "Client " + std::to_string(i) + " asks " + std::to_string(k)},
                     {"max_tokens", kMaxTokens}, {"stream", stream}, {"seed", i * 100 + k}};
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        if (std::string why = check_response(r, stream, kMaxTokens); !why.empty()) {
          failures[i] += fmt::format("request {}: {}\n", k, why);
          continue;
        }
        ++done;
        // Warm-up: every client has had two requests served; memory is measured from here.
        if (k == 1 && ++warm == kClients) rss_warm = s.rss_kib();
      }
    });
  for (auto& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < kClients; ++i) EXPECT_TRUE(failures[i].empty()) << "client " << i << ":\n" << failures[i];
  EXPECT_EQ(done.load(), kClients * kRequests) << "nothing lost";
  const size_t rss_end = s.rss_kib();
  ASSERT_GT(rss_warm.load(), 0u);
  // Flat: the second half of the load adds no more than allocator noise.
  EXPECT_LE(rss_end, rss_warm.load() + rss_warm.load() / 20 + 4096)
      << "RSS grew from " << rss_warm.load() << " KiB after warm-up to " << rss_end << " KiB";
  EXPECT_LT(seconds, 60.0);
  // The server's own count agrees.
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find(fmt::format("wgrt_requests_total{{result=\"done\"}} {}\n", kClients * kRequests)),
            std::string::npos) << m->body;
  EXPECT_NE(m->body.find("wgrt_requests_queued 0\n"), std::string::npos);
  std::fprintf(stderr, "load: %d requests in %.1f s; server RSS %zu KiB after warm-up, %zu KiB at the end\n",
               kClients * kRequests, seconds, rss_warm.load(), rss_end);
}

// Hostile requests on one server (issue 40): each refused with its status before any harm, the
// framing never desynchronized, and the server answering correctly after each.
TEST(ServeE2E, HostileRequestsAreRefusedAndFramingHolds) {
  ServerProcess s({"--max-body", "65536", "--cors", "https://app.example"});
  ASSERT_GT(s.port, 0);
  using test::roundtrip;
  using test::post;
  // 30k levels of nesting in a message's content (60 KB): 400, not a crash.
  const std::string deep = R"({"messages": [{"role": "user", "content": )" + std::string(30000, '[') +
                           std::string(30000, ']') + "}]}";
  test::RawResponse r = roundtrip(s.port, post("/v1/chat/completions", deep));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("json_too_deep"), std::string::npos) << r.body;
  // A chunked body past --max-body: 413 (it used to be read whole and accepted).
  std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                        std::string(kKey) + "\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 100; ++i) chunked += "400\r\n" + std::string(1024, ' ') + "\r\n";
  r = roundtrip(s.port, chunked + "0\r\n\r\n");
  EXPECT_EQ(r.status, 413) << r.body;
  // A compressed body: 415, never inflated.
  r = roundtrip(s.port, post("/v1/completions", std::string(100, '\x1f'), "Content-Encoding: gzip\r\n"));
  EXPECT_EQ(r.status, 415) << r.body;
  // Two requests in one write: both answered, in order.
  {
    const int fd = test::connect_to(s.port);
    test::RawReader rd{fd};
    ASSERT_TRUE(test::send_bytes(fd, post("/tokenize", R"({"content": "ab", "add_special": false})") +
                                         post("/tokenize", R"({"content": "xyz", "add_special": false})")));
    const test::RawResponse a = rd.next(), b = rd.next();
    EXPECT_EQ(a.status, 200);
    if (a.status == 200) {
      EXPECT_EQ(json::parse(a.body)["tokens"], json::array({'a', 'b'}));
    }
    EXPECT_EQ(b.status, 200) << "the second pipelined request was lost";
    if (b.status == 200) {
      EXPECT_EQ(json::parse(b.body)["tokens"], json::array({'x', 'y', 'z'}));
    }
    ::close(fd);
  }
  // The unread body of a 401'd POST is never parsed as a request (it carries the key).
  {
    const std::string smuggled = test::get("/v1/models");
    const int fd = test::connect_to(s.port);
    test::RawReader rd{fd};
    ASSERT_TRUE(test::send_bytes(fd, fmt::format("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                 "Content-Length: {}\r\n\r\n{}", smuggled.size(), smuggled)));
    EXPECT_EQ(rd.next().status, 401);
    const test::RawResponse second = rd.next(std::chrono::milliseconds(3000));
    EXPECT_EQ(second.status, 0) << "the body was served as a request:\n" << second.head << second.body;
    ::close(fd);
  }
  // A GET's body is its body: the request after it is the one served next.
  {
    const std::string smuggled = "GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const int fd = test::connect_to(s.port);
    test::RawReader rd{fd};
    ASSERT_TRUE(test::send_bytes(fd, fmt::format("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}"
                                                 "\r\n\r\n{}", smuggled.size(), smuggled) + test::get("/v1/models")));
    EXPECT_EQ(rd.next().status, 200);
    const test::RawResponse models = rd.next();
    EXPECT_EQ(models.status, 200) << models.head << models.body;
    EXPECT_NE(models.body.find("tiny-chat.gguf"), std::string::npos) << models.body;
    ::close(fd);
  }
  // A page of another origin, a rebinding Host: 403.
  r = roundtrip(s.port, post("/v1/completions", R"({"prompt": "x"})", "Origin: https://evil.example\r\n"));
  EXPECT_EQ(r.status, 403) << r.body;
  r = roundtrip(s.port, "GET /v1/models HTTP/1.1\r\nHost: evil.example:80\r\nAuthorization: Bearer " +
                           std::string(kKey) + "\r\n\r\n");
  EXPECT_EQ(r.status, 403) << r.body;
  // An origin --cors allows: its preflight and its requests carry Access-Control-Allow-Origin.
  r = roundtrip(s.port, "OPTIONS /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\n"
                        "Access-Control-Request-Method: POST\r\n\r\n");
  EXPECT_EQ(r.status, 204) << r.head << r.body;
  EXPECT_TRUE(r.has("Access-Control-Allow-Origin: https://app.example\r\n")) << r.head;
  r = roundtrip(s.port, post("/tokenize", R"({"content": "a"})", "Origin: https://app.example\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.has("Access-Control-Allow-Origin: https://app.example\r\n")) << r.head;
  // Special-token text in a message is text: the prompt has one token per byte of it.
  const std::string content = "<|end_of_text|><|begin_of_text|>user";
  r = roundtrip(s.port, post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", content}}}},
                                                         {"max_tokens", 1}}.dump()));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string rest = "<|start_header_id|>user<|end_header_id|>\n\n" + content +
                           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(json::parse(r.body)["usage"]["prompt_tokens"], 1 + rest.size()) << "BOS, then one token per byte";
  EXPECT_TRUE(healthy(s));
  // A second server on the same port: a clear error, no sharing.
  const std::string out = test::temp_dir("serve-port") + "/out";
  const std::string cmd = fmt::format("{} serve -m {} --port {} >{} 2>&1", WGRT_BINARY, model_path(), s.port, out);
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_NE(slurp(out).find("already in use"), std::string::npos) << slurp(out);
  EXPECT_TRUE(healthy(s));
}

// /health says "loading" until the worker has run its warm-up generation (the kernels compiled),
// as llama-server: the first request does not pay for the compilation.
TEST(ServeE2E, HealthSaysLoadingUntilWarm) {
  ServerProcess s({}, /*wait_ready=*/false);
  ASSERT_GT(s.port, 0);
  int loading = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 120s) {
    const test::RawResponse r = test::roundtrip(s.port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    if (r.status == 200) break;
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.body.find("loading"), std::string::npos) << r.body;
    ++loading;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GT(loading, 0);
  EXPECT_NE(slurp(s.err_path).find("warmed up"), std::string::npos) << "ok before the warm-up:\n" << slurp(s.err_path);
}

// A non-streamed request whose client hangs up is cancelled (it used to run to its end).
TEST(ServeE2E, ANonStreamedRequestIsCancelledWhenItsClientGoes) {
  ServerProcess s({"--parallel", "1"});
  ASSERT_GT(s.port, 0);
  const int fd = test::connect_to(s.port);
  // The random model's end token (257) is banned: the reply cannot end before the client goes.
  ASSERT_TRUE(test::send_bytes(
      fd, test::post("/v1/completions", R"({"prompt": "x", "max_tokens": 900, "logit_bias": {"257": -100}})")));
  std::this_thread::sleep_for(300ms);
  ::close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  std::string metrics;
  while (std::chrono::steady_clock::now() - t0 < 30s) {
    metrics = test::roundtrip(s.port, test::get("/metrics")).body;
    if (metrics.find("wgrt_requests_total{result=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_NE(metrics.find("wgrt_requests_total{result=\"cancelled\"} 1"), std::string::npos) << metrics;
  // The slot is free again: a live request is served.
  auto r = s.client().Post("/v1/completions", R"({"prompt": "y", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(s.stop(), 0);
}

// A device lost mid-generation (the test hook destroys it after a few steps): the request in
// flight gets 503 "device_lost", /health and every later request 503 with the reason, within
// seconds (no hang), and the process stays up until SIGTERM, which still stops it cleanly.
TEST(ServeE2E, ALostDeviceAnswers503AndTheServerKeepsRunning) {
  ::setenv("WGRT_TEST_DESTROY_DEVICE_AFTER", "4", 1);  // the prompt step, then 3 tokens
  ServerProcess s;
  ::unsetenv("WGRT_TEST_DESTROY_DEVICE_AFTER");
  ASSERT_GT(s.port, 0);
  httplib::Client c = s.client();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.Post("/v1/completions", R"({"prompt": "The quick brown fox", "max_tokens": 50, "temperature": 0})",
                  "application/json");
  expect_error(r, 503, "device_lost", "the request in flight");
  if (r) {
    EXPECT_NE(r->body.find("destroyed"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("restart"), std::string::npos) << r->body;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s) << "the lost device was not reported promptly";

  httplib::Client anon("127.0.0.1", s.port);
  auto h = anon.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  json hj = json::parse(h->body, nullptr, false);
  EXPECT_EQ(hj["status"], "device_lost") << h->body;
  EXPECT_NE(hj["error"].get<std::string>().find("destroyed"), std::string::npos) << h->body;
  // Later requests, streamed or not, and the other paths: 503 at once.
  expect_error(c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 5})", "application/json"), 503,
               "device_lost", "a later completion");
  expect_error(c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})",
                      "application/json"),
               503, "device_lost", "a later stream");
  expect_error(c.Get("/v1/models"), 503, "device_lost", "models");
  int status = 0;
  EXPECT_EQ(waitpid(s.pid, &status, WNOHANG), 0) << "wgrt serve exited:\n" << slurp(s.err_path);
  EXPECT_NE(slurp(s.err_path).find("answering 503"), std::string::npos) << slurp(s.err_path);
  EXPECT_EQ(s.stop(), 0);
}

// The same in-process: a job the worker fails with the lost device's error, while the handlers
// answer 503 device_lost.
// The HTTP layer in-process on a free loopback port, without a model or a worker (key "k").
struct InProcessServer {
  server::ServerState st;
  std::unique_ptr<server::HttpServer> svr;
  int port = -1;
  std::thread t;
  explicit InProcessServer(server::HttpOptions o = {}) {
    st.api_key = "k";
    server::init_scheduler(st.sched, 1, 4);
    o.access.allowed_hosts = server::default_allowed_hosts("127.0.0.1");
    svr = std::make_unique<server::HttpServer>(st, o);
    port = svr->bind("127.0.0.1", 0);
    t = std::thread([this] { svr->run(); });
  }
  ~InProcessServer() {
    svr->stop();
    if (t.joinable()) t.join();
  }
};

TEST(ServeHttp, DeviceLostPhaseAnswers503WithTheReason) {
  InProcessServer srv;
  server::ServerState& st = srv.st;
  st.lost_error = "the WebGPU device on 'x' was destroyed: test";
  st.phase = server::Phase::DeviceLost;
  const int port = srv.port;
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth("k");
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body), json({{"status", "device_lost"}, {"error", st.lost_error}}));
  auto r = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  expect_error(r, 503, "device_lost", "completion");
  if (r) {
    EXPECT_NE(r->body.find("was destroyed: test"), std::string::npos) << r->body;
  }
  httplib::Client anon("127.0.0.1", port);
  expect_error(anon.Get("/v1/models"), 401, "invalid_api_key", "the key is still checked");
}

TEST(ServeHttp, LoadingAnswers503AndTheKeyIsChecked) {
  InProcessServer srv;  // phase Loading: no model, no worker
  server::ServerState& st = srv.st;
  const int port = srv.port;
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth("k");
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body), json({{"status", "loading"}}));
  expect_error(c.Post("/v1/chat/completions", "{}", "application/json"), 503, "loading", "while loading");
  httplib::Client anon("127.0.0.1", port);
  EXPECT_EQ(anon.Get("/health")->status, 503) << "/health needs no key";
  expect_error(anon.Get("/v1/models"), 401, "invalid_api_key", "no key while loading");
  st.load_error = "no such file";
  st.phase = server::Phase::Failed;
  auto f = c.Get("/health");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 500);
  EXPECT_EQ(json::parse(f->body)["error"], "no such file");
}

}  // namespace
}  // namespace wgrt
