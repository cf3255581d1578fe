// A part of gpu/dawn_abi.h: the objects and structs. Include gpu/dawn_abi.h, whose opening comment
// gives the rules these declarations follow; tests/gpu/abi_test.cpp checks them against dawn.json.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/dawn_abi_enums.h"

extern "C" {

// ---- objects (opaque, reference counted) -------------------------------------------------
typedef struct WGPUAdapterImpl* WGPUAdapter;
typedef struct WGPUBindGroupImpl* WGPUBindGroup;
typedef struct WGPUBindGroupLayoutImpl* WGPUBindGroupLayout;
typedef struct WGPUBufferImpl* WGPUBuffer;
typedef struct WGPUCommandBufferImpl* WGPUCommandBuffer;
typedef struct WGPUCommandEncoderImpl* WGPUCommandEncoder;
typedef struct WGPUComputePassEncoderImpl* WGPUComputePassEncoder;
typedef struct WGPUComputePipelineImpl* WGPUComputePipeline;
typedef struct WGPUDeviceImpl* WGPUDevice;
typedef struct WGPUInstanceImpl* WGPUInstance;
typedef struct WGPUPipelineLayoutImpl* WGPUPipelineLayout;
typedef struct WGPUQuerySetImpl* WGPUQuerySet;
typedef struct WGPUQueueImpl* WGPUQueue;
typedef struct WGPUSamplerImpl* WGPUSampler;
typedef struct WGPUShaderModuleImpl* WGPUShaderModule;
typedef struct WGPUSurfaceImpl* WGPUSurface;
typedef struct WGPUTextureViewImpl* WGPUTextureView;

// ---- plain structs -----------------------------------------------------------------------
typedef struct WGPUStringView {
  char const* data;
  size_t length;
} WGPUStringView;

typedef struct WGPUChainedStruct {
  struct WGPUChainedStruct const* next;
  WGPUSType sType;
} WGPUChainedStruct;

typedef struct WGPUChainedStructOut {
  struct WGPUChainedStructOut* next;
  WGPUSType sType;
} WGPUChainedStructOut;

typedef struct WGPUFuture {
  uint64_t id;
} WGPUFuture;

typedef struct WGPUFutureWaitInfo {
  WGPUFuture future;
  WGPUBool completed;
} WGPUFutureWaitInfo;

// ---- callbacks ---------------------------------------------------------------------------
typedef void (*WGPURequestAdapterCallback)(WGPURequestAdapterStatus status, WGPUAdapter adapter,
                                           WGPUStringView message, void* userdata1,
                                           void* userdata2);
typedef void (*WGPURequestDeviceCallback)(WGPURequestDeviceStatus status, WGPUDevice device,
                                          WGPUStringView message, void* userdata1,
                                          void* userdata2);
typedef void (*WGPUDeviceLostCallback)(WGPUDevice const* device, WGPUDeviceLostReason reason,
                                       WGPUStringView message, void* userdata1, void* userdata2);
typedef void (*WGPUUncapturedErrorCallback)(WGPUDevice const* device, WGPUErrorType type,
                                            WGPUStringView message, void* userdata1,
                                            void* userdata2);
typedef void (*WGPUPopErrorScopeCallback)(WGPUPopErrorScopeStatus status, WGPUErrorType type,
                                          WGPUStringView message, void* userdata1,
                                          void* userdata2);
typedef void (*WGPULoggingCallback)(WGPULoggingType type, WGPUStringView message, void* userdata1,
                                    void* userdata2);
typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus status, WGPUStringView message,
                                      void* userdata1, void* userdata2);
typedef void (*WGPUQueueWorkDoneCallback)(WGPUQueueWorkDoneStatus status, WGPUStringView message,
                                          void* userdata1, void* userdata2);

// Dawn's blob cache (function pointers, one userdata). Load is asked twice per key: with
// value null to learn the size (0: a miss), then with a buffer of that size; it returns the
// bytes copied, and a size other than the first answer counts as a miss.
typedef size_t (*WGPUDawnLoadCacheDataFunction)(void const* key, size_t keySize, void* value,
                                                size_t valueSize, void* userdata);
typedef void (*WGPUDawnStoreCacheDataFunction)(void const* key, size_t keySize, void const* value,
                                               size_t valueSize, void* userdata);

typedef struct WGPURequestAdapterCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPURequestAdapterCallback callback;
  void* userdata1;
  void* userdata2;
} WGPURequestAdapterCallbackInfo;

typedef struct WGPURequestDeviceCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPURequestDeviceCallback callback;
  void* userdata1;
  void* userdata2;
} WGPURequestDeviceCallbackInfo;

typedef struct WGPUDeviceLostCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUDeviceLostCallback callback;
  void* userdata1;
  void* userdata2;
} WGPUDeviceLostCallbackInfo;

typedef struct WGPUUncapturedErrorCallbackInfo {  // no mode: it fires when the error happens
  WGPUChainedStruct* nextInChain;
  WGPUUncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
} WGPUUncapturedErrorCallbackInfo;

typedef struct WGPULoggingCallbackInfo {  // dawn: the device's log (toggle output, warnings)
  WGPUChainedStruct* nextInChain;
  WGPULoggingCallback callback;
  void* userdata1;
  void* userdata2;
} WGPULoggingCallbackInfo;

typedef struct WGPUPopErrorScopeCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUPopErrorScopeCallback callback;
  void* userdata1;
  void* userdata2;
} WGPUPopErrorScopeCallbackInfo;

typedef struct WGPUBufferMapCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUBufferMapCallback callback;
  void* userdata1;
  void* userdata2;
} WGPUBufferMapCallbackInfo;

typedef struct WGPUQueueWorkDoneCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUQueueWorkDoneCallback callback;
  void* userdata1;
  void* userdata2;
} WGPUQueueWorkDoneCallbackInfo;

// ---- descriptors and info structs --------------------------------------------------------
typedef struct WGPUInstanceLimits {
  WGPUChainedStructOut* nextInChain;
  size_t timedWaitAnyMaxCount;
} WGPUInstanceLimits;

typedef struct WGPUInstanceDescriptor {
  WGPUChainedStruct const* nextInChain;
  size_t requiredFeatureCount;
  WGPUInstanceFeatureName const* requiredFeatures;
  WGPUInstanceLimits const* requiredLimits;
} WGPUInstanceDescriptor;

typedef struct WGPURequestAdapterOptions {
  WGPUChainedStruct const* nextInChain;
  WGPUFeatureLevel featureLevel;
  WGPUPowerPreference powerPreference;
  WGPUBool forceFallbackAdapter;
  WGPUBackendType backendType;
  WGPUSurface compatibleSurface;
} WGPURequestAdapterOptions;

typedef struct WGPUAdapterInfo {
  WGPUChainedStructOut* nextInChain;
  WGPUStringView vendor;
  WGPUStringView architecture;
  WGPUStringView device;
  WGPUStringView description;
  WGPUBackendType backendType;
  WGPUAdapterType adapterType;
  uint32_t vendorID;
  uint32_t deviceID;
  uint32_t subgroupMinSize;
  uint32_t subgroupMaxSize;
} WGPUAdapterInfo;

typedef struct WGPULimits {
  WGPUChainedStructOut* nextInChain;
  uint32_t maxTextureDimension1D;
  uint32_t maxTextureDimension2D;
  uint32_t maxTextureDimension3D;
  uint32_t maxTextureArrayLayers;
  uint32_t maxBindGroups;
  uint32_t maxBindGroupsPlusVertexBuffers;
  uint32_t maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout;
  uint32_t maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage;
  uint32_t maxSamplersPerShaderStage;
  uint32_t maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage;
  uint32_t maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment;
  uint32_t minStorageBufferOffsetAlignment;
  uint32_t maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes;
  uint32_t maxVertexBufferArrayStride;
  uint32_t maxInterStageShaderVariables;
  uint32_t maxColorAttachments;
  uint32_t maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize;
  uint32_t maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX;
  uint32_t maxComputeWorkgroupSizeY;
  uint32_t maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
  uint32_t maxImmediateSize;
} WGPULimits;

typedef struct WGPUSupportedFeatures {
  size_t featureCount;
  WGPUFeatureName const* features;
} WGPUSupportedFeatures;

// Chained into WGPUAdapterInfo when the adapter has AdapterPropertiesMemoryHeaps.
typedef struct WGPUMemoryHeapInfo {
  WGPUHeapProperty properties;
  uint64_t size;
} WGPUMemoryHeapInfo;

typedef struct WGPUAdapterPropertiesMemoryHeaps {
  WGPUChainedStructOut chain;
  size_t heapCount;
  WGPUMemoryHeapInfo const* heapInfo;
} WGPUAdapterPropertiesMemoryHeaps;

// Chained into WGPUAdapterInfo when the adapter has ChromiumExperimentalSubgroupMatrix: the
// matrix shapes and types its shaders may use.
typedef struct WGPUSubgroupMatrixConfig {
  WGPUSubgroupMatrixComponentType componentType;
  WGPUSubgroupMatrixComponentType resultComponentType;
  uint32_t M;
  uint32_t N;
  uint32_t K;
} WGPUSubgroupMatrixConfig;

typedef struct WGPUAdapterPropertiesSubgroupMatrixConfigs {
  WGPUChainedStructOut chain;
  size_t configCount;
  WGPUSubgroupMatrixConfig const* configs;
} WGPUAdapterPropertiesSubgroupMatrixConfigs;

typedef struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
} WGPUDawnTogglesDescriptor;

// Chained into WGPUDeviceDescriptor: the isolation key enters every cache key Dawn makes.
typedef struct WGPUDawnCacheDeviceDescriptor {
  WGPUChainedStruct chain;
  WGPUStringView isolationKey;
  WGPUDawnLoadCacheDataFunction loadDataFunction;
  WGPUDawnStoreCacheDataFunction storeDataFunction;
  void* functionUserdata;
} WGPUDawnCacheDeviceDescriptor;

typedef struct WGPUQueueDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
} WGPUQueueDescriptor;

typedef struct WGPUDeviceDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  WGPUFeatureName const* requiredFeatures;
  WGPULimits const* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUDeviceLostCallbackInfo deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
} WGPUDeviceDescriptor;

typedef struct WGPUBufferDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  WGPUBufferUsage usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
} WGPUBufferDescriptor;

typedef struct WGPUShaderModuleDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
} WGPUShaderModuleDescriptor;

typedef struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
} WGPUShaderSourceWGSL;

typedef struct WGPUConstantEntry {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView key;
  double value;
} WGPUConstantEntry;

typedef struct WGPUComputeState {
  WGPUChainedStruct const* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  WGPUConstantEntry const* constants;
} WGPUComputeState;

typedef struct WGPUComputePipelineDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  WGPUPipelineLayout layout;
  WGPUComputeState compute;
} WGPUComputePipelineDescriptor;

typedef struct WGPUBufferBindingLayout {
  WGPUChainedStruct const* nextInChain;
  WGPUBufferBindingType type;
  WGPUBool hasDynamicOffset;
  uint64_t minBindingSize;
} WGPUBufferBindingLayout;

typedef struct WGPUSamplerBindingLayout {
  WGPUChainedStruct const* nextInChain;
  WGPUSamplerBindingType type;
} WGPUSamplerBindingLayout;

typedef struct WGPUTextureBindingLayout {
  WGPUChainedStruct const* nextInChain;
  WGPUTextureSampleType sampleType;
  WGPUTextureViewDimension viewDimension;
  WGPUBool multisampled;
} WGPUTextureBindingLayout;

typedef struct WGPUStorageTextureBindingLayout {
  WGPUChainedStruct const* nextInChain;
  WGPUStorageTextureAccess access;
  WGPUTextureFormat format;
  WGPUTextureViewDimension viewDimension;
} WGPUStorageTextureBindingLayout;

typedef struct WGPUBindGroupLayoutEntry {
  WGPUChainedStruct const* nextInChain;
  uint32_t binding;
  WGPUShaderStage visibility;
  uint32_t bindingArraySize;
  WGPUBufferBindingLayout buffer;
  WGPUSamplerBindingLayout sampler;
  WGPUTextureBindingLayout texture;
  WGPUStorageTextureBindingLayout storageTexture;
} WGPUBindGroupLayoutEntry;

typedef struct WGPUBindGroupLayoutDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  size_t entryCount;
  WGPUBindGroupLayoutEntry const* entries;
} WGPUBindGroupLayoutDescriptor;

typedef struct WGPUPipelineLayoutDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  size_t bindGroupLayoutCount;
  WGPUBindGroupLayout const* bindGroupLayouts;
  uint32_t immediateSize;
} WGPUPipelineLayoutDescriptor;

typedef struct WGPUBindGroupEntry {
  WGPUChainedStruct const* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  WGPUSampler sampler;
  WGPUTextureView textureView;
} WGPUBindGroupEntry;

typedef struct WGPUBindGroupDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  WGPUBindGroupEntry const* entries;
} WGPUBindGroupDescriptor;

typedef struct WGPUCommandEncoderDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
} WGPUCommandEncoderDescriptor;

typedef struct WGPUCommandBufferDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
} WGPUCommandBufferDescriptor;

typedef struct WGPUPassTimestampWrites {
  WGPUChainedStruct const* nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
} WGPUPassTimestampWrites;

typedef struct WGPUComputePassDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  WGPUPassTimestampWrites const* timestampWrites;
} WGPUComputePassDescriptor;

typedef struct WGPUQuerySetDescriptor {
  WGPUChainedStruct const* nextInChain;
  WGPUStringView label;
  WGPUQueryType type;
  uint32_t count;
} WGPUQuerySetDescriptor;

}  // extern "C"
