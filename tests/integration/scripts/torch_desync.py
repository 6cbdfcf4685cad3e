"""A gloo training loop in which one rank falls out of step with the others at one collective.

    python torch_desync.py --fault size|op --bad-rank R [--fault-step S] [--timeout-s T]

Each step all_reduces a gradient-sized tensor (256 floats) and the loss (1 float). At step S rank
R does not: `size` all_reduces 16 floats more (gloo aborts the rank that reads the mismatch, with
SIGABRT from its own thread), `op` broadcasts the tensor instead (the ranks wait until torch's
timeout, `init_process_group(timeout=T)`, or DETAIL's fingerprint check rejects the call).
For `size`, every rank's post hooks take 2 s over that all_reduce (a hook of its own, id 1, which
runs before partrain's, as torch's own hooks do): gloo's thread reads the mismatch and aborts a
rank (SIGABRT) while partrain's post hook has yet to run on every rank, which is what a loaded
machine's GIL does now and then over a few microseconds.
"""

import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)


def start_together(rank, world):
    """Every rank enters the loop within milliseconds of the others (through the launcher's
    store, which no collective records), so the fault is the only thing told apart."""
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, timeout=timedelta(minutes=10))
    store.set(f"torch_desync/ready/{rank}", "1")
    store.wait([f"torch_desync/ready/{peer}" for peer in range(world)], timedelta(minutes=10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=("size", "op"), required=True)
    parser.add_argument("--bad-rank", type=int, required=True)
    parser.add_argument("--fault-step", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=3.0)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    start_together(rank, world)
    gradient = torch.ones(256)
    loss = torch.ones(1)
    for step in range(args.steps):
        if step == args.fault_step and args.fault == "size":
            dist.group.WORLD.register_post_hook(1, lambda hook_args: time.sleep(2))
        if rank == args.bad_rank and step == args.fault_step:
            print(f"rank {rank}: {args.fault} fault at step {step}", flush=True)
            if args.fault == "size":
                dist.all_reduce(torch.ones(256 + 16))
            else:
                dist.broadcast(gradient, src=0)
        else:
            dist.all_reduce(gradient)
        dist.all_reduce(loss)
    print(f"rank {rank}: {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
