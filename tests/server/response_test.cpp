// Responses and SSE chunks against OpenAI's schema (field names, objects, where null goes), the
// Prometheus text, and the queue's rules (FIFO, a full queue refuses, one sequence at a time).
#include <gtest/gtest.h>

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
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})");
  EXPECT_EQ(j, want) << j.dump(2);
}

TEST(Response, TextCompletion) {
  const ordered_json j = completion_json(kText, " upon a time", "length", {2, 4});
  const ordered_json want = ordered_json::parse(R"({
    "id": "cmpl-1", "object": "text_completion", "created": 1700000000, "model": "tiny.gguf",
    "choices": [{"index": 0, "text": " upon a time", "logprobs": null, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}})");
  EXPECT_EQ(j, want) << j.dump(2);
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
    "model": "tiny.gguf", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}})"));
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
