// The NCCL and CUDA runtime calls the NCCL communicator makes, as one table of function pointers:
// the linked libraries' functions in a run, a stand-in's in tests (tests/support/standin_nccl),
// so the communicator's call sequences (bootstrap, split, groups, stream ordering, asynchronous
// errors) are checked with several ranks on a machine without a GPU. GPU builds only: this header
// names NCCL and CUDA types.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/comm/nccl_comm.h"
#include "runner/rendezvous/store.h"

namespace partrain::comm {

// Members are named as the functions they stand for, so a failed call's message names the real
// NCCL or CUDA function.
struct NcclRuntime {
  // NCCL
  decltype(&::ncclGetErrorString) ncclGetErrorString;
  decltype(&::ncclGetUniqueId) ncclGetUniqueId;
  decltype(&::ncclCommInitRank) ncclCommInitRank;
  decltype(&::ncclCommSplit) ncclCommSplit;
  decltype(&::ncclCommFinalize) ncclCommFinalize;
  decltype(&::ncclCommDestroy) ncclCommDestroy;
  decltype(&::ncclCommGetAsyncError) ncclCommGetAsyncError;
  decltype(&::ncclCommUserRank) ncclCommUserRank;
  decltype(&::ncclCommCount) ncclCommCount;
  decltype(&::ncclAllReduce) ncclAllReduce;
  decltype(&::ncclReduceScatter) ncclReduceScatter;
  decltype(&::ncclAllGather) ncclAllGather;
  decltype(&::ncclBroadcast) ncclBroadcast;
  decltype(&::ncclSend) ncclSend;
  decltype(&::ncclRecv) ncclRecv;
  decltype(&::ncclGroupStart) ncclGroupStart;
  decltype(&::ncclGroupEnd) ncclGroupEnd;
  // CUDA runtime
  decltype(&::cudaGetErrorString) cudaGetErrorString;
  decltype(&::cudaGetDeviceCount) cudaGetDeviceCount;
  decltype(&::cudaSetDevice) cudaSetDevice;
  decltype(&::cudaStreamCreateWithFlags) cudaStreamCreateWithFlags;
  decltype(&::cudaStreamSynchronize) cudaStreamSynchronize;
  decltype(&::cudaStreamDestroy) cudaStreamDestroy;
  decltype(&::cudaStreamWaitEvent) cudaStreamWaitEvent;
  decltype(&::cudaEventCreateWithFlags) cudaEventCreateWithFlags;
  decltype(&::cudaEventRecord) cudaEventRecord;
  decltype(&::cudaEventQuery) cudaEventQuery;
  decltype(&::cudaEventDestroy) cudaEventDestroy;
  cudaError_t (*cudaMalloc)(void**, size_t);  // spelled out: cuda_runtime.h overloads it
  decltype(&::cudaFree) cudaFree;
  cudaError_t (*cudaMallocAsync)(void**, size_t, cudaStream_t);
  decltype(&::cudaFreeAsync) cudaFreeAsync;
  decltype(&::cudaMemset) cudaMemset;
  decltype(&::cudaMemcpy) cudaMemcpy;
  decltype(&::cudaMemcpyAsync) cudaMemcpyAsync;
};

// The functions of the libnccl and libcudart this binary is linked against.
const NcclRuntime& linked_nccl_runtime();

// create_nccl_comm (nccl_comm.h) through `runtime`, which must outlive the communicator and every
// communicator split from it.
StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, NcclCommOptions options,
                                                 std::string id_prefix,
                                                 const NcclRuntime& runtime);

}  // namespace partrain::comm
