#include "reference/transformer_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace wgrt::ref {
namespace {

const std::vector<float>& get(const Weights& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) throw std::runtime_error("reference: missing weight " + name);
  return it->second;
}

void rms_norm(float* x, const float* weight, size_t n, float eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / double(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = float(x[i] * inv * weight[i]);
}

// out[o] = sum_i w[o, i] x[i] (+ bias[o])
std::vector<float> matvec(const std::vector<float>& w, const float* x, size_t out, size_t in,
                          const std::vector<float>* bias) {
  std::vector<float> y(out);
  for (size_t o = 0; o < out; ++o) {
    double acc = bias ? (*bias)[o] : 0.0;
    for (size_t i = 0; i < in; ++i) acc += double(w[o * in + i]) * x[i];
    y[o] = float(acc);
  }
  return y;
}

// Whether layer l attends through the sliding window: every layer when none is marked local.
bool windowed(const TransformerConfig& c, uint32_t l) {
  return c.local_layers.empty() || (l < c.local_layers.size() && c.local_layers[l]);
}
bool local(const TransformerConfig& c, uint32_t l) { return l < c.local_layers.size() && c.local_layers[l]; }

void rope(float* head, uint32_t head_dim, uint32_t pos, const TransformerConfig& c, uint32_t layer) {
  uint32_t half = head_dim / 2;
  const bool own_base = local(c, layer) && c.rope_theta_local > 0;
  for (uint32_t j = 0; j < half; ++j) {
    double freq = std::pow(double(own_base ? c.rope_theta_local : c.rope_theta), -2.0 * j / head_dim);
    if (!c.rope_freq_factors.empty() && !own_base) freq /= c.rope_freq_factors[j];
    double angle = pos * freq;
    // LongRoPE's magnitude: the rotation times rope_attn_factor.
    double cs = std::cos(angle) * c.rope_attn_factor, sn = std::sin(angle) * c.rope_attn_factor;
    uint32_t a = c.rope_neox ? j : 2 * j;
    uint32_t b = c.rope_neox ? j + half : 2 * j + 1;
    double x0 = head[a], x1 = head[b];
    head[a] = float(x0 * cs - x1 * sn);
    head[b] = float(x0 * sn + x1 * cs);
  }
}

// The mixture-of-experts FFN of one normed row h (TransformerConfig's experts).
std::vector<float> moe_ffn(const TransformerConfig& c, const Weights& w, const std::string& p,
                           const std::vector<float>& h, float& margin) {
  const size_t D = c.dim, F = c.expert_ff, E = c.n_experts;
  const std::vector<float> logits = matvec(get(w, p + "ffn_gate_inp.weight"), h.data(), E, D, nullptr);
  std::vector<size_t> order(E);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  if (c.n_experts_used < E)
    margin = std::min(margin, logits[order[c.n_experts_used - 1]] - logits[order[c.n_experts_used]]);
  const double top = logits[order[0]];
  double total = 0;
  for (size_t i = 0; i < (c.expert_norm ? c.n_experts_used : E); ++i)
    total += std::exp(logits[c.expert_norm ? order[i] : i] - top);
  const std::vector<float>& wg = get(w, p + "ffn_gate_exps.weight");
  const std::vector<float>& wu = get(w, p + "ffn_up_exps.weight");
  const std::vector<float>& wd = get(w, p + "ffn_down_exps.weight");
  std::vector<double> y(D);
  for (size_t s = 0; s < c.n_experts_used; ++s) {
    const size_t e = order[s];
    const double weight = std::exp(logits[e] - top) / total;
    std::vector<float> act(F);
    for (size_t r = 0; r < F; ++r) {
      double g = 0, u = 0;
      for (size_t i = 0; i < D; ++i) {
        g += double(wg[(e * F + r) * D + i]) * h[i];
        u += double(wu[(e * F + r) * D + i]) * h[i];
      }
      act[r] = float(g / (1.0 + std::exp(-g)) * u);
    }
    for (size_t o = 0; o < D; ++o) {
      double acc = 0;
      for (size_t r = 0; r < F; ++r) acc += double(wd[(e * D + o) * F + r]) * act[r];
      y[o] += weight * acc;
    }
  }
  return {y.begin(), y.end()};
}

// Qwen2-MoE's shared expert of one normed row h: its SwiGLU's output times the sigmoid of its
// gate's dot product with h.
std::vector<float> shared_expert(const TransformerConfig& c, const Weights& w, const std::string& p,
                                 const std::vector<float>& h) {
  const size_t D = c.dim, F = c.shared_expert_ff;
  const std::vector<float>& gate_w = get(w, p + "ffn_gate_inp_shexp.weight");
  double z = 0;
  for (size_t i = 0; i < D; ++i) z += double(gate_w[i]) * h[i];
  const double scale = 1.0 / (1.0 + std::exp(-z));
  const std::vector<float> g = matvec(get(w, p + "ffn_gate_shexp.weight"), h.data(), F, D, nullptr);
  const std::vector<float> u = matvec(get(w, p + "ffn_up_shexp.weight"), h.data(), F, D, nullptr);
  std::vector<float> act(F);
  for (size_t r = 0; r < F; ++r) act[r] = float(double(g[r]) / (1.0 + std::exp(-double(g[r]))) * u[r]);
  std::vector<float> y = matvec(get(w, p + "ffn_down_shexp.weight"), act.data(), D, F, nullptr);
  for (float& v : y) v = float(v * scale);
  return y;
}

}  // namespace

std::vector<float> transformer_forward(const TransformerConfig& c, const Weights& w,
                                       const std::vector<int32_t>& tokens, std::vector<float>* hidden,
                                       std::vector<float>* router_margin) {
  const size_t T = tokens.size(), D = c.dim, hd = c.head_dim;
  std::vector<float> margins(T, INFINITY);
  const size_t q_dim = size_t(c.n_heads) * hd, kv_dim = size_t(c.n_kv_heads) * hd;
  const std::vector<float>& embd = get(w, "token_embd.weight");
  std::vector<float> x(T * D);
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < D; ++i) x[t * D + i] = embd[size_t(tokens[t]) * D + i] * (c.embd_scale > 0 ? c.embd_scale : 1);

  for (uint32_t l = 0; l < c.n_layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    std::vector<float> q(T * q_dim), k(T * kv_dim), v(T * kv_dim);
    for (size_t t = 0; t < T; ++t) {
      std::vector<float> h(x.begin() + long(t * D), x.begin() + long((t + 1) * D));
      rms_norm(h.data(), get(w, p + "attn_norm.weight").data(), D, c.norm_eps);
      auto qt = matvec(get(w, p + "attn_q.weight"), h.data(), q_dim, D, c.qkv_bias ? &get(w, p + "attn_q.bias") : nullptr);
      auto kt = matvec(get(w, p + "attn_k.weight"), h.data(), kv_dim, D, c.qkv_bias ? &get(w, p + "attn_k.bias") : nullptr);
      auto vt = matvec(get(w, p + "attn_v.weight"), h.data(), kv_dim, D, c.qkv_bias ? &get(w, p + "attn_v.bias") : nullptr);
      for (uint32_t hh = 0; hh < c.n_heads; ++hh) {
        if (c.qk_norm) rms_norm(&qt[hh * hd], get(w, p + "attn_q_norm.weight").data(), hd, c.norm_eps);
        rope(&qt[hh * hd], c.head_dim, uint32_t(t), c, l);
      }
      for (uint32_t hh = 0; hh < c.n_kv_heads; ++hh) {
        if (c.qk_norm) rms_norm(&kt[hh * hd], get(w, p + "attn_k_norm.weight").data(), hd, c.norm_eps);
        rope(&kt[hh * hd], c.head_dim, uint32_t(t), c, l);
      }
      std::copy(qt.begin(), qt.end(), q.begin() + long(t * q_dim));
      std::copy(kt.begin(), kt.end(), k.begin() + long(t * kv_dim));
      std::copy(vt.begin(), vt.end(), v.begin() + long(t * kv_dim));
    }
    // Causal attention with grouped KV heads.
    std::vector<float> attn(T * q_dim);
    const uint32_t group = c.n_heads / c.n_kv_heads;
    const double scale = c.attn_scale > 0 ? double(c.attn_scale) : 1.0 / std::sqrt(double(hd));
    const size_t window = windowed(c, l) ? c.sliding_window : 0;
    for (size_t t = 0; t < T; ++t)
      for (uint32_t hh = 0; hh < c.n_heads; ++hh) {
        const float* qh = &q[t * q_dim + hh * hd];
        size_t kvh = hh / group;
        const size_t first = window && t + 1 > window ? t + 1 - window : 0;  // keys t - j >= window masked
        std::vector<double> s(t + 1, 0.0);
        double mx = -INFINITY;
        for (size_t j = first; j <= t; ++j) {
          double dot = 0;
          for (size_t d = 0; d < hd; ++d) dot += double(qh[d]) * k[j * kv_dim + kvh * hd + d];
          s[j] = dot * scale;
          if (c.attn_softcap > 0) s[j] = c.attn_softcap * std::tanh(s[j] / c.attn_softcap);
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (size_t j = first; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (size_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (size_t j = first; j <= t; ++j) acc += s[j] * v[j * kv_dim + kvh * hd + d];
          attn[t * q_dim + hh * hd + d] = float(acc / sum);
        }
      }
    for (size_t t = 0; t < T; ++t) {
      auto o = matvec(get(w, p + "attn_output.weight"), &attn[t * q_dim], D, q_dim, nullptr);
      if (c.gemma) rms_norm(o.data(), get(w, p + "post_attention_norm.weight").data(), D, c.norm_eps);
      for (size_t i = 0; i < D; ++i) x[t * D + i] += o[i];
      std::vector<float> h(x.begin() + long(t * D), x.begin() + long((t + 1) * D));
      rms_norm(h.data(), get(w, p + "ffn_norm.weight").data(), D, c.norm_eps);
      if (c.n_experts) {
        const std::vector<float> y = moe_ffn(c, w, p, h, margins[t]);
        for (size_t i = 0; i < D; ++i) x[t * D + i] += y[i];
        if (c.shared_expert_ff) {
          const std::vector<float> s = shared_expert(c, w, p, h);
          for (size_t i = 0; i < D; ++i) x[t * D + i] += s[i];
        }
        continue;
      }
      auto gate = matvec(get(w, p + "ffn_gate.weight"), h.data(), c.ff, D, nullptr);
      auto up = matvec(get(w, p + "ffn_up.weight"), h.data(), c.ff, D, nullptr);
      for (size_t i = 0; i < c.ff; ++i) {
        const double g = gate[i];
        const double act = c.gemma ? 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)))
                                   : g / (1.0 + std::exp(-g));
        gate[i] = float(act * up[i]);
      }
      auto down = matvec(get(w, p + "ffn_down.weight"), gate.data(), D, c.ff, nullptr);
      if (c.gemma) rms_norm(down.data(), get(w, p + "post_ffw_norm.weight").data(), D, c.norm_eps);
      for (size_t i = 0; i < D; ++i) x[t * D + i] += down[i];
    }
  }

  const std::vector<float>& out_w = w.count("output.weight") ? get(w, "output.weight") : embd;
  std::vector<float> logits(T * c.n_vocab);
  for (size_t t = 0; t < T; ++t) {
    rms_norm(&x[t * D], get(w, "output_norm.weight").data(), D, c.norm_eps);
    if (hidden) hidden->insert(hidden->end(), x.begin() + long(t * D), x.begin() + long((t + 1) * D));
    auto lt = matvec(out_w, &x[t * D], c.n_vocab, D, nullptr);
    if (c.final_softcap > 0)
      for (float& v : lt) v = float(c.final_softcap * std::tanh(double(v) / c.final_softcap));
    std::copy(lt.begin(), lt.end(), logits.begin() + long(t * c.n_vocab));
  }
  if (router_margin) *router_margin = margins;
  return logits;
}

}  // namespace wgrt::ref
