// wgrt's own declarations of Dawn's C ABI (src/gpu/dawn_abi.h) against the API description
// of the pinned Dawn build (tests/gpu/dawn_api.json: the part of its dawn.json wgrt uses): every enum and bitmask value, the
// size of every enum type, and for every struct its members (names, order, offsets, sizes)
// and its size, with the expected layout computed from dawn.json's member types alone.
//
// The tables below map each C++ name to its dawn.json name; a check parses dawn_abi.h so a
// declaration added there without a row here fails too.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/webgpu.h"

namespace wgrt::gpu {
namespace {

using nlohmann::json;

// ---- the C++ side --------------------------------------------------------------------------
struct CEnumValue {
  const char* json_type;   // "adapter type"
  const char* json_value;  // "discrete GPU"
  const char* c_name;      // "WGPUAdapterType_DiscreteGPU"
  uint64_t value;
};
#define EV(jt, jv, c) CEnumValue{jt, jv, #c, uint64_t(c)}

const std::vector<CEnumValue>& enum_values() {
  static const std::vector<CEnumValue> table = {
    EV("adapter type", "discrete GPU", WGPUAdapterType_DiscreteGPU),
    EV("adapter type", "integrated GPU", WGPUAdapterType_IntegratedGPU),
    EV("adapter type", "CPU", WGPUAdapterType_CPU),
    EV("adapter type", "unknown", WGPUAdapterType_Unknown),
    EV("backend type", "undefined", WGPUBackendType_Undefined),
    EV("backend type", "null", WGPUBackendType_Null),
    EV("backend type", "WebGPU", WGPUBackendType_WebGPU),
    EV("backend type", "D3D11", WGPUBackendType_D3D11),
    EV("backend type", "D3D12", WGPUBackendType_D3D12),
    EV("backend type", "metal", WGPUBackendType_Metal),
    EV("backend type", "vulkan", WGPUBackendType_Vulkan),
    EV("backend type", "openGL", WGPUBackendType_OpenGL),
    EV("backend type", "openGLES", WGPUBackendType_OpenGLES),
    EV("buffer binding type", "binding not used", WGPUBufferBindingType_BindingNotUsed),
    EV("buffer binding type", "undefined", WGPUBufferBindingType_Undefined),
    EV("buffer binding type", "uniform", WGPUBufferBindingType_Uniform),
    EV("buffer binding type", "storage", WGPUBufferBindingType_Storage),
    EV("buffer binding type", "read only storage", WGPUBufferBindingType_ReadOnlyStorage),
    EV("buffer map state", "unmapped", WGPUBufferMapState_Unmapped),
    EV("buffer map state", "pending", WGPUBufferMapState_Pending),
    EV("buffer map state", "mapped", WGPUBufferMapState_Mapped),
    EV("callback mode", "wait any only", WGPUCallbackMode_WaitAnyOnly),
    EV("callback mode", "allow process events", WGPUCallbackMode_AllowProcessEvents),
    EV("callback mode", "allow spontaneous", WGPUCallbackMode_AllowSpontaneous),
    EV("compilation info request status", "success", WGPUCompilationInfoRequestStatus_Success),
    EV("compilation info request status", "callback cancelled", WGPUCompilationInfoRequestStatus_CallbackCancelled),
    EV("compilation message type", "error", WGPUCompilationMessageType_Error),
    EV("compilation message type", "warning", WGPUCompilationMessageType_Warning),
    EV("compilation message type", "info", WGPUCompilationMessageType_Info),
    EV("device lost reason", "unknown", WGPUDeviceLostReason_Unknown),
    EV("device lost reason", "destroyed", WGPUDeviceLostReason_Destroyed),
    EV("device lost reason", "callback cancelled", WGPUDeviceLostReason_CallbackCancelled),
    EV("device lost reason", "failed creation", WGPUDeviceLostReason_FailedCreation),
    EV("error filter", "validation", WGPUErrorFilter_Validation),
    EV("error filter", "out of memory", WGPUErrorFilter_OutOfMemory),
    EV("error filter", "internal", WGPUErrorFilter_Internal),
    EV("error type", "no error", WGPUErrorType_NoError),
    EV("error type", "validation", WGPUErrorType_Validation),
    EV("error type", "out of memory", WGPUErrorType_OutOfMemory),
    EV("error type", "internal", WGPUErrorType_Internal),
    EV("error type", "unknown", WGPUErrorType_Unknown),
    EV("logging type", "verbose", WGPULoggingType_Verbose),
    EV("logging type", "info", WGPULoggingType_Info),
    EV("logging type", "warning", WGPULoggingType_Warning),
    EV("logging type", "error", WGPULoggingType_Error),
    EV("feature name", "depth clip control", WGPUFeatureName_DepthClipControl),
    EV("feature name", "depth32 float stencil8", WGPUFeatureName_Depth32FloatStencil8),
    EV("feature name", "timestamp query", WGPUFeatureName_TimestampQuery),
    EV("feature name", "texture compression BC", WGPUFeatureName_TextureCompressionBC),
    EV("feature name", "texture compression BC sliced 3D", WGPUFeatureName_TextureCompressionBCSliced3D),
    EV("feature name", "texture compression ETC2", WGPUFeatureName_TextureCompressionETC2),
    EV("feature name", "texture compression ASTC", WGPUFeatureName_TextureCompressionASTC),
    EV("feature name", "texture compression ASTC sliced 3D", WGPUFeatureName_TextureCompressionASTCSliced3D),
    EV("feature name", "indirect first instance", WGPUFeatureName_IndirectFirstInstance),
    EV("feature name", "shader f16", WGPUFeatureName_ShaderF16),
    EV("feature name", "RG11B10 ufloat renderable", WGPUFeatureName_RG11B10UfloatRenderable),
    EV("feature name", "BGRA8 unorm storage", WGPUFeatureName_BGRA8UnormStorage),
    EV("feature name", "float32 filterable", WGPUFeatureName_Float32Filterable),
    EV("feature name", "float32 blendable", WGPUFeatureName_Float32Blendable),
    EV("feature name", "clip distances", WGPUFeatureName_ClipDistances),
    EV("feature name", "dual source blending", WGPUFeatureName_DualSourceBlending),
    EV("feature name", "subgroups", WGPUFeatureName_Subgroups),
    EV("feature name", "core features and limits", WGPUFeatureName_CoreFeaturesAndLimits),
    EV("feature name", "chromium experimental timestamp query inside passes", WGPUFeatureName_ChromiumExperimentalTimestampQueryInsidePasses),
    EV("feature name", "shader module compilation options", WGPUFeatureName_ShaderModuleCompilationOptions),
    EV("feature name", "chromium experimental subgroup matrix", WGPUFeatureName_ChromiumExperimentalSubgroupMatrix),
    EV("feature name", "adapter properties memory heaps", WGPUFeatureName_AdapterPropertiesMemoryHeaps),
    EV("feature level", "undefined", WGPUFeatureLevel_Undefined),
    EV("feature level", "compatibility", WGPUFeatureLevel_Compatibility),
    EV("feature level", "core", WGPUFeatureLevel_Core),
    EV("map async status", "success", WGPUMapAsyncStatus_Success),
    EV("map async status", "callback cancelled", WGPUMapAsyncStatus_CallbackCancelled),
    EV("map async status", "error", WGPUMapAsyncStatus_Error),
    EV("map async status", "aborted", WGPUMapAsyncStatus_Aborted),
    EV("pop error scope status", "success", WGPUPopErrorScopeStatus_Success),
    EV("pop error scope status", "callback cancelled", WGPUPopErrorScopeStatus_CallbackCancelled),
    EV("pop error scope status", "error", WGPUPopErrorScopeStatus_Error),
    EV("power preference", "undefined", WGPUPowerPreference_Undefined),
    EV("power preference", "low power", WGPUPowerPreference_LowPower),
    EV("power preference", "high performance", WGPUPowerPreference_HighPerformance),
    EV("query type", "occlusion", WGPUQueryType_Occlusion),
    EV("query type", "timestamp", WGPUQueryType_Timestamp),
    EV("queue work done status", "success", WGPUQueueWorkDoneStatus_Success),
    EV("queue work done status", "callback cancelled", WGPUQueueWorkDoneStatus_CallbackCancelled),
    EV("queue work done status", "error", WGPUQueueWorkDoneStatus_Error),
    EV("request adapter status", "success", WGPURequestAdapterStatus_Success),
    EV("request adapter status", "callback cancelled", WGPURequestAdapterStatus_CallbackCancelled),
    EV("request adapter status", "unavailable", WGPURequestAdapterStatus_Unavailable),
    EV("request adapter status", "error", WGPURequestAdapterStatus_Error),
    EV("request device status", "success", WGPURequestDeviceStatus_Success),
    EV("request device status", "callback cancelled", WGPURequestDeviceStatus_CallbackCancelled),
    EV("request device status", "error", WGPURequestDeviceStatus_Error),
    EV("sampler binding type", "binding not used", WGPUSamplerBindingType_BindingNotUsed),
    EV("status", "success", WGPUStatus_Success),
    EV("status", "error", WGPUStatus_Error),
    EV("storage texture access", "binding not used", WGPUStorageTextureAccess_BindingNotUsed),
    EV("s type", "shader source SPIRV", WGPUSType_ShaderSourceSPIRV),
    EV("s type", "shader source WGSL", WGPUSType_ShaderSourceWGSL),
    EV("s type", "dawn cache device descriptor", WGPUSType_DawnCacheDeviceDescriptor),
    EV("s type", "dawn toggles descriptor", WGPUSType_DawnTogglesDescriptor),
    EV("s type", "adapter properties memory heaps", WGPUSType_AdapterPropertiesMemoryHeaps),
    EV("s type", "adapter properties subgroup matrix configs", WGPUSType_AdapterPropertiesSubgroupMatrixConfigs),
    EV("instance feature name", "timed wait any", WGPUInstanceFeatureName_TimedWaitAny),
    EV("instance feature name", "shader source SPIRV", WGPUInstanceFeatureName_ShaderSourceSPIRV),
    EV("instance feature name", "multiple devices per adapter", WGPUInstanceFeatureName_MultipleDevicesPerAdapter),
    EV("subgroup matrix component type", "f32", WGPUSubgroupMatrixComponentType_F32),
    EV("subgroup matrix component type", "f16", WGPUSubgroupMatrixComponentType_F16),
    EV("subgroup matrix component type", "u32", WGPUSubgroupMatrixComponentType_U32),
    EV("subgroup matrix component type", "i32", WGPUSubgroupMatrixComponentType_I32),
    EV("subgroup matrix component type", "u8", WGPUSubgroupMatrixComponentType_U8),
    EV("subgroup matrix component type", "i8", WGPUSubgroupMatrixComponentType_I8),
    EV("texture format", "undefined", WGPUTextureFormat_Undefined),
    EV("texture sample type", "binding not used", WGPUTextureSampleType_BindingNotUsed),
    EV("texture view dimension", "undefined", WGPUTextureViewDimension_Undefined),
    EV("wait status", "success", WGPUWaitStatus_Success),
    EV("wait status", "timed out", WGPUWaitStatus_TimedOut),
    EV("wait status", "error", WGPUWaitStatus_Error),
    EV("buffer usage", "none", WGPUBufferUsage_None),
    EV("buffer usage", "map read", WGPUBufferUsage_MapRead),
    EV("buffer usage", "map write", WGPUBufferUsage_MapWrite),
    EV("buffer usage", "copy src", WGPUBufferUsage_CopySrc),
    EV("buffer usage", "copy dst", WGPUBufferUsage_CopyDst),
    EV("buffer usage", "index", WGPUBufferUsage_Index),
    EV("buffer usage", "vertex", WGPUBufferUsage_Vertex),
    EV("buffer usage", "uniform", WGPUBufferUsage_Uniform),
    EV("buffer usage", "storage", WGPUBufferUsage_Storage),
    EV("buffer usage", "indirect", WGPUBufferUsage_Indirect),
    EV("buffer usage", "query resolve", WGPUBufferUsage_QueryResolve),
    EV("map mode", "none", WGPUMapMode_None),
    EV("map mode", "read", WGPUMapMode_Read),
    EV("map mode", "write", WGPUMapMode_Write),
    EV("shader stage", "none", WGPUShaderStage_None),
    EV("shader stage", "vertex", WGPUShaderStage_Vertex),
    EV("shader stage", "fragment", WGPUShaderStage_Fragment),
    EV("shader stage", "compute", WGPUShaderStage_Compute),
    EV("heap property", "none", WGPUHeapProperty_None),
    EV("heap property", "device local", WGPUHeapProperty_DeviceLocal),
    EV("heap property", "host visible", WGPUHeapProperty_HostVisible),
    EV("heap property", "host coherent", WGPUHeapProperty_HostCoherent),
    EV("heap property", "host uncached", WGPUHeapProperty_HostUncached),
    EV("heap property", "host cached", WGPUHeapProperty_HostCached),
  };
  return table;
}

struct CEnumType {
  const char* json_type;
  const char* c_name;
  size_t size;
};
#define ET(jt, c) CEnumType{jt, #c, sizeof(c)}

const std::vector<CEnumType>& enum_types() {
  static const std::vector<CEnumType> table = {
    ET("adapter type", WGPUAdapterType),
    ET("backend type", WGPUBackendType),
    ET("buffer binding type", WGPUBufferBindingType),
    ET("buffer map state", WGPUBufferMapState),
    ET("callback mode", WGPUCallbackMode),
    ET("compilation info request status", WGPUCompilationInfoRequestStatus),
    ET("compilation message type", WGPUCompilationMessageType),
    ET("device lost reason", WGPUDeviceLostReason),
    ET("error filter", WGPUErrorFilter),
    ET("error type", WGPUErrorType),
    ET("feature name", WGPUFeatureName),
    ET("logging type", WGPULoggingType),
    ET("feature level", WGPUFeatureLevel),
    ET("map async status", WGPUMapAsyncStatus),
    ET("pop error scope status", WGPUPopErrorScopeStatus),
    ET("power preference", WGPUPowerPreference),
    ET("query type", WGPUQueryType),
    ET("queue work done status", WGPUQueueWorkDoneStatus),
    ET("request adapter status", WGPURequestAdapterStatus),
    ET("request device status", WGPURequestDeviceStatus),
    ET("sampler binding type", WGPUSamplerBindingType),
    ET("status", WGPUStatus),
    ET("instance feature name", WGPUInstanceFeatureName),
    ET("subgroup matrix component type", WGPUSubgroupMatrixComponentType),
    ET("storage texture access", WGPUStorageTextureAccess),
    ET("s type", WGPUSType),
    ET("texture format", WGPUTextureFormat),
    ET("texture sample type", WGPUTextureSampleType),
    ET("texture view dimension", WGPUTextureViewDimension),
    ET("wait status", WGPUWaitStatus),
    ET("buffer usage", WGPUBufferUsage),
    ET("map mode", WGPUMapMode),
    ET("shader stage", WGPUShaderStage),
    ET("heap property", WGPUHeapProperty),
  };
  return table;
}

struct CField {
  const char* c_name;     // "mappedAtCreation"
  const char* json_name;  // "mapped at creation"; implicit members: "next in chain",
                          // "chain", "userdata1", "userdata2"
  size_t offset;
  size_t size;
};
struct CStruct {
  const char* json_key;  // "buffer descriptor"
  const char* c_name;    // "WGPUBufferDescriptor"
  size_t size;
  size_t align;
  std::vector<CField> fields;  // in declaration order
};
#define ROW(jk, T, ...) \
  CStruct{jk, #T, sizeof(T), alignof(T), [] { using S = T; return std::vector<CField>{__VA_ARGS__}; }()}
#define F(m, jn) CField{#m, jn, offsetof(S, m), sizeof(S::m)}

// The instance's and the adapter's structs: the plain ones, the callback infos, limits, features.
std::vector<CStruct> instance_structs() {
  return {
    ROW("string view", WGPUStringView, F(data, "data"), F(length, "length")),
    ROW("future", WGPUFuture, F(id, "id")),
    ROW("future wait info", WGPUFutureWaitInfo, F(future, "future"), F(completed, "completed")),
    ROW("request adapter callback info", WGPURequestAdapterCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("request device callback info", WGPURequestDeviceCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("device lost callback info", WGPUDeviceLostCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("uncaptured error callback info", WGPUUncapturedErrorCallbackInfo,
        F(nextInChain, "next in chain"), F(callback, "callback"), F(userdata1, "userdata1"),
        F(userdata2, "userdata2")),
    ROW("logging callback info", WGPULoggingCallbackInfo,
        F(nextInChain, "next in chain"), F(callback, "callback"), F(userdata1, "userdata1"),
        F(userdata2, "userdata2")),
    ROW("pop error scope callback info", WGPUPopErrorScopeCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("buffer map callback info", WGPUBufferMapCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("queue work done callback info", WGPUQueueWorkDoneCallbackInfo,
        F(nextInChain, "next in chain"), F(mode, "mode"), F(callback, "callback"),
        F(userdata1, "userdata1"), F(userdata2, "userdata2")),
    ROW("instance limits", WGPUInstanceLimits,
        F(nextInChain, "next in chain"), F(timedWaitAnyMaxCount, "timed wait any max count")),
    ROW("instance descriptor", WGPUInstanceDescriptor,
        F(nextInChain, "next in chain"), F(requiredFeatureCount, "required feature count"),
        F(requiredFeatures, "required features"), F(requiredLimits, "required limits")),
    ROW("request adapter options", WGPURequestAdapterOptions,
        F(nextInChain, "next in chain"), F(featureLevel, "feature level"),
        F(powerPreference, "power preference"), F(forceFallbackAdapter, "force fallback adapter"),
        F(backendType, "backend type"), F(compatibleSurface, "compatible surface")),
    ROW("adapter info", WGPUAdapterInfo,
        F(nextInChain, "next in chain"), F(vendor, "vendor"), F(architecture, "architecture"),
        F(device, "device"), F(description, "description"), F(backendType, "backend type"),
        F(adapterType, "adapter type"), F(vendorID, "vendor ID"), F(deviceID, "device ID"),
        F(subgroupMinSize, "subgroup min size"), F(subgroupMaxSize, "subgroup max size")),
    ROW("limits", WGPULimits,
        F(nextInChain, "next in chain"), F(maxTextureDimension1D, "max texture dimension 1D"),
        F(maxTextureDimension2D, "max texture dimension 2D"),
        F(maxTextureDimension3D, "max texture dimension 3D"),
        F(maxTextureArrayLayers, "max texture array layers"), F(maxBindGroups, "max bind groups"),
        F(maxBindGroupsPlusVertexBuffers, "max bind groups plus vertex buffers"),
        F(maxBindingsPerBindGroup, "max bindings per bind group"),
        F(maxDynamicUniformBuffersPerPipelineLayout, "max dynamic uniform buffers per pipeline layout"),
        F(maxDynamicStorageBuffersPerPipelineLayout, "max dynamic storage buffers per pipeline layout"),
        F(maxSampledTexturesPerShaderStage, "max sampled textures per shader stage"),
        F(maxSamplersPerShaderStage, "max samplers per shader stage"),
        F(maxStorageBuffersPerShaderStage, "max storage buffers per shader stage"),
        F(maxStorageTexturesPerShaderStage, "max storage textures per shader stage"),
        F(maxUniformBuffersPerShaderStage, "max uniform buffers per shader stage"),
        F(maxUniformBufferBindingSize, "max uniform buffer binding size"),
        F(maxStorageBufferBindingSize, "max storage buffer binding size"),
        F(minUniformBufferOffsetAlignment, "min uniform buffer offset alignment"),
        F(minStorageBufferOffsetAlignment, "min storage buffer offset alignment"),
        F(maxVertexBuffers, "max vertex buffers"), F(maxBufferSize, "max buffer size"),
        F(maxVertexAttributes, "max vertex attributes"),
        F(maxVertexBufferArrayStride, "max vertex buffer array stride"),
        F(maxInterStageShaderVariables, "max inter stage shader variables"),
        F(maxColorAttachments, "max color attachments"),
        F(maxColorAttachmentBytesPerSample, "max color attachment bytes per sample"),
        F(maxComputeWorkgroupStorageSize, "max compute workgroup storage size"),
        F(maxComputeInvocationsPerWorkgroup, "max compute invocations per workgroup"),
        F(maxComputeWorkgroupSizeX, "max compute workgroup size x"),
        F(maxComputeWorkgroupSizeY, "max compute workgroup size y"),
        F(maxComputeWorkgroupSizeZ, "max compute workgroup size z"),
        F(maxComputeWorkgroupsPerDimension, "max compute workgroups per dimension"),
        F(maxImmediateSize, "max immediate size")),
    ROW("supported features", WGPUSupportedFeatures,
        F(featureCount, "feature count"), F(features, "features")),
    ROW("memory heap info", WGPUMemoryHeapInfo, F(properties, "properties"), F(size, "size")),
    ROW("adapter properties memory heaps", WGPUAdapterPropertiesMemoryHeaps,
        F(chain, "chain"), F(heapCount, "heap count"), F(heapInfo, "heap info")),
    ROW("subgroup matrix config", WGPUSubgroupMatrixConfig,
        F(componentType, "component type"), F(resultComponentType, "result component type"),
        F(M, "M"), F(N, "N"), F(K, "K")),
    ROW("adapter properties subgroup matrix configs", WGPUAdapterPropertiesSubgroupMatrixConfigs,
        F(chain, "chain"), F(configCount, "config count"), F(configs, "configs")),
    ROW("dawn toggles descriptor", WGPUDawnTogglesDescriptor,
        F(chain, "chain"), F(enabledToggleCount, "enabled toggle count"),
        F(enabledToggles, "enabled toggles"), F(disabledToggleCount, "disabled toggle count"),
        F(disabledToggles, "disabled toggles")),
    ROW("dawn cache device descriptor", WGPUDawnCacheDeviceDescriptor,
        F(chain, "chain"), F(isolationKey, "isolation key"), F(loadDataFunction, "load data function"),
        F(storeDataFunction, "store data function"), F(functionUserdata, "function userdata")),
  };
}

// The device's: the descriptors of queues, buffers, pipelines, bind groups and passes.
std::vector<CStruct> device_structs() {
  return {
    ROW("queue descriptor", WGPUQueueDescriptor,
        F(nextInChain, "next in chain"), F(label, "label")),
    ROW("device descriptor", WGPUDeviceDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"),
        F(requiredFeatureCount, "required feature count"), F(requiredFeatures, "required features"),
        F(requiredLimits, "required limits"), F(defaultQueue, "default queue"),
        F(deviceLostCallbackInfo, "device lost callback info"),
        F(uncapturedErrorCallbackInfo, "uncaptured error callback info")),
    ROW("buffer descriptor", WGPUBufferDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(usage, "usage"), F(size, "size"),
        F(mappedAtCreation, "mapped at creation")),
    ROW("shader module descriptor", WGPUShaderModuleDescriptor,
        F(nextInChain, "next in chain"), F(label, "label")),
    ROW("shader source WGSL", WGPUShaderSourceWGSL, F(chain, "chain"), F(code, "code")),
    ROW("constant entry", WGPUConstantEntry,
        F(nextInChain, "next in chain"), F(key, "key"), F(value, "value")),
    ROW("compute state", WGPUComputeState,
        F(nextInChain, "next in chain"), F(module, "module"), F(entryPoint, "entry point"),
        F(constantCount, "constant count"), F(constants, "constants")),
    ROW("compute pipeline descriptor", WGPUComputePipelineDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(layout, "layout"),
        F(compute, "compute")),
    ROW("buffer binding layout", WGPUBufferBindingLayout,
        F(nextInChain, "next in chain"), F(type, "type"), F(hasDynamicOffset, "has dynamic offset"),
        F(minBindingSize, "min binding size")),
    ROW("sampler binding layout", WGPUSamplerBindingLayout,
        F(nextInChain, "next in chain"), F(type, "type")),
    ROW("texture binding layout", WGPUTextureBindingLayout,
        F(nextInChain, "next in chain"), F(sampleType, "sample type"),
        F(viewDimension, "view dimension"), F(multisampled, "multisampled")),
    ROW("storage texture binding layout", WGPUStorageTextureBindingLayout,
        F(nextInChain, "next in chain"), F(access, "access"), F(format, "format"),
        F(viewDimension, "view dimension")),
    ROW("bind group layout entry", WGPUBindGroupLayoutEntry,
        F(nextInChain, "next in chain"), F(binding, "binding"), F(visibility, "visibility"),
        F(bindingArraySize, "binding array size"), F(buffer, "buffer"), F(sampler, "sampler"),
        F(texture, "texture"), F(storageTexture, "storage texture")),
    ROW("bind group layout descriptor", WGPUBindGroupLayoutDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(entryCount, "entry count"),
        F(entries, "entries")),
    ROW("pipeline layout descriptor", WGPUPipelineLayoutDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"),
        F(bindGroupLayoutCount, "bind group layout count"),
        F(bindGroupLayouts, "bind group layouts"), F(immediateSize, "immediate size")),
    ROW("bind group entry", WGPUBindGroupEntry,
        F(nextInChain, "next in chain"), F(binding, "binding"), F(buffer, "buffer"),
        F(offset, "offset"), F(size, "size"), F(sampler, "sampler"),
        F(textureView, "texture view")),
    ROW("bind group descriptor", WGPUBindGroupDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(layout, "layout"),
        F(entryCount, "entry count"), F(entries, "entries")),
    ROW("command encoder descriptor", WGPUCommandEncoderDescriptor,
        F(nextInChain, "next in chain"), F(label, "label")),
    ROW("command buffer descriptor", WGPUCommandBufferDescriptor,
        F(nextInChain, "next in chain"), F(label, "label")),
    ROW("pass timestamp writes", WGPUPassTimestampWrites,
        F(nextInChain, "next in chain"), F(querySet, "query set"),
        F(beginningOfPassWriteIndex, "beginning of pass write index"),
        F(endOfPassWriteIndex, "end of pass write index")),
    ROW("compute pass descriptor", WGPUComputePassDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(timestampWrites, "timestamp writes")),
    ROW("query set descriptor", WGPUQuerySetDescriptor,
        F(nextInChain, "next in chain"), F(label, "label"), F(type, "type"), F(count, "count")),
  };
}

const std::vector<CStruct>& structs() {
  static const std::vector<CStruct> table = [] {
    std::vector<CStruct> t = instance_structs();
    for (CStruct& s : device_structs()) t.push_back(std::move(s));
    return t;
  }();
  return table;
}

template <class R, class... A>
constexpr size_t arity(R (*)(A...)) {
  return sizeof...(A);
}

struct CCallback {
  const char* json_name;  // "buffer map callback"
  const char* c_name;
  size_t arity;           // including userdata1 and userdata2
};
#define CB(jn, T) CCallback{jn, #T, arity(T{})}

const std::vector<CCallback>& callbacks() {
  static const std::vector<CCallback> table = {
      CB("request adapter callback", WGPURequestAdapterCallback),
      CB("request device callback", WGPURequestDeviceCallback),
      CB("device lost callback", WGPUDeviceLostCallback),
      CB("uncaptured error callback", WGPUUncapturedErrorCallback),
      CB("logging callback", WGPULoggingCallback),
      CB("pop error scope callback", WGPUPopErrorScopeCallback),
      CB("buffer map callback", WGPUBufferMapCallback),
      CB("queue work done callback", WGPUQueueWorkDoneCallback)};
  return table;
}

// Dawn's plain function pointers (no userdata pair): the arity, and whether it returns a value.
struct CFunctionPointer {
  const char* json_name;  // "dawn load cache data function"
  const char* c_name;
  size_t arity;
  bool returns_void;
};
template <class R, class... A>
constexpr bool returns_void(R (*)(A...)) {
  return std::is_void_v<R>;
}
#define FP(jn, T) CFunctionPointer{jn, #T, arity(T{}), returns_void(T{})}

const std::vector<CFunctionPointer>& function_pointers() {
  static const std::vector<CFunctionPointer> table = {
      FP("dawn load cache data function", WGPUDawnLoadCacheDataFunction),
      FP("dawn store cache data function", WGPUDawnStoreCacheDataFunction)};
  return table;
}

// Where the pinned Dawn library is known to differ from its dawn.json: extra arguments it
// passes (none for Dawn c5d549e250).
const std::map<std::string, size_t> kExtraArgsInTheLibrary = {};

// ---- the dawn.json side --------------------------------------------------------------------
// The entries of the pinned Dawn's dawn.json (commit c5d549e250) that dawn_abi.h declares and
// the types they name, extracted by tools/dawn-api-subset.py.
const char* kDawnJson = WGRT_SOURCE_DIR "/tests/gpu/dawn_api.json";
const char* kAbiHeader = WGRT_SOURCE_DIR "/src/gpu/dawn_abi.h";
// dawn_abi.h's parts (it includes them): the checks read the three as one header.
const char* kAbiHeaderParts[] = {WGRT_SOURCE_DIR "/src/gpu/dawn_abi_enums.h",
                                 WGRT_SOURCE_DIR "/src/gpu/dawn_abi_structs.h", kAbiHeader};

const json* load_api() {
  static const json api = [] {
    std::ifstream in(kDawnJson);
    if (!in) return json();
    return json::parse(in);
  }();
  return api.is_object() ? &api : nullptr;
}

#define REQUIRE_API(api)      \
  const json* api = load_api(); \
  ASSERT_NE(api, nullptr) << "cannot read " << kDawnJson

// The value a C header carries for a dawn.json enum value (PLATFORM.md: block offsets by tag).
uint64_t tagged_value(const json& v) {
  std::set<std::string> tags;
  if (v.contains("tags"))
    for (const auto& t : v["tags"]) tags.insert(t.get<std::string>());
  uint64_t offset = 0;
  if (tags.contains("compat")) offset = 0x20000;
  if (!tags.contains("upstream")) {
    if (tags.contains("dawn")) offset = 0x50000;
    else if (tags.contains("emscripten")) offset = 0x40000;
  }
  if (offset == 0 && tags.contains("native")) offset = 0x10000;
  return v["value"].get<uint64_t>() + offset;
}

struct Layout {
  size_t size = 0;
  size_t align = 1;
};

struct JsonMember {
  std::string name;
  Layout layout;
  size_t offset = 0;
};

constexpr Layout kPointer{sizeof(void*), alignof(void*)};
// WGPUChainedStruct{,Out} is not in dawn.json: { next pointer, WGPUSType (32-bit) }.
constexpr Layout kChainedStruct{2 * sizeof(void*), alignof(void*)};

size_t align_to(size_t v, size_t a) { return (v + a - 1) / a * a; }

// C layout of dawn.json types, computed from the description alone.
class JsonLayouts {
 public:
  explicit JsonLayouts(const json& api) : api_(api) {}

  Layout of_type(const std::string& type, const std::string& annotation) {
    if (!annotation.empty() && annotation != "value") return kPointer;  // const*, *, const*const*
    static const std::map<std::string, Layout> natives = {
        {"bool", {4, 4}},     {"char", {1, 1}},     {"uint8_t", {1, 1}},   {"uint16_t", {2, 2}},
        {"int", {4, 4}},      {"int32_t", {4, 4}},  {"uint32_t", {4, 4}},  {"float", {4, 4}},
        {"uint64_t", {8, 8}}, {"double", {8, 8}},   {"size_t", {sizeof(size_t), alignof(size_t)}},
        {"void *", kPointer}, {"void const *", kPointer}};
    if (auto it = natives.find(type); it != natives.end()) return it->second;
    if (!api_.contains(type)) {
      ADD_FAILURE() << "dawn.json has no type '" << type << "'";
      return {};
    }
    const json& e = api_[type];
    std::string cat = e.value("category", "");
    if (cat == "enum") return {4, 4};
    if (cat == "bitmask") return {8, 8};
    if (cat == "object" || cat == "callback function" || cat == "function pointer") return kPointer;
    if (cat == "typedef") return of_type(e["type"].get<std::string>(), "");
    if (cat == "structure" || cat == "callback info") return of_struct(type).first;
    ADD_FAILURE() << "type '" << type << "' of category '" << cat << "' not handled";
    return {};
  }

  // The struct's members as a C header lays them out (implicit ones included), and its layout.
  std::pair<Layout, std::vector<JsonMember>> of_struct(const std::string& key) {
    const json& e = api_[key];
    std::vector<JsonMember> members;
    const bool callback_info = e.value("category", "") == "callback info";
    if (callback_info || e.contains("extensible")) members.push_back({"next in chain", kPointer});
    if (e.contains("chained")) members.push_back({"chain", kChainedStruct});
    for (const auto& m : e["members"])
      members.push_back({m["name"].get<std::string>(),
                         of_type(m["type"].get<std::string>(), m.value("annotation", ""))});
    if (callback_info) {
      members.push_back({"userdata1", kPointer});
      members.push_back({"userdata2", kPointer});
    }
    Layout whole{0, 1};
    for (auto& m : members) {
      m.offset = align_to(whole.size, m.layout.align);
      whole.size = m.offset + m.layout.size;
      whole.align = std::max(whole.align, m.layout.align);
    }
    whole.size = align_to(whole.size, whole.align);
    return {whole, members};
  }

 private:
  const json& api_;
};

// The header and its parts, one after another; empty where one cannot be read.
std::string read_header() {
  std::stringstream s;
  for (const char* path : kAbiHeaderParts) {
    std::ifstream in(path);
    if (!in) return {};
    s << in.rdbuf() << '\n';
  }
  return s.str();
}

// ---- the checks -----------------------------------------------------------------------------
TEST(GpuAbi, EnumAndBitmaskValuesMatchDawnJson) {
  REQUIRE_API(api);
  ASSERT_FALSE(enum_values().empty());
  for (const CEnumValue& row : enum_values()) {
    SCOPED_TRACE(row.c_name);
    ASSERT_TRUE(api->contains(row.json_type)) << "no dawn.json entry '" << row.json_type << "'";
    const json& e = (*api)[row.json_type];
    const std::string cat = e.value("category", "");
    ASSERT_TRUE(cat == "enum" || cat == "bitmask") << row.json_type << " is a " << cat;
    int found = 0;
    for (const json& v : e["values"]) {
      if (v["name"].get<std::string>() != row.json_value) continue;
      ++found;
      uint64_t want = cat == "bitmask" ? v["value"].get<uint64_t>() : tagged_value(v);
      EXPECT_EQ(row.value, want) << std::hex << "dawn.json " << row.json_type << " '"
                                 << row.json_value << "' is 0x" << want << ", dawn_abi.h says 0x"
                                 << row.value;
    }
    EXPECT_EQ(found, 1) << "'" << row.json_value << "' in dawn.json '" << row.json_type << "'";
  }
}

TEST(GpuAbi, EnumTypesHaveTheirCSize) {
  REQUIRE_API(api);
  for (const CEnumType& row : enum_types()) {
    SCOPED_TRACE(row.c_name);
    ASSERT_TRUE(api->contains(row.json_type));
    const std::string cat = (*api)[row.json_type].value("category", "");
    EXPECT_EQ(row.size, cat == "bitmask" ? 8u : 4u) << cat;
  }
}

TEST(GpuAbi, StructMembersMatchDawnJson) {
  REQUIRE_API(api);
  JsonLayouts layouts(*api);
  ASSERT_FALSE(structs().empty());
  for (const CStruct& row : structs()) {
    SCOPED_TRACE(row.c_name);
    ASSERT_TRUE(api->contains(row.json_key)) << "no dawn.json entry '" << row.json_key << "'";
    const std::string cat = (*api)[row.json_key].value("category", "");
    ASSERT_TRUE(cat == "structure" || cat == "callback info") << row.json_key << " is a " << cat;
    auto [whole, members] = layouts.of_struct(row.json_key);
    ASSERT_EQ(row.fields.size(), members.size())
        << row.c_name << " declares " << row.fields.size() << " members, dawn.json '"
        << row.json_key << "' implies " << members.size();
    for (size_t i = 0; i < members.size(); ++i) {
      const CField& f = row.fields[i];
      SCOPED_TRACE(f.c_name);
      EXPECT_EQ(f.json_name, members[i].name) << "member " << i;
      EXPECT_EQ(f.offset, members[i].offset) << "offsetof " << f.c_name;
      EXPECT_EQ(f.size, members[i].layout.size) << "sizeof " << f.c_name;
    }
    EXPECT_EQ(row.size, whole.size) << "sizeof " << row.c_name;
    EXPECT_EQ(row.align, whole.align) << "alignof " << row.c_name;
  }
}

TEST(GpuAbi, ChainedStructHeaders) {
  EXPECT_EQ(offsetof(WGPUChainedStruct, next), 0u);
  EXPECT_EQ(offsetof(WGPUChainedStruct, sType), sizeof(void*));
  EXPECT_EQ(sizeof(WGPUChainedStruct), kChainedStruct.size);
  EXPECT_EQ(offsetof(WGPUChainedStructOut, next), 0u);
  EXPECT_EQ(offsetof(WGPUChainedStructOut, sType), sizeof(void*));
  EXPECT_EQ(sizeof(WGPUChainedStructOut), kChainedStruct.size);
  EXPECT_EQ(sizeof(WGPUBool), 4u);
  EXPECT_EQ(sizeof(WGPUFlags), 8u);
}

// A callback with the wrong arity shifts the userdata into another argument's place.
TEST(GpuAbi, CallbackArityMatchesDawnJson) {
  REQUIRE_API(api);
  for (const CCallback& row : callbacks()) {
    SCOPED_TRACE(row.c_name);
    ASSERT_TRUE(api->contains(row.json_name)) << "no dawn.json entry '" << row.json_name << "'";
    const json& e = (*api)[row.json_name];
    ASSERT_EQ(e.value("category", ""), "callback function");
    size_t want = e["args"].size() + 2;  // + userdata1, userdata2
    if (auto it = kExtraArgsInTheLibrary.find(row.json_name); it != kExtraArgsInTheLibrary.end())
      want += it->second;
    EXPECT_EQ(row.arity, want);
  }
}

TEST(GpuAbi, FunctionPointersMatchDawnJson) {
  REQUIRE_API(api);
  JsonLayouts layouts(*api);
  for (const CFunctionPointer& row : function_pointers()) {
    SCOPED_TRACE(row.c_name);
    ASSERT_TRUE(api->contains(row.json_name)) << "no dawn.json entry '" << row.json_name << "'";
    const json& e = (*api)[row.json_name];
    ASSERT_EQ(e.value("category", ""), "function pointer");
    EXPECT_EQ(row.arity, e["args"].size());
    EXPECT_EQ(row.returns_void, !e.contains("returns"));
  }
}

// Every value and struct dawn_abi.h declares has a row above (so the checks cover it).
TEST(GpuAbi, TablesCoverTheWholeHeader) {
  REQUIRE_API(api);
  std::string header = read_header();
  ASSERT_FALSE(header.empty()) << "cannot read " << kAbiHeader;

  std::set<std::string> enum_rows, enum_type_rows, struct_rows;
  for (const auto& r : enum_values()) enum_rows.insert(r.c_name);
  for (const auto& r : enum_types()) enum_type_rows.insert(r.c_name);
  for (const auto& r : structs()) struct_rows.insert(r.c_name);

  const std::regex value_re(R"(\b(WGPU[A-Za-z0-9]+_[A-Za-z0-9_]+)\s*=\s*0x)");
  size_t values = 0;
  for (auto it = std::sregex_iterator(header.begin(), header.end(), value_re);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    if (name.ends_with("_Force32")) continue;
    ++values;
    EXPECT_TRUE(enum_rows.contains(name)) << name << " is declared but not checked";
  }
  EXPECT_EQ(values, enum_rows.size());

  const std::regex enum_re(R"(typedef enum (WGPU\w+)|typedef WGPUFlags (WGPU\w+);)");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), enum_re);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1].matched ? (*it)[1] : (*it)[2];
    EXPECT_TRUE(enum_type_rows.contains(name)) << name << " is declared but not checked";
  }

  std::set<std::string> callback_rows;
  for (const auto& r : callbacks()) callback_rows.insert(r.c_name);
  const std::regex callback_re(R"(typedef void \(\*(WGPU\w+Callback)\))");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), callback_re);
       it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(callback_rows.contains((*it)[1])) << (*it)[1] << " is declared but not checked";

  std::set<std::string> function_rows;
  for (const auto& r : function_pointers()) function_rows.insert(r.c_name);
  const std::regex function_re(R"(typedef \w+ \(\*(WGPU\w+Function)\))");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), function_re);
       it != std::sregex_iterator(); ++it)
    EXPECT_TRUE(function_rows.contains((*it)[1])) << (*it)[1] << " is declared but not checked";

  const std::regex struct_re(R"(typedef struct (WGPU\w+) \{)");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), struct_re);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    if (name == "WGPUChainedStruct" || name == "WGPUChainedStructOut") continue;  // not in json
    EXPECT_TRUE(struct_rows.contains(name)) << name << " is declared but not checked";
  }
}

}  // namespace
}  // namespace wgrt::gpu
