"""Small gloo programs that use torch.distributed features beyond the hooked collectives, for
partrain's torch tests (tests/integration/torch_dist_features_torch_test.cpp).

    python torch_dist_features.py CASE        (under partrain launch or torchrun)

monitored_barrier        all_reduce; rank 1 late by 0.3 s; monitored_barrier; all_reduce;
                         monitored_barrier(wait_all_ranks=True); all_reduce
monitored_barrier_hang   all_reduce; rank 1 sleeps forever before a monitored_barrier (timeout
                         10 minutes) the others wait in
monitored_barrier_timeout  rank 0's monitored_barrier(timeout=2 s) times out while rank 1 sleeps
                         4 s (rank 0 catches the error); rank 1 never calls it
"""

import datetime
import sys
import time

import torch
import torch.distributed as dist


def monitored_barrier(rank):
    dist.all_reduce(torch.ones(1))
    if rank == 1:
        time.sleep(0.3)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(2))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)
    dist.all_reduce(torch.ones(3))


def monitored_barrier_hang(rank):
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        print(f"rank {rank} hangs before the monitored_barrier", flush=True)
        while True:
            time.sleep(3600)
    dist.monitored_barrier(timeout=datetime.timedelta(minutes=10))


def monitored_barrier_timeout(rank):
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        time.sleep(4)
        return
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))
    except RuntimeError as error:
        print(f"rank {rank}: monitored_barrier failed: {str(error).splitlines()[0]}", flush=True)


def main():
    case = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    rank = dist.get_rank()
    globals()[case](rank)
    print(f"rank {rank}: {case} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
