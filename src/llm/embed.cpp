#include "llm/embed.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "llm/batch.h"

namespace wgrt::llm {

std::vector<int32_t> embedding_tokens(const tokenizer::Tokenizer& tok, std::string_view text) {
  return tokenizer::tokenize(tok, text, /*add_special=*/true, /*parse_special=*/true);
}

std::string embedding_refusal(const model::ModelConfig& c) {
  if (c.pooling == model::Pooling::None || c.pooling == model::Pooling::Rank)
    return fmt::format("the model's pooling type is {}, which makes no single embedding of a text (hint: a file "
                       "whose pooling_type is mean, cls or last)", model::pooling_name(c.pooling));
  return "";
}

void normalize_l2(std::span<float> v) {
  double sq = 0;
  for (float x : v) sq += double(x) * x;
  if (sq <= 0) return;
  const double inv = 1.0 / std::sqrt(sq);
  for (float& x : v) x = float(x * inv);
}

std::vector<float> pool_rows(std::span<const float> hidden, size_t rows, size_t n_embd, model::Pooling p) {
  if (rows == 0 || hidden.size() != rows * n_embd)
    throw std::invalid_argument(fmt::format("pool_rows: {} values for {} rows of {}", hidden.size(), rows, n_embd));
  switch (p) {
    case model::Pooling::Cls: return {hidden.begin(), hidden.begin() + ptrdiff_t(n_embd)};
    case model::Pooling::Last: return {hidden.end() - ptrdiff_t(n_embd), hidden.end()};
    case model::Pooling::Mean: {
      std::vector<double> sum(n_embd, 0.0);
      for (size_t r = 0; r < rows; ++r)
        for (size_t i = 0; i < n_embd; ++i) sum[i] += hidden[r * n_embd + i];
      std::vector<float> out(n_embd);
      for (size_t i = 0; i < n_embd; ++i) out[i] = float(sum[i] / double(rows));
      return out;
    }
    case model::Pooling::None:
    case model::Pooling::Rank: break;
  }
  throw std::invalid_argument(fmt::format("pool_rows: pooling {} makes no single vector", model::pooling_name(p)));
}

std::vector<float> truncate_embedding(std::span<const float> v, size_t dims) {
  if (dims == 0 || dims > v.size())
    throw std::invalid_argument(fmt::format("an embedding of {} values has no first {}", v.size(), dims));
  std::vector<float> out(v.begin(), v.begin() + ptrdiff_t(dims));
  normalize_l2(out);
  return out;
}

namespace {

// Turns the graph's hidden output on for the embedding's steps and off again after them, so
// later steps (decode) run no kernel for it, whatever throws in between.
struct HiddenOn {
  Session& s;
  explicit HiddenOn(Session& s_) : s(s_) {
    const graph::SymbolInput on{s.mg.want_hidden, 1};
    graph::update(*s.mg.graph, {}, {&on, 1});
  }
  ~HiddenOn() {
    const graph::SymbolInput off{s.mg.want_hidden, 0};
    try {
      graph::update(*s.mg.graph, {}, {&off, 1});
    } catch (const std::exception&) {
      // A symbol in its range always updates; a lost device shows at the next step instead.
    }
  }
  HiddenOn(const HiddenOn&) = delete;
  HiddenOn& operator=(const HiddenOn&) = delete;
};

}  // namespace

std::vector<float> embed(Session& s, uint32_t seq, std::span<const int32_t> tokens) {
  const model::ModelGraph& mg = s.mg;
  const model::Pooling pooling = s.model.config.pooling;
  if (const std::string why = embedding_refusal(s.model.config); !why.empty()) throw std::invalid_argument(why);
  if (tokens.empty()) throw std::invalid_argument("an embedding of no tokens (hint: a non-empty text)");
  if (tokens.size() > mg.n_ctx)
    throw std::invalid_argument(fmt::format("{} tokens pass the context of {} (hint: a shorter text, or a larger "
                                            "--ctx-size)", tokens.size(), mg.n_ctx));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= mg.n_vocab)
      throw std::invalid_argument(fmt::format("token {} at index {} is outside the vocabulary of {}", tokens[i], i,
                                              mg.n_vocab));
  const size_t d = mg.n_embd, step = s.prompt_step ? std::min(s.prompt_step, mg.max_batch) : mg.max_batch;
  graph::Graph& g = *mg.graph;
  std::vector<float> pooled(d, 0.f), rows;
  std::vector<double> sum(pooling == model::Pooling::Mean ? d : 0, 0.0);
  reset_seq(s, seq);
  {
    HiddenOn on(s);
    for (size_t first = 0; first < tokens.size(); first += step) {
      const size_t n = std::min(step, tokens.size() - first);
      const SeqPart part{seq, tokens.subspan(first, n), true};
      eval_seqs(s, {&part, 1}, Readout::Hidden);
      // The step's rows are this part's tokens, in order.
      if (pooling == model::Pooling::Mean) {
        rows.resize(n * d);
        graph::read_output(g, s.last, mg.hidden, rows.data(), rows.size() * sizeof(float));
        for (size_t r = 0; r < n; ++r)
          for (size_t i = 0; i < d; ++i) sum[i] += rows[r * d + i];
      } else if (pooling == model::Pooling::Cls && first == 0) {
        graph::read_output(g, s.last, mg.hidden, pooled.data(), d * sizeof(float));
      } else if (pooling == model::Pooling::Last && first + n == tokens.size()) {
        graph::read_output(g, s.last, mg.hidden, pooled.data(), d * sizeof(float), (n - 1) * d * sizeof(float));
      }
    }
  }
  reset_seq(s, seq);
  if (pooling == model::Pooling::Mean)
    for (size_t i = 0; i < d; ++i) pooled[i] = float(sum[i] / double(tokens.size()));
  normalize_l2(pooled);
  return pooled;
}

}  // namespace wgrt::llm
