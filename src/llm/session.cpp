#include "llm/session.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <stdexcept>

#include "llm/batch.h"
#include "model/random_model.h"
#include "ops/sampling/sampling.h"
#include "support/install_paths.h"

namespace wgrt::llm {

std::string demo_model_path() { return support::find_shipped_file(support::kDemoModelFile); }

model::ModelFile open_model_or_default(const std::string& model_path) {
  if (model_path == kRandomModel) {
    model::GgufWriter w = model::make_random_model(model::default_model_spec());
    return model::open_gguf_bytes(model::gguf_serialize(w), "<built-in default model>");
  }
  if (!model_path.empty()) return model::open_model(model_path);
  if (std::string demo = demo_model_path(); !demo.empty()) return model::open_model(demo);
  std::string tried;
  for (const std::string& c : support::shipped_file_candidates(support::kDemoModelFile))
    tried += (tried.empty() ? "" : ", ") + c;
  throw model::ModelError(fmt::format("the demo model is not beside {} (tried {}) (hint: name a model "
                                      "with -m FILE, or install wgrt with `cmake --install`, which puts "
                                      "it in share/wgrt/; -m {} runs random weights)",
                                      support::own_file(), tried.empty() ? "nothing" : tried, kRandomModel));
}

bool is_default_model(const Session& s) { return s.model.bytes != nullptr; }

namespace {

tokenizer::Tokenizer load_tokenizer(const model::ModelFile& m) {
  if (m.gguf) return tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(*m.gguf));
  if (m.tokenizer_json.empty())
    throw model::ModelError(fmt::format("{}: no tokenizer.json (hint: a Hugging Face model directory needs "
                                        "its tokenizer.json)", m.path));
  return tokenizer::build_tokenizer(tokenizer::vocab_from_tokenizer_json(m.tokenizer_json));
}

}  // namespace

Session open_session(gpu::Device& dev, const std::string& model_path, const model::BuildOptions& o) {
  Session s;
  s.dev = &dev;
  s.model = open_model_or_default(model_path);
  s.tok = load_tokenizer(s.model);
  if (uint32_t(s.tok.vocab.n_vocab()) > s.model.config.n_vocab)
    throw model::ModelError(fmt::format("{}: the tokenizer has {} tokens but the model only {} embeddings",
                                        s.model.path, s.tok.vocab.n_vocab(), s.model.config.n_vocab));
  s.mg = model::build_model(dev, s.model, o);
  if (s.mg.n_seqs > 1) s.seq_past.assign(s.mg.n_seqs, 0);
  return s;
}

std::span<const graph::TensorId> readout_tensors(const model::ModelGraph& mg, Readout r, ReadoutBuffer& buf,
                                                 bool logprobs) {
  size_t n = 0;
  if (r == Readout::All || r == Readout::Argmax) buf[n++] = mg.argmax;
  if (r == Readout::All || r == Readout::TopK || logprobs) {
    buf[n++] = mg.top_ids;
    buf[n++] = mg.top_logits;
  }
  if (r == Readout::All || r == Readout::Logits) buf[n++] = mg.logits;
  if (logprobs) buf[n++] = mg.logprob_norm;
  if (r == Readout::Hidden) buf[n++] = mg.hidden;
  return {buf.data(), n};
}

bool can_sample_on_gpu(const Session& s, const SamplerParams& p) {
  return !s.mg.all_logits && p.temperature > 0 && !needs_all_logits(p) && p.top_k >= 1 && p.top_k <= s.mg.top_k;
}

namespace {

void write_pick(Session& s, const GpuSample& g) {
  const ops::PickParams pp{g.draw, g.temperature, g.top_p, g.min_p, g.k, 0, 0, 0};
  graph::write_tensor(*s.mg.graph, s.mg.pick, &pp, sizeof pp);
}

}  // namespace

void eval(Session& s, std::span<const int32_t> tokens, const std::function<void(size_t, size_t)>& chunk_done,
          Readout readout, const GpuSample* sample, bool logprobs) {
  const model::ModelGraph& mg = s.mg;
  if (tokens.empty()) return;
  if (uint64_t(s.n_past) + tokens.size() > mg.n_ctx)
    throw std::invalid_argument(fmt::format(
        "{} tokens at position {} pass the context of {} (hint: a larger --ctx-size, or a shorter prompt)",
        tokens.size(), s.n_past, mg.n_ctx));
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || uint32_t(tokens[i]) >= mg.n_vocab)
      throw std::invalid_argument(fmt::format("token {} at index {} is outside the vocabulary of {}", tokens[i], i,
                                              mg.n_vocab));
  graph::Graph& g = *mg.graph;
  ReadoutBuffer buf, last_buf;
  const std::span<const graph::TensorId> read = readout_tensors(mg, readout, buf);
  // Log-probabilities are read with the last chunk only (the row a pick reads).
  const std::span<const graph::TensorId> read_last = readout_tensors(mg, readout, last_buf, logprobs);
  const int64_t top_k = readout == Readout::All || readout == Readout::TopK ? 1 : 0;
  if (sample && mg.all_logits) throw std::logic_error("eval: GPU sampling needs a session without all_logits");
  const size_t step = s.prompt_step ? std::min<size_t>(s.prompt_step, mg.max_batch) : mg.max_batch;
  for (size_t first = 0; first < tokens.size(); first += step) {
    const uint32_t n = uint32_t(std::min<size_t>(step, tokens.size() - first));
    const bool last = first + n == tokens.size();
    const int64_t pick = sample && last ? 1 : 0, lp = logprobs && last ? 1 : 0, adjust = s.adjust_next && last;
    graph::ShapeInput shape{mg.tokens, {n}};
    const graph::SymbolInput syms[] = {{mg.pos, int64_t(s.n_past)}, {mg.feed, 0}, {mg.want_top_k, top_k | pick | lp},
                                       {mg.want_sample, pick}, {mg.want_logprobs, lp}, {mg.adjust.enable, adjust}};
    graph::update(g, {&shape, 1}, syms);
    if (pick) write_pick(s, *sample);
    graph::write_tensor(g, mg.tokens, tokens.data() + first, n * sizeof(int32_t));
    s.last = graph::execute(g, {.read = last ? read_last : read});
    s.last_rows = mg.all_logits ? n : 1;
    s.n_past += n;
    if (chunk_done) chunk_done(first, n);
  }
  s.adjust_next = false;
}

bool can_feed(const Session& s) { return !s.mg.all_logits; }

graph::Snapshot submit_fed_step(Session& s, const GpuSample* sample) {
  const model::ModelGraph& mg = s.mg;
  if (!can_feed(s)) throw std::logic_error("submit_fed_step: the session was built with all_logits");
  if (s.n_past >= mg.n_ctx)
    throw std::invalid_argument(fmt::format("a token at position {} passes the context of {} (hint: a larger "
                                            "--ctx-size)", s.n_past, mg.n_ctx));
  graph::Graph& g = *mg.graph;
  graph::ShapeInput shape{mg.tokens, {1}};
  const int64_t pick = sample ? 1 : 0;
  const graph::SymbolInput syms[] = {{mg.pos, int64_t(s.n_past)}, {mg.feed, 1}, {mg.want_top_k, pick},
                                     {mg.want_sample, pick}, {mg.want_logprobs, 0}, {mg.adjust.enable, 0}};
  graph::update(g, {&shape, 1}, syms);
  if (sample) write_pick(s, *sample);
  s.last = graph::execute(g, {.read = {&mg.argmax, 1}});
  s.last_rows = 1;
  s.n_past += 1;
  return s.last;
}

int32_t read_argmax(Session& s, const graph::Snapshot& snap) {
  std::vector<uint32_t> ids = graph::read_output<uint32_t>(*s.mg.graph, snap, s.mg.argmax);
  return int32_t(ids.back());
}

std::vector<float> read_logits(Session& s) { return graph::read_output<float>(*s.mg.graph, s.last, s.mg.logits); }

int32_t read_argmax(Session& s) {
  return s.mg.n_seqs > 1 ? read_argmax_row(s, s.last_rows - 1) : read_argmax(s, s.last);
}

std::vector<Candidate> read_top_k(Session& s) {
  return read_top_k_row(s, s.last_rows - 1);
}

void reset(Session& s) {
  s.n_past = 0;
  std::fill(s.seq_past.begin(), s.seq_past.end(), 0);
}

}  // namespace wgrt::llm
