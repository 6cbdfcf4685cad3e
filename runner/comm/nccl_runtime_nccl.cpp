#include "runner/comm/nccl_runtime.h"

namespace partrain::comm {

const NcclRuntime& linked_nccl_runtime() {
  static const NcclRuntime runtime{
      .ncclGetErrorString = &ncclGetErrorString,
      .ncclGetUniqueId = &ncclGetUniqueId,
      .ncclCommInitRank = &ncclCommInitRank,
      .ncclCommSplit = &ncclCommSplit,
      .ncclCommFinalize = &ncclCommFinalize,
      .ncclCommDestroy = &ncclCommDestroy,
      .ncclCommGetAsyncError = &ncclCommGetAsyncError,
      .ncclCommUserRank = &ncclCommUserRank,
      .ncclCommCount = &ncclCommCount,
      .ncclAllReduce = &ncclAllReduce,
      .ncclReduceScatter = &ncclReduceScatter,
      .ncclAllGather = &ncclAllGather,
      .ncclBroadcast = &ncclBroadcast,
      .ncclSend = &ncclSend,
      .ncclRecv = &ncclRecv,
      .ncclGroupStart = &ncclGroupStart,
      .ncclGroupEnd = &ncclGroupEnd,
      .cudaGetErrorString = &cudaGetErrorString,
      .cudaGetDeviceCount = &cudaGetDeviceCount,
      .cudaSetDevice = &cudaSetDevice,
      .cudaStreamCreateWithFlags = &cudaStreamCreateWithFlags,
      .cudaStreamSynchronize = &cudaStreamSynchronize,
      .cudaStreamDestroy = &cudaStreamDestroy,
      .cudaStreamWaitEvent = &cudaStreamWaitEvent,
      .cudaEventCreateWithFlags = &cudaEventCreateWithFlags,
      .cudaEventRecord = &cudaEventRecord,
      .cudaEventQuery = &cudaEventQuery,
      .cudaEventDestroy = &cudaEventDestroy,
      .cudaMalloc = &cudaMalloc,
      .cudaFree = &cudaFree,
      .cudaMallocAsync = &cudaMallocAsync,
      .cudaFreeAsync = &cudaFreeAsync,
      .cudaMemset = &cudaMemset,
      .cudaMemcpy = &cudaMemcpy,
      .cudaMemcpyAsync = &cudaMemcpyAsync,
  };
  return runtime;
}

}  // namespace partrain::comm
