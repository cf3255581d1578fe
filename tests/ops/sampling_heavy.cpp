// Full-size sampling on real vocabularies (run on a GPU; CI skips *_heavy): llama3's 128256
// and qwen2's 152064, top-k up to 128, several rows.
#include <fmt/format.h>

#include "ops/sampling/sampling.h"
#include "reference/sampling_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

void check(uint32_t rows, uint32_t vocab, uint32_t k, uint32_t seed) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {rows, vocab}, .dynamic_dims = 1});
  TensorId am = ops::add_argmax(g, {.name = "argmax", .logits = l});
  ops::TopKOutputs t = ops::add_top_k(g, {.name = "topk", .logits = l, .k = k});
  mark_output(g, am);
  mark_output(g, t.indices);
  mark_output(g, t.values);
  build(g);
  for (uint32_t live : {rows, 1u}) {
    auto lv = random_floats(size_t(live) * vocab, seed + live, -30.f, 30.f);
    for (size_t i = 0; i < lv.size(); i += 97) lv[i] = 29.f;  // ties near the top
    ShapeInput s{l, {live, vocab}};
    update(g, {&s, 1});
    write_tensor<float>(g, l, lv);
    execute(g);
    EXPECT_EQ(read_output<uint32_t>(g, am), ref::argmax_rows(lv, vocab)) << "rows " << live;
    ref::TopKRef want = ref::top_k_rows(lv, vocab, k);
    EXPECT_EQ(read_output<uint32_t>(g, t.indices), want.indices) << "rows " << live;
    EXPECT_TRUE(all_close(read_output<float>(g, t.values), want.values, 0, 0));
  }
}

std::vector<OpCase> heavy_cases() {
  return {{"llama3_8x128256_k128", [] { check(8, 128256, 128, 1); }},
          {"llama3_1x128256_k64", [] { check(1, 128256, 64, 2); }},
          {"qwen2_4x152064_k100", [] { check(4, 152064, 100, 3); }},
          {"qwen2_2x152064_k512", [] { check(2, 152064, 512, 4); }}};
}

WGRT_OP_CASES(SamplingHeavy, heavy_cases);

}  // namespace
}  // namespace wgrt::test
