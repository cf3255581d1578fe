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

// log sum exp of each row in double, NaN and -inf carrying no mass; -inf for a row without any.
std::vector<float> logsumexp_rows(const std::vector<float>& logits, uint32_t n_vocab);

// A sampled pick from candidates sorted best first (values `v`), in double: keep the smallest
// prefix whose temperature-1 softmax mass reaches top_p, then cut at the first candidate below
// min_p times the best's probability; weights exp((v_i - v_0) / T); the first index whose
// running weight passes u * total, u = draw / 2^32. `margin` gets the distance of u * total to
// the nearest running-weight boundary, relative to the total (f32 rounding can flip a pick that
// close to one).
uint32_t sample_pick(const std::vector<float>& v, uint32_t k, float temperature, float top_p, float min_p,
                     uint32_t draw, double* margin);

}  // namespace wgrt::ref
