#include "gpu/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "gpu/dawn_loader.h"
#include "gpu/disk_cache.h"
#include "gpu/pipeline.h"
#include "support/knobs.h"

namespace wgrt::gpu {

// Written by Dawn's callbacks (possibly from Dawn's threads), read at sync points.
struct ErrorSink {
  std::mutex mu;
  std::string first_error;  // first uncaptured error since the last sync point
  int more_errors = 0;
  bool lost = false;
  std::string lost_message;
  bool closing = false;  // ~Device: the loss that follows is wgrt's own teardown
};

// WGRT_SHADER_DUMP=DIR: what Dawn's dump_shaders toggle logs (the WGSL it was given, and the
// code it hands the driver: SPIR-V disassembly on Vulkan), one file per message, DIR/NNNN.txt,
// under a line naming the pipeline being created (set_dump_pipeline). For reading what a
// kernel becomes; bench/shader-stats turns the SPIR-V into the driver's register counts.
struct ShaderDump {
  std::mutex mu;
  std::string dir;
  std::string pipeline;  // the one being created, "" outside pipeline creation
  int files = 0;
};

namespace {

// The device's knobs (support/knobs.h).
const knobs::Text kToggles{"WGRT_TOGGLES",
                           "Dawn toggles, comma-separated: NAME or -NAME (disables it), after instance:, adapter: or device: (default device:)"};
const knobs::Choice kLimits{"WGRT_LIMITS", "adapter|default", "adapter",
                            "the limits the device asks for: the adapter's maximum or WebGPU's defaults"};
const knobs::Count kAdapter{"WGRT_ADAPTER", -1, 1024, -1, "the adapter, by its index in `wgrt info` (-1: the best GPU)"};
const knobs::Choice kSubgroups{"WGRT_SUBGROUPS", "0|1", "1", "0 keeps kernels off subgroup operations"};
const knobs::Text kShaderDump{"WGRT_SHADER_DUMP", "a folder for the WGSL and SPIR-V of every pipeline (Dawn's dump_shaders)",
                              knobs::Lab};

// A knob's value, its errors as GpuError (what create_device throws).
template <class F>
auto device_knob(F&& get) {
  try {
    return get();
  } catch (const std::invalid_argument& e) {
    throw GpuError(e.what());
  }
}

void on_log(WGPULoggingType, WGPUStringView message, void* u1, void*) {
  auto* d = static_cast<ShaderDump*>(u1);
  std::lock_guard lock(d->mu);
  const std::string path = fmt::format("{}/{:04d}.txt", d->dir, d->files++);
  std::ofstream f(path, std::ios::binary);
  f << "// wgrt pipeline: " << (d->pipeline.empty() ? "(none)" : d->pipeline) << "\n";
  f << to_string(message) << "\n";
}

}  // namespace

void set_dump_pipeline(Device& dev, const std::string& label) {
  if (!dev.dump) return;
  std::lock_guard lock(dev.dump->mu);
  dev.dump->pipeline = label;
}

Device::Device() = default;
Device::Device(Device&&) noexcept = default;
Device& Device::operator=(Device&&) noexcept = default;
Device::~Device() {
  // Objects before the device, the device before the sink its callbacks write to.
  if (errors) {
    std::lock_guard lock(errors->mu);
    errors->closing = true;
  }
  pipelines.reset();
  queue.reset();
  device.reset();
  if (instance) wgpuInstanceProcessEvents(instance.get());
  adapter.reset();
  instance.reset();
  errors.reset();
  dump.reset();
  disk_cache.reset();
}

std::string cache_isolation_key(const AdapterDesc& a) {
  uint64_t kernels = 0xcbf29ce484222325ull;
  for (const EmbeddedKernel& k : embedded_kernels()) {
    kernels = fnv1a64(k.name, std::strlen(k.name) + 1, kernels);
    kernels = fnv1a64(k.source, std::strlen(k.source) + 1, kernels);
  }
  // Dawn's own keys carry its version and the adapter too; the isolation key adds what only
  // wgrt knows (its kernels) and keeps entries apart even where Dawn's description of an
  // adapter would not.
  const std::string what = fmt::format("dawn c5d549e250; {} {:04x}:{:04x} {}; {}; {}; kernels {:016x}", a.name,
                                       a.vendor_id, a.device_id, backend_name(a.backend), a.driver, a.architecture,
                                       kernels);
  return fmt::format("wgrt{:016x}", fnv1a64(what.data(), what.size()));
}

const char* backend_name(WGPUBackendType t) {
  switch (t) {
    case WGPUBackendType_Null: return "null";
    case WGPUBackendType_WebGPU: return "webgpu";
    case WGPUBackendType_D3D11: return "d3d11";
    case WGPUBackendType_D3D12: return "d3d12";
    case WGPUBackendType_Metal: return "metal";
    case WGPUBackendType_Vulkan: return "vulkan";
    case WGPUBackendType_OpenGL: return "opengl";
    case WGPUBackendType_OpenGLES: return "opengles";
    default: return "undefined";
  }
}

const char* adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete GPU";
    case WGPUAdapterType_IntegratedGPU: return "integrated GPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "unknown";
  }
}

std::string feature_name(WGPUFeatureName f) {
  switch (f) {
    case WGPUFeatureName_DepthClipControl: return "depth-clip-control";
    case WGPUFeatureName_Depth32FloatStencil8: return "depth32float-stencil8";
    case WGPUFeatureName_TimestampQuery: return "timestamp-query";
    case WGPUFeatureName_TextureCompressionBC: return "texture-compression-bc";
    case WGPUFeatureName_TextureCompressionBCSliced3D: return "texture-compression-bc-sliced-3d";
    case WGPUFeatureName_TextureCompressionETC2: return "texture-compression-etc2";
    case WGPUFeatureName_TextureCompressionASTC: return "texture-compression-astc";
    case WGPUFeatureName_TextureCompressionASTCSliced3D:
      return "texture-compression-astc-sliced-3d";
    case WGPUFeatureName_IndirectFirstInstance: return "indirect-first-instance";
    case WGPUFeatureName_ShaderF16: return "shader-f16";
    case WGPUFeatureName_RG11B10UfloatRenderable: return "rg11b10ufloat-renderable";
    case WGPUFeatureName_BGRA8UnormStorage: return "bgra8unorm-storage";
    case WGPUFeatureName_Float32Filterable: return "float32-filterable";
    case WGPUFeatureName_Float32Blendable: return "float32-blendable";
    case WGPUFeatureName_ClipDistances: return "clip-distances";
    case WGPUFeatureName_DualSourceBlending: return "dual-source-blending";
    case WGPUFeatureName_Subgroups: return "subgroups";
    case WGPUFeatureName_CoreFeaturesAndLimits: return "core-features-and-limits";
    case WGPUFeatureName_ChromiumExperimentalTimestampQueryInsidePasses:
      return "chromium-experimental-timestamp-query-inside-passes";
    case WGPUFeatureName_ShaderModuleCompilationOptions:
      return "shader-module-compilation-options";
    case WGPUFeatureName_ChromiumExperimentalSubgroupMatrix:
      return "chromium-experimental-subgroup-matrix";
    default: return fmt::format("dawn-feature-0x{:x}", uint32_t(f));
  }
}

const char* component_type_name(WGPUSubgroupMatrixComponentType t) {
  switch (t) {
    case WGPUSubgroupMatrixComponentType_F32: return "f32";
    case WGPUSubgroupMatrixComponentType_F16: return "f16";
    case WGPUSubgroupMatrixComponentType_U32: return "u32";
    case WGPUSubgroupMatrixComponentType_I32: return "i32";
    case WGPUSubgroupMatrixComponentType_U8: return "u8";
    case WGPUSubgroupMatrixComponentType_I8: return "i8";
    default: return "unknown";
  }
}

std::string config_name(const SubgroupMatrixConfig& c) {
  return fmt::format("{0}x{0}->{1} m{2}n{3}k{4}", component_type_name(c.component),
                     component_type_name(c.result), c.m, c.n, c.k);
}

namespace {

WGPUBackendType parse_backend(const std::string& name) {
  if (name.empty()) return WGPUBackendType_Undefined;
  static const std::pair<const char*, WGPUBackendType> table[] = {
      {"vulkan", WGPUBackendType_Vulkan},   {"metal", WGPUBackendType_Metal},
      {"d3d12", WGPUBackendType_D3D12},     {"d3d11", WGPUBackendType_D3D11},
      {"opengl", WGPUBackendType_OpenGL},   {"opengles", WGPUBackendType_OpenGLES},
      {"null", WGPUBackendType_Null}};
  for (auto& [n, t] : table)
    if (name == n) return t;
  throw GpuError(fmt::format(
      "unknown backend '{}' (hint: one of vulkan, metal, d3d12, d3d11, opengl, opengles, null)",
      name));
}

// Dawn's toggles by the stage that reads them (DeviceOptions::toggles).
struct StageToggles {
  std::vector<std::string> enabled, disabled;
};
struct Toggles {
  StageToggles instance, adapter, device;
};

Toggles parse_toggles(const DeviceOptions& opts) {
  std::vector<std::string> entries(std::begin(kDefaultToggles), std::end(kDefaultToggles));
  entries.insert(entries.end(), opts.toggles.begin(), opts.toggles.end());
  if (const auto env = device_knob([] { return kToggles.get(); })) {
    std::string_view list(*env);
    while (!list.empty()) {
      size_t comma = list.find(',');
      if (std::string_view e = list.substr(0, comma); !e.empty()) entries.emplace_back(e);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
  }
  Toggles t;
  for (std::string_view e : entries) {
    StageToggles* stage = &t.device;
    if (size_t colon = e.find(':'); colon != std::string_view::npos) {
      std::string_view name = e.substr(0, colon);
      stage = name == "instance" ? &t.instance : name == "adapter" ? &t.adapter
              : name == "device" ? &t.device : nullptr;
      if (!stage)
        throw GpuError(fmt::format("toggle '{}' names no stage '{}' (hint: instance:NAME, "
                                   "adapter:NAME or device:NAME; -NAME disables)", e, name));
      e = e.substr(colon + 1);
    }
    bool off = e.starts_with('-');
    std::string name(off ? e.substr(1) : e);
    if (name.empty()) throw GpuError(fmt::format("an empty toggle name in '{}'", e));
    auto& keep = off ? stage->disabled : stage->enabled;
    auto& drop = off ? stage->enabled : stage->disabled;
    std::erase(drop, name);  // the last word on a toggle wins
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) keep.push_back(name);
  }
  return t;
}

// A DawnTogglesDescriptor over `t`, valid while `t` and `ptrs` live.
WGPUDawnTogglesDescriptor toggles_desc(const StageToggles& t, std::vector<const char*>& ptrs) {
  ptrs.clear();
  for (const auto& n : t.enabled) ptrs.push_back(n.c_str());
  for (const auto& n : t.disabled) ptrs.push_back(n.c_str());
  WGPUDawnTogglesDescriptor d{};
  d.chain.sType = WGPUSType_DawnTogglesDescriptor;
  d.enabledToggleCount = t.enabled.size();
  d.enabledToggles = ptrs.data();
  d.disabledToggleCount = t.disabled.size();
  d.disabledToggles = ptrs.data() + t.enabled.size();
  return d;
}

Instance make_instance(const Toggles& toggles) {
  load_dawn();
  std::vector<const char*> ptrs;
  WGPUDawnTogglesDescriptor td = toggles_desc(toggles.instance, ptrs);
  const WGPUInstanceFeatureName features[] = {WGPUInstanceFeatureName_TimedWaitAny};
  WGPUInstanceDescriptor desc{};
  desc.nextInChain = &td.chain;
  desc.requiredFeatureCount = 1;  // TimedWaitAny lets wait() block instead of spinning
  desc.requiredFeatures = features;
  auto inst = Instance::adopt(wgpuCreateInstance(&desc));
  if (!inst) throw GpuError("could not create a WebGPU instance (Dawn failed to start)");
  return inst;
}

void wait_on(WGPUInstance instance, WGPUFuture future) {
  WGPUFutureWaitInfo info{future, 0};
  WGPUWaitStatus s = wgpuInstanceWaitAny(instance, 1, &info, UINT64_MAX);
  if (s != WGPUWaitStatus_Success || !info.completed)
    throw GpuError(fmt::format("waiting on a WebGPU future failed (status {})", int(s)));
}

AdapterDesc describe(WGPUAdapter adapter) {
  WGPUAdapterInfo info{};
  if (wgpuAdapterGetInfo(adapter, &info) != WGPUStatus_Success)
    throw GpuError("wgpuAdapterGetInfo failed");
  AdapterDesc d;
  d.name = to_string(info.device);
  d.vendor = to_string(info.vendor);
  d.architecture = to_string(info.architecture);
  d.driver = to_string(info.description);
  d.backend = info.backendType;
  d.type = info.adapterType;
  d.vendor_id = info.vendorID;
  d.device_id = info.deviceID;
  wgpuAdapterInfoFreeMembers(info);
  return d;
}

// The largest device-local memory heap, where the adapter reports its heaps (else 0): what the
// memory plan checks a model's total against.
uint64_t device_local_memory(WGPUAdapter adapter) {
  if (!wgpuAdapterHasFeature(adapter, WGPUFeatureName_AdapterPropertiesMemoryHeaps)) return 0;
  WGPUAdapterPropertiesMemoryHeaps heaps{};
  heaps.chain.sType = WGPUSType_AdapterPropertiesMemoryHeaps;
  WGPUAdapterInfo info{};
  info.nextInChain = &heaps.chain;
  if (wgpuAdapterGetInfo(adapter, &info) != WGPUStatus_Success) return 0;
  uint64_t largest = 0;
  for (size_t i = 0; i < heaps.heapCount; ++i)
    if (heaps.heapInfo[i].properties & WGPUHeapProperty_DeviceLocal) largest = std::max(largest, heaps.heapInfo[i].size);
  wgpuAdapterPropertiesMemoryHeapsFreeMembers(heaps);
  wgpuAdapterInfoFreeMembers(info);
  return largest;
}

Adapter request_adapter(WGPUInstance instance, const StageToggles& toggles, WGPUBackendType backend,
                        WGPUPowerPreference pref, bool fallback) {
  std::vector<const char*> ptrs;
  WGPUDawnTogglesDescriptor td = toggles_desc(toggles, ptrs);
  WGPURequestAdapterOptions opts{};
  opts.nextInChain = &td.chain;
  opts.featureLevel = WGPUFeatureLevel_Core;
  opts.powerPreference = pref;
  opts.forceFallbackAdapter = fallback ? 1 : 0;
  opts.backendType = backend;
  WGPUAdapter got = nullptr;
  WGPURequestAdapterCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPURequestAdapterStatus status, WGPUAdapter a, WGPUStringView, void* u1,
                   void*) {
    if (status == WGPURequestAdapterStatus_Success) *static_cast<WGPUAdapter*>(u1) = a;
  };
  cb.userdata1 = &got;
  wait_on(instance, wgpuInstanceRequestAdapter(instance, &opts, cb));
  return Adapter::adopt(got);
}

int type_rank(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return 0;
    case WGPUAdapterType_IntegratedGPU: return 1;
    case WGPUAdapterType_CPU: return 3;
    default: return 2;
  }
}

struct Candidate {
  Adapter adapter;
  AdapterDesc desc;
};

// Dawn's C API has no enumeration call; asking with each power preference and with the
// fallback flag finds every distinct adapter it would hand out.
std::vector<Candidate> find_adapters(WGPUInstance instance, const DeviceOptions& opts,
                                     const Toggles& toggles) {
  WGPUBackendType backend = parse_backend(opts.backend);
  std::vector<Candidate> found;
  const std::pair<WGPUPowerPreference, bool> asks[] = {
      {WGPUPowerPreference_HighPerformance, false},
      {WGPUPowerPreference_LowPower, false},
      {WGPUPowerPreference_Undefined, true}};
  for (auto [pref, fallback] : asks) {
    Adapter a = request_adapter(instance, toggles.adapter, backend, pref, fallback);
    if (!a) continue;
    AdapterDesc d = describe(a.get());
    bool seen = std::any_of(found.begin(), found.end(), [&](const Candidate& c) {
      return c.desc.name == d.name && c.desc.backend == d.backend &&
             c.desc.vendor_id == d.vendor_id && c.desc.device_id == d.device_id;
    });
    if (!seen) found.push_back({std::move(a), std::move(d)});
  }
  std::stable_sort(found.begin(), found.end(), [](const Candidate& x, const Candidate& y) {
    return type_rank(x.desc.type) < type_rank(y.desc.type);
  });
  return found;
}

// WGRT_LIMITS: unset, empty or "adapter" (the adapter's maximum), or "default".
bool want_default_limits(const DeviceOptions& opts) {
  return device_knob([] { return kLimits.get(); }) == "default" || opts.default_limits;
}

int chosen_index(const DeviceOptions& opts, size_t count) {
  int index = opts.adapter_index;
  std::string source = "--adapter";
  if (index < 0) {
    if (const int64_t v = device_knob([] { return kAdapter.get(); }); v >= 0) {
      index = int(v);
      source = "WGRT_ADAPTER";
    }
  }
  if (index < 0) return 0;
  if (size_t(index) >= count)
    throw GpuError(fmt::format("{} {} is out of range: {} adapter(s) found (hint: `wgrt info` "
                               "lists them)", source, index, count));
  return index;
}

void on_device_lost(WGPUDevice const*, WGPUDeviceLostReason reason, WGPUStringView message,
                    void* u1, void*) {
  // CallbackCancelled is the instance going away: teardown, not a failure. Destroyed is too
  // when ~Device releases the device; any other destroy (a test's, a driver's) is a loss.
  if (reason == WGPUDeviceLostReason_CallbackCancelled) return;
  auto* sink = static_cast<ErrorSink*>(u1);
  std::lock_guard lock(sink->mu);
  if (sink->closing || sink->lost) return;
  sink->lost = true;
  const char* why = reason == WGPUDeviceLostReason_Destroyed ? "destroyed"
                    : reason == WGPUDeviceLostReason_FailedCreation ? "failed at creation"
                                                                    : "lost";
  sink->lost_message = fmt::format("{}: {}", why, to_string(message));
}

void on_uncaptured_error(WGPUDevice const*, WGPUErrorType type, WGPUStringView message, void* u1,
                         void*) {
  auto* sink = static_cast<ErrorSink*>(u1);
  std::lock_guard lock(sink->mu);
  if (sink->first_error.empty()) {
    const char* kind = type == WGPUErrorType_Validation    ? "validation"
                       : type == WGPUErrorType_OutOfMemory ? "out of memory"
                       : type == WGPUErrorType_Internal    ? "internal"
                                                           : "unknown";
    sink->first_error = fmt::format("WebGPU {} error: {}", kind, to_string(message));
  } else {
    ++sink->more_errors;
  }
}

}  // namespace

std::vector<AdapterDesc> list_adapters(const DeviceOptions& opts) {
  Toggles toggles = parse_toggles(opts);
  Instance instance = make_instance(toggles);
  std::vector<AdapterDesc> out;
  for (auto& c : find_adapters(instance.get(), opts, toggles)) out.push_back(c.desc);
  return out;
}

Device create_device(const DeviceOptions& opts) {
  Device dev;
  dev.errors = std::make_unique<ErrorSink>();
  Toggles toggles = parse_toggles(opts);
  dev.instance = make_instance(toggles);
  auto candidates = find_adapters(dev.instance.get(), opts, toggles);
  if (candidates.empty())
    throw GpuError(fmt::format(
        "no WebGPU adapter found{} (hint: install a Vulkan driver, e.g. mesa-vulkan-drivers "
        ">= 25 for a CPU device, or check VK_DRIVER_FILES)",
        opts.backend.empty() ? "" : " for backend " + opts.backend));
  int index = chosen_index(opts, candidates.size());
  dev.adapter = std::move(candidates[size_t(index)].adapter);
  dev.caps.adapter = candidates[size_t(index)].desc;
  WGPUAdapter adapter = dev.adapter.get();

  WGPULimits limits{};
  if (wgpuAdapterGetLimits(adapter, &limits) != WGPUStatus_Success)
    throw GpuError("wgpuAdapterGetLimits failed");
  limits.nextInChain = nullptr;

  WGPUSupportedFeatures supported{};
  wgpuAdapterGetFeatures(adapter, &supported);
  dev.caps.adapter_features.assign(supported.features, supported.features + supported.featureCount);
  wgpuSupportedFeaturesFreeMembers(supported);
  auto offered = [&](WGPUFeatureName f) {
    return std::find(dev.caps.adapter_features.begin(), dev.caps.adapter_features.end(), f) !=
           dev.caps.adapter_features.end();
  };
  const bool want_subgroups = opts.subgroups && device_knob([] { return kSubgroups.get(); }) == "1";
  std::vector<WGPUFeatureName> wanted;
  for (auto f : {WGPUFeatureName_ShaderF16, WGPUFeatureName_Subgroups,
                 WGPUFeatureName_TimestampQuery, WGPUFeatureName_ChromiumExperimentalSubgroupMatrix}) {
    bool needs_subgroups = f == WGPUFeatureName_Subgroups ||
                           f == WGPUFeatureName_ChromiumExperimentalSubgroupMatrix;
    if (offered(f) && (!needs_subgroups || want_subgroups)) wanted.push_back(f);
  }

  if (const auto dump_dir = kShaderDump.get()) {
    dev.dump = std::make_unique<ShaderDump>();
    dev.dump->dir = *dump_dir;
    std::erase(toggles.device.disabled, "dump_shaders");
    std::erase(toggles.device.enabled, "dump_shaders");
    toggles.device.enabled.emplace_back("dump_shaders");
  }
  std::vector<const char*> toggle_ptrs;
  WGPUDawnTogglesDescriptor device_toggles = toggles_desc(toggles.device, toggle_ptrs);

  const std::string cache_dir = resolve_cache_dir(opts.cache_dir);
  if (!cache_dir.empty()) dev.disk_cache = open_disk_cache(cache_dir);
  const std::string isolation = cache_isolation_key(dev.caps.adapter);
  WGPUDawnCacheDeviceDescriptor cache_desc{};
  cache_desc.chain.sType = WGPUSType_DawnCacheDeviceDescriptor;
  cache_desc.isolationKey = sv(isolation);
  cache_desc.loadDataFunction = disk_cache_load;
  cache_desc.storeDataFunction = disk_cache_store;
  cache_desc.functionUserdata = dev.disk_cache.get();
  if (dev.disk_cache) device_toggles.chain.next = &cache_desc.chain;

  WGPUDeviceDescriptor desc{};
  desc.nextInChain = &device_toggles.chain;
  desc.label = sv("wgrt");
  desc.requiredFeatureCount = wanted.size();
  desc.requiredFeatures = wanted.data();
  // No required limits: Dawn grants WebGPU's defaults.
  WGPULimits asked = limits;
  if (opts.workgroup_storage) {
    if (want_default_limits(opts) || opts.workgroup_storage < 16384 ||
        opts.workgroup_storage > limits.maxComputeWorkgroupStorageSize)
      throw GpuError(fmt::format("workgroup storage of {} bytes asked; the adapter grants 16384 to {} (and not with "
                                 "WebGPU's default limits)", opts.workgroup_storage,
                                 limits.maxComputeWorkgroupStorageSize));
    asked.maxComputeWorkgroupStorageSize = opts.workgroup_storage;
  }
  desc.requiredLimits = want_default_limits(opts) ? nullptr : &asked;
  desc.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  desc.deviceLostCallbackInfo.callback = on_device_lost;
  desc.deviceLostCallbackInfo.userdata1 = dev.errors.get();
  desc.uncapturedErrorCallbackInfo.callback = on_uncaptured_error;
  desc.uncapturedErrorCallbackInfo.userdata1 = dev.errors.get();

  struct Result {
    WGPUDevice device = nullptr;
    std::string message;
  } result;
  WGPURequestDeviceCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice d, WGPUStringView message, void* u1,
                   void*) {
    auto* r = static_cast<Result*>(u1);
    if (status == WGPURequestDeviceStatus_Success) r->device = d;
    else r->message = to_string(message);
  };
  cb.userdata1 = &result;
  wait_on(dev.instance.get(), wgpuAdapterRequestDevice(adapter, &desc, cb));
  if (!result.device)
    throw GpuError(fmt::format("requesting a device on '{}' failed: {}", dev.caps.adapter.name,
                               result.message));
  dev.device = DeviceHandle::adopt(result.device);
  dev.queue = Queue::adopt(wgpuDeviceGetQueue(dev.get()));
  if (dev.dump) {
    WGPULoggingCallbackInfo log{};
    log.callback = on_log;
    log.userdata1 = dev.dump.get();
    wgpuDeviceSetLoggingCallback(dev.get(), log);
  }

  WGPULimits granted{};
  wgpuDeviceGetLimits(dev.get(), &granted);
  granted.nextInChain = nullptr;
  dev.caps.limits = granted;
  dev.caps.shader_f16 = wgpuDeviceHasFeature(dev.get(), WGPUFeatureName_ShaderF16);
  dev.caps.subgroups = wgpuDeviceHasFeature(dev.get(), WGPUFeatureName_Subgroups);
  dev.caps.timestamp_query = wgpuDeviceHasFeature(dev.get(), WGPUFeatureName_TimestampQuery);
  dev.caps.subgroup_matrix =
      wgpuDeviceHasFeature(dev.get(), WGPUFeatureName_ChromiumExperimentalSubgroupMatrix);

  WGPUAdapterPropertiesSubgroupMatrixConfigs matrices{};
  matrices.chain.sType = WGPUSType_AdapterPropertiesSubgroupMatrixConfigs;
  WGPUAdapterInfo info{};
  if (dev.caps.subgroup_matrix) info.nextInChain = &matrices.chain;
  if (wgpuAdapterGetInfo(adapter, &info) == WGPUStatus_Success) {
    dev.caps.subgroup_min_size = info.subgroupMinSize;
    dev.caps.subgroup_max_size = info.subgroupMaxSize;
    for (size_t i = 0; i < matrices.configCount; ++i) {
      const WGPUSubgroupMatrixConfig& c = matrices.configs[i];
      dev.caps.subgroup_matrix_configs.push_back({c.componentType, c.resultComponentType, c.M, c.N, c.K});
    }
    if (dev.caps.subgroup_matrix) wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers(matrices);
    wgpuAdapterInfoFreeMembers(info);
  }
  dev.caps.device_memory = device_local_memory(adapter);
  dev.pipelines = std::make_unique<PipelineCache>();
  return dev;
}

namespace {

[[noreturn]] void throw_lost(const Device& dev, const std::string& lost_message) {
  throw DeviceLostError(fmt::format(
      "the WebGPU device on '{}' was {}: its buffers, pipelines and the model on it are gone (hint: "
      "restart wgrt; if it recurs, the GPU driver reset or ran out of memory: try a smaller "
      "--ctx-size or model)", dev.caps.adapter.name, lost_message));
}

}  // namespace

bool is_lost(Device& dev) {
  if (!dev.instance || !dev.errors) return false;
  wgpuInstanceProcessEvents(dev.instance.get());
  std::lock_guard lock(dev.errors->mu);
  return dev.errors->lost;
}

void check(Device& dev) {
  wgpuInstanceProcessEvents(dev.instance.get());
  std::lock_guard lock(dev.errors->mu);
  if (dev.errors->lost) throw_lost(dev, dev.errors->lost_message);
  if (!dev.errors->first_error.empty()) {
    std::string msg = std::move(dev.errors->first_error);
    if (dev.errors->more_errors) msg += fmt::format(" (and {} more)", dev.errors->more_errors);
    dev.errors->first_error.clear();
    dev.errors->more_errors = 0;
    throw GpuError(msg);
  }
}

void wait(Device& dev, WGPUFuture future) {
  try {
    wait_on(dev.instance.get(), future);
  } catch (const GpuError&) {
    check(dev);  // a lost device explains the failed wait better
    throw;
  }
}

void wait_idle(Device& dev) {
  WGPUQueueWorkDoneStatus status = WGPUQueueWorkDoneStatus_Error;
  WGPUQueueWorkDoneCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUQueueWorkDoneStatus s, WGPUStringView, void* u1, void*) {
    *static_cast<WGPUQueueWorkDoneStatus*>(u1) = s;
  };
  cb.userdata1 = &status;
  wait(dev, wgpuQueueOnSubmittedWorkDone(dev.queue.get(), cb));
  check(dev);
  if (status != WGPUQueueWorkDoneStatus_Success)
    throw GpuError(fmt::format("queue work failed to complete (status {})", int(status)));
}

void push_error_scopes(Device& dev) {
  wgpuDevicePushErrorScope(dev.get(), WGPUErrorFilter_OutOfMemory);
  wgpuDevicePushErrorScope(dev.get(), WGPUErrorFilter_Validation);
}

void pop_error_scopes(Device& dev, const std::string& what) {
  std::string first;
  for (int i = 0; i < 2; ++i) {  // validation first (pushed last), then out-of-memory
    struct Popped {
      WGPUErrorType type = WGPUErrorType_NoError;
      std::string message;
    } popped;
    WGPUPopErrorScopeCallbackInfo cb{};
    cb.mode = WGPUCallbackMode_WaitAnyOnly;
    cb.callback = [](WGPUPopErrorScopeStatus, WGPUErrorType type, WGPUStringView message,
                     void* u1, void*) {
      auto* p = static_cast<Popped*>(u1);
      p->type = type;
      p->message = to_string(message);
    };
    cb.userdata1 = &popped;
    wait(dev, wgpuDevicePopErrorScope(dev.get(), cb));
    if (popped.type != WGPUErrorType_NoError && first.empty())
      first = popped.message.empty() ? "unknown WebGPU error" : popped.message;
  }
  // A lost device reports no scoped errors: what was made is an invalid object.
  if (is_lost(dev)) {
    std::lock_guard lock(dev.errors->mu);
    throw_lost(dev, fmt::format("{} (while {})", dev.errors->lost_message, what));
  }
  if (!first.empty()) throw GpuError(fmt::format("{}: {}", what, first));
}

}  // namespace wgrt::gpu
