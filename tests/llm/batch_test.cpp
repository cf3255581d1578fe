// Several sequences on one graph (llm/batch.h): sequences started at different steps, prompts
// split across steps, decode tokens and prefill chunks mixed in one step, give each sequence
// the tokens and logits it gets when run alone on a graph of one sequence; bad steps are
// refused with nothing run.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <filesystem>
#include <unistd.h>

#include "llm/batch.h"
#include "llm/generate.h"
#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/device.h"

namespace wgrt::llm {
namespace {

using ::testing::HasSubstr;

model::BuildOptions options(uint32_t n_seqs, uint32_t n_ctx = 48) {
  model::BuildOptions o;
  o.n_ctx = n_ctx;
  // Steps of at most 8 rows take the gemv with f32 activations (gemv_int8 0) alone and batched,
  // so rows compare closely; the int8 gemm's rounding (past 8 rows) would differ with the
  // chunking. Steps of 5..8 tokens of 4 sequences still take attention's prefill route.
  o.max_batch = 8;
  o.n_seqs = n_seqs;
  o.gemv_int8 = 0;
  return o;
}

struct Picks {
  std::vector<int32_t> tokens;           // greedy picks
  std::vector<std::vector<float>> logits;  // the logits of each pick
};

std::vector<float> row_of(const std::vector<float>& logits, size_t row, size_t n_vocab) {
  return {logits.begin() + row * n_vocab, logits.begin() + (row + 1) * n_vocab};
}

// The sequence alone: the prompt in one step, then one token per step.
Picks alone(Session& s, const std::vector<int32_t>& prompt, size_t n_gen) {
  Picks r;
  reset(s);
  eval(s, prompt, {}, Readout::All);
  for (size_t i = 0; i < n_gen; ++i) {
    r.tokens.push_back(read_argmax(s));
    r.logits.push_back(read_logits(s));
    if (i + 1 < n_gen) eval(s, std::vector<int32_t>{r.tokens.back()}, {}, Readout::All);
  }
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(want[i]));
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(worst, 2e-3f * std::max(scale, 1.0f)) << what;
}

// A small qwen3moe model (2 of 6 experts a token; byte-level vocabulary), written once per process.
const std::string& moe_model_path() {
  static const std::string path = [] {
    model::RandomModelSpec spec;
    spec.arch = model::Arch::Qwen3Moe;
    spec.dim = 128, spec.ff = 256, spec.n_experts = 6, spec.n_experts_used = 2, spec.expert_ff = 128;
    spec.matrix_type = model::GgmlType::Q8_0;
    const std::string p = ::testing::TempDir() + fmt::format("wgrt-batch-moe-{}.gguf", getpid());
    model::gguf_write_file(model::make_random_model(spec), p);
    return p;
  }();
  return path;
}

// The demo model, and a mixture of experts (each row routed to its own experts in the step).
class BatchModels : public ::testing::TestWithParam<const char*> {
 protected:
  bool moe() const { return std::string(GetParam()) == "moe"; }
  std::string path() const { return moe() ? moe_model_path() : demo_model_path(); }
  uint32_t n_ctx() const { return moe() ? 128 : 48; }  // its vocabulary spells the prompts byte by byte
};

TEST_P(BatchModels, InterleavedSequencesGiveTheTokensTheyGetAlone) {
  Session one = open_session(test::device(), path(), options(1, n_ctx()));
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The old man", "Once upon a time there was a little girl who",
                           "It was a cold morning in the village, and the miller's daughter went down to the river"})
    prompts.push_back(tokenizer::tokenize(one.tok, text, /*add_special=*/true, /*parse_special=*/false));
  ASSERT_GT(prompts[2].size(), 8u) << "the longest prompt must take two steps";
  const std::vector<size_t> start = {0, 2, 3};  // the step each sequence joins
  const size_t n_gen = 8;

  std::vector<Picks> want;
  for (const auto& p : prompts) want.push_back(alone(one, p, n_gen));
  one = Session{};

  Session s = open_session(test::device(), path(), options(4, n_ctx()));
  ASSERT_EQ(n_seqs(s), 4u);
  // As `wgrt serve` steps its slots: decode tokens first, then prompt chunks within the batch.
  std::vector<Picks> got(prompts.size());
  std::vector<size_t> prefilled(prompts.size(), 0);
  std::vector<int32_t> next(prompts.size(), -1);
  size_t mixed_steps = 0;
  for (size_t step = 0; step < 40; ++step) {
    std::vector<SeqPart> parts;
    std::vector<size_t> who;
    size_t budget = s.mg.max_batch, decoding = 0;
    for (size_t q = 0; q < prompts.size(); ++q)
      if (step >= start[q] && prefilled[q] == prompts[q].size() && got[q].tokens.size() < n_gen) {
        parts.push_back({uint32_t(q), {&next[q], 1}, true});
        who.push_back(q);
        --budget;
        ++decoding;
      }
    for (size_t q = 0; q < prompts.size(); ++q)
      if (step >= start[q] && prefilled[q] < prompts[q].size() && budget > 0) {
        const size_t n = std::min(budget, prompts[q].size() - prefilled[q]);
        parts.push_back({uint32_t(q), {prompts[q].data() + prefilled[q], n}, prefilled[q] + n == prompts[q].size()});
        who.push_back(q);
        prefilled[q] += n;
        budget -= n;
      }
    if (parts.empty()) break;
    if (decoding && decoding < parts.size()) ++mixed_steps;
    eval_seqs(s, parts, Readout::All);
    const std::vector<float> logits = read_logits(s);
    size_t row = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      if (!parts[k].output) continue;
      const size_t q = who[k];
      next[q] = read_argmax_row(s, row);
      // The other per-row reads (each copies only its row): the row's top-k, and its logits for
      // a sampler that needs all of them (a repetition penalty; greedy with nothing to penalize).
      const std::vector<Candidate> top = read_top_k_row(s, row);
      ASSERT_FALSE(top.empty());
      EXPECT_EQ(top[0].id, next[q]) << "sequence " << q << " step " << step;
      Sampler all_logits = make_sampler({.temperature = 0, .repeat_penalty = 1.5f});
      EXPECT_EQ(pick_next_row(s, all_logits, row), next[q]) << "sequence " << q << " step " << step;
      got[q].tokens.push_back(next[q]);
      got[q].logits.push_back(row_of(logits, row, s.mg.n_vocab));
      ++row;
    }
  }
  EXPECT_GE(mixed_steps, 2u) << "the schedule must mix decode tokens and prompt chunks";
  for (size_t q = 0; q < prompts.size(); ++q) {
    EXPECT_EQ(got[q].tokens, want[q].tokens) << "sequence " << q;
    ASSERT_EQ(got[q].logits.size(), want[q].logits.size());
    for (size_t i = 0; i < want[q].logits.size(); ++i)
      expect_close(got[q].logits[i], want[q].logits[i], fmt::format("sequence {} pick {}", q, i));
    EXPECT_EQ(seq_pos(s, uint32_t(q)), prompts[q].size() + n_gen - 1);
  }
  EXPECT_EQ(seq_pos(s, 3), 0u) << "an idle sequence keeps its place";
  EXPECT_THROW(read_argmax_row(s, s.last_rows), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(, BatchModels, ::testing::Values("demo", "moe"),
                         [](const auto& i) { return std::string(i.param); });

// Pipelined greedy decode (submit_fed_seqs), stepped as `wgrt serve` steps its slots: a step of
// decode tokens alone is followed by steps that embed the previous step's argmax rows on the GPU,
// each submitted before those picks are read; a sequence that ends on a pick takes the token it
// had in the step in flight back out (truncate_seq), and the rest go back to host-built steps,
// where a new sequence joins. Each sequence gets the tokens it gets alone, and its cache holds
// what the unpipelined steps leave: the prompt and every pick but the last.
TEST(Batch, PipelinedDecodeGivesTheTokensOfHostSteps) {
  Session one = open_session(test::device(), demo_model_path(), options(1));
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The old man", "Once upon a", "It was cold", "A little bird"})
    prompts.push_back(tokenizer::tokenize(one.tok, text, /*add_special=*/true, /*parse_special=*/false));
  const std::vector<size_t> n_gen = {3, 11, 7, 6};  // sequence 3 joins once sequence 0 has ended
  std::vector<std::vector<int32_t>> want;
  for (size_t q = 0; q < prompts.size(); ++q) want.push_back(alone(one, prompts[q], n_gen[q]).tokens);
  one = Session{};

  Session s = open_session(test::device(), demo_model_path(), options(4));
  ASSERT_TRUE(can_feed_seqs(s));
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<int32_t> next(prompts.size(), -1);
  std::vector<bool> started(prompts.size(), false);
  auto running = [&](size_t q) { return started[q] && got[q].size() < n_gen[q]; };
  auto pick = [&](size_t q, int32_t id) {
    next[q] = id;
    got[q].push_back(id);
  };
  size_t fed_steps = 0, host_steps = 0;
  while (host_steps < 40) {
    // A host step: every running sequence's token, and one new prompt (a sequence starts).
    std::vector<SeqPart> parts;
    std::vector<uint32_t> who;
    for (size_t q = 0; q < prompts.size(); ++q)
      if (running(q)) {
        parts.push_back({uint32_t(q), {&next[q], 1}, true});
        who.push_back(uint32_t(q));
      }
    bool prompt = false;
    for (size_t q = 0; q < prompts.size(); ++q)
      if (!started[q] && (q < 3 || !running(0))) {
        started[q] = prompt = true;
        parts.push_back({uint32_t(q), prompts[q], true});
        who.push_back(uint32_t(q));
        break;
      }
    if (parts.empty()) break;
    ++host_steps;
    eval_seqs(s, parts, Readout::Argmax);
    if (prompt) {
      for (size_t r = 0; r < who.size(); ++r) pick(who[r], read_argmax_row(s, r));
      continue;
    }
    // Decode tokens alone: pipelined until a sequence ends.
    graph::Snapshot snap = s.last;
    std::vector<size_t> rows(who.size());
    for (size_t r = 0; r < rows.size(); ++r) rows[r] = r;
    while (!who.empty()) {
      bool feed = true;
      for (size_t r = 0; r < who.size(); ++r) feed = feed && rows[r] == r && seq_pos(s, who[r]) + 1 < s.mg.n_ctx;
      graph::Snapshot ahead;
      if (feed) {
        ahead = submit_fed_seqs(s, who);
        ++fed_steps;
      }
      for (size_t r = 0; r < who.size(); ++r) pick(who[r], read_argmax_row(s, snap, rows[r]));
      if (!feed) break;
      std::vector<uint32_t> going;
      std::vector<size_t> going_rows;
      for (size_t r = 0; r < who.size(); ++r) {
        if (running(who[r])) {
          going.push_back(who[r]);
          going_rows.push_back(r);
        } else {
          truncate_seq(s, who[r], seq_pos(s, who[r]) - 1);  // its last pick went into `ahead`
        }
      }
      snap = ahead;
      who = std::move(going);
      rows = std::move(going_rows);
    }
  }
  EXPECT_GE(fed_steps, 4u);
  for (size_t q = 0; q < prompts.size(); ++q) {
    EXPECT_EQ(got[q], want[q]) << "sequence " << q;
    EXPECT_EQ(seq_pos(s, uint32_t(q)), prompts[q].size() + n_gen[q] - 1) << "sequence " << q;
  }
}

// A fed step follows the previous step's readout rows: other sequences, more of them, a row
// nobody asked for, or a full context are refused with nothing run.
TEST(Batch, BadFedStepsAreRefusedWithNothingRun) {
  Session s = open_session(test::device(), kRandomModel, options(3));
  const std::vector<int32_t> a = {1, 5, 7}, b = {1, 9};
  const SeqPart first[] = {{0, a, true}, {2, b, true}};
  eval_seqs(s, first, Readout::Argmax);
  auto refused = [&](std::vector<uint32_t> seqs, const char* says) {
    try {
      submit_fed_seqs(s, seqs);
      ADD_FAILURE() << says << ": nothing thrown";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(says));
    }
    EXPECT_EQ(seq_pos(s, 0), 3u) << says;
    EXPECT_EQ(seq_pos(s, 2), 2u) << says;
  };
  refused({2, 0}, "row 0 of the previous readout is sequence 0's");
  refused({0, 2, 1}, "after a readout of 2 rows");
  refused({}, "no sequences");
  const SeqPart silent[] = {{1, b, false}};
  eval_seqs(s, silent, Readout::Argmax);
  refused({1}, "nobody's");
  const SeqPart both[] = {{0, a, true}, {2, b, true}};
  eval_seqs(s, both, Readout::Argmax);
  truncate_seq(s, 0, 0);
  const std::vector<int32_t> fill(s.mg.max_batch, 3);
  for (uint32_t pos = 0; pos < s.mg.n_ctx; pos += s.mg.max_batch) {
    const SeqPart part[] = {{0, fill, true}};
    eval_seqs(s, part, Readout::Argmax);
  }
  ASSERT_EQ(seq_pos(s, 0), s.mg.n_ctx);
  try {
    submit_fed_seqs(s, std::vector<uint32_t>{0});
    ADD_FAILURE() << "a full context: nothing thrown";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("passes sequence 0's context"));
  }
  // A prefix of the rows steps.
  const SeqPart two[] = {{2, b, true}, {1, b, true}};
  eval_seqs(s, two, Readout::Argmax);
  const graph::Snapshot prev = s.last;
  const int32_t want = read_argmax_row(s, prev, 0);
  submit_fed_seqs(s, std::vector<uint32_t>{2});
  EXPECT_EQ(seq_pos(s, 2), 2u * 3 + 1);
  EXPECT_GE(read_argmax_row(s, 0), 0);
  EXPECT_EQ(read_argmax_row(s, prev, 0), want) << "an earlier step's snapshot still reads";
}

TEST(Batch, BadStepsAreRefusedWithNothingRun) {
  Session s = open_session(test::device(), kRandomModel, options(3));
  const std::vector<int32_t> a = {1, 5, 7}, b = {1, 9};
  const SeqPart ok[] = {{0, a, true}, {2, b, true}};
  eval_seqs(s, ok, Readout::Argmax);
  ASSERT_EQ(seq_pos(s, 0), 3u);
  ASSERT_EQ(seq_pos(s, 2), 2u);
  const std::vector<int32_t> long_prompt(48, 3), over_batch(7, 3), bad_id = {int32_t(s.mg.n_vocab)};
  auto refused = [&](std::vector<SeqPart> parts, const char* says) {
    try {
      eval_seqs(s, parts, Readout::Argmax);
      ADD_FAILURE() << says << ": nothing thrown";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr(says));
    }
    EXPECT_EQ(seq_pos(s, 0), 3u) << says;
    EXPECT_EQ(seq_pos(s, 1), 0u) << says;
    EXPECT_EQ(seq_pos(s, 2), 2u) << says;
  };
  refused({{3, a, true}}, "sequence 3 of a session of 3");
  refused({{0, a, true}, {0, b, true}}, "appears twice");
  refused({{1, {}, true}}, "no tokens");
  refused({{0, long_prompt, true}}, "pass sequence 0's context of 48");
  refused({{1, over_batch, true}, {2, a, true}}, "past the batch of 8");
  refused({{1, bad_id, true}}, "outside the vocabulary");
  refused({}, "no sequences");
  // The graph still steps.
  const SeqPart again[] = {{1, b, true}};
  eval_seqs(s, again, Readout::Argmax);
  EXPECT_EQ(seq_pos(s, 1), 2u);
  EXPECT_GE(read_argmax_row(s, 0), 0);
}

// A sequence cut back to a prefix keeps that prefix's keys and values (the server's prompt
// cache): the rest of a new prompt after them gives the logits the whole prompt gets alone.
TEST(Batch, ATruncatedSequenceKeepsItsPrefix) {
  Session one = open_session(test::device(), kRandomModel, options(1));
  Session s = open_session(test::device(), kRandomModel, options(2));
  const std::vector<int32_t> a = {1, 5, 7, 11, 13, 17, 19}, b = {1, 5, 7, 11, 23, 29};
  const Picks want = alone(one, b, 1);
  const SeqPart first[] = {{1, a, true}};
  eval_seqs(s, first, Readout::All);
  truncate_seq(s, 1, 4);
  EXPECT_EQ(seq_pos(s, 1), 4u);
  const std::vector<int32_t> rest(b.begin() + 4, b.end());
  const SeqPart second[] = {{1, rest, true}};
  eval_seqs(s, second, Readout::All);
  EXPECT_EQ(seq_pos(s, 1), b.size());
  EXPECT_EQ(read_argmax_row(s, 0), want.tokens[0]);
  expect_close(row_of(read_logits(s), 0, s.mg.n_vocab), want.logits[0], "b after a's prefix");
  EXPECT_THAT([&] { truncate_seq(s, 1, 7); }, ::testing::Throws<std::invalid_argument>());
  EXPECT_EQ(seq_pos(s, 1), b.size()) << "a refused cut changes nothing";
  truncate_seq(s, 1, 0);
  EXPECT_EQ(seq_pos(s, 1), 0u);
}

}  // namespace
}  // namespace wgrt::llm
