"""Correct gloo programs whose ops partrain could not follow to their completion, for
tests/integration/torch_gloo_ops_torch_test.cpp.

    python torch_gloo_ops.py CASE        (under partrain launch or torchrun)

unwaited_ops      a functional reduce_scatter (waited from C++, as DTensor and torch.compile
                  wait theirs) and an isend rank 0 never waits on (rank 1 receives it), then
                  4 s without collectives and a barrier
recv_any_source   ranks 1.. each send 2 tensors to rank 0, which receives them with
                  dist.recv(buf) and no src (from any source)
no_backend        init_process_group() without a backend (cpu:gloo here), one all_reduce
rs_waited_late    5 iterations of an async 2 MiB reduce_scatter_tensor and an async 1 MiB
                  all_reduce, each waited after 0.1 s of "backward"
"""

import datetime
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)


def unwaited_ops(rank, world):
    import torch.distributed._functional_collectives as funcol

    shard = funcol.reduce_scatter_tensor(torch.ones(world * 64), "sum", scatter_dim=0,
                                         group=dist.group.WORLD)
    assert shard.sum().item() == 64 * world, shard  # waited (in C++) here
    if rank == 0:
        dist.isend(torch.ones(10), dst=1)  # never waited
    elif rank == 1:
        received = torch.zeros(10)
        dist.recv(received, src=0)
        assert received.sum().item() == 10, received
    dist.barrier()
    time.sleep(4)
    dist.barrier()


def recv_any_source(rank, world):
    if rank == 0:
        sources = []
        for _ in range(2 * (world - 1)):
            received = torch.zeros(4)
            source = dist.recv(received)
            assert received[0].item() == source, (received, source)
            sources.append(source)
        assert sorted(sources) == sorted(list(range(1, world)) * 2), sources
    else:
        for _ in range(2):
            dist.send(torch.full((4,), float(rank)), dst=0)
    dist.barrier()


def no_backend(rank, world):
    dist.all_reduce(torch.ones(8))


def rs_waited_late(rank, world):
    for _ in range(5):
        shard = torch.zeros(1 << 18)
        scattered = dist.reduce_scatter_tensor(shard, torch.ones(world << 18), async_op=True)
        reduced = dist.all_reduce(torch.ones(1 << 18), async_op=True)
        time.sleep(0.1)
        scattered.wait()
        reduced.wait()


def main():
    case = sys.argv[1]
    if case == "no_backend":
        dist.init_process_group(timeout=datetime.timedelta(minutes=10))
    else:
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    rank = dist.get_rank()
    globals()[case](rank, dist.get_world_size())
    print(f"rank {rank}: {case} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
