// wgrt's own declarations of the part of Dawn's WebGPU C ABI that wgrt uses.
//
// Written from the API description of the pinned Dawn build (Dawn commit c5d549e250, the one
// in npm webgpu@0.4.0; tests/gpu/dawn_api.json holds the entries wgrt uses), not from any
// header. Rules that description implies:
//   - enum values carry a block offset from their tags: dawn +0x50000, emscripten +0x40000,
//     compat +0x20000 ("upstream" cancels dawn/emscripten); bitmasks are uint64_t;
//   - WGPUBool is uint32_t; strings are WGPUStringView {data, length}, length
//     WGPU_STRLEN meaning NUL-terminated;
//   - callbacks take (..., void* userdata1, void* userdata2) inside *CallbackInfo structs.
// Struct members are in dawn.json order; tests/gpu/abi_test.cpp checks enum values and
// member counts against dawn.json. Names match the official webgpu.h so that a build
// against an installed Dawn (WGRT_SYSTEM_WEBGPU_H) compiles the same sources.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;
#define WGPU_STRLEN SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX
#define WGPU_QUERY_SET_INDEX_UNDEFINED UINT32_MAX
#define WGPU_LIMIT_U32_UNDEFINED UINT32_MAX
#define WGPU_LIMIT_U64_UNDEFINED UINT64_MAX

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

// ---- enums -------------------------------------------------------------------------------
typedef enum WGPUAdapterType {
  WGPUAdapterType_DiscreteGPU = 0x00000001,
  WGPUAdapterType_IntegratedGPU = 0x00000002,
  WGPUAdapterType_CPU = 0x00000003,
  WGPUAdapterType_Unknown = 0x00000004,
  WGPUAdapterType_Force32 = 0x7FFFFFFF
} WGPUAdapterType;

typedef enum WGPUBackendType {
  WGPUBackendType_Undefined = 0x00000000,
  WGPUBackendType_Null = 0x00000001,
  WGPUBackendType_WebGPU = 0x00000002,
  WGPUBackendType_D3D11 = 0x00000003,
  WGPUBackendType_D3D12 = 0x00000004,
  WGPUBackendType_Metal = 0x00000005,
  WGPUBackendType_Vulkan = 0x00000006,
  WGPUBackendType_OpenGL = 0x00000007,
  WGPUBackendType_OpenGLES = 0x00000008,
  WGPUBackendType_Force32 = 0x7FFFFFFF
} WGPUBackendType;

typedef enum WGPUBufferBindingType {
  WGPUBufferBindingType_BindingNotUsed = 0x00000000,
  WGPUBufferBindingType_Undefined = 0x00000001,
  WGPUBufferBindingType_Uniform = 0x00000002,
  WGPUBufferBindingType_Storage = 0x00000003,
  WGPUBufferBindingType_ReadOnlyStorage = 0x00000004,
  WGPUBufferBindingType_Force32 = 0x7FFFFFFF
} WGPUBufferBindingType;

typedef enum WGPUBufferMapState {
  WGPUBufferMapState_Unmapped = 0x00000001,
  WGPUBufferMapState_Pending = 0x00000002,
  WGPUBufferMapState_Mapped = 0x00000003,
  WGPUBufferMapState_Force32 = 0x7FFFFFFF
} WGPUBufferMapState;

typedef enum WGPUCallbackMode {
  WGPUCallbackMode_WaitAnyOnly = 0x00000001,
  WGPUCallbackMode_AllowProcessEvents = 0x00000002,
  WGPUCallbackMode_AllowSpontaneous = 0x00000003,
  WGPUCallbackMode_Force32 = 0x7FFFFFFF
} WGPUCallbackMode;

typedef enum WGPUCompilationInfoRequestStatus {
  WGPUCompilationInfoRequestStatus_Success = 0x00000001,
  WGPUCompilationInfoRequestStatus_CallbackCancelled = 0x00000002,
  WGPUCompilationInfoRequestStatus_Force32 = 0x7FFFFFFF
} WGPUCompilationInfoRequestStatus;

typedef enum WGPUCompilationMessageType {
  WGPUCompilationMessageType_Error = 0x00000001,
  WGPUCompilationMessageType_Warning = 0x00000002,
  WGPUCompilationMessageType_Info = 0x00000003,
  WGPUCompilationMessageType_Force32 = 0x7FFFFFFF
} WGPUCompilationMessageType;

typedef enum WGPUDeviceLostReason {
  WGPUDeviceLostReason_Unknown = 0x00000001,
  WGPUDeviceLostReason_Destroyed = 0x00000002,
  WGPUDeviceLostReason_CallbackCancelled = 0x00000003,
  WGPUDeviceLostReason_FailedCreation = 0x00000004,
  WGPUDeviceLostReason_Force32 = 0x7FFFFFFF
} WGPUDeviceLostReason;

typedef enum WGPUErrorFilter {
  WGPUErrorFilter_Validation = 0x00000001,
  WGPUErrorFilter_OutOfMemory = 0x00000002,
  WGPUErrorFilter_Internal = 0x00000003,
  WGPUErrorFilter_Force32 = 0x7FFFFFFF
} WGPUErrorFilter;

typedef enum WGPUErrorType {
  WGPUErrorType_NoError = 0x00000001,
  WGPUErrorType_Validation = 0x00000002,
  WGPUErrorType_OutOfMemory = 0x00000003,
  WGPUErrorType_Internal = 0x00000004,
  WGPUErrorType_Unknown = 0x00000005,
  WGPUErrorType_Force32 = 0x7FFFFFFF
} WGPUErrorType;

typedef enum WGPULoggingType {
  WGPULoggingType_Verbose = 0x00000001,
  WGPULoggingType_Info = 0x00000002,
  WGPULoggingType_Warning = 0x00000003,
  WGPULoggingType_Error = 0x00000004,
  WGPULoggingType_Force32 = 0x7FFFFFFF
} WGPULoggingType;

// Only the features wgrt asks for or prints by name; others are printed as numbers.
typedef enum WGPUFeatureName {
  WGPUFeatureName_DepthClipControl = 0x00000002,
  WGPUFeatureName_Depth32FloatStencil8 = 0x00000003,
  WGPUFeatureName_TimestampQuery = 0x00000009,
  WGPUFeatureName_TextureCompressionBC = 0x00000004,
  WGPUFeatureName_TextureCompressionBCSliced3D = 0x00000005,
  WGPUFeatureName_TextureCompressionETC2 = 0x00000006,
  WGPUFeatureName_TextureCompressionASTC = 0x00000007,
  WGPUFeatureName_TextureCompressionASTCSliced3D = 0x00000008,
  WGPUFeatureName_IndirectFirstInstance = 0x0000000A,
  WGPUFeatureName_ShaderF16 = 0x0000000B,
  WGPUFeatureName_RG11B10UfloatRenderable = 0x0000000C,
  WGPUFeatureName_BGRA8UnormStorage = 0x0000000D,
  WGPUFeatureName_Float32Filterable = 0x0000000E,
  WGPUFeatureName_Float32Blendable = 0x0000000F,
  WGPUFeatureName_ClipDistances = 0x00000010,
  WGPUFeatureName_DualSourceBlending = 0x00000011,
  WGPUFeatureName_Subgroups = 0x00000012,
  WGPUFeatureName_CoreFeaturesAndLimits = 0x00000001,
  WGPUFeatureName_ChromiumExperimentalTimestampQueryInsidePasses = 0x00050003,
  WGPUFeatureName_ShaderModuleCompilationOptions = 0x0005002E,
  WGPUFeatureName_ChromiumExperimentalSubgroupMatrix = 0x00050034,
  WGPUFeatureName_AdapterPropertiesMemoryHeaps = 0x00050014,
  WGPUFeatureName_Force32 = 0x7FFFFFFF
} WGPUFeatureName;

typedef enum WGPUFeatureLevel {
  WGPUFeatureLevel_Undefined = 0x00000000,
  WGPUFeatureLevel_Compatibility = 0x00000001,
  WGPUFeatureLevel_Core = 0x00000002,
  WGPUFeatureLevel_Force32 = 0x7FFFFFFF
} WGPUFeatureLevel;

typedef enum WGPUMapAsyncStatus {
  WGPUMapAsyncStatus_Success = 0x00000001,
  WGPUMapAsyncStatus_CallbackCancelled = 0x00000002,
  WGPUMapAsyncStatus_Error = 0x00000003,
  WGPUMapAsyncStatus_Aborted = 0x00000004,
  WGPUMapAsyncStatus_Force32 = 0x7FFFFFFF
} WGPUMapAsyncStatus;

typedef enum WGPUPopErrorScopeStatus {
  WGPUPopErrorScopeStatus_Success = 0x00000001,
  WGPUPopErrorScopeStatus_CallbackCancelled = 0x00000002,
  WGPUPopErrorScopeStatus_Error = 0x00000003,
  WGPUPopErrorScopeStatus_Force32 = 0x7FFFFFFF
} WGPUPopErrorScopeStatus;

typedef enum WGPUPowerPreference {
  WGPUPowerPreference_Undefined = 0x00000000,
  WGPUPowerPreference_LowPower = 0x00000001,
  WGPUPowerPreference_HighPerformance = 0x00000002,
  WGPUPowerPreference_Force32 = 0x7FFFFFFF
} WGPUPowerPreference;

typedef enum WGPUQueryType {
  WGPUQueryType_Occlusion = 0x00000001,
  WGPUQueryType_Timestamp = 0x00000002,
  WGPUQueryType_Force32 = 0x7FFFFFFF
} WGPUQueryType;

typedef enum WGPUQueueWorkDoneStatus {
  WGPUQueueWorkDoneStatus_Success = 0x00000001,
  WGPUQueueWorkDoneStatus_CallbackCancelled = 0x00000002,
  WGPUQueueWorkDoneStatus_Error = 0x00000003,
  WGPUQueueWorkDoneStatus_Force32 = 0x7FFFFFFF
} WGPUQueueWorkDoneStatus;

typedef enum WGPURequestAdapterStatus {
  WGPURequestAdapterStatus_Success = 0x00000001,
  WGPURequestAdapterStatus_CallbackCancelled = 0x00000002,
  WGPURequestAdapterStatus_Unavailable = 0x00000003,
  WGPURequestAdapterStatus_Error = 0x00000004,
  WGPURequestAdapterStatus_Force32 = 0x7FFFFFFF
} WGPURequestAdapterStatus;

typedef enum WGPURequestDeviceStatus {
  WGPURequestDeviceStatus_Success = 0x00000001,
  WGPURequestDeviceStatus_CallbackCancelled = 0x00000002,
  WGPURequestDeviceStatus_Error = 0x00000003,
  WGPURequestDeviceStatus_Force32 = 0x7FFFFFFF
} WGPURequestDeviceStatus;

typedef enum WGPUSamplerBindingType {
  WGPUSamplerBindingType_BindingNotUsed = 0x00000000,
  WGPUSamplerBindingType_Force32 = 0x7FFFFFFF
} WGPUSamplerBindingType;

// What an instance is created with (WGPUInstanceDescriptor's required features).
typedef enum WGPUInstanceFeatureName {
  WGPUInstanceFeatureName_TimedWaitAny = 0x00000001,
  WGPUInstanceFeatureName_ShaderSourceSPIRV = 0x00000002,
  WGPUInstanceFeatureName_MultipleDevicesPerAdapter = 0x00000003,
  WGPUInstanceFeatureName_Force32 = 0x7FFFFFFF
} WGPUInstanceFeatureName;

// The element types of a subgroup matrix (chromium-experimental-subgroup-matrix).
typedef enum WGPUSubgroupMatrixComponentType {
  WGPUSubgroupMatrixComponentType_F32 = 0x00000001,
  WGPUSubgroupMatrixComponentType_F16 = 0x00000002,
  WGPUSubgroupMatrixComponentType_U32 = 0x00000003,
  WGPUSubgroupMatrixComponentType_I32 = 0x00000004,
  WGPUSubgroupMatrixComponentType_U8 = 0x00000005,
  WGPUSubgroupMatrixComponentType_I8 = 0x00000006,
  WGPUSubgroupMatrixComponentType_Force32 = 0x7FFFFFFF
} WGPUSubgroupMatrixComponentType;

typedef enum WGPUStatus {
  WGPUStatus_Success = 0x00000001,
  WGPUStatus_Error = 0x00000002,
  WGPUStatus_Force32 = 0x7FFFFFFF
} WGPUStatus;

typedef enum WGPUStorageTextureAccess {
  WGPUStorageTextureAccess_BindingNotUsed = 0x00000000,
  WGPUStorageTextureAccess_Force32 = 0x7FFFFFFF
} WGPUStorageTextureAccess;

typedef enum WGPUSType {
  WGPUSType_ShaderSourceSPIRV = 0x00000001,
  WGPUSType_ShaderSourceWGSL = 0x00000002,
  WGPUSType_DawnCacheDeviceDescriptor = 0x00050007,
  WGPUSType_DawnTogglesDescriptor = 0x0005000A,
  WGPUSType_AdapterPropertiesMemoryHeaps = 0x00050013,
  WGPUSType_AdapterPropertiesSubgroupMatrixConfigs = 0x0005003B,
  WGPUSType_Force32 = 0x7FFFFFFF
} WGPUSType;

typedef enum WGPUTextureFormat {
  WGPUTextureFormat_Undefined = 0x00000000,
  WGPUTextureFormat_Force32 = 0x7FFFFFFF
} WGPUTextureFormat;

typedef enum WGPUTextureSampleType {
  WGPUTextureSampleType_BindingNotUsed = 0x00000000,
  WGPUTextureSampleType_Force32 = 0x7FFFFFFF
} WGPUTextureSampleType;

typedef enum WGPUTextureViewDimension {
  WGPUTextureViewDimension_Undefined = 0x00000000,
  WGPUTextureViewDimension_Force32 = 0x7FFFFFFF
} WGPUTextureViewDimension;

typedef enum WGPUWaitStatus {
  WGPUWaitStatus_Success = 0x00000001,
  WGPUWaitStatus_TimedOut = 0x00000002,
  WGPUWaitStatus_Error = 0x00000003,
  WGPUWaitStatus_Force32 = 0x7FFFFFFF
} WGPUWaitStatus;

// ---- bitmasks (uint64_t) -----------------------------------------------------------------
typedef WGPUFlags WGPUBufferUsage;
static const WGPUBufferUsage WGPUBufferUsage_None = 0x0000000000000000;
static const WGPUBufferUsage WGPUBufferUsage_MapRead = 0x0000000000000001;
static const WGPUBufferUsage WGPUBufferUsage_MapWrite = 0x0000000000000002;
static const WGPUBufferUsage WGPUBufferUsage_CopySrc = 0x0000000000000004;
static const WGPUBufferUsage WGPUBufferUsage_CopyDst = 0x0000000000000008;
static const WGPUBufferUsage WGPUBufferUsage_Index = 0x0000000000000010;
static const WGPUBufferUsage WGPUBufferUsage_Vertex = 0x0000000000000020;
static const WGPUBufferUsage WGPUBufferUsage_Uniform = 0x0000000000000040;
static const WGPUBufferUsage WGPUBufferUsage_Storage = 0x0000000000000080;
static const WGPUBufferUsage WGPUBufferUsage_Indirect = 0x0000000000000100;
static const WGPUBufferUsage WGPUBufferUsage_QueryResolve = 0x0000000000000200;

typedef WGPUFlags WGPUMapMode;
static const WGPUMapMode WGPUMapMode_None = 0x0000000000000000;
static const WGPUMapMode WGPUMapMode_Read = 0x0000000000000001;
static const WGPUMapMode WGPUMapMode_Write = 0x0000000000000002;

typedef WGPUFlags WGPUShaderStage;
static const WGPUShaderStage WGPUShaderStage_None = 0x0000000000000000;
static const WGPUShaderStage WGPUShaderStage_Vertex = 0x0000000000000001;
static const WGPUShaderStage WGPUShaderStage_Fragment = 0x0000000000000002;
static const WGPUShaderStage WGPUShaderStage_Compute = 0x0000000000000004;

typedef WGPUFlags WGPUHeapProperty;
static const WGPUHeapProperty WGPUHeapProperty_None = 0x0000000000000000;
static const WGPUHeapProperty WGPUHeapProperty_DeviceLocal = 0x0000000000000001;
static const WGPUHeapProperty WGPUHeapProperty_HostVisible = 0x0000000000000002;
static const WGPUHeapProperty WGPUHeapProperty_HostCoherent = 0x0000000000000004;
static const WGPUHeapProperty WGPUHeapProperty_HostUncached = 0x0000000000000008;
static const WGPUHeapProperty WGPUHeapProperty_HostCached = 0x0000000000000010;

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

// ---- functions ---------------------------------------------------------------------------
// Every entry point wgrt calls, as X(return type, name, (parameters), (arguments)): declared
// below; defined in dawn_loader.cpp as calls through the table it fills by name at load.
#define WGRT_DAWN_FUNCTIONS(X) \
  X(WGPUInstance, wgpuCreateInstance, (WGPUInstanceDescriptor const* descriptor), (descriptor)) \
  X(void, wgpuInstanceRelease, (WGPUInstance instance), (instance)) \
  X(WGPUFuture, wgpuInstanceRequestAdapter, \
    (WGPUInstance instance, WGPURequestAdapterOptions const* options, \
     WGPURequestAdapterCallbackInfo callbackInfo), \
    (instance, options, callbackInfo)) \
  X(WGPUWaitStatus, wgpuInstanceWaitAny, \
    (WGPUInstance instance, size_t futureCount, WGPUFutureWaitInfo* futures, uint64_t timeoutNS), \
    (instance, futureCount, futures, timeoutNS)) \
  X(void, wgpuInstanceProcessEvents, (WGPUInstance instance), (instance)) \
  X(void, wgpuAdapterRelease, (WGPUAdapter adapter), (adapter)) \
  X(WGPUStatus, wgpuAdapterGetLimits, \
    (WGPUAdapter adapter, WGPULimits* limits), \
    (adapter, limits)) \
  X(WGPUStatus, wgpuAdapterGetInfo, (WGPUAdapter adapter, WGPUAdapterInfo* info), (adapter, info)) \
  X(WGPUBool, wgpuAdapterHasFeature, \
    (WGPUAdapter adapter, WGPUFeatureName feature), \
    (adapter, feature)) \
  X(void, wgpuAdapterGetFeatures, \
    (WGPUAdapter adapter, WGPUSupportedFeatures* features), \
    (adapter, features)) \
  X(WGPUFuture, wgpuAdapterRequestDevice, \
    (WGPUAdapter adapter, WGPUDeviceDescriptor const* options, \
     WGPURequestDeviceCallbackInfo callbackInfo), \
    (adapter, options, callbackInfo)) \
  X(void, wgpuAdapterInfoFreeMembers, (WGPUAdapterInfo adapterInfo), (adapterInfo)) \
  X(void, wgpuAdapterPropertiesMemoryHeapsFreeMembers, \
    (WGPUAdapterPropertiesMemoryHeaps adapterPropertiesMemoryHeaps), \
    (adapterPropertiesMemoryHeaps)) \
  X(void, wgpuAdapterPropertiesSubgroupMatrixConfigsFreeMembers, \
    (WGPUAdapterPropertiesSubgroupMatrixConfigs adapterPropertiesSubgroupMatrixConfigs), \
    (adapterPropertiesSubgroupMatrixConfigs)) \
  X(void, wgpuSupportedFeaturesFreeMembers, \
    (WGPUSupportedFeatures supportedFeatures), \
    (supportedFeatures)) \
  X(void, wgpuDeviceRelease, (WGPUDevice device), (device)) \
  X(void, wgpuDeviceDestroy, (WGPUDevice device), (device)) \
  X(WGPUQueue, wgpuDeviceGetQueue, (WGPUDevice device), (device)) \
  X(WGPUStatus, wgpuDeviceGetLimits, (WGPUDevice device, WGPULimits* limits), (device, limits)) \
  X(WGPUBool, wgpuDeviceHasFeature, \
    (WGPUDevice device, WGPUFeatureName feature), \
    (device, feature)) \
  X(void, wgpuDeviceSetLoggingCallback, \
    (WGPUDevice device, WGPULoggingCallbackInfo callbackInfo), \
    (device, callbackInfo)) \
  X(void, wgpuDevicePushErrorScope, (WGPUDevice device, WGPUErrorFilter filter), (device, filter)) \
  X(WGPUFuture, wgpuDevicePopErrorScope, \
    (WGPUDevice device, WGPUPopErrorScopeCallbackInfo callbackInfo), \
    (device, callbackInfo)) \
  X(WGPUBuffer, wgpuDeviceCreateBuffer, \
    (WGPUDevice device, WGPUBufferDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUShaderModule, wgpuDeviceCreateShaderModule, \
    (WGPUDevice device, WGPUShaderModuleDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUComputePipeline, wgpuDeviceCreateComputePipeline, \
    (WGPUDevice device, WGPUComputePipelineDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUBindGroupLayout, wgpuDeviceCreateBindGroupLayout, \
    (WGPUDevice device, WGPUBindGroupLayoutDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUPipelineLayout, wgpuDeviceCreatePipelineLayout, \
    (WGPUDevice device, WGPUPipelineLayoutDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUBindGroup, wgpuDeviceCreateBindGroup, \
    (WGPUDevice device, WGPUBindGroupDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUCommandEncoder, wgpuDeviceCreateCommandEncoder, \
    (WGPUDevice device, WGPUCommandEncoderDescriptor const* descriptor), \
    (device, descriptor)) \
  X(WGPUQuerySet, wgpuDeviceCreateQuerySet, \
    (WGPUDevice device, WGPUQuerySetDescriptor const* descriptor), \
    (device, descriptor)) \
  X(void, wgpuQueueRelease, (WGPUQueue queue), (queue)) \
  X(void, wgpuQueueSubmit, \
    (WGPUQueue queue, size_t commandCount, WGPUCommandBuffer const* commands), \
    (queue, commandCount, commands)) \
  X(void, wgpuQueueWriteBuffer, \
    (WGPUQueue queue, WGPUBuffer buffer, uint64_t bufferOffset, void const* data, size_t size), \
    (queue, buffer, bufferOffset, data, size)) \
  X(WGPUFuture, wgpuQueueOnSubmittedWorkDone, \
    (WGPUQueue queue, WGPUQueueWorkDoneCallbackInfo callbackInfo), \
    (queue, callbackInfo)) \
  X(void, wgpuBufferRelease, (WGPUBuffer buffer), (buffer)) \
  X(void, wgpuBufferDestroy, (WGPUBuffer buffer), (buffer)) \
  X(uint64_t, wgpuBufferGetSize, (WGPUBuffer buffer), (buffer)) \
  X(WGPUFuture, wgpuBufferMapAsync, \
    (WGPUBuffer buffer, WGPUMapMode mode, size_t offset, size_t size, \
     WGPUBufferMapCallbackInfo callbackInfo), \
    (buffer, mode, offset, size, callbackInfo)) \
  X(void const*, wgpuBufferGetConstMappedRange, \
    (WGPUBuffer buffer, size_t offset, size_t size), \
    (buffer, offset, size)) \
  X(void*, wgpuBufferGetMappedRange, \
    (WGPUBuffer buffer, size_t offset, size_t size), \
    (buffer, offset, size)) \
  X(void, wgpuBufferUnmap, (WGPUBuffer buffer), (buffer)) \
  X(void, wgpuShaderModuleRelease, (WGPUShaderModule shaderModule), (shaderModule)) \
  X(void, wgpuComputePipelineRelease, (WGPUComputePipeline computePipeline), (computePipeline)) \
  X(WGPUBindGroupLayout, wgpuComputePipelineGetBindGroupLayout, \
    (WGPUComputePipeline computePipeline, uint32_t groupIndex), \
    (computePipeline, groupIndex)) \
  X(void, wgpuBindGroupLayoutRelease, (WGPUBindGroupLayout bindGroupLayout), (bindGroupLayout)) \
  X(void, wgpuPipelineLayoutRelease, (WGPUPipelineLayout pipelineLayout), (pipelineLayout)) \
  X(void, wgpuBindGroupRelease, (WGPUBindGroup bindGroup), (bindGroup)) \
  X(void, wgpuQuerySetRelease, (WGPUQuerySet querySet), (querySet)) \
  X(void, wgpuQuerySetDestroy, (WGPUQuerySet querySet), (querySet)) \
  X(void, wgpuCommandEncoderRelease, (WGPUCommandEncoder commandEncoder), (commandEncoder)) \
  X(WGPUComputePassEncoder, wgpuCommandEncoderBeginComputePass, \
    (WGPUCommandEncoder commandEncoder, WGPUComputePassDescriptor const* descriptor), \
    (commandEncoder, descriptor)) \
  X(void, wgpuCommandEncoderCopyBufferToBuffer, \
    (WGPUCommandEncoder commandEncoder, WGPUBuffer source, uint64_t sourceOffset, \
     WGPUBuffer destination, uint64_t destinationOffset, uint64_t size), \
    (commandEncoder, source, sourceOffset, destination, destinationOffset, size)) \
  X(void, wgpuCommandEncoderResolveQuerySet, \
    (WGPUCommandEncoder commandEncoder, WGPUQuerySet querySet, uint32_t firstQuery, \
     uint32_t queryCount, WGPUBuffer destination, uint64_t destinationOffset), \
    (commandEncoder, querySet, firstQuery, queryCount, destination, destinationOffset)) \
  X(WGPUCommandBuffer, wgpuCommandEncoderFinish, \
    (WGPUCommandEncoder commandEncoder, WGPUCommandBufferDescriptor const* descriptor), \
    (commandEncoder, descriptor)) \
  X(void, wgpuCommandBufferRelease, (WGPUCommandBuffer commandBuffer), (commandBuffer)) \
  X(void, wgpuComputePassEncoderRelease, \
    (WGPUComputePassEncoder computePassEncoder), \
    (computePassEncoder)) \
  X(void, wgpuComputePassEncoderSetPipeline, \
    (WGPUComputePassEncoder computePassEncoder, WGPUComputePipeline pipeline), \
    (computePassEncoder, pipeline)) \
  X(void, wgpuComputePassEncoderSetBindGroup, \
    (WGPUComputePassEncoder computePassEncoder, uint32_t groupIndex, WGPUBindGroup group, \
     size_t dynamicOffsetCount, uint32_t const* dynamicOffsets), \
    (computePassEncoder, groupIndex, group, dynamicOffsetCount, dynamicOffsets)) \
  X(void, wgpuComputePassEncoderDispatchWorkgroups, \
    (WGPUComputePassEncoder computePassEncoder, uint32_t workgroupCountX, \
     uint32_t workgroupCountY, uint32_t workgroupCountZ), \
    (computePassEncoder, workgroupCountX, workgroupCountY, workgroupCountZ)) \
  X(void, wgpuComputePassEncoderEnd, \
    (WGPUComputePassEncoder computePassEncoder), \
    (computePassEncoder))

#define WGRT_DAWN_DECLARE(ret, name, params, args) ret name params;
WGRT_DAWN_FUNCTIONS(WGRT_DAWN_DECLARE)
#undef WGRT_DAWN_DECLARE

}  // extern "C"
