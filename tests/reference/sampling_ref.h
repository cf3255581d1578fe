// CPU references for argmax and top-k over logits rows. Order: larger value first, equal
// values by lower index; NaN ranks as -inf (and is reported as -inf), -0 equals +0.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

std::vector<uint32_t> argmax_rows(const std::vector<float>& logits, uint32_t n_vocab);

struct TopKRef {
  std::vector<uint32_t> indices;  // [rows, k]
  std::vector<float> values;      // [rows, k]
};
TopKRef top_k_rows(const std::vector<float>& logits, uint32_t n_vocab, uint32_t k);

}  // namespace wgrt::ref
