"""Plays PyTorch's ProcessGroupNCCL for the NCCL join test, with the standard library only.

    partrain trace -- python3 torch_nccl_join.py FAKE_LIBNCCL SHARE_PYTHON_DIR [NRANKS]

A real torch cannot drive NCCL without a GPU, so this process makes the calls a PyTorch rank
makes on an NCCL group, in PyTorch's order, against the stand-in libnccl
(tests/support/fake_nccl): partrain's module's pre hook opens a window
(partrain_torch_window_open), c10d calls NCCL (here ncclAllReduce through the process's global
scope, so libpartrain_inject.so's interposition sees it as it sees libtorch's calls), the post
hook closes the window, and at completion the module reports the op (its packed record, made
by the module's own _native.COLLECTIVE). It does so for:
  - op 0, an all_reduce of 1000 floats (one NCCL call);
  - op 1, a barrier (NCCL sees an all_reduce of one element: another op, other numbers);
  - op 2, an all_gather whose record never comes (the process ends first);
and makes one ncclBroadcast outside any window. Exit 0 when every call returned ncclSuccess.
NRANKS (default 1) is the communicator's size this rank 0 claims (the stand-in sends nothing).
"""

import ctypes
import os
import sys
import time


def main():
    fake_nccl, share_python = sys.argv[1], sys.argv[2]
    nranks = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    sys.path.insert(0, share_python)
    from partrain_torch import _native

    ctypes.CDLL(fake_nccl, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)  # libtorch_cuda's libnccl
    scope = ctypes.PyDLL(None)  # calls resolve as libtorch's do: the preloaded library first
    native, why = _native.load()
    if native is None:
        print(f"torch_nccl_join: {why}", file=sys.stderr)
        return 2
    if native.start(0) != 1:
        print("torch_nccl_join: not traced", file=sys.stderr)
        return 2

    unique_id = ctypes.create_string_buffer(128)
    comm = ctypes.c_void_p()
    results = [scope.ncclGetUniqueId(unique_id)]
    results.append(scope.ncclCommInitRank(ctypes.byref(comm), nranks,
                                          ctypes.c_char_p(unique_id.raw), 0))
    buffer = ctypes.create_string_buffer(4096)
    group = native.register_group("0", "default_pg", list(range(nranks)), 0)

    def torch_op(seq, hook_op, elements, nccl_call, report=True):
        issue_ns = time.monotonic_ns()
        window = native.window_open()
        results.append(nccl_call())
        native.window_close()
        issued_ns = time.monotonic_ns()
        if report:
            record = _native.COLLECTIVE.pack(group, -1, 0, 4, elements, 0, seq, issue_ns,
                                             issued_ns, time.monotonic_ns(), window,
                                             hook_op, b"float32")
            native.collective(record, len(record))

    float32, sum_op = 7, 0  # ncclFloat32, ncclSum
    torch_op(0, b"ALLREDUCE", 1000,
             lambda: scope.ncclAllReduce(buffer, buffer, ctypes.c_size_t(1000), float32, sum_op,
                                         comm, None))
    torch_op(1, b"BARRIER", 0,
             lambda: scope.ncclAllReduce(buffer, buffer, ctypes.c_size_t(1), float32, sum_op,
                                         comm, None))
    results.append(scope.ncclBroadcast(buffer, buffer, ctypes.c_size_t(16), float32, 0, comm,
                                       None))
    torch_op(2, b"ALLGATHER_BASE", 8,
             lambda: scope.ncclAllGather(buffer, buffer, ctypes.c_size_t(8), float32, comm, None),
             report=False)
    if any(result != 0 for result in results):
        print(f"torch_nccl_join: NCCL results {results}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
