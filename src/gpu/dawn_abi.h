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
// The enums and bitmasks are in dawn_abi_enums.h, the objects and structs in dawn_abi_structs.h;
// this file has the constants and the functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/dawn_abi_structs.h"

#define WGPU_STRLEN SIZE_MAX
#define WGPU_WHOLE_SIZE UINT64_MAX
#define WGPU_QUERY_SET_INDEX_UNDEFINED UINT32_MAX
#define WGPU_LIMIT_U32_UNDEFINED UINT32_MAX
#define WGPU_LIMIT_U64_UNDEFINED UINT64_MAX

extern "C" {

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
