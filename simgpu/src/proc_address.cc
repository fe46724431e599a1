// cuGetProcAddress: one table of (name, version introduced, function, per-thread-stream variant)
// answers lookups as the real driver does: the newest entry whose version is <= the requested
// one (cudaTypedefs.h's PFN_<name>_vNNNNN, one entry per signature); the _ptsz/_ptds variant when
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is set; nothing above the driver's version.
#include <cstring>

#include "simgpu_internal.h"

namespace simgpu {
namespace {

struct ProcEntry {
  const char* name;
  int version;
  void* fn;
  void* per_thread;
};

#define F(name, ver, fn) \
  { name, ver, reinterpret_cast<void*>(&fn), nullptr }
#define PT(name, ver, fn, pt) \
  { name, ver, reinterpret_cast<void*>(&fn), reinterpret_cast<void*>(&pt) }

const ProcEntry kProcs[] = {
    F("cuInit", 2000, cuInit),
    F("cuDriverGetVersion", 2020, cuDriverGetVersion),
    F("cuGetErrorName", 6000, cuGetErrorName),
    F("cuGetErrorString", 6000, cuGetErrorString),
    F("cuGetExportTable", 3000, cuGetExportTable),
    F("cuGetProcAddress", 11030, cuGetProcAddress),
    F("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    F("cuDeviceGet", 2000, cuDeviceGet),
    F("cuDeviceGetCount", 2000, cuDeviceGetCount),
    F("cuDeviceGetName", 2000, cuDeviceGetName),
    F("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    F("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    F("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    F("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    F("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    F("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    F("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    F("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    F("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),
    F("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    F("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    F("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    F("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    F("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    F("cuDevicePrimaryCtxSetFlags", 7000, cuDevicePrimaryCtxSetFlags),
    F("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
    F("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    F("cuCtxCreate", 2000, cuCtxCreate),
    F("cuCtxCreate", 3020, cuCtxCreate_v2),
    F("cuCtxCreate", 12050, cuCtxCreate_v4),
    F("cuCtxDestroy", 2000, cuCtxDestroy),
    F("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    F("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    F("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    F("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    F("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    F("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    F("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    F("cuCtxGetDevice", 2000, cuCtxGetDevice),
    F("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    F("cuCtxGetFlags", 7000, cuCtxGetFlags),
    F("cuCtxGetId", 12000, cuCtxGetId),
    F("cuCtxGetApiVersion", 3020, cuCtxGetApiVersion),
    F("cuCtxGetStreamPriorityRange", 5050, cuCtxGetStreamPriorityRange),
    F("cuCtxSynchronize", 2000, cuCtxSynchronize),
    F("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    F("cuMemGetInfo", 2000, cuMemGetInfo),
    F("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    F("cuMemAlloc", 2000, cuMemAlloc),
    F("cuMemAlloc", 3020, cuMemAlloc_v2),
    F("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    F("cuMemFree", 2000, cuMemFree),
    F("cuMemFree", 3020, cuMemFree_v2),
    F("cuMemAllocManaged", 6000, cuMemAllocManaged),
    F("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    F("cuMemHostAlloc", 2020, cuMemHostAlloc),
    F("cuMemFreeHost", 2000, cuMemFreeHost),
    F("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    F("cuMemPoolCreate", 11020, cuMemPoolCreate),
    F("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    F("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    F("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    F("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    F("cuMemGetDefaultMemPool", 13000, cuMemGetDefaultMemPool),
    F("cuMemGetMemPool", 13000, cuMemGetMemPool),
    F("cuMemSetMemPool", 13000, cuMemSetMemPool),
    PT("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
    PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    PT("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
    PT("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
    PT("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    F("cuMemcpyHtoD", 2000, cuMemcpyHtoD),
    PT("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    F("cuMemcpyDtoH", 2000, cuMemcpyDtoH),
    PT("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    PT("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    PT("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    PT("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    PT("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    PT("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
    PT("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    PT("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    PT("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
    PT("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    PT("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
    PT("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz),
    PT("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz),
    PT("cuMemPrefetchBatchAsync", 13000, cuMemPrefetchBatchAsync, cuMemPrefetchBatchAsync_ptsz),
    PT("cuMemDiscardBatchAsync", 13000, cuMemDiscardBatchAsync, cuMemDiscardBatchAsync_ptsz),
    PT("cuMemDiscardAndPrefetchBatchAsync", 13000, cuMemDiscardAndPrefetchBatchAsync,
       cuMemDiscardAndPrefetchBatchAsync_ptsz),
    F("cuMemAdvise", 8000, cuMemAdvise),
    F("cuMemAdvise", 12020, cuMemAdvise_v2),
    F("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    F("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    F("cuMemAddressReserve", 10020, cuMemAddressReserve),
    F("cuMemCreate", 10020, cuMemCreate),
    F("cuMemMap", 10020, cuMemMap),
    F("cuMemUnmap", 10020, cuMemUnmap),
    F("cuMemRelease", 10020, cuMemRelease),
    PT("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    F("cuGraphCreate", 10000, cuGraphCreate),
    F("cuGraphDestroy", 10000, cuGraphDestroy),
    F("cuGraphAddKernelNode", 10000, cuGraphAddKernelNode),
    F("cuGraphAddKernelNode", 12000, cuGraphAddKernelNode_v2),
    F("cuGraphAddEmptyNode", 10000, cuGraphAddEmptyNode),
    F("cuGraphAddNode", 12020, cuGraphAddNode),
    F("cuGraphAddNode", 12030, cuGraphAddNode_v2),
    F("cuGraphAddMemcpyNode", 10000, cuGraphAddMemcpyNode),
    F("cuGraphAddMemsetNode", 10000, cuGraphAddMemsetNode),
    F("cuGraphAddHostNode", 10000, cuGraphAddHostNode),
    F("cuGraphAddChildGraphNode", 10000, cuGraphAddChildGraphNode),
    F("cuGraphAddEventRecordNode", 11010, cuGraphAddEventRecordNode),
    F("cuGraphAddEventWaitNode", 11010, cuGraphAddEventWaitNode),
    F("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    F("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    F("cuGraphGetNodes", 10000, cuGraphGetNodes),
    F("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    F("cuGraphChildGraphNodeGetGraph", 10000, cuGraphChildGraphNodeGetGraph),
    F("cuGraphKernelNodeGetParams", 10000, cuGraphKernelNodeGetParams),
    F("cuGraphKernelNodeGetParams", 12000, cuGraphKernelNodeGetParams_v2),
    F("cuGraphKernelNodeSetParams", 10000, cuGraphKernelNodeSetParams),
    F("cuGraphKernelNodeSetParams", 12000, cuGraphKernelNodeSetParams_v2),
    F("cuGraphInstantiate", 10000, cuGraphInstantiate),
    F("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    F("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    F("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    PT("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams,
       cuGraphInstantiateWithParams_ptsz),
    F("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    F("cuGraphExecKernelNodeSetParams", 10010, cuGraphExecKernelNodeSetParams),
    F("cuGraphExecKernelNodeSetParams", 12000, cuGraphExecKernelNodeSetParams_v2),
    F("cuGraphExecChildGraphNodeSetParams", 11010, cuGraphExecChildGraphNodeSetParams),
    F("cuGraphExecNodeSetParams", 12020, cuGraphExecNodeSetParams),
    F("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
    F("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
    F("cuStreamCreate", 2000, cuStreamCreate),
    F("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    F("cuStreamDestroy", 2000, cuStreamDestroy),
    F("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    PT("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    PT("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
    PT("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    PT("cuStreamGetId", 12000, cuStreamGetId, cuStreamGetId_ptsz),
    PT("cuStreamGetFlags", 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    PT("cuStreamGetPriority", 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
    PT("cuStreamGetCtx", 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
    PT("cuLaunchHostFunc", 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    F("cuEventCreate", 2000, cuEventCreate),
    F("cuEventDestroy", 2000, cuEventDestroy),
    F("cuEventDestroy", 4000, cuEventDestroy_v2),
    PT("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
    PT("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    F("cuEventQuery", 2000, cuEventQuery),
    F("cuEventSynchronize", 2000, cuEventSynchronize),
    F("cuEventElapsedTime", 2000, cuEventElapsedTime),
    F("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    F("cuModuleLoad", 2000, cuModuleLoad),
    F("cuModuleUnload", 2000, cuModuleUnload),
    F("cuModuleGetFunction", 2000, cuModuleGetFunction),
    F("cuModuleGetFunctionCount", 12040, cuModuleGetFunctionCount),
    F("cuFuncGetName", 12030, cuFuncGetName),
    F("cuFuncGetParamInfo", 12040, cuFuncGetParamInfo),
    F("cuFuncGetAttribute", 2020, cuFuncGetAttribute),
    F("cuFuncSetAttribute", 9000, cuFuncSetAttribute),
    F("cuLibraryLoadFromFile", 12000, cuLibraryLoadFromFile),
    F("cuLibraryUnload", 12000, cuLibraryUnload),
    F("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
    F("cuLibraryGetKernelCount", 12040, cuLibraryGetKernelCount),
    F("cuLibraryGetModule", 12000, cuLibraryGetModule),
    F("cuKernelGetFunction", 12000, cuKernelGetFunction),
    F("cuKernelGetName", 12030, cuKernelGetName),
    F("cuKernelGetParamInfo", 12040, cuKernelGetParamInfo),
    PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    PT("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    F("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    PT("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph,
       cuStreamBeginCaptureToGraph_ptsz),
    F("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    PT("cuStreamAddCallback", 5000, cuStreamAddCallback, cuStreamAddCallback_ptsz),
    PT("cuLaunchKernel", 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
    PT("cuLaunchKernelEx", 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
    PT("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel,
       cuLaunchCooperativeKernel_ptsz),
};

#undef F
#undef PT

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<cuuint64_t>(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  // cuda.h: a version newer than the driver's is refused (a CUDA 12 driver refuses 13000).
  const int driver = DriverVersion();
  if (version > driver) return CUDA_ERROR_INVALID_VALUE;
  const ProcEntry* best = nullptr;
  bool named = false;
  for (const ProcEntry& e : kProcs) {
    // What came after the driver's version, that driver does not have.
    if (std::strcmp(e.name, symbol) != 0 || e.version > driver) continue;
    named = true;
    if (e.version <= version && (best == nullptr || e.version > best->version)) best = &e;
  }
  if (best == nullptr) {
    if (named && status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = (per_thread && best->per_thread) ? best->per_thread : best->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace simgpu

extern "C" {

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  return simgpu::Lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  return simgpu::Lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
