#include "gpu/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace wgrt::gpu {

std::string_view kernel_source(std::string_view name) {
  for (const auto& k : embedded_kernels())
    if (name == k.name) return k.source;
  throw GpuError(fmt::format("no embedded WGSL kernel named '{}' (hint: kernels are the .wgsl files under src/ and "
                             "bench/, found by file stem; re-run cmake after adding one)", name));
}

namespace {

// `file`'s shared constants as WGSL declarations.
std::string constants_of(std::string_view file) {
  std::string out;
  for (const KernelConstant& c : kernel_constants())
    if (c.file == file) out += fmt::format("const {}: u32 = {}u;  // from C++ (ops/kernel_constants.cpp)\n", c.name, c.value);
  return out;
}

// Appends the parts `source` names on lines `//! use NAME` (each part's own parts first), each
// once, to `out`.
void append_parts(std::string_view kernel, std::string_view source,
                  std::set<std::string_view, std::less<>>& seen, std::string& out) {
  constexpr std::string_view kUse = "//! use ";
  for (size_t at = 0; at < source.size();) {
    const size_t end = std::min(source.find('\n', at), source.size());
    const std::string_view line = source.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kUse)) continue;
    const std::string_view part = line.substr(kUse.size());
    if (part == kernel) throw GpuError(fmt::format("WGSL kernel '{}' uses itself (hint: a part names other files)", kernel));
    if (!seen.insert(part).second) continue;
    const std::string_view text = kernel_source(part);
    append_parts(kernel, text, seen, out);
    out += fmt::format("// ---- {}.wgsl (a part used by {}.wgsl) ----\n{}{}\n", part, kernel, constants_of(part), text);
  }
}

}  // namespace

std::string hoist_directives(std::string_view source) {
  std::string directives, rest;
  for (size_t at = 0; at < source.size();) {
    const size_t end = std::min(source.find('\n', at), source.size());
    const std::string_view line = source.substr(at, end - at);
    at = end + 1;
    if (line.starts_with("enable ") || line.starts_with("diagnostic(")) {
      if (directives.find(line) == std::string::npos) (directives += line) += '\n';
    } else {
      (rest += line) += '\n';
    }
  }
  return directives + rest;
}

std::string kernel_module_source(std::string_view name) {
  const std::string_view source = kernel_source(name);
  std::set<std::string_view, std::less<>> seen;
  std::string module;
  append_parts(name, source, seen, module);
  module += constants_of(name);
  module += source;
  return hoist_directives(module);
}

PipelineKey make_key(std::string kernel, std::string entry, std::vector<OverrideConstant> constants) {
  std::sort(constants.begin(), constants.end());
  return PipelineKey{std::move(kernel), std::move(entry), std::move(constants)};
}

ShaderModule compile_wgsl(Device& dev, std::string_view label, std::string_view source) {
  WGPUShaderSourceWGSL wgsl{};
  wgsl.chain.sType = WGPUSType_ShaderSourceWGSL;
  wgsl.code = sv(source);
  WGPUShaderModuleDescriptor desc{};
  desc.nextInChain = &wgsl.chain;
  desc.label = sv(label);
  return scoped(dev, fmt::format("compiling WGSL '{}'", label), [&] {
    return ShaderModule::adopt(wgpuDeviceCreateShaderModule(dev.get(), &desc));
  });
}

uint32_t subgroup_lanes(const DeviceCaps& caps) {
  if (!caps.subgroups || caps.subgroup_min_size != caps.subgroup_max_size || caps.subgroup_min_size == 0) return 1;
  return std::min<uint32_t>(caps.subgroup_min_size, 32);
}

namespace {

constexpr std::string_view kSubgroupPrelude =
    "enable subgroups;\nfn sg_xor(v: f32, mask: u32) -> f32 { return subgroupShuffleXor(v, mask); }\n";
constexpr std::string_view kNoSubgroupPrelude = "fn sg_xor(v: f32, mask: u32) -> f32 { return v; }\n";

Pipeline make_pipeline(Device& dev, std::string_view label, WGPUShaderModule module,
                       const std::string& entry, const std::vector<OverrideConstant>& constants) {
  std::vector<WGPUConstantEntry> entries;
  for (const auto& c : constants) {
    WGPUConstantEntry e{};
    e.key = sv(c.name);
    e.value = c.value;
    entries.push_back(e);
  }
  WGPUComputePipelineDescriptor desc{};
  desc.label = sv(label);
  desc.layout = nullptr;  // derived from the shader: group 0 is the kernel's bindings
  desc.compute.module = module;
  desc.compute.entryPoint = sv(entry);
  desc.compute.constantCount = entries.size();
  desc.compute.constants = entries.data();
  std::string what = fmt::format("creating pipeline '{}' (entry {})", label, entry);
  Pipeline p;
  set_dump_pipeline(dev, fmt::format("{} (entry {})", label, entry));
  p.pipeline = scoped(dev, what, [&] {
    return ComputePipeline::adopt(wgpuDeviceCreateComputePipeline(dev.get(), &desc));
  });
  set_dump_pipeline(dev, "");
  p.layout = scoped(dev, what + " layout", [&] {
    return BindGroupLayout::adopt(wgpuComputePipelineGetBindGroupLayout(p.pipeline.get(), 0));
  });
  return p;
}

}  // namespace

const Pipeline& get_pipeline(Device& dev, const PipelineKey& key) {
  PipelineCache& cache = *dev.pipelines;
  if (auto it = cache.pipelines.find(key); it != cache.pipelines.end()) {
    ++cache.hits;
    return *it->second;
  }
  ++cache.misses;
  const std::string module_name = key.sg_shim ? key.kernel + "+sg" : key.kernel;
  auto mod = cache.modules.find(module_name);
  if (mod == cache.modules.end()) {
    std::string source = kernel_module_source(key.kernel);
    if (key.sg_shim)
      source = hoist_directives(std::string(dev.caps.subgroups ? kSubgroupPrelude : kNoSubgroupPrelude) + source);
    mod = cache.modules.emplace(module_name, compile_wgsl(dev, key.kernel, source)).first;
  }
  std::string label = key.kernel;
  for (const auto& c : key.constants) label += fmt::format(" {}={}", c.name, c.value);
  if (cache.on_create) cache.on_create(label);
  auto p = std::make_unique<Pipeline>(
      make_pipeline(dev, label, mod->second.get(), key.entry, key.constants));
  return *cache.pipelines.emplace(key, std::move(p)).first->second;
}

Pipeline create_pipeline(Device& dev, std::string_view label, std::string_view source,
                         const std::string& entry, const std::vector<OverrideConstant>& constants) {
  ShaderModule mod = compile_wgsl(dev, label, source);
  return make_pipeline(dev, label, mod.get(), entry, constants);
}

BindGroup create_bind_group(Device& dev, WGPUBindGroupLayout layout,
                            std::span<const BufferBinding> entries, std::string_view label) {
  std::vector<WGPUBindGroupEntry> raw;
  raw.reserve(entries.size());
  for (const auto& b : entries) {
    WGPUBindGroupEntry e{};
    e.binding = b.binding;
    e.buffer = b.buffer;
    e.offset = b.offset;
    e.size = b.size;
    raw.push_back(e);
  }
  WGPUBindGroupDescriptor desc{};
  desc.label = sv(label);
  desc.layout = layout;
  desc.entryCount = raw.size();
  desc.entries = raw.data();
  return scoped(dev, fmt::format("creating bind group '{}'", label),
                [&] { return BindGroup::adopt(wgpuDeviceCreateBindGroup(dev.get(), &desc)); });
}

}  // namespace wgrt::gpu
