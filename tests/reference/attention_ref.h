// CPU references for the attention family: KV-cache write, causal GQA attention over the
// cache, row softmax. Plain loops, double accumulation.
#pragma once

#include <cstdint>
#include <vector>

namespace wgrt::ref {

// Cache layout [n_kv_heads, n_ctx, head_dim] as plain floats (an f16 cache: values already
// rounded through f16, see round_f16).
struct KvShape {
  uint32_t n_kv_heads, n_ctx, head_dim;
};

// Rows of k [n_tokens, n_kv_heads * head_dim] into cache positions pos .. pos + n_tokens - 1.
void kv_write(std::vector<float>& cache, const KvShape& s, const std::vector<float>& k,
              uint32_t n_tokens, uint32_t pos);

// out [n_tokens, n_heads * head_dim]: query i (position pos + i) attends keys 0 .. pos + i;
// query head h uses KV head h / (n_heads / n_kv_heads). `window` (0: none): only keys k with
// pos + i - k < window; `softcap` (0: none): each scaled score s becomes softcap * tanh(s / softcap).
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, const KvShape& s,
                             uint32_t n_tokens, uint32_t n_heads, uint32_t pos, float scale,
                             uint32_t window = 0, float softcap = 0);

// A token of a step mixing sequences (ops::KvRows): its position in its sequence and the first
// cache row of its sequence's region.
struct TokenRow {
  uint32_t pos, base;
};
// Row i of k into cache row rows[i].base + rows[i].pos.
void kv_write_rows(std::vector<float>& cache, const KvShape& s, const std::vector<float>& k,
                   const std::vector<TokenRow>& rows);
// Query i attends cache rows rows[i].base .. rows[i].base + rows[i].pos (window and softcap as
// attention's).
std::vector<float> attention_rows(const std::vector<float>& q, const std::vector<float>& k_cache,
                                  const std::vector<float>& v_cache, const KvShape& s,
                                  const std::vector<TokenRow>& rows, uint32_t n_heads, float scale,
                                  uint32_t window = 0, float softcap = 0);

// Softmax of each row of [rows, n].
std::vector<float> softmax(const std::vector<float>& x, uint32_t rows, uint32_t n);

// IEEE binary16, round to nearest even (what pack2x16float does for normal values).
uint16_t f32_to_f16(float v);
float f16_to_f32(uint16_t h);
inline float round_f16(float v) { return f16_to_f32(f32_to_f16(v)); }

}  // namespace wgrt::ref
