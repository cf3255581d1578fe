#include "ops/sampling/logit_adjust.h"

#include <fmt/format.h>

#include <stdexcept>

#include "ops/sampling/sampling.h"

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_rows", offsetof(LogitAdjustParams, n_rows)},
                                  {"n_vocab", offsetof(LogitAdjustParams, n_vocab)},
                                  {"max_entries", offsetof(LogitAdjustParams, max_entries)},
                                  {"mask_words", offsetof(LogitAdjustParams, mask_words)},
                                  {"neg_inf", offsetof(LogitAdjustParams, neg_inf)},
                                  {"_pad1", offsetof(LogitAdjustParams, _pad1)},
                                  {"_pad2", offsetof(LogitAdjustParams, _pad2)},
                                  {"_pad3", offsetof(LogitAdjustParams, _pad3)}};
}  // namespace

const ParamLayout kLogitAdjustLayout{"logit_adjust", sizeof(LogitAdjustParams), kFields};

LogitAdjust add_logit_adjust(graph::Graph& g, const LogitAdjustDesc& d) {
  const graph::Tensor& l = graph::tensor_info(g, d.logits);
  if (l.dtype != graph::DType::F32 || l.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: logits '{}' must be f32 [n_rows, n_vocab], got {} {}", d.name,
                                            l.name, graph::dtype_name(l.dtype), graph::to_string(l.max_shape)));
  if (d.enable.v >= graph::symbol_count(g) || graph::symbol_info(g, d.enable).lo != 0 ||
      graph::symbol_info(g, d.enable).hi != 1)
    throw std::invalid_argument(fmt::format("{}: the enable symbol must range over [0, 1]", d.name));
  LogitAdjust a;
  a.enable = d.enable;
  a.max_rows = l.max_shape[0];
  a.n_vocab = l.max_shape[1];
  const uint32_t words = uint32_t(ceil_div(a.n_vocab, 32));
  const uint32_t u32s = sizeof(LogitAdjustRow) / 4, entry_u32s = sizeof(LogitAdjustEntry) / 4;
  a.rows = graph::add_input(g, {.name = d.name + ".rows", .dtype = graph::DType::U32, .max_shape = {a.max_rows, u32s}});
  a.entries = graph::add_input(g, {.name = d.name + ".entries", .dtype = graph::DType::U32,
                                   .max_shape = {a.max_rows, kLogitAdjustMaxEntries, entry_u32s}});
  a.allow = graph::add_input(g, {.name = d.name + ".allow", .dtype = graph::DType::U32,
                                 .max_shape = {a.max_rows, words}});
  using graph::Binding;
  // Each kernel binds what its entry point uses (the layouts come from the shader).
  std::vector<graph::KernelSpec> kernels = {
      {gpu::make_key("logit_adjust", "adjust_entries"),
       {Binding::of(0, d.logits), Binding::of(1, a.rows), Binding::of(2, a.entries), Binding::params(4)}},
      {gpu::make_key("logit_adjust", "adjust_mask"),
       {Binding::of(0, d.logits), Binding::of(1, a.rows), Binding::of(3, a.allow), Binding::params(4)}}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "logit_adjust",
      // `logits` is written in place (logit_adjust.h says why it is not an output).
      .inputs = {d.logits, a.rows, a.entries, a.allow},
      .outputs = {},
      .dynamic = true,
      .routes = graph::RouteSet{graph::RouteKey::of_symbol(d.enable),
                                {{kSamplingOff, "off", 0, 0, {}, /*idle=*/true},
                                 {kSamplingOn, "on", 1, 1, std::move(kernels)}}},
      .infer = [](const graph::InferArgs&) {},
      .plan =
          [words](const graph::PlanArgs& pa, graph::Plan& p) {
            const LogitAdjustParams lp{pa.in[0][0], pa.in[0][1], kLogitAdjustMaxEntries, words, 0xff800000u, 0, 0, 0};
            const uint32_t blocks = uint32_t(ceil_div(lp.n_vocab, kLogitAdjustWorkgroup));
            if (lp.n_rows > pa.caps->limits.maxComputeWorkgroupsPerDimension ||
                blocks > pa.caps->limits.maxComputeWorkgroupsPerDimension)
              throw std::invalid_argument(fmt::format("logit_adjust: {} rows of {} logits pass the grid limit",
                                                      lp.n_rows, lp.n_vocab));
            p.params[0].set(lp);
            p.params[1].set(lp);
            p.grids[0] = {1, lp.n_rows, 1};       // a workgroup per row
            p.grids[1] = {blocks, lp.n_rows, 1};  // a thread per logit
          },
  });
  return a;
}

}  // namespace wgrt::ops
