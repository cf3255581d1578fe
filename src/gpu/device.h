// The WebGPU device: adapter choice, limits and features (DeviceCaps), and the error model.
//
// Errors: object creation runs inside error scopes and throws GpuError with Dawn's message;
// errors outside scopes (uncaptured) and device loss are recorded by callbacks and thrown at
// the next sync point (check(), wait_idle(), a read back). After a thrown validation error
// the device stays usable; after device loss it does not: every later sync point, and every
// creation, throws DeviceLostError again (a lost device is rebuilt, never revived).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/handles.h"

namespace wgrt::gpu {

struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The device is gone (driver reset, out of memory in the driver, wgpuDeviceDestroy, ...):
// nothing made on it works any more; the session must be rebuilt on a new device.
struct DeviceLostError : GpuError {
  using GpuError::GpuError;
};

struct DeviceOptions {
  std::string backend;     // "" (any), "vulkan", "metal", "d3d12", "opengl", "opengles", "null"
  int adapter_index = -1;  // index into list_adapters(); -1: env WGRT_ADAPTER, else best GPU
  // Off: the subgroups feature is not requested (kernels take their workgroup-memory paths).
  // Env WGRT_SUBGROUPS=0 turns it off too.
  bool subgroups = true;
  // Dawn toggles to enable, e.g. "disable_robustness" (docs/perf/2026-12-01.md, "Dawn device toggles", says which are
  // safe). Each is set at the stage Dawn reads it: "instance:NAME", "adapter:NAME" or
  // "device:NAME" (the default stage); "-NAME" disables one, e.g. "adapter:-vulkan_enable_f16_on_nvidia".
  // Env WGRT_TOGGLES adds a comma-separated list. kDefaultToggles are set first.
  std::vector<std::string> toggles;
  // On: request WebGPU's default limits (16 KiB of workgroup storage, 256 invocations per
  // workgroup, 128 MiB storage bindings, ...) instead of the adapter's maximum, to run as on
  // the smallest conforming adapter. Env WGRT_LIMITS=default turns it on too.
  bool default_limits = false;
  // Nonzero: request exactly this maxComputeWorkgroupStorageSize (from WebGPU's 16 KiB up to the
  // adapter's), the rest as above: tests check C++'s count of a kernel's workgroup memory.
  uint32_t workgroup_storage = 0;
  // Dawn's compiled shaders and pipeline cache on disk (gpu/disk_cache.h): "" for env
  // WGRT_CACHE_DIR, else $XDG_CACHE_HOME/wgrt or ~/.cache/wgrt; "off" for none.
  std::string cache_dir;
};

// Set first, so DeviceOptions::toggles can undo them: the experimental features (subgroup
// matrices) need allow_unsafe_apis; Dawn exposes shader-f16 on NVIDIA's Vulkan driver only
// with vulkan_enable_f16_on_nvidia; timestamps at full resolution (Dawn quantizes them by
// default, a browser's concern).
inline constexpr const char* kDefaultToggles[] = {
    "instance:allow_unsafe_apis", "adapter:vulkan_enable_f16_on_nvidia",
    "device:-timestamp_quantization"};

struct AdapterDesc {
  std::string name;          // e.g. "NVIDIA H200"
  std::string vendor;
  std::string architecture;
  std::string driver;        // Dawn's adapter description: the driver and its version
  WGPUBackendType backend = WGPUBackendType_Undefined;
  WGPUAdapterType type = WGPUAdapterType_Unknown;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
};

// One matrix shape and type pair a subgroup-matrix shader may use (M x K times K x N).
struct SubgroupMatrixConfig {
  WGPUSubgroupMatrixComponentType component = WGPUSubgroupMatrixComponentType_F32;
  WGPUSubgroupMatrixComponentType result = WGPUSubgroupMatrixComponentType_F32;
  uint32_t m = 0, n = 0, k = 0;
};

// What the device can do, passed explicitly to whatever needs it.
struct DeviceCaps {
  AdapterDesc adapter;
  WGPULimits limits{};  // as granted to the device: the adapter's, or WebGPU's defaults
  std::vector<WGPUFeatureName> adapter_features;
  bool shader_f16 = false;
  bool subgroups = false;
  bool timestamp_query = false;
  bool subgroup_matrix = false;  // chromium-experimental-subgroup-matrix enabled
  std::vector<SubgroupMatrixConfig> subgroup_matrix_configs;  // the adapter's, when enabled
  uint32_t subgroup_min_size = 0;
  uint32_t subgroup_max_size = 0;
  uint64_t device_memory = 0;  // bytes of device-local memory the adapter reports; 0: not reported
};

struct ErrorSink;       // callback-owned error record (device.cpp)
struct ShaderDump;      // WGRT_SHADER_DUMP's log sink (device.cpp)
struct PipelineCache;   // pipeline.h
struct DiskCache;       // disk_cache.h

struct Device {
  Instance instance;
  Adapter adapter;
  DeviceHandle device;
  Queue queue;
  DeviceCaps caps;
  std::unique_ptr<ErrorSink> errors;        // stable address for the callbacks
  std::unique_ptr<PipelineCache> pipelines; // owned by the device, shared by graphs
  std::unique_ptr<ShaderDump> dump;         // env WGRT_SHADER_DUMP=DIR only
  std::unique_ptr<DiskCache> disk_cache;    // null when off; outlives the device (Dawn calls it)

  Device();
  Device(Device&&) noexcept;
  Device& operator=(Device&&) noexcept;
  ~Device();
  WGPUDevice get() const { return device.get(); }
};

const char* backend_name(WGPUBackendType t);
const char* adapter_type_name(WGPUAdapterType t);
std::string feature_name(WGPUFeatureName f);
const char* component_type_name(WGPUSubgroupMatrixComponentType t);  // "f16", "i8", ...
std::string config_name(const SubgroupMatrixConfig& c);              // "f16xf16->f32 m16n16k16"

// Every adapter Dawn offers for the options' backend, best first (discrete, integrated,
// others, CPU). Indices here are what --adapter and WGRT_ADAPTER mean.
std::vector<AdapterDesc> list_adapters(const DeviceOptions& opts);

Device create_device(const DeviceOptions& opts = {});

// What Dawn's blob cache asks the cache for: everything that changes what Dawn compiles, so
// entries of another adapter, driver, Dawn or version of wgrt's kernels never match. Dawn
// puts it into each of its keys.
std::string cache_isolation_key(const AdapterDesc& adapter);

// WGRT_SHADER_DUMP: names the pipeline whose shaders Dawn logs next ("" after it); no-op when
// the dump is off.
void set_dump_pipeline(Device& dev, const std::string& label);

// Sync point: lets Dawn deliver callbacks, then throws the device loss (DeviceLostError, each
// time) or the first recorded uncaptured error (clearing it).
void check(Device& dev);
// Whether the device-lost callback has fired (after letting Dawn deliver callbacks).
bool is_lost(Device& dev);
// Waits until all submitted work is done, then check().
void wait_idle(Device& dev);
// Blocks on one future of this device's instance.
void wait(Device& dev, WGPUFuture future);

// Runs `create` inside validation and out-of-memory error scopes; throws GpuError
// "<what>: <Dawn's message>" when either caught an error.
void push_error_scopes(Device& dev);
void pop_error_scopes(Device& dev, const std::string& what);
template <class F>
auto scoped(Device& dev, const std::string& what, F&& create) {
  push_error_scopes(dev);
  try {
    auto r = create();
    pop_error_scopes(dev, what);
    return r;
  } catch (...) {
    try { pop_error_scopes(dev, what); } catch (...) {}
    throw;
  }
}

}  // namespace wgrt::gpu
