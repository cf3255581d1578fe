// `wgrt info`: the adapter and what it offers (all adapters with --all).
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "support/knobs.h"

namespace wgrt::cli {
namespace {

std::vector<std::pair<const char*, uint64_t>> limit_entries(const WGPULimits& l) {
  return {
      {"maxTextureDimension1D", l.maxTextureDimension1D},
      {"maxTextureDimension2D", l.maxTextureDimension2D},
      {"maxTextureDimension3D", l.maxTextureDimension3D},
      {"maxTextureArrayLayers", l.maxTextureArrayLayers},
      {"maxBindGroups", l.maxBindGroups},
      {"maxBindGroupsPlusVertexBuffers", l.maxBindGroupsPlusVertexBuffers},
      {"maxBindingsPerBindGroup", l.maxBindingsPerBindGroup},
      {"maxDynamicUniformBuffersPerPipelineLayout", l.maxDynamicUniformBuffersPerPipelineLayout},
      {"maxDynamicStorageBuffersPerPipelineLayout", l.maxDynamicStorageBuffersPerPipelineLayout},
      {"maxSampledTexturesPerShaderStage", l.maxSampledTexturesPerShaderStage},
      {"maxSamplersPerShaderStage", l.maxSamplersPerShaderStage},
      {"maxStorageBuffersPerShaderStage", l.maxStorageBuffersPerShaderStage},
      {"maxStorageTexturesPerShaderStage", l.maxStorageTexturesPerShaderStage},
      {"maxUniformBuffersPerShaderStage", l.maxUniformBuffersPerShaderStage},
      {"maxUniformBufferBindingSize", l.maxUniformBufferBindingSize},
      {"maxStorageBufferBindingSize", l.maxStorageBufferBindingSize},
      {"minUniformBufferOffsetAlignment", l.minUniformBufferOffsetAlignment},
      {"minStorageBufferOffsetAlignment", l.minStorageBufferOffsetAlignment},
      {"maxVertexBuffers", l.maxVertexBuffers},
      {"maxBufferSize", l.maxBufferSize},
      {"maxVertexAttributes", l.maxVertexAttributes},
      {"maxVertexBufferArrayStride", l.maxVertexBufferArrayStride},
      {"maxInterStageShaderVariables", l.maxInterStageShaderVariables},
      {"maxColorAttachments", l.maxColorAttachments},
      {"maxColorAttachmentBytesPerSample", l.maxColorAttachmentBytesPerSample},
      {"maxComputeWorkgroupStorageSize", l.maxComputeWorkgroupStorageSize},
      {"maxComputeInvocationsPerWorkgroup", l.maxComputeInvocationsPerWorkgroup},
      {"maxComputeWorkgroupSizeX", l.maxComputeWorkgroupSizeX},
      {"maxComputeWorkgroupSizeY", l.maxComputeWorkgroupSizeY},
      {"maxComputeWorkgroupSizeZ", l.maxComputeWorkgroupSizeZ},
      {"maxComputeWorkgroupsPerDimension", l.maxComputeWorkgroupsPerDimension},
      {"maxImmediateSize", l.maxImmediateSize},
  };
}

std::vector<std::string> matrix_configs(const gpu::DeviceCaps& caps) {
  std::vector<std::string> out;
  for (const auto& c : caps.subgroup_matrix_configs) out.push_back(gpu::config_name(c));
  return out;
}

nlohmann::json adapter_json(const gpu::AdapterDesc& a) {
  return {{"name", a.name},
          {"vendor", a.vendor},
          {"architecture", a.architecture},
          {"driver", a.driver},
          {"backend", gpu::backend_name(a.backend)},
          {"adapter_type", gpu::adapter_type_name(a.type)},
          {"vendor_id", a.vendor_id},
          {"device_id", a.device_id}};
}

int run_info(const gpu::DeviceOptions& opts, bool json) {
  std::vector<gpu::AdapterDesc> adapters = gpu::list_adapters(opts);
  gpu::Device dev = gpu::create_device(opts);
  const gpu::DeviceCaps& caps = dev.caps;
  std::vector<std::string> features;
  for (auto f : caps.adapter_features) features.push_back(gpu::feature_name(f));
  if (json) {
    nlohmann::json j;
    j["adapter"] = adapter_json(caps.adapter);
    j["enabled"] = {{"shader-f16", caps.shader_f16},
                    {"subgroups", caps.subgroups},
                    {"timestamp-query", caps.timestamp_query},
                    {"subgroup-matrix", caps.subgroup_matrix}};
    j["subgroup_matrix_configs"] = nlohmann::json::array();
    for (const auto& c : caps.subgroup_matrix_configs)
      j["subgroup_matrix_configs"].push_back(
          {{"component", gpu::component_type_name(c.component)},
           {"result", gpu::component_type_name(c.result)}, {"m", c.m}, {"n", c.n}, {"k", c.k}});
    j["subgroup_size"] = {{"min", caps.subgroup_min_size}, {"max", caps.subgroup_max_size}};
    j["features"] = features;
    j["device_memory"] = caps.device_memory;  // largest device-local heap; 0: not reported
    for (auto& [name, v] : limit_entries(caps.limits)) j["limits"][name] = v;
    j["adapters"] = nlohmann::json::array();
    for (auto& a : adapters) j["adapters"].push_back(adapter_json(a));
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  const auto& a = caps.adapter;
  fmt::print("adapter       {}\n", a.name);
  fmt::print("vendor        {} (0x{:04x}), device 0x{:04x}, architecture {}\n",
             a.vendor.empty() ? "-" : a.vendor, a.vendor_id, a.device_id,
             a.architecture.empty() ? "-" : a.architecture);
  fmt::print("backend       {}\n", gpu::backend_name(a.backend));
  fmt::print("type          {}\n", gpu::adapter_type_name(a.type));
  fmt::print("driver        {}\n", a.driver.empty() ? "-" : a.driver);
  fmt::print("enabled       shader-f16 {}, subgroups {} (size {}..{}), timestamp-query {}\n",
             caps.shader_f16 ? "yes" : "no", caps.subgroups ? "yes" : "no",
             caps.subgroup_min_size, caps.subgroup_max_size, caps.timestamp_query ? "yes" : "no");
  if (caps.subgroup_matrix)
    fmt::print("matrices      subgroup-matrix yes: {}\n", fmt::join(matrix_configs(caps), ", "));
  else
    fmt::print("matrices      subgroup-matrix no\n");
  fmt::print("features      {}\n", fmt::join(features, " "));
  if (caps.device_memory)
    fmt::print("memory        {:.1f} MiB (largest device-local heap)\n", double(caps.device_memory) / 1048576.0);
  else
    fmt::print("memory        not reported (models are checked against the buffer limits only)\n");
  fmt::print("limits\n");
  for (auto& [name, v] : limit_entries(caps.limits)) fmt::print("  {:<42} {}\n", name, v);
  fmt::print("adapters (--adapter N / WGRT_ADAPTER=N)\n");
  for (size_t i = 0; i < adapters.size(); ++i)
    fmt::print("  {}  {} [{}, {}]\n", i, adapters[i].name, gpu::backend_name(adapters[i].backend),
               gpu::adapter_type_name(adapters[i].type));
  return 0;
}

}  // namespace

void add_device_flags(CLI::App& cmd, gpu::DeviceOptions& opts) {
  cmd.add_option("--backend", opts.backend, "WebGPU backend: vulkan, metal, d3d12, opengl, ...")
      ->check(CLI::IsMember({"vulkan", "metal", "d3d12", "d3d11", "opengl", "opengles", "null"}));
  cmd.add_option("--adapter", opts.adapter_index,
                 "adapter index from `wgrt info` (default: env WGRT_ADAPTER, else the best GPU)")
      ->check(integer_in(0, 1 << 16))
      ->default_str("");  // -1 stands for "choose", which the description says
}

Run add_info(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("info", "print the adapter, its limits and features");
  auto json = std::make_shared<bool>(false), knobs = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print JSON for machines");
  cmd->add_flag("--knobs", *knobs, "list the WGRT_* environment variables (docs/KNOBS.md) and exit");
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, json, knobs] {
    if (*knobs) {
      fmt::print("{}", knobs::table());
      return 0;
    }
    return run_info(dev_opts, *json);
  };
}

}  // namespace wgrt::cli
