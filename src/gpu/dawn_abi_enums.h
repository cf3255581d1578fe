// A part of gpu/dawn_abi.h: the enums and bitmasks. Include gpu/dawn_abi.h, whose opening comment
// gives the rules these declarations follow; tests/gpu/abi_test.cpp checks them against dawn.json.
#pragma once

#include <cstdint>

extern "C" {

typedef uint32_t WGPUBool;
typedef uint64_t WGPUFlags;

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

}  // extern "C"
