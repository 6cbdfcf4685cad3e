/* A small NCCL program for the interposition tests, linked against libnccl.so.2 (the tests' fake
 * one): `nccl_program RANK NRANKS`. Before each call it prints the call as the fake logs it
 * ("call <function> <arguments>"), after it the result ("result <function> <code>"), so a test
 * can check that the library received exactly these arguments and that results pass through.
 * Buffers and streams are made-up addresses: the fake never touches them. Exit 0 when every
 * result was the one expected (ncclSuccess, or FAKE_NCCL_FAIL's function failing).
 * FAKE_CUDA_INIT=1 first calls the CUDA injection entry point (InitializeInjection) the way the
 * CUDA driver does at cuInit, as a GPU program under `partrain trace` would see it.
 * FAKE_NCCL_PROFILING_NAMES=1 ends with a ring exchange and an all-reduce made through NCCL's
 * profiling names (pncclSend...), as a program built against a profiling layer calls them. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler/nccl_abi.h"

static int g_unexpected = 0;

static void check(const char* function, ncclResult_t result) {
  printf("result %s %d\n", function, (int)result);
  const char* fail = getenv("FAKE_NCCL_FAIL");
  const int should_fail = fail != NULL && strcmp(fail, function) == 0;
  if ((result != ncclSuccess) != should_fail) g_unexpected = 1;
}

static void* address(uintptr_t value) { return (void*)value; }

/* The entry points the program calls by either of NCCL's names (they log alike). */
extern __typeof__(ncclAllReduce) pncclAllReduce;
extern __typeof__(ncclSend) pncclSend;
extern __typeof__(ncclRecv) pncclRecv;
extern __typeof__(ncclGroupStart) pncclGroupStart;
extern __typeof__(ncclGroupEnd) pncclGroupEnd;
struct Api {
  __typeof__(ncclAllReduce)* all_reduce;
  __typeof__(ncclSend)* send;
  __typeof__(ncclRecv)* recv;
  __typeof__(ncclGroupStart)* group_start;
  __typeof__(ncclGroupEnd)* group_end;
};
static const struct Api kPublicNames = {ncclAllReduce, ncclSend, ncclRecv, ncclGroupStart,
                                        ncclGroupEnd};
static const struct Api kProfilingNames = {pncclAllReduce, pncclSend, pncclRecv, pncclGroupStart,
                                           pncclGroupEnd};

static void all_reduce_by(const struct Api* api, size_t count, ncclDataType_t dtype,
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  void* send = address(0x10000);
  void* recv = address(0x20000);
  printf("call ncclAllReduce send=%p recv=%p count=%zu dtype=%d op=%d comm=%p stream=%p\n", send,
         recv, count, (int)dtype, (int)op, (void*)comm, (void*)stream);
  check("ncclAllReduce", api->all_reduce(send, recv, count, dtype, op, comm, stream));
}

static void all_reduce(size_t count, ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                       cudaStream_t stream) {
  all_reduce_by(&kPublicNames, count, dtype, op, comm, stream);
}

/* A ring exchange fused in a group: both calls are issued by ncclGroupEnd. */
static void ring_exchange(const struct Api* api, int rank, int nranks, ncclComm_t comm,
                          cudaStream_t stream) {
  const int next = (rank + 1) % nranks;
  const int prev = (rank + nranks - 1) % nranks;
  void* send_buf = address(0x50000);
  void* recv_buf = address(0x60000);
  printf("call ncclGroupStart \n");
  check("ncclGroupStart", api->group_start());
  printf("call ncclSend send=%p count=%zu dtype=%d peer=%d comm=%p stream=%p\n", send_buf,
         (size_t)256, (int)ncclBfloat16, next, (void*)comm, (void*)stream);
  check("ncclSend", api->send(send_buf, 256, ncclBfloat16, next, comm, stream));
  printf("call ncclRecv recv=%p count=%zu dtype=%d peer=%d comm=%p stream=%p\n", recv_buf,
         (size_t)256, (int)ncclBfloat16, prev, (void*)comm, (void*)stream);
  check("ncclRecv", api->recv(recv_buf, 256, ncclBfloat16, prev, comm, stream));
  printf("call ncclGroupEnd \n");
  check("ncclGroupEnd", api->group_end());
}

static void broadcast(size_t count, ncclDataType_t dtype, int root, ncclComm_t comm,
                      cudaStream_t stream) {
  void* send = address(0x30000);
  void* recv = address(0x40000);
  printf("call ncclBroadcast send=%p recv=%p count=%zu dtype=%d root=%d comm=%p stream=%p\n",
         send, recv, count, (int)dtype, root, (void*)comm, (void*)stream);
  check("ncclBroadcast", ncclBroadcast(send, recv, count, dtype, root, comm, stream));
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: nccl_program RANK NRANKS\n");
    return 2;
  }
  const int rank = atoi(argv[1]);
  const int nranks = atoi(argv[2]);
  cudaStream_t stream = (cudaStream_t)address(0x5000 + (uintptr_t)rank);
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char* cuda_init = getenv("FAKE_CUDA_INIT");
  if (cuda_init != NULL && strcmp(cuda_init, "1") == 0) {
    int (*initialize)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
    printf("InitializeInjection %s\n", initialize == NULL ? "absent" : initialize() == 1 ? "ok" : "failed");
  }

  ncclUniqueId id;
  check("ncclGetUniqueId", ncclGetUniqueId(&id));
  ncclComm_t world = NULL;
  printf("call ncclCommInitRank nranks=%d id=%s rank=%d\n", nranks, id.internal, rank);
  check("ncclCommInitRank", ncclCommInitRank(&world, nranks, id, rank));

  all_reduce(1024, ncclFloat32, ncclSum, world, stream);
  all_reduce(4096, ncclBfloat16, ncclSum, world, stream);

  ring_exchange(&kPublicNames, rank, nranks, world, stream);

  printf("call ncclAllGather send=%p recv=%p count=%zu dtype=%d comm=%p stream=%p\n",
         address(0x70000), address(0x80000), (size_t)100, (int)ncclFloat16, (void*)world,
         (void*)stream);
  check("ncclAllGather",
        ncclAllGather(address(0x70000), address(0x80000), 100, ncclFloat16, world, stream));
  printf("call ncclReduceScatter send=%p recv=%p count=%zu dtype=%d op=%d comm=%p stream=%p\n",
         address(0x90000), address(0xa0000), (size_t)50, (int)ncclInt32, (int)ncclMax,
         (void*)world, (void*)stream);
  check("ncclReduceScatter", ncclReduceScatter(address(0x90000), address(0xa0000), 50, ncclInt32,
                                               ncclMax, world, stream));
  broadcast(10, ncclInt64, 0, world, stream);
  /* ncclBcast reaches the library's own ncclBroadcast underneath. */
  printf("call ncclBcast buff=%p count=%zu dtype=%d root=%d comm=%p stream=%p\n",
         address(0xb0000), (size_t)12, (int)ncclUint8, nranks - 1, (void*)world, (void*)stream);
  check("ncclBcast", ncclBcast(address(0xb0000), 12, ncclUint8, nranks - 1, world, stream));
  printf("call ncclReduce send=%p recv=%p count=%zu dtype=%d op=%d root=%d comm=%p stream=%p\n",
         address(0xc0000), address(0xd0000), (size_t)64, (int)ncclFloat64, (int)ncclMin, 0,
         (void*)world, (void*)stream);
  check("ncclReduce", ncclReduce(address(0xc0000), address(0xd0000), 64, ncclFloat64, ncclMin, 0,
                                 world, stream));

  /* A sub-communicator, and nested groups: only the outermost ncclGroupEnd issues. */
  ncclComm_t half = NULL;
  printf("call ncclCommSplit comm=%p color=%d key=%d config=%p\n", (void*)world, 0, rank,
         (void*)NULL);
  check("ncclCommSplit", ncclCommSplit(world, 0, rank, &half, NULL));
  printf("call ncclGroupStart \n");
  check("ncclGroupStart", ncclGroupStart());
  printf("call ncclGroupStart \n");
  check("ncclGroupStart", ncclGroupStart());
  all_reduce(8, ncclFloat64, ncclAvg, half, stream);
  printf("call ncclGroupEnd \n");
  check("ncclGroupEnd", ncclGroupEnd());
  broadcast(16, ncclFloat32, 0, half, stream);
  printf("call ncclGroupEnd \n");
  check("ncclGroupEnd", ncclGroupEnd());

  const char* profiling = getenv("FAKE_NCCL_PROFILING_NAMES");
  if (profiling != NULL && strcmp(profiling, "1") == 0) {
    ring_exchange(&kProfilingNames, rank, nranks, world, stream);
    all_reduce_by(&kProfilingNames, 32, ncclFloat32, ncclSum, world, stream);
  }

  printf("call ncclCommDestroy comm=%p\n", (void*)half);
  check("ncclCommDestroy", ncclCommDestroy(half));
  printf("call ncclCommDestroy comm=%p\n", (void*)world);
  check("ncclCommDestroy", ncclCommDestroy(world));
  printf("done rank %d: %s\n", rank, g_unexpected ? "unexpected results" : "all results as expected");
  return g_unexpected ? 1 : 0;
}
