// Responses and SSE chunks against OpenAI's schema (field names, objects, where null goes), the
// Prometheus text, and the queue's rules (FIFO, a full queue refuses, one sequence at a time).
#include <gtest/gtest.h>

#include <limits>
#include <thread>

#include "server/http.h"
#include "server/response.h"
#include "server/scheduler.h"

namespace wgrt::server {
namespace {

using nlohmann::ordered_json;

const ResponseHead kChat{"chatcmpl-1", 1700000000, "tiny.gguf", true};
const ResponseHead kText{"cmpl-1", 1700000000, "tiny.gguf", false};

// The JSON of one `data: ...\n\n` event.
ordered_json event_json(const std::string& ev) {
  EXPECT_TRUE(ev.starts_with("data: ")) << ev;
  EXPECT_TRUE(ev.ends_with("\n\n")) << ev;
  EXPECT_EQ(ev.find('\n'), ev.size() - 2) << "an event is one line: " << ev;
  return ordered_json::parse(ev.substr(6, ev.size() - 8));
}

TEST(Response, ChatCompletion) {
  const ordered_json j = completion_json(kChat, "Hello!", "stop", {12, 3});
  const ordered_json want = ordered_json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "tiny.gguf",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "logprobs": null,
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
    "prompt_tokens_details": {"cached_tokens": 0}}})");
  EXPECT_EQ(j, want) << j.dump(2);
}

TEST(Response, TextCompletion) {
  const ordered_json j = completion_json(kText, " upon a time", "length", {2, 4});
  const ordered_json want = ordered_json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "tiny.gguf",
    "choices": [{"index": 0, "text": " upon a time", "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6,
    "prompt_tokens_details": {"cached_tokens": 0}}})");
  EXPECT_EQ(j, want) << j.dump(2);
}

// Log-probabilities in both of OpenAI's shapes; -inf becomes -9999 (JSON has no infinity); a
// token holding part of a UTF-8 character keeps its bytes and is named "bytes:\xNN...".
TEST(Response, LogprobsShapes) {
  const std::vector<TokenLogprobs> lp = {{"Hi", -0.25f, {{"Hi", -0.25f}, {"Yo", -1.5f}}},
                                         {"\xe2\x82", -std::numeric_limits<float>::infinity(), {}}};
  const ordered_json chat = logprobs_json(true, lp);
  const ordered_json want_chat = ordered_json::parse(R"({"content": [
      {"token": "Hi", "logprob": -0.25, "bytes": [72, 105],
       "top_logprobs": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]},
                        {"token": "Yo", "logprob": -1.5, "bytes": [89, 111]}]},
      {"token": "bytes:\\xe2\\x82", "logprob": -9999.0, "bytes": [226, 130], "top_logprobs": []}],
    "refusal": null})");
  EXPECT_EQ(chat["content"][0], want_chat["content"][0]) << chat.dump(2);
  EXPECT_EQ(chat["content"][1], want_chat["content"][1]) << chat.dump(2);
  EXPECT_TRUE(chat["refusal"].is_null());
  const ordered_json text = logprobs_json(false, {lp[0], {"!", -2.0f, {{"!", -2.0f}}}}, 5);
  const ordered_json want_text = ordered_json::parse(R"({"tokens": ["Hi", "!"], "token_logprobs": [-0.25, -2.0],
      "top_logprobs": [{"Hi": -0.25, "Yo": -1.5}, {"!": -2.0}], "text_offset": [5, 7]})");
  EXPECT_EQ(text, want_text) << text.dump(2);
}

// n > 1: one choice per index, each with its own text, finish and logprobs.
TEST(Response, SeveralChoices) {
  const std::vector<Choice> choices = {{"A", "stop", {}, nullptr}, {"B", "length", {}, ordered_json::object()}};
  const ordered_json j = completion_json(kText, choices, {4, 6});
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0], ordered_json::parse(R"({"index": 0, "text": "A", "logprobs": null, "finish_reason": "stop"})"));
  EXPECT_EQ(j["choices"][1], ordered_json::parse(R"({"index": 1, "text": "B", "logprobs": {}, "finish_reason": "length"})"));
  EXPECT_EQ(j["usage"]["total_tokens"], 10);
  // Streamed: each choice's chunks carry its index; usage and [DONE] once, after the last.
  StreamState a{.head = kChat, .include_usage = true, .choice = 0}, b{.head = kChat, .include_usage = true, .choice = 1};
  const std::string t = stream_text_events(b, "x", {{"x", -1.0f, {}}}, true);
  const ordered_json tj = event_json(t);
  EXPECT_EQ(tj["choices"][0]["index"], 1);
  EXPECT_EQ(tj["choices"][0]["logprobs"]["content"][0]["token"], "x");
  const std::string end_a = stream_end_events(a, "eos", {3, 1}, /*last=*/false);
  EXPECT_EQ(end_a.find("[DONE]"), std::string::npos) << end_a;
  EXPECT_EQ(end_a.find("\"usage\":{"), std::string::npos) << end_a;
  const std::string end_b = stream_end_events(b, "length", {3, 2}, /*last=*/true);
  EXPECT_NE(end_b.find("\"index\":1"), std::string::npos) << end_b;
  EXPECT_NE(end_b.find("\"total_tokens\":5"), std::string::npos) << end_b;
  EXPECT_TRUE(end_b.ends_with("data: [DONE]\n\n"));
}

struct ChunkCase {
  const char* name;
  bool chat;
  const char* text;
  const char* finish;
  bool first, include_usage;
  const char* want;  // the event's JSON
};

const ChunkCase kChunks[] = {
    {"chat_first", true, "", "", true, false,
     R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                      "finish_reason": null}]})"},
    {"chat_text", true, "Hel", "", false, false,
     R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "delta": {"content": "Hel"}, "logprobs": null, "finish_reason": null}]})"},
    {"chat_last", true, "", "stop", false, false,
     R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]})"},
    {"chat_text_usage_null", true, "lo", "", false, true,
     R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "delta": {"content": "lo"}, "logprobs": null, "finish_reason": null}],
         "usage": null})"},
    {"text_newline", false, "a\nb\"c", "", false, false,
     R"({"id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "text": "a\nb\"c", "logprobs": null, "finish_reason": null}]})"},
    {"text_last", false, "", "length", false, true,
     R"({"id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "tiny.gguf",
         "choices": [{"index": 0, "text": "", "logprobs": null, "finish_reason": "length"}], "usage": null})"},
};

class Chunk : public testing::TestWithParam<ChunkCase> {};

TEST_P(Chunk, AsOpenAISendsIt) {
  const ChunkCase& c = GetParam();
  const std::string ev = sse_event(chunk_json(c.chat ? kChat : kText, c.text, c.finish, c.first, c.include_usage));
  EXPECT_EQ(event_json(ev), ordered_json::parse(c.want)) << ev;
}

INSTANTIATE_TEST_SUITE_P(Table, Chunk, testing::ValuesIn(kChunks),
                         [](const testing::TestParamInfo<ChunkCase>& i) { return std::string(i.param.name); });

TEST(Response, UsageChunkAndDone) {
  const ordered_json j = event_json(sse_event(usage_chunk_json(kChat, {5, 7})));
  EXPECT_EQ(j, ordered_json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
    "model": "tiny.gguf", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
    "prompt_tokens_details": {"cached_tokens": 0}}})"));
  // Tokens from the prompt cache, and turns the context shift left out (only then).
  const Usage u{.prompt_tokens = 5, .completion_tokens = 7, .cached_tokens = 4, .dropped_messages = 2,
                .dropped_tokens = 40};
  EXPECT_EQ(usage_json(u), ordered_json::parse(R"({"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
    "prompt_tokens_details": {"cached_tokens": 4},
    "context_shift": {"dropped_messages": 2, "dropped_tokens": 40, "discarded_tokens": 0}})"));
  const Usage shifted{.prompt_tokens = 5, .completion_tokens = 700, .discarded_tokens = 300};
  EXPECT_EQ(usage_json(shifted)["context_shift"],
            ordered_json::parse(R"({"dropped_messages": 0, "dropped_tokens": 0, "discarded_tokens": 300})"));
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Response, InvalidUtf8BecomesReplacementNotAnException) {
  const std::string ev = sse_event(chunk_json(kText, "a\xFF" "b", "", false, false));
  EXPECT_EQ(event_json(ev)["choices"][0]["text"], "a\xEF\xBF\xBD" "b");
}

TEST(Response, FinishReasons) {
  EXPECT_STREQ(finish_reason("eos"), "stop");
  EXPECT_STREQ(finish_reason("stop string"), "stop");
  EXPECT_STREQ(finish_reason("length"), "length");
  EXPECT_STREQ(finish_reason("context"), "length");
}

TEST(Response, IdsAreUniqueAndPrefixed) {
  const ResponseHead a = make_head(true, "m", 1), b = make_head(true, "m", 2), c = make_head(false, "m", 3);
  EXPECT_TRUE(a.id.starts_with("chatcmpl-"));
  EXPECT_TRUE(c.id.starts_with("cmpl-"));
  EXPECT_NE(a.id, b.id);
  EXPECT_GT(a.created, 1700000000);
}

TEST(Response, ChatCompletionWithToolCalls) {
  // The reply as a Qwen model writes it, parsed and built as the server does.
  const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const ParsedReply p = parse_tool_calls(ToolFormat::Hermes, reply, call_id_base(kChat));
  const ordered_json j = completion_json(kChat, p.content, "tool_calls", {12, 20}, p.calls);
  const ordered_json want = ordered_json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "tiny.gguf",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
                   {"id": "call_1_0", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                 "logprobs": null, "finish_reason": "tool_calls"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32,
    "prompt_tokens_details": {"cached_tokens": 0}}})");
  EXPECT_EQ(j, want) << j.dump(2);
  // Text left beside the calls stays the content.
  const ordered_json k = completion_json(kChat, "Checking.", "tool_calls", {1, 1}, p.calls);
  EXPECT_EQ(k["choices"][0]["message"]["content"], "Checking.");
}

// Every `data: ...` event of a stretch of stream, as JSON ([DONE] as the string "[DONE]").
std::vector<ordered_json> events_of(const std::string& s) {
  std::vector<ordered_json> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t end = s.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << s;
    if (end == std::string::npos) break;
    const std::string ev = s.substr(pos, end + 2 - pos);
    out.push_back(ev == sse_done() ? ordered_json("[DONE]") : event_json(ev));
    pos = end + 2;
  }
  return out;
}

TEST(Response, StreamedToolCallsAreDeltasAtTheEnd) {
  StreamState st{.head = kChat, .include_usage = true, .tools = {.format = ToolFormat::Hermes}};
  std::string out;
  for (const char* piece : {"Let me", " check.\n<tool", "_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>",
                            "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"})
    out += stream_text_events(st, piece);
  out += stream_end_events(st, "eos", {3, 9});
  const std::vector<ordered_json> ev = events_of(out);
  ASSERT_EQ(ev.size(), 7u) << out;
  EXPECT_EQ(ev[0]["choices"][0]["delta"], ordered_json::parse(R"({"content": "Let me"})"));
  EXPECT_EQ(ev[1]["choices"][0]["delta"], ordered_json::parse(R"({"content": " check.\n"})"));
  EXPECT_EQ(ev[2]["choices"][0]["delta"], ordered_json::parse(R"({"tool_calls": [{"index": 0, "id": "call_1_0",
      "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]})"));
  EXPECT_EQ(ev[3]["choices"][0]["delta"], ordered_json::parse(R"({"tool_calls": [{"index": 1, "id": "call_1_1",
      "type": "function", "function": {"name": "g", "arguments": "{}"}}]})"));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    EXPECT_TRUE(ev[i]["choices"][0]["finish_reason"].is_null());
    EXPECT_TRUE(ev[i]["usage"].is_null());
  }
  EXPECT_EQ(ev[4]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(ev[5]["usage"]["completion_tokens"], 9);
  EXPECT_EQ(ev[6], "[DONE]");
}

TEST(Response, StreamedTextThatIsNotACallIsFlushedAtTheEnd) {
  StreamState st{.head = kChat, .include_usage = false, .tools = {.format = ToolFormat::Hermes}};
  std::string out = stream_text_events(st, "a <tool_call>{broken");
  out += stream_end_events(st, "length", {1, 2});
  const std::vector<ordered_json> ev = events_of(out);
  ASSERT_EQ(ev.size(), 4u) << out;
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["content"], "a ");
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["content"], "<tool_call>{broken");
  EXPECT_EQ(ev[2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ev[3], "[DONE]");
}

TEST(Response, Models) {
  const ordered_json j = models_json("tiny.gguf", 1700000000, 512);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tiny.gguf");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["owned_by"], "wgrt");
}

TEST(Metrics, PrometheusText) {
  Metrics m;
  m.prompt_tokens = 100;
  m.generated_tokens = 50;
  m.prefill_us = 2'000'000;
  m.decode_us = 5'000'000;
  m.requests_done = 3;
  m.requests_rejected = 1;
  const std::string t = metrics_text(m, {2, 1}, 4);
  for (const char* line : {"wgrt_prompt_tokens_total 100\n", "wgrt_generated_tokens_total 50\n",
                           "wgrt_prompt_tokens_per_second 50\n", "wgrt_generated_tokens_per_second 10\n",
                           "wgrt_requests_running 1\n", "wgrt_requests_queued 2\n", "wgrt_slots 4\n",
                           "# TYPE wgrt_generated_tokens_total counter\n", "# TYPE wgrt_requests_queued gauge\n",
                           "wgrt_requests_total{result=\"done\"} 3\n", "wgrt_requests_total{result=\"rejected\"} 1\n"})
    EXPECT_NE(t.find(line), std::string::npos) << line << "\nin:\n" << t;
}

std::shared_ptr<Job> job(const std::string& prompt) {
  auto j = std::make_shared<Job>();
  j->req.prompt = prompt;
  return j;
}

TEST(Scheduler, FifoIntoFreeSlotsAndAFullQueueRefuses) {
  Scheduler s;
  init_scheduler(s, 2, 3);
  auto a = job("a"), b = job("b"), c = job("c"), d = job("d"), e = job("e"), f = job("f");
  // The free slots take two at once; three more may wait.
  for (const auto& j : {a, b, c, d, e}) EXPECT_TRUE(submit(s, j));
  EXPECT_FALSE(submit(s, f)) << "2 free slots + a queue of 3";
  EXPECT_EQ(queue_counts(s).queued, 5u);

  // Every slot generates: the first jobs in arrival order take the free slots.
  std::vector<size_t> busy = fill_slots(s, std::chrono::milliseconds(0));
  ASSERT_EQ(busy, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(s.slots[0], a);
  EXPECT_EQ(s.slots[1], b);
  EXPECT_EQ(queue_counts(s).running, 2u);
  EXPECT_EQ(queue_counts(s).queued, 3u);
  EXPECT_FALSE(submit(s, f)) << "no free slot, the queue holds 3";
  busy = fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(busy.size(), 2u);
  EXPECT_EQ(s.slots[0], a) << "a busy slot keeps its job";
  EXPECT_EQ(s.slots[1], b);
  free_slot(s, 1);
  busy = fill_slots(s, std::chrono::milliseconds(0));
  ASSERT_EQ(busy.size(), 2u);
  EXPECT_EQ(s.slots[1], c) << "the oldest queued job takes the freed slot";
  free_slot(s, 0);
  free_slot(s, 1);
  busy = fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(s.slots[0], d);
  EXPECT_EQ(s.slots[1], e);
  EXPECT_EQ(queue_counts(s).queued, 0u);
}

// --queue-size 0: no waiting beyond the slots, yet a free slot always takes a request.
TEST(Scheduler, QueueSizeZeroServesFreeSlotsAndRefusesTheRest) {
  Scheduler s;
  init_scheduler(s, 2, 0);
  auto a = job("a"), b = job("b"), c = job("c");
  EXPECT_TRUE(submit(s, a));
  EXPECT_TRUE(submit(s, b));
  EXPECT_FALSE(submit(s, c));
  fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_FALSE(submit(s, c)) << "both slots busy";
  free_slot(s, 0);
  EXPECT_TRUE(submit(s, c));
}

// A queued job whose client went away leaves the queue (ended as cancelled), freeing its place.
TEST(Scheduler, CancelledQueuedJobsLeaveTheQueue) {
  Scheduler s;
  init_scheduler(s, 1, 1);
  auto a = job("a"), b = job("b"), c = job("c");
  ASSERT_TRUE(submit(s, a));
  fill_slots(s, std::chrono::milliseconds(0));
  ASSERT_TRUE(submit(s, b));
  EXPECT_FALSE(submit(s, c)) << "the queue holds b";
  b->cancelled.store(true);
  EXPECT_TRUE(submit(s, c)) << "b left the queue";
  std::optional<Event> e = wait_event(*b, std::chrono::milliseconds(0));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->done);
  EXPECT_EQ(e->stop_reason, "cancelled");
  EXPECT_EQ(queue_counts(s).left_queue, 1u);
  free_slot(s, 0);
  fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(s.slots[0], c);
}

TEST(Scheduler, WaitsForWorkAndStopEndsQueuedJobs) {
  Scheduler s;
  init_scheduler(s, 2, 8);
  auto a = job("a");
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    submit(s, a);
  });
  std::vector<size_t> busy = fill_slots(s, std::chrono::seconds(10));  // woken by the submit
  t.join();
  ASSERT_EQ(busy.size(), 1u);
  auto b = job("b");
  ASSERT_TRUE(submit(s, b));
  stop_scheduler(s);
  std::optional<Event> e = wait_event(*b, std::chrono::milliseconds(0));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->done);
  ASSERT_TRUE(e->error);
  EXPECT_EQ(e->error->status, 503);
  EXPECT_FALSE(submit(s, job("c"))) << "a stopped scheduler takes nothing";
}

std::shared_ptr<Job> job_of(std::vector<int32_t> prompt, bool cache_prompt = true) {
  auto j = std::make_shared<Job>();
  j->prompt = std::move(prompt);
  j->req.cache_prompt = cache_prompt;
  return j;
}

TEST(Scheduler, ReusablePrefixLeavesTheLastPromptTokenToEvaluate) {
  EXPECT_EQ(reusable_prefix({1, 2, 3, 4}, {1, 2, 9}), 2u);
  EXPECT_EQ(reusable_prefix({1, 2, 3, 4}, {1, 2, 3}), 2u) << "all cached: the last is evaluated again";
  EXPECT_EQ(reusable_prefix({1, 2, 3}, {1, 2, 3, 4, 5}), 3u);
  EXPECT_EQ(reusable_prefix({}, {1, 2}), 0u);
  EXPECT_EQ(reusable_prefix({1}, {}), 0u);
  EXPECT_EQ(reusable_prefix({7, 2}, {1, 2}), 0u);
}

// A job goes to the free slot whose cache shares the longest prefix with its prompt; ties, and
// jobs that turn the cache off, go to the slot idle longest.
TEST(Scheduler, AJobTakesTheFreeSlotWithItsLongestCachedPrefix) {
  Scheduler s;
  init_scheduler(s, 3, 8);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(submit(s, job_of({100 + i})));
  fill_slots(s, std::chrono::milliseconds(0));
  // The slots end with these caches (slot 0 idle longest).
  free_slot(s, 0, {1, 2, 3, 4, 5, 6});
  free_slot(s, 1, {1, 2, 9, 9});
  free_slot(s, 2, {1, 2, 3, 7});
  auto a = job_of({1, 2, 3, 4, 8});
  ASSERT_TRUE(submit(s, a));
  fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(s.slots[0], a);
  EXPECT_EQ(a->n_reused, 4u);
  auto b = job_of({1, 2, 9, 9, 1}), off = job_of({1, 2, 3, 7, 1}, false);
  ASSERT_TRUE(submit(s, off));
  ASSERT_TRUE(submit(s, b));
  fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(off->n_reused, 0u) << "cache_prompt false reuses nothing";
  EXPECT_EQ(s.slots[1], off) << "it takes the slot idle longest (1), not the one with its prefix (2)";
  EXPECT_EQ(s.slots[2], b) << "the last free slot";
  EXPECT_EQ(b->n_reused, 2u);
  // A free slot's cache stays until a job overwrites it; a failed step's slot forgets it.
  free_slot(s, 1);
  EXPECT_TRUE(s.cached[1].empty());
  EXPECT_EQ(s.cached[0], (std::vector<int32_t>{1, 2, 3, 4, 5, 6})) << "busy slot 0's entry is left as it was";
  auto c = job_of({1, 2, 3});
  ASSERT_TRUE(submit(s, c));
  fill_slots(s, std::chrono::milliseconds(0));
  EXPECT_EQ(s.slots[1], c);
  EXPECT_EQ(c->n_reused, 0u);
  free_slot(s, 0, {5});
  free_slot(s, 1, {1, 2});
  free_slot(s, 2, {3});
  clear_caches(s);
  for (const auto& cache : s.cached) EXPECT_TRUE(cache.empty());
}

TEST(Scheduler, EventsArriveInOrder) {
  Job j;
  push_event(j, Event{"a"});
  push_event(j, Event{"b", true, "eos"});
  EXPECT_EQ(wait_event(j, std::chrono::milliseconds(0))->text, "a");
  std::optional<Event> e = wait_event(j, std::chrono::milliseconds(0));
  EXPECT_EQ(e->text, "b");
  EXPECT_TRUE(e->done);
  EXPECT_FALSE(wait_event(j, std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace wgrt::server
