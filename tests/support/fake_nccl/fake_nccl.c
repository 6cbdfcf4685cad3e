/* A stand-in libnccl.so.2 for the interposition tests: every entry point libpartrain_inject.so
 * wraps, recording each call it receives, one line per call with every argument, into the file
 * FAKE_NCCL_LOG names, so a test can check the real library gets exactly what the program
 * passed. FAKE_NCCL_FAIL=<function> makes that function return ncclInvalidArgument (4), to check
 * results pass through. Communicators are small structs: size and rank, nothing is sent. With
 * FAKE_NCCL_PROFILER it loads NCCL_PROFILER_PLUGIN as NCCL does (fake_nccl_profiler.h).
 * FAKE_NCCL_VERSION: what ncclGetVersion says (default 22809, NCCL 2.28.9). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/nccl_abi.h"
#include "tests/support/fake_nccl/fake_nccl_profiler.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

struct ncclComm {
  int nranks;
  int rank;
  uint64_t hash; /* NCCL's commHash: the same on every member */
  int splits;
  struct FakeProfiledComm* profiled;
};

static ncclResult_t logged(const char* function, const char* format, ...) {
  const char* path = getenv("FAKE_NCCL_LOG");
  if (path != NULL && path[0] != '\0') {
    FILE* log = fopen(path, "a");
    if (log != NULL) {
      va_list args;
      va_start(args, format);
      fprintf(log, "%s ", function);
      vfprintf(log, format, args);
      fputc('\n', log);
      va_end(args);
      fclose(log);
    }
  }
  const char* fail = getenv("FAKE_NCCL_FAIL");
  return fail != NULL && strcmp(fail, function) == 0 ? ncclInvalidArgument : ncclSuccess;
}

static ncclComm_t new_comm(int nranks, int rank, uint64_t hash) {
  ncclComm_t comm = (ncclComm_t)calloc(1, sizeof(struct ncclComm));
  comm->nranks = nranks;
  comm->rank = rank;
  comm->hash = hash;
  comm->profiled = fake_profiler_comm_init(hash, nranks, rank);
  return comm;
}

static void end_comm(ncclComm_t comm) {
  fake_profiler_comm_end(comm->profiled);
  free(comm);
}

static uint64_t hash_of(const ncclUniqueId* id) { /* FNV-1a */
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    hash = (hash ^ (unsigned char)id->internal[i]) * 1099511628211ull;
  }
  return hash;
}

FAKE_EXPORT ncclResult_t ncclGetVersion(int* version) {
  const char* text = getenv("FAKE_NCCL_VERSION");
  *version = text != NULL ? atoi(text) : 22809;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  /* Every process of a test makes the same id from FAKE_NCCL_ID, as rank 0's broadcast would. */
  const char* seed = getenv("FAKE_NCCL_ID");
  memset(unique_id->internal, 0, sizeof(unique_id->internal));
  snprintf(unique_id->internal, sizeof(unique_id->internal), "fake-nccl-%s",
           seed != NULL ? seed : "default");
  return logged("ncclGetUniqueId", "id=%s", unique_id->internal);
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                          int rank) {
  ncclResult_t result =
      logged("ncclCommInitRank", "nranks=%d id=%s rank=%d", nranks, comm_id.internal, rank);
  if (result == ncclSuccess) *comm = new_comm(nranks, rank, hash_of(&comm_id));
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                                int rank, ncclConfig_t* config) {
  ncclResult_t result = logged("ncclCommInitRankConfig", "nranks=%d id=%s rank=%d config=%p",
                               nranks, comm_id.internal, rank, (void*)config);
  if (result == ncclSuccess) *comm = new_comm(nranks, rank, hash_of(&comm_id));
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int n_ids,
                                                  ncclUniqueId* comm_ids, ncclConfig_t* config) {
  ncclResult_t result = logged("ncclCommInitRankScalable", "nranks=%d rank=%d n_ids=%d config=%p",
                               nranks, rank, n_ids, (void*)config);
  if (result == ncclSuccess) {
    *comm = new_comm(nranks, rank, n_ids > 0 && comm_ids != NULL ? hash_of(comm_ids) : 0);
  }
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclResult_t result = logged("ncclCommInitAll", "ndev=%d devlist=%p", ndev, (const void*)devlist);
  for (int i = 0; result == ncclSuccess && i < ndev; ++i) {
    comms[i] = new_comm(ndev, i, 0x1000u + (uint64_t)i);
  }
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  ncclResult_t result = logged("ncclCommSplit", "comm=%p color=%d key=%d config=%p", (void*)comm,
                               color, key, (void*)config);
  /* Every rank passes the same colour in the tests: the child has the parent's members. */
  if (result == ncclSuccess) {
    const uint64_t hash = comm->hash * 31u + (uint64_t)(++comm->splits) * 7u + (uint64_t)color;
    *newcomm =
        color == PARTRAIN_NCCL_SPLIT_NOCOLOR ? NULL : new_comm(comm->nranks, comm->rank, hash);
  }
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return logged("ncclCommFinalize", "comm=%p", (void*)comm);
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  ncclResult_t result = logged("ncclCommDestroy", "comm=%p", (void*)comm);
  if (result == ncclSuccess) end_comm(comm);
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  ncclResult_t result = logged("ncclCommAbort", "comm=%p", (void*)comm);
  if (result == ncclSuccess) end_comm(comm);
  return result;
}

FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->nranks;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                       cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclAllReduce", "send=%p recv=%p count=%zu dtype=%d op=%d comm=%p stream=%p",
             sendbuff, recvbuff, count, (int)datatype, (int)op, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "AllReduce", count, -1);
  return result;
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                       ncclDataType_t datatype, int root, ncclComm_t comm,
                                       cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclBroadcast", "send=%p recv=%p count=%zu dtype=%d root=%d comm=%p stream=%p",
             sendbuff, recvbuff, count, (int)datatype, root, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Broadcast", count, root);
  return result;
}

FAKE_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                   ncclComm_t comm, cudaStream_t stream) {
  /* As the real NCCL does: ncclBcast is ncclBroadcast in place, called through the public API. */
  ncclResult_t result = logged("ncclBcast", "buff=%p count=%zu dtype=%d root=%d comm=%p stream=%p",
                               buff, count, (int)datatype, root, (void*)comm, (void*)stream);
  return result != ncclSuccess ? result
                               : ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

FAKE_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, int root,
                                    ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclReduce", "send=%p recv=%p count=%zu dtype=%d op=%d root=%d comm=%p stream=%p",
             sendbuff, recvbuff, count, (int)datatype, (int)op, root, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Reduce", count, root);
  return result;
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm,
                                       cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclAllGather", "send=%p recv=%p count=%zu dtype=%d comm=%p stream=%p", sendbuff,
             recvbuff, sendcount, (int)datatype, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "AllGather", sendcount, -1);
  return result;
}

FAKE_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclReduceScatter", "send=%p recv=%p count=%zu dtype=%d op=%d comm=%p stream=%p",
             sendbuff, recvbuff, recvcount, (int)datatype, (int)op, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "ReduceScatter", recvcount, -1);
  return result;
}

FAKE_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                      ncclDataType_t datatype, ncclComm_t comm,
                                      cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclAlltoAll", "send=%p recv=%p count=%zu dtype=%d comm=%p stream=%p", sendbuff,
             recvbuff, count, (int)datatype, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "AlltoAll", count, -1);
  return result;
}

FAKE_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclGather", "send=%p recv=%p count=%zu dtype=%d root=%d comm=%p stream=%p", sendbuff,
             recvbuff, count, (int)datatype, root, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Gather", count, root);
  return result;
}

FAKE_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream) {
  ncclResult_t result =
      logged("ncclScatter", "send=%p recv=%p count=%zu dtype=%d root=%d comm=%p stream=%p",
             sendbuff, recvbuff, count, (int)datatype, root, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Scatter", count, root);
  return result;
}

FAKE_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                  int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t result = logged("ncclSend", "send=%p count=%zu dtype=%d peer=%d comm=%p stream=%p",
                               sendbuff, count, (int)datatype, peer, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Send", count, peer);
  return result;
}

FAKE_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t result = logged("ncclRecv", "recv=%p count=%zu dtype=%d peer=%d comm=%p stream=%p",
                               recvbuff, count, (int)datatype, peer, (void*)comm, (void*)stream);
  if (result == ncclSuccess) fake_profiler_task(comm->profiled, "Recv", count, peer);
  return result;
}

FAKE_EXPORT ncclResult_t ncclGroupStart(void) {
  ncclResult_t result = logged("ncclGroupStart", "%s", "");
  if (result == ncclSuccess) fake_profiler_group_start();
  return result;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd(void) {
  ncclResult_t result = logged("ncclGroupEnd", "%s", "");
  if (result == ncclSuccess) fake_profiler_group_end();
  return result;
}

/* NCCL's profiling names: in libnccl pncclX is the function and ncclX its alias, so a call by
 * either name logs as ncclX. */
#define FAKE_PROFILING_NAME(name) \
  FAKE_EXPORT __typeof__(name) p##name __attribute__((alias(#name)));
FAKE_PROFILING_NAME(ncclCommInitRank)
FAKE_PROFILING_NAME(ncclCommInitRankConfig)
FAKE_PROFILING_NAME(ncclCommInitRankScalable)
FAKE_PROFILING_NAME(ncclCommInitAll)
FAKE_PROFILING_NAME(ncclCommSplit)
FAKE_PROFILING_NAME(ncclCommFinalize)
FAKE_PROFILING_NAME(ncclCommDestroy)
FAKE_PROFILING_NAME(ncclCommAbort)
FAKE_PROFILING_NAME(ncclAllReduce)
FAKE_PROFILING_NAME(ncclBroadcast)
FAKE_PROFILING_NAME(ncclBcast)
FAKE_PROFILING_NAME(ncclReduce)
FAKE_PROFILING_NAME(ncclAllGather)
FAKE_PROFILING_NAME(ncclReduceScatter)
FAKE_PROFILING_NAME(ncclAlltoAll)
FAKE_PROFILING_NAME(ncclGather)
FAKE_PROFILING_NAME(ncclScatter)
FAKE_PROFILING_NAME(ncclSend)
FAKE_PROFILING_NAME(ncclRecv)
FAKE_PROFILING_NAME(ncclGroupStart)
FAKE_PROFILING_NAME(ncclGroupEnd)
