#include "model/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/embedding/embedding.h"
#include "ops/linear/linear.h"
#include "ops/linear_q/linear_q.h"

namespace wgrt::model {

WeightFormat parse_weight_format(const std::string& s) {
  if (s == "q4gsw") return WeightFormat::Q4gsw;
  if (s == "q8") return WeightFormat::Q8;
  if (s == "none") return WeightFormat::None;
  if (s == "auto") return WeightFormat::Auto;
  throw ModelError(fmt::format("--quantize '{}' is not a format (hint: q4gsw, q8, none or auto)", s));
}

namespace {

// The weight `name`, recorded as read.
const WeightView& take(Loader& l, const std::string& name, const std::vector<uint64_t>& dims) {
  l.used.insert(name);
  return get_weight(*l.model, name, dims);
}

// The block types the kernels read in their blocks (after a lossless repack), beside Q4_0/Q8_0.
std::optional<ops::QuantFormat> block_format(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_K: return ops::QuantFormat::Q4K;
    case GgmlType::Q5_K: return ops::QuantFormat::Q5K;
    case GgmlType::Q6_K: return ops::QuantFormat::Q6K;
    case GgmlType::Q4_1: return ops::QuantFormat::Q41;
    case GgmlType::Q5_0: return ops::QuantFormat::Q50;
    case GgmlType::Q5_1: return ops::QuantFormat::Q51;
    case GgmlType::IQ4_NL: return ops::QuantFormat::IQ4NL;
    case GgmlType::IQ4_XS: return ops::QuantFormat::IQ4XS;
    case GgmlType::Q2_K: return ops::QuantFormat::Q2K;
    case GgmlType::Q3_K: return ops::QuantFormat::Q3K;
    default: return std::nullopt;
  }
}

// What the weight becomes on the GPU.
LinearWeight::Kind choose_kind(const WeightView& w, const LoadOptions& o, uint32_t k, ops::QuantFormat& fmt,
                               uint32_t& gs) {
  const bool fits = [&](uint32_t g) { return (g == 32 || g == 64 || g == 128) && k % g == 0; }(o.group_size);
  switch (o.quantize) {
    case WeightFormat::Q4gsw:
    case WeightFormat::Q8:
      if (fits) {
        fmt = o.quantize == WeightFormat::Q4gsw ? ops::QuantFormat::Q4gsw : ops::QuantFormat::Q8;
        gs = o.group_size;
        return LinearWeight::Kind::Quant;
      }
      return LinearWeight::Kind::F16;
    case WeightFormat::None:
      return w.type == GgmlType::F32 ? LinearWeight::Kind::F32 : LinearWeight::Kind::F16;
    case WeightFormat::Auto:
      break;
  }
  if (const std::optional<ops::QuantFormat> bf = block_format(w.type); bf && (!ops::is_k_quant(*bf) || k % 256 == 0)) {
    fmt = *bf;
    gs = ops::has_block_d(*bf) ? 256 : 32;
    return LinearWeight::Kind::Quant;
  }
  if (w.type == GgmlType::Q4_0 || w.type == GgmlType::Q8_0) {
    fmt = w.type == GgmlType::Q4_0 ? ops::QuantFormat::Q4gsw : ops::QuantFormat::Q8;
    gs = 32;
    return LinearWeight::Kind::Quant;
  }
  return w.type == GgmlType::F32 ? LinearWeight::Kind::F32 : LinearWeight::Kind::F16;
}

ops::QuantWeight to_quant(const WeightView& w, ops::QuantFormat fmt, uint32_t n, uint32_t k, uint32_t gs) {
  std::span<const uint8_t> raw(w.data, w.n_bytes);
  if (gs == 32 && fmt == ops::QuantFormat::Q4gsw && w.type == GgmlType::Q4_0) return ops::repack_gguf_q4_0(raw, n, k);
  if (gs == 32 && fmt == ops::QuantFormat::Q8 && w.type == GgmlType::Q8_0) return ops::repack_gguf_q8_0(raw, n, k);
  if (ops::from_gguf_blocks(fmt)) return ops::repack_gguf_blocks(fmt, raw, n, k);
  std::vector<float> f = weight_to_f32(w);
  return ops::quantize(fmt, f, n, k, gs);
}

uint32_t k_words(const LinearWeight& w) { return ops::quant_row_words(w.format, w.k); }

// A weight splits into at most this many tensors: each is a kernel of its op's routes, and a
// route has at most graph::kMaxDispatches (linear_q's gemm route: norm, quantize_act, the parts;
// parts this many take no split K, linear_q.cpp).
constexpr uint32_t kMaxWeightParts = 5;

// The bytes of the largest tensor that `rows` rows of the weight take on the GPU.
uint64_t rows_bytes(const LinearWeight& lw, uint32_t rows) {
  switch (lw.kind) {
    case LinearWeight::Kind::Quant:
      return std::max(uint64_t(rows) * ops::quant_row_words(lw.format, lw.k) * 4,
                      graph::dtype_bytes(ops::scales_dtype(lw.format), ops::scales_shape(lw.format, rows, lw.k, lw.gs)));
    case LinearWeight::Kind::F16: return graph::dtype_bytes(graph::DType::F16, {rows, lw.k});
    case LinearWeight::Kind::F32: break;
  }
  return uint64_t(rows) * lw.k * 4;
}

// Rows per tensor: all of them where they fit, else the most multiple of 16 (linear_q's gemv
// tile, so every part's argmax partials line up) that fits the budget.
uint32_t rows_per_tensor(const LinearWeight& lw, uint64_t budget, const std::string& name) {
  if (rows_bytes(lw, lw.n) <= budget) return lw.n;
  uint32_t r = uint32_t(std::min<uint64_t>(lw.n, budget / std::max<uint64_t>(rows_bytes(lw, 1), 1))) / 16 * 16;
  while (r > 0 && rows_bytes(lw, r) > budget) r -= 16;
  if (r == 0 || ops::ceil_div(lw.n, r) > kMaxWeightParts)
    throw ModelError(fmt::format("{}: this [{}, {}] weight takes {} bytes, past {} storage bindings of {} bytes "
                                 "(hint: a more compact weight type, or an adapter with a larger "
                                 "maxStorageBufferBindingSize)",
                                 name, lw.n, lw.k, rows_bytes(lw, lw.n), kMaxWeightParts, budget));
  return r;
}

// Rows [r0, r0 + rows) of a [n, k] weight: files store a matrix's rows one after another,
// each whole blocks.
WeightView row_slice(const WeightView& w, uint32_t n, uint32_t r0, uint32_t rows) {
  WeightView v = w;
  const uint64_t row_bytes = w.n_bytes / n;
  v.data = w.data + r0 * row_bytes;
  v.n_bytes = rows * row_bytes;
  v.dims = {w.dims[0], rows};
  return v;
}

// One tensor of `rows` rows of the weight, its upload queued: lw's first or a further one.
void add_weight_rows(graph::Graph& g, Loader& l, LinearWeight& lw, const std::string& name, const WeightView& w,
                     uint32_t rows, bool first) {
  switch (lw.kind) {
    case LinearWeight::Kind::Quant: {
      const ops::QuantTensors q = ops::add_quant_weight(g, name, lw.format, rows, lw.k, lw.gs);
      l.gpu_bytes += ops::quant_bytes(lw.format, rows, lw.k, lw.gs);
      l.writes.push_back([w, q, f = lw.format, rows, k = lw.k, gs = lw.gs](graph::Graph& gg) {
        ops::write_quant_weight(gg, q, to_quant(w, f, rows, k, gs));
      });
      if (first) lw.q = q;
      else lw.more.push_back({lw.format, lw.gs, q.q, q.scales});
      return;
    }
    case LinearWeight::Kind::F16:
    case LinearWeight::Kind::F32: {
      const graph::DType dt = lw.kind == LinearWeight::Kind::F16 ? graph::DType::F16 : graph::DType::F32;
      const graph::TensorId t = graph::add_weight(g, {.name = name, .dtype = dt, .shape = {rows, lw.k}});
      l.gpu_bytes += graph::dtype_bytes(dt, {rows, lw.k});
      l.writes.push_back([w, t, dt](graph::Graph& gg) {
        std::vector<float> f = weight_to_f32(w);
        if (dt == graph::DType::F32) {
          graph::write_tensor(gg, t, f.data(), f.size() * 4);
          return;
        }
        std::vector<uint32_t> words = ops::pack_f16(f);
        graph::write_tensor(gg, t, words.data(), words.size() * 4);
      });
      if (first) lw.w = t;
      else lw.w_more.push_back(t);
      return;
    }
  }
}

}  // namespace

uint64_t tensor_budget(const graph::Graph& g, const LoadOptions& o) {
  const uint64_t device = graph::device_caps(g).limits.maxStorageBufferBindingSize;
  return o.max_tensor_bytes ? std::min(device, o.max_tensor_bytes) : device;
}

LinearWeight load_linear(graph::Graph& g, Loader& l, const std::string& name, uint32_t n, uint32_t k,
                         const std::string& bias_name) {
  const WeightView& w = take(l, name, {k, n});
  LinearWeight lw;
  lw.n = n;
  lw.k = k;
  lw.kind = choose_kind(w, l.opts, k, lw.format, lw.gs);
  // Past one binding: tensors of consecutive rows, named by their first row.
  const uint32_t per = rows_per_tensor(lw, tensor_budget(g, l.opts), name);
  if (per == n) {
    add_weight_rows(g, l, lw, name, w, n, true);
  } else {
    for (uint32_t r0 = 0; r0 < n; r0 += per)
      add_weight_rows(g, l, lw, fmt::format("{}.rows{}", name, r0), row_slice(w, n, r0, std::min(per, n - r0)),
                      std::min(per, n - r0), r0 == 0);
  }
  if (!bias_name.empty() && find_weight(*l.model, bias_name)) lw.bias = load_vector(g, l, bias_name, n);
  return lw;
}

std::optional<ops::QuantFormat> linear_quant_format(const Loader& l, const std::string& name, uint32_t k) {
  const WeightView* w = find_weight(*l.model, name);
  ops::QuantFormat f{};
  uint32_t gs = 0;
  if (!w || choose_kind(*w, l.opts, k, f, gs) != LinearWeight::Kind::Quant) return std::nullopt;
  return f;
}

namespace {

// f16 scale rows: the packed pairs as one u32 per value, and back (rows of odd length do not
// start on a word boundary, so rows are moved value by value).
std::vector<uint32_t> unpack_halves(const std::vector<uint32_t>& words, size_t count) {
  std::vector<uint32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = (words[i / 2] >> (16 * (i % 2))) & 0xffffu;
  return v;
}
std::vector<uint32_t> pack_halves(const std::vector<uint32_t>& v) {
  std::vector<uint32_t> words((v.size() + 1) / 2, 0);
  for (size_t i = 0; i < v.size(); ++i) words[i / 2] |= v[i] << (16 * (i % 2));
  return words;
}

// Rows 0 .. n_rows - 1 of `data` (rows of `width` elements) appended to `out` in `order` (empty:
// as they are).
template <class T>
void append_rows(std::vector<T>& out, const T* data, size_t n_rows, size_t width, const std::vector<uint32_t>& order) {
  if (order.empty()) {
    out.insert(out.end(), data, data + n_rows * width);
    return;
  }
  for (uint32_t r : order) out.insert(out.end(), data + size_t(r) * width, data + (size_t(r) + 1) * width);
}

// The fused matrix's rows in the file's own blocks (a row is whole blocks), so one
// repack makes the fused layout: parts in turn (Rows) or (gate, up) blocks of 16 rows (SwiGlu).
std::vector<uint8_t> fuse_blocks(const std::vector<const WeightView*>& parts, const std::vector<uint32_t>& rows,
                                 FuseLayout layout, const std::vector<std::vector<uint32_t>>& orders) {
  const size_t row_bytes = parts[0]->n_bytes / rows[0];
  std::vector<uint8_t> out;
  if (layout == FuseLayout::SwiGlu) {
    for (uint32_t r0 = 0; r0 < rows[0]; r0 += 16)
      for (const WeightView* p : parts) out.insert(out.end(), p->data + r0 * row_bytes, p->data + (r0 + 16) * row_bytes);
    return out;
  }
  for (size_t i = 0; i < parts.size(); ++i) append_rows(out, parts[i]->data, rows[i], row_bytes, orders[i]);
  return out;
}

// `v`'s rows of `width` values in `order` (empty: as they are).
template <class T>
std::vector<T> reorder_rows(std::vector<T> v, const std::vector<uint32_t>& order, size_t width) {
  if (order.empty()) return v;
  std::vector<T> out;
  out.reserve(v.size());
  append_rows(out, v.data(), v.size() / width, width, order);
  return out;
}

}  // namespace

namespace {

// One fused matrix of parts that share a format: their rows in turn (Rows) or (gate, up)
// blocks (SwiGlu); the write is queued.
ops::QuantTensors add_fused(graph::Graph& g, Loader& l, const std::string& name,
                            const std::vector<const WeightView*>& parts, const std::vector<uint32_t>& rows,
                            FuseLayout layout, const std::vector<std::vector<uint32_t>>& orders,
                            const LinearWeight& lw) {
  const ops::QuantTensors t = ops::add_quant_weight(g, name, lw.format, lw.n, lw.k, lw.gs);
  l.gpu_bytes += ops::quant_bytes(lw.format, lw.n, lw.k, lw.gs);
  l.writes.push_back([parts, rows, layout, orders, lw, t](graph::Graph& gg) {
    if (ops::from_gguf_blocks(lw.format)) {
      ops::write_quant_weight(
          gg, t, ops::repack_gguf_blocks(lw.format, fuse_blocks(parts, rows, layout, orders), lw.n, lw.k));
      return;
    }
    const uint32_t qw = k_words(lw), sw = lw.k / lw.gs;
    std::vector<std::vector<uint32_t>> q, sc;
    for (size_t i = 0; i < parts.size(); ++i) {
      ops::QuantWeight w = to_quant(*parts[i], lw.format, rows[i], lw.k, lw.gs);
      q.push_back(reorder_rows(std::move(w.q), orders[i], qw));
      sc.push_back(reorder_rows(unpack_halves(w.scales, size_t(rows[i]) * sw), orders[i], sw));
    }
    ops::QuantWeight out{.format = lw.format, .n = lw.n, .k = lw.k, .gs = lw.gs};
    std::vector<uint32_t> halves;
    if (layout == FuseLayout::SwiGlu) {
      out.q = ops::interleave_swiglu_rows(q[0], q[1], rows[0], qw);
      halves = ops::interleave_swiglu_rows(sc[0], sc[1], rows[0], sw);
    } else {
      for (size_t i = 0; i < parts.size(); ++i) {
        out.q.insert(out.q.end(), q[i].begin(), q[i].end());
        halves.insert(halves.end(), sc[i].begin(), sc[i].end());
      }
    }
    out.scales = pack_halves(halves);
    ops::write_quant_weight(gg, t, out);
  });
  return t;
}

}  // namespace

namespace {

// Every part quantized; consecutive parts of one format and group size make one weight.
struct FuseGroup {
  ops::QuantFormat format;
  uint32_t gs;
  std::vector<const WeightView*> parts;
  std::vector<uint32_t> rows;
  std::vector<std::vector<uint32_t>> orders;
};

// The weights load_linear_fused makes of `names`, or nullopt where they do not fuse (a part
// missing, not quantized, of another activation grouping, or a run past one binding). Reads
// nothing and marks nothing used.
std::optional<std::vector<FuseGroup>> fuse_groups(const graph::Graph& g, const Loader& l,
                                                  const std::vector<std::string>& names,
                                                  const std::vector<uint32_t>& rows, uint32_t k, FuseLayout layout,
                                                  const std::vector<std::vector<uint32_t>>& orders) {
  std::vector<FuseGroup> groups;
  uint64_t n_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!find_weight(*l.model, names[i])) return std::nullopt;
    const WeightView& w = get_weight(*l.model, names[i], {k, rows[i]});
    ops::QuantFormat f{};
    uint32_t gs = 0;
    if (choose_kind(w, l.opts, k, f, gs) != LinearWeight::Kind::Quant) return std::nullopt;
    if (groups.empty() || groups.back().format != f || groups.back().gs != gs) groups.push_back({f, gs, {}, {}, {}});
    groups.back().parts.push_back(&w);
    groups.back().rows.push_back(rows[i]);
    groups.back().orders.push_back(orders.empty() ? std::vector<uint32_t>{} : orders[i]);
    n_rows += rows[i];
  }
  if (n_rows > std::numeric_limits<uint32_t>::max())
    throw ModelError(fmt::format("{}: the fused weight's {} rows are past 32 bits (hint: the model's configuration "
                                 "is corrupt)", names[0], n_rows));
  if (layout == FuseLayout::SwiGlu &&
      (groups.size() != 1 || names.size() != 2 || rows[0] != rows[1] || rows[0] % 16 != 0))
    return std::nullopt;
  // One output from several weights needs one activation grouping (linear_q's int8 routes).
  auto act_group = [](const FuseGroup& gr) { return ops::activation_group(gr.format, gr.gs); };
  for (const FuseGroup& gr : groups)
    if (act_group(gr) != act_group(groups[0])) return std::nullopt;
  // A fused tensor past one binding: the parts are loaded one by one (and split by rows).
  for (const FuseGroup& gr : groups) {
    LinearWeight fused{.kind = LinearWeight::Kind::Quant, .n = 0, .k = k, .format = gr.format, .gs = gr.gs};
    for (uint32_t r : gr.rows) fused.n += r;
    if (rows_bytes(fused, fused.n) > tensor_budget(g, l.opts)) return std::nullopt;
  }
  return groups;
}

}  // namespace

bool linear_fuses(const graph::Graph& g, const Loader& l, const std::vector<std::string>& names,
                  const std::vector<uint32_t>& rows, uint32_t k, FuseLayout layout) {
  return fuse_groups(g, l, names, rows, k, layout, {}).has_value();
}

std::optional<LinearWeight> load_linear_fused(graph::Graph& g, Loader& l, const std::vector<std::string>& names,
                                              const std::vector<uint32_t>& rows, uint32_t k, FuseLayout layout,
                                              const std::vector<std::string>& bias_names,
                                              const std::vector<std::vector<uint32_t>>& row_orders) {
  std::vector<std::vector<uint32_t>> orders = row_orders;
  orders.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    if (!orders[i].empty() && (layout != FuseLayout::Rows || orders[i].size() != rows[i]))
      throw std::logic_error(fmt::format("{}: a row order of {} for {} rows", names[i], orders[i].size(), rows[i]));
  for (size_t i = 0; i < names.size(); ++i) take(l, names[i], {k, rows[i]});
  const std::optional<std::vector<FuseGroup>> fused_groups = fuse_groups(g, l, names, rows, k, layout, orders);
  if (!fused_groups) return std::nullopt;
  const std::vector<FuseGroup>& groups = *fused_groups;
  uint32_t n = 0;
  for (uint32_t r : rows) n += r;
  LinearWeight lw;
  lw.kind = LinearWeight::Kind::Quant;
  lw.n = n;
  lw.k = k;
  const std::string name = names[0] + "+fused";
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const FuseGroup& gr = groups[gi];
    LinearWeight part{.kind = LinearWeight::Kind::Quant, .n = 0, .k = k, .format = gr.format, .gs = gr.gs};
    for (uint32_t r : gr.rows) part.n += r;
    const ops::QuantTensors t =
        add_fused(g, l, gi == 0 ? name : fmt::format("{}.{}", name, gi), gr.parts, gr.rows, layout, gr.orders, part);
    if (gi == 0) {
      lw.q = t;
      lw.format = gr.format;
      lw.gs = gr.gs;
    } else {
      lw.more.push_back({gr.format, gr.gs, t.q, t.scales});
    }
  }
  bool all_bias = !bias_names.empty();
  for (const std::string& b : bias_names) all_bias = all_bias && find_weight(*l.model, b);
  if (all_bias) {
    std::vector<const WeightView*> bparts;
    for (size_t i = 0; i < bias_names.size(); ++i) bparts.push_back(&take(l, bias_names[i], {rows[i]}));
    graph::TensorId t = graph::add_weight(g, {.name = name + ".bias", .dtype = graph::DType::F32, .shape = {n}});
    l.gpu_bytes += uint64_t(n) * 4;
    l.writes.push_back([bparts, layout, t, rows, orders](graph::Graph& gg) {
      std::vector<std::vector<float>> v;
      for (size_t i = 0; i < bparts.size(); ++i) v.push_back(reorder_rows(weight_to_f32(*bparts[i]), orders[i], 1));
      std::vector<float> all;
      if (layout == FuseLayout::SwiGlu) {
        std::vector<uint32_t> a(v[0].size()), b(v[1].size());
        std::memcpy(a.data(), v[0].data(), a.size() * 4);
        std::memcpy(b.data(), v[1].data(), b.size() * 4);
        std::vector<uint32_t> m = ops::interleave_swiglu_rows(a, b, rows[0], 1);
        all.resize(m.size());
        std::memcpy(all.data(), m.data(), m.size() * 4);
      } else {
        for (const auto& x : v) all.insert(all.end(), x.begin(), x.end());
      }
      graph::write_tensor(gg, t, all.data(), all.size() * 4);
    });
    lw.bias = t;
  } else if (!bias_names.empty()) {
    for (const std::string& b : bias_names)
      if (find_weight(*l.model, b))
        throw ModelError(fmt::format("{}: some but not all of the fused projection's parts have biases", b));
  }
  return lw;
}

std::optional<ExpertsWeight> load_experts(graph::Graph& g, Loader& l, const std::vector<std::string>& names, uint32_t n,
                                          uint32_t k, uint32_t n_experts) {
  ExpertsWeight ew;
  std::vector<const WeightView*> parts;
  for (size_t i = 0; i < names.size(); ++i) {
    const WeightView& w = get_weight(*l.model, names[i], {k, n, n_experts});
    ops::QuantFormat f{};
    uint32_t gs = 0;
    if (choose_kind(w, l.opts, k, f, gs) != LinearWeight::Kind::Quant) {
      if (k % 32 != 0)
        throw ModelError(fmt::format("{}: the experts' kernels read quantized rows, and K = {} is not a multiple of "
                                     "32 for q8 (hint: a file with quantized experts)", names[i], k));
      f = ops::QuantFormat::Q8, gs = 32;
    }
    if (i > 0 && (f != ew.format || gs != ew.gs)) return std::nullopt;  // gate and up of two formats
    ew.format = f, ew.gs = gs;
    parts.push_back(&w);
  }
  const uint64_t rows = uint64_t(n) * n_experts * names.size();
  LinearWeight lw{.kind = LinearWeight::Kind::Quant, .n = uint32_t(rows), .k = k, .format = ew.format, .gs = ew.gs};
  const bool fits = rows <= std::numeric_limits<uint32_t>::max() && rows_bytes(lw, lw.n) <= tensor_budget(g, l.opts);
  if (!fits && names.size() == 2) return std::nullopt;  // gate|up past one binding: each may fit alone
  for (const std::string& name : names) take(l, name, {k, n, n_experts});
  if (!fits)
    throw ModelError(fmt::format("{}: the experts' weight of {} rows takes {} bytes, past one storage binding of {} "
                                 "(hint: a more compact weight type, or an adapter with a larger "
                                 "maxStorageBufferBindingSize)", names[0], rows, rows_bytes(lw, uint32_t(rows)),
                                 tensor_budget(g, l.opts)));
  // Each part's experts back to back are rows of one [n_experts * n, k] matrix; (gate, up)
  // blocks of 16 rows over those keep each expert's rows together (n is a multiple of 16).
  const std::vector<uint32_t> part_rows(names.size(), n * n_experts);
  const FuseLayout layout = names.size() == 2 ? FuseLayout::SwiGlu : FuseLayout::Rows;
  ew.q = add_fused(g, l, names.size() == 2 ? names[0] + "+fused" : names[0], parts, part_rows, layout,
                   std::vector<std::vector<uint32_t>>(names.size()), lw);
  ew.n_expert = n * uint32_t(names.size());
  return ew;
}

std::vector<uint32_t> neox_pairs_adjacent(uint32_t n_heads, uint32_t head_dim) {
  std::vector<uint32_t> order(size_t(n_heads) * head_dim);
  const uint32_t half = head_dim / 2;
  for (uint32_t h = 0; h < n_heads; ++h)
    for (uint32_t j = 0; j < half; ++j) {
      order[h * head_dim + 2 * j] = h * head_dim + j;
      order[h * head_dim + 2 * j + 1] = h * head_dim + j + half;
    }
  return order;
}

graph::TensorId load_vector(graph::Graph& g, Loader& l, const std::string& name, uint32_t n, float add,
                            const std::vector<uint32_t>& order) {
  const WeightView& w = take(l, name, {n});
  if (!order.empty() && order.size() != n)
    throw std::logic_error(fmt::format("{}: an order of {} for {} values", name, order.size(), n));
  graph::TensorId t = graph::add_weight(g, {.name = order.empty() ? name : name + ".reordered", .dtype = graph::DType::F32,
                                            .shape = {n}});
  l.gpu_bytes += uint64_t(n) * 4;
  const WeightView* wp = &w;
  l.writes.push_back([wp, t, add, order](graph::Graph& gg) {
    std::vector<float> f = reorder_rows(weight_to_f32(*wp), order, 1);
    if (add != 0)
      for (float& v : f) v += add;
    graph::write_tensor(gg, t, f.data(), f.size() * 4);
  });
  return t;
}

graph::TensorId apply_linear(graph::Graph& g, const LinearWeight& w, graph::TensorId x, const std::string& out_name,
                             int gemv_int8, std::optional<LinearNorm> norm) {
  const std::optional<graph::TensorId> nw = norm ? std::optional(norm->weight) : std::nullopt;
  const float eps = norm ? norm->eps : 1e-5f;
  if (w.kind == LinearWeight::Kind::Quant)
    return ops::add_linear_q(g, {.name = out_name, .format = w.format, .gs = w.gs, .x = x, .q = w.q.q,
                                 .scales = w.q.scales, .bias = w.bias, .norm = nw, .eps = eps, .more = w.more,
                                 .gemv_int8 = gemv_int8});
  return ops::add_linear(g, {.name = out_name, .x = x, .w = w.w, .more = w.w_more, .bias = w.bias, .norm = nw,
                             .eps = eps});
}

EmbeddingWeight load_embedding(graph::Graph& g, Loader& l, const std::string& name, uint32_t n_vocab, uint32_t dim) {
  EmbeddingWeight e;
  e.table = load_linear(g, l, name, n_vocab, dim, "");
  return e;
}

graph::TensorId apply_embedding(graph::Graph& g, const EmbeddingWeight& e, graph::TensorId ids, const std::string& out_name,
                                std::optional<graph::TensorId> fed_ids, graph::SymbolId feed) {
  const LinearWeight& t = e.table;
  ops::EmbeddingDesc d{.name = out_name, .ids = ids, .fed_ids = fed_ids, .feed = feed};
  switch (t.kind) {
    case LinearWeight::Kind::Quant:
      d.type = ops::embedding_type(t.format);
      d.table = t.q.q;
      d.scales = t.q.scales;
      d.gs = t.gs;
      for (const ops::LinearQPart& p : t.more) d.more.push_back({p.q, p.scales});  // a table split by rows
      break;
    case LinearWeight::Kind::F16:
    case LinearWeight::Kind::F32:
      d.type = t.kind == LinearWeight::Kind::F16 ? ops::EmbeddingType::F16 : ops::EmbeddingType::F32;
      d.table = t.w;
      for (graph::TensorId w : t.w_more) d.more.push_back({w, std::nullopt});
      break;
  }
  return ops::add_embedding(g, d);
}

void check_every_tensor_used(const Loader& l) {
  std::vector<std::string> unused;
  for (const auto& [name, w] : l.model->weights) {
    (void)w;
    // The rope factors are read on the host, with the config.
    if (l.used.count(name) || name == "rope_freqs.weight" || name == "rope_factors_short.weight" ||
        name == "rope_factors_long.weight")
      continue;
    unused.push_back(name);
  }
  if (unused.empty()) return;
  std::string list;
  for (size_t i = 0; i < unused.size() && i < 3; ++i) list += fmt::format("{}'{}'", i ? ", " : "", unused[i]);
  if (unused.size() > 3) list += fmt::format(" and {} more", unused.size() - 3);
  const std::string msg = fmt::format("{}: tensor {} is not read by wgrt's {} graph", l.model->path, list,
                                      arch_name(l.model->config.arch));
  if (!l.opts.allow_unused)
    throw ModelError(msg + " (hint: the file has parts this architecture does not use; --allow-unused-tensors "
                           "runs without them)");
  fmt::print(stderr, "wgrt: warning: {} (running without it: --allow-unused-tensors)\n", msg);
}

void write_weights(graph::Graph& g, Loader& l) {
  for (auto& w : l.writes) w(g);
  l.writes.clear();
}

}  // namespace wgrt::model
