// embedding against the CPU references, bit for bit: f32 rows are copies, f16 rows exact
// conversions, and q8/q4gsw values (an f16 scale times a small integer) exact in f32, so the
// GPU's dequantized values must equal tests/reference/quant_ref's. Ids past the vocabulary
// give rows of zeros. One graph per case through n_tokens 37 -> 1 -> 1 -> 64 -> 1.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string_view>

#include "ops/embedding/embedding.h"
#include "ops/linear_q/linear_q.h"
#include "ops/sampling/sampling.h"
#include "ops/quant/quant.h"
#include "reference/quant_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/quant_weights.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::EmbeddingType;


// A table in the given type, uploaded into tensors added before build(), and the values the
// reference reads from it.
struct Table {
  TensorId table;
  std::optional<TensorId> scales;
  std::vector<uint32_t> words;   // table contents (f32 as bits, f16 pairs, q words)
  std::vector<uint32_t> scale_words;
  std::vector<float> values;     // [vocab, dim], the reference's reading
};

Table add_table(Graph& g, EmbeddingType type, uint32_t vocab, uint32_t dim, uint32_t gs) {
  Table t;
  switch (type) {
    case EmbeddingType::F32:
      t.table = add_weight(g, {.name = "table", .shape = {vocab, dim}});
      break;
    case EmbeddingType::F16:
      t.table = add_weight(g, {.name = "table", .dtype = DType::F16, .shape = {vocab, dim}});
      break;
    default: {
      uint32_t per = type == EmbeddingType::Q8 ? 4 : 8;
      t.table = add_weight(g, {.name = "table", .dtype = DType::U32, .shape = {vocab, dim / per}});
      t.scales = add_weight(g, {.name = "scales", .dtype = DType::F16, .shape = {vocab, dim / gs}});
    }
  }
  auto v = random_floats(size_t(vocab) * dim, vocab + dim, -300.f, 300.f);
  switch (type) {
    case EmbeddingType::F32:
      t.words.resize(v.size());
      std::memcpy(t.words.data(), v.data(), v.size() * 4);
      t.values = v;
      break;
    case EmbeddingType::F16:
      t.words = ops::pack_f16(v);
      for (size_t i = 0; i < v.size(); ++i)
        t.values.push_back(ref::half_to_float(uint16_t(t.words[i / 2] >> (16 * (i % 2)))));
      break;
    default: {
      auto f = type == EmbeddingType::Q8 ? ops::QuantFormat::Q8 : ops::QuantFormat::Q4gsw;
      ops::QuantWeight w = ops::quantize(f, v, vocab, dim, gs);
      t.words = w.q;
      t.scale_words = w.scales;
      t.values = type == EmbeddingType::Q8 ? ref::dequant_q8(w.q, w.scales, vocab, dim, gs)
                                           : ref::dequant_q4gsw(w.q, w.scales, vocab, dim, gs);
    }
  }
  return t;
}

void write_table(Graph& g, const Table& t) {
  write_tensor<uint32_t>(g, t.table, t.words);
  if (t.scales) write_tensor<uint32_t>(g, *t.scales, t.scale_words);
}

std::vector<float> reference_rows(const std::vector<float>& values, const std::vector<uint32_t>& ids,
                                  uint32_t vocab, uint32_t dim) {
  std::vector<float> out;
  for (uint32_t id : ids)
    for (uint32_t d = 0; d < dim; ++d) out.push_back(id < vocab ? values[size_t(id) * dim + d] : 0.f);
  return out;
}

void run_sequence(Graph& g, TensorId ids, TensorId out, const std::vector<float>& values,
                  uint32_t vocab, uint32_t dim) {
  uint32_t step = 0;
  for (uint32_t n : {37u, 1u, 1u, 64u, 1u, 5u}) {
    SCOPED_TRACE(fmt::format("step {}: n_tokens {}", step, n));
    std::vector<uint32_t> idv(n);
    for (uint32_t i = 0; i < n; ++i) idv[i] = (i * 7919u + step * 31u) % vocab;
    if (n > 1) {  // past the vocabulary: zeros, never a read out of bounds
      idv[1] = vocab;
      idv[n - 1] = 0xFFFFFFFFu;
    } else if (step == 2) {
      idv[0] = vocab + 5;
    }
    ++step;
    ShapeInput s{ids, {n}};
    StepInput in{ids, idv.data(), idv.size() * 4};
    auto got = run_step(g, {&s, 1}, {}, {&in, 1}, out);
    ASSERT_TRUE(bit_equal(got, reference_rows(values, idv, vocab, dim)));
  }
}

std::vector<OpCase> embedding_cases() {
  std::vector<OpCase> cases;
  const char* names[] = {"f32", "f16", "q8", "q4"};
  for (EmbeddingType type : {EmbeddingType::F32, EmbeddingType::F16, EmbeddingType::Q8, EmbeddingType::Q4gsw})
    for (auto [vocab, dim, gs] : {std::tuple{37u, 96u, 32u}, {131u, 448u, 64u}, {97u, 640u, 128u}}) {
      cases.push_back({fmt::format("{}_v{}_d{}_gs{}", names[int(type)], vocab, dim, gs), [=] {
                         Graph g(device());
                         TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {64}, .dynamic_dims = 1});
                         Table t = add_table(g, type, vocab, dim, gs);
                         TensorId out = ops::add_embedding(g, {.name = "emb", .type = type, .ids = ids,
                                                               .table = t.table, .scales = t.scales, .gs = gs});
                         mark_output(g, out);
                         build(g);
                         write_table(g, t);
                         run_sequence(g, ids, out, t.values, vocab, dim);
                       }});
    }
  // GGUF Q4_0 / Q8_0 blocks repacked at load: the GPU reads exactly what GGUF's own
  // dequantization gives.
  for (bool q8 : {false, true}) {
    cases.push_back({q8 ? "gguf_q8_0_repack" : "gguf_q4_0_repack", [q8] {
                       const uint32_t vocab = 41, dim = 160;
                       const size_t bsize = q8 ? 34 : 18;
                       std::vector<uint8_t> blocks(size_t(vocab) * dim / 32 * bsize);
                       std::mt19937 rng(99);
                       for (size_t b = 0; b < blocks.size() / bsize; ++b) {
                         uint16_t d = uint16_t(0x2000 + rng() % 0x3000);  // normal halves, either sign
                         if (rng() % 2) d |= 0x8000;
                         blocks[b * bsize] = uint8_t(d);
                         blocks[b * bsize + 1] = uint8_t(d >> 8);
                         for (size_t i = 2; i < bsize; ++i) blocks[b * bsize + i] = uint8_t(rng());
                       }
                       ops::QuantWeight w = q8 ? ops::repack_gguf_q8_0(blocks, vocab, dim)
                                               : ops::repack_gguf_q4_0(blocks, vocab, dim);
                       auto want = q8 ? ref::dequant_gguf_q8_0(blocks, size_t(vocab) * dim)
                                      : ref::dequant_gguf_q4_0(blocks, size_t(vocab) * dim);
                       Graph g(device());
                       TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {64}, .dynamic_dims = 1});
                       TensorId q = add_weight(g, {.name = "q", .dtype = DType::U32, .shape = {vocab, dim / (q8 ? 4 : 8)}});
                       TensorId s = add_weight(g, {.name = "s", .dtype = DType::F16, .shape = {vocab, dim / 32}});
                       TensorId out = ops::add_embedding(g, {.name = "emb", .type = q8 ? EmbeddingType::Q8 : EmbeddingType::Q4gsw,
                                                             .ids = ids, .table = q, .scales = s, .gs = 32});
                       mark_output(g, out);
                       build(g);
                       write_tensor<uint32_t>(g, q, w.q);
                       write_tensor<uint32_t>(g, s, w.scales);
                       run_sequence(g, ids, out, want, vocab, dim);
                     }});
  }
  // GGUF blocks repacked (the K-quants, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS): bit-exact against the
  // reference's reading of random blocks; rows of 15 groups for the 32-value blocks (the
  // fifth-bit words padded), 2 blocks for the 256-value ones.
  using ops::QuantFormat;
  for (QuantFormat f : {QuantFormat::Q6K, QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q41, QuantFormat::Q50,
                        QuantFormat::Q51, QuantFormat::IQ4NL, QuantFormat::IQ4XS, QuantFormat::Q2K, QuantFormat::Q3K})
    cases.push_back({fmt::format("gguf_{}_blocks", ops::quant_format_name(f)), [f] {
                       const uint32_t vocab = 37, dim = ops::is_k_quant(f) ? 512 : 480;
                       const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
                       auto [w, want] = random_quant_weight(f, vocab, dim, gs, 9);
                       Graph g(device());
                       TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {64}, .dynamic_dims = 1});
                       ops::QuantTensors t = ops::add_quant_weight(g, "t", w.format, vocab, dim, gs);
                       TensorId out = ops::add_embedding(g, {.name = "emb", .type = ops::embedding_type(w.format),
                                                             .ids = ids, .table = t.q, .scales = t.scales, .gs = gs});
                       mark_output(g, out);
                       build(g);
                       ops::write_quant_weight(g, t, w);
                       run_sequence(g, ids, out, want, vocab, dim);
                     }});
  // A table split by rows into several tensors (a table past the storage binding limit, as the
  // loader splits it): each part repacked on its own, one kernel per part, the same rows as the
  // whole table's reading; ids in every part, on the parts' edges and past the vocabulary.
  struct Split {
    const char* name;
    ops::QuantFormat format;  // for the GGUF cases
    size_t block_bytes;       // 0: a float table
    uint32_t vocab, dim;
    std::vector<uint32_t> rows;
  };
  for (const Split& sp : {Split{"split_f32", {}, 0, 131, 96, {48, 48, 35}},
                          Split{"split_f16", {}, 0, 131, 96, {64, 67}},
                          Split{"split_gguf_q8_0", ops::QuantFormat::Q8, 34, 41, 160, {16, 16, 9}},
                          Split{"split_gguf_q4_k", ops::QuantFormat::Q4K, 144, 37, 512, {16, 16, 5}},
                          Split{"split_gguf_q6_k", ops::QuantFormat::Q6K, 210, 37, 512, {32, 5}}}) {
    const bool f16 = std::string_view(sp.name) == "split_f16";
    cases.push_back({sp.name, [sp, f16] {
                       Graph g(device());
                       TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {64}, .dynamic_dims = 1});
                       std::vector<float> want;
                       std::vector<std::pair<TensorId, std::vector<uint32_t>>> words;  // written after build
                       std::vector<ops::QuantTensors> qt;
                       std::vector<ops::QuantWeight> qw;
                       const size_t count = size_t(sp.vocab) * sp.dim;
                       EmbeddingType type = f16 ? EmbeddingType::F16 : EmbeddingType::F32;
                       std::vector<ops::EmbeddingPart> parts;
                       if (sp.block_bytes == 0) {
                         auto v = random_floats(count, 77, -300.f, 300.f);
                         uint32_t r0 = 0;
                         for (uint32_t r : sp.rows) {
                           std::vector<float> rows(v.begin() + size_t(r0) * sp.dim, v.begin() + size_t(r0 + r) * sp.dim);
                           TensorId t = add_weight(g, {.name = fmt::format("t{}", r0), .dtype = f16 ? DType::F16 : DType::F32,
                                                       .shape = {r, sp.dim}});
                           std::vector<uint32_t> w(rows.size());
                           if (f16) w = ops::pack_f16(rows);
                           else std::memcpy(w.data(), rows.data(), rows.size() * 4);
                           words.push_back({t, w});
                           parts.push_back({t, std::nullopt});
                           r0 += r;
                         }
                         for (size_t i = 0; i < count; ++i)
                           want.push_back(f16 ? ref::half_to_float(ops::f32_to_f16(v[i])) : v[i]);
                       } else {
                         const uint32_t per_block = sp.block_bytes == 34 ? 32 : 256;
                         std::vector<uint8_t> blocks =
                             sp.format == ops::QuantFormat::Q8   ? [&] {
                               std::vector<uint8_t> b(count / 32 * 34);
                               std::mt19937 rng(5);
                               for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(rng());
                               for (size_t i = 0; i < b.size(); i += 34) b[i + 1] = uint8_t(0x20 + rng() % 0x30);
                               return b;
                             }()
                             : sp.format == ops::QuantFormat::Q6K ? test::random_q6_k_blocks(count / 256, 5)
                                                                   : test::random_k_blocks(count / 256, 7, false);
                         want = sp.format == ops::QuantFormat::Q8   ? ref::dequant_gguf_q8_0(blocks, count)
                                : sp.format == ops::QuantFormat::Q6K ? ref::dequant_gguf_q6_k(blocks, count)
                                                                      : ref::dequant_gguf_q4_k(blocks, count);
                         const size_t row_bytes = sp.dim / per_block * sp.block_bytes;
                         const uint32_t gs = ops::has_block_d(sp.format) ? 256 : 32;
                         uint32_t r0 = 0;
                         for (uint32_t r : sp.rows) {
                           std::span<const uint8_t> raw(blocks.data() + r0 * row_bytes, r * row_bytes);
                           qw.push_back(sp.format == ops::QuantFormat::Q8 ? ops::repack_gguf_q8_0(raw, r, sp.dim)
                                                                           : ops::repack_gguf_blocks(sp.format, raw, r, sp.dim));
                           qt.push_back(ops::add_quant_weight(g, fmt::format("t{}", r0), sp.format, r, sp.dim, gs));
                           parts.push_back({qt.back().q, qt.back().scales});
                           r0 += r;
                         }
                         type = ops::embedding_type(sp.format);
                       }
                       const uint32_t gs = sp.block_bytes == 0 ? 32 : ops::has_block_d(sp.format) ? 256 : 32;
                       std::vector<ops::EmbeddingPart> more(parts.begin() + 1, parts.end());
                       TensorId out = ops::add_embedding(g, {.name = "emb", .type = type, .ids = ids, .table = parts[0].table,
                                                             .scales = parts[0].scales, .gs = gs, .more = more});
                       mark_output(g, out);
                       build(g);
                       for (const auto& [t, w] : words) write_tensor<uint32_t>(g, t, w);
                       for (size_t i = 0; i < qt.size(); ++i) ops::write_quant_weight(g, qt[i], qw[i]);
                       run_sequence(g, ids, out, want, sp.vocab, sp.dim);
                       EXPECT_EQ(active_dispatches(g), sp.rows.size());  // a kernel per part
                     }});
  }
  return cases;
}

WGRT_OP_CASES(Embedding, embedding_cases);

// The route pipelined batched decode takes (model/transformer.h): each logits row's argmax lands
// in that row of a carried State tensor, and while `feed` is 1 a step's token t embeds row t of
// it: the rows of the previous step feed this one's tokens (1..rows of them). Against the CPU:
// the first index of each row's maximum, then the table rows of those ids.
TEST(EmbeddingFed, RowRFeedsTokenR) {
  const uint32_t vocab = 37, dim = 96, m = 4;
  Graph g(device());
  TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {m + 2}, .dynamic_dims = 1});
  TensorId logits = add_input(g, {.name = "logits", .max_shape = {m, vocab}, .dynamic_dims = 1});
  SymbolId feed = add_symbol(g, {.name = "feed", .lo = 0, .hi = 1});
  TensorId next = add_weight(g, {.name = "next", .dtype = DType::U32, .shape = {m}, .role = TensorRole::State,
                                 .carried = true});
  Table t = add_table(g, EmbeddingType::F32, vocab, dim, 32);
  TensorId out = ops::add_embedding(g, {.name = "emb", .type = EmbeddingType::F32, .ids = ids, .table = t.table,
                                        .fed_ids = next, .feed = feed});
  TensorId am = ops::add_argmax(g, {.name = "argmax", .logits = logits, .out = next});
  ASSERT_EQ(am.v, next.v);
  mark_output(g, out);
  mark_output(g, am);
  build(g);
  write_table(g, t);
  std::vector<uint32_t> picks;  // the previous step's argmax rows, from the CPU
  std::mt19937 rng(5);
  struct Step {
    int64_t feed;
    uint32_t n_ids, n_rows;
  };
  for (const Step st : {Step{0, 3, 3}, Step{1, 3, 3}, Step{1, 2, 2}, Step{0, 6, 4}, Step{1, 4, 4}, Step{1, 1, 1}}) {
    SCOPED_TRACE(fmt::format("feed {}, {} tokens, {} logits rows", st.feed, st.n_ids, st.n_rows));
    std::vector<uint32_t> idv(st.n_ids);
    for (uint32_t& id : idv) id = rng() % vocab;
    std::vector<float> lv(size_t(st.n_rows) * vocab);
    for (float& v : lv) v = float(int(rng() % 2001) - 1000) / 7.0f;
    const ShapeInput shapes[] = {{ids, {st.n_ids}}, {logits, {st.n_rows, vocab}}};
    const SymbolInput syms[] = {{feed, st.feed}};
    update(g, shapes, syms);
    write_tensor<uint32_t>(g, ids, idv);
    write_tensor<float>(g, logits, lv);
    execute(g);
    const std::vector<uint32_t> want_ids = st.feed ? std::vector<uint32_t>(picks.begin(), picks.begin() + st.n_ids) : idv;
    EXPECT_TRUE(bit_equal(read_output<float>(g, out), reference_rows(t.values, want_ids, vocab, dim)));
    picks.clear();
    for (uint32_t r = 0; r < st.n_rows; ++r) {
      const auto row = lv.begin() + ptrdiff_t(r) * vocab;
      picks.push_back(uint32_t(std::max_element(row, row + vocab) - row));
    }
    const std::vector<uint32_t> got = read_output<uint32_t>(g, am);
    ASSERT_EQ(got.size(), m) << "the State keeps its fixed shape";
    EXPECT_EQ(std::vector<uint32_t>(got.begin(), got.begin() + st.n_rows), picks);
  }
  // A fed step of more tokens than rows is refused.
  const ShapeInput shapes[] = {{ids, {m + 1}}, {logits, {1, vocab}}};
  const SymbolInput syms[] = {{feed, 1}};
  EXPECT_THROW(update(g, shapes, syms), std::invalid_argument);
}

TEST(EmbeddingErrors, RejectsBadTables) {
  Graph g(device());
  TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {8}, .dynamic_dims = 1});
  TensorId f = add_input(g, {.name = "f", .max_shape = {8}, .dynamic_dims = 1});
  TensorId t = add_weight(g, {.name = "t", .shape = {10, 64}});
  EXPECT_THROW(ops::add_embedding(g, {.name = "e", .ids = f, .table = t}), std::invalid_argument);
  EXPECT_THROW(ops::add_embedding(g, {.name = "e", .type = EmbeddingType::F16, .ids = ids, .table = t}),
               std::invalid_argument);
  TensorId q = add_weight(g, {.name = "q", .dtype = DType::U32, .shape = {10, 8}});
  EXPECT_THROW(ops::add_embedding(g, {.name = "e", .type = EmbeddingType::Q4gsw, .ids = ids, .table = q}),
               std::invalid_argument);  // no scales
}

}  // namespace
}  // namespace wgrt::test
