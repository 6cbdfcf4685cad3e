"""A DDP-like gloo training loop in which one rank hangs outside any collective.

    python torch_hang.py --hang-rank R --hang-step S [--steps N]

Each step: a forward and backward pass of a small model, each gradient all_reduced (averaged) as
DDP does, an optimizer step. Rank R, at step S, sleeps forever in Python before its first
all_reduce (a data loader that never returns): the others wait in that all_reduce, the one rank R
never entered, for as long as gloo's timeout (30 minutes) allows.
"""

import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)


def start_together(model, inputs, rank, world):
    """Every rank enters step 0 within milliseconds of the others, so that the collectives the
    watchdog times see the hang and nothing else. Without this, the first all_reduce also waited
    for however much longer the slowest rank took to start (its model, optimizer and first
    backward: seconds on a loaded machine, past the tests' --collective-timeout 3s), and the run
    was diagnosed at seq 0, not at the hang. A first backward outside the steps, then a barrier
    through the launcher's store, which no watchdog times."""
    model(inputs + rank).square().mean().backward()
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, timeout=timedelta(minutes=10))
    store.set(f"torch_hang/ready/{rank}", "1")
    store.wait([f"torch_hang/ready/{peer}" for peer in range(world)], timedelta(minutes=10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hang-rank", type=int, required=True)
    parser.add_argument("--hang-step", type=int, required=True)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(8, 16)
    start_together(model, inputs, rank, world)
    for step in range(args.steps):
        optimizer.zero_grad()
        model(inputs + rank).square().mean().backward()
        if rank == args.hang_rank and step == args.hang_step:
            # CLOCK_MONOTONIC, the test's clock: how long the hang took to be diagnosed.
            print(f"rank {rank} hangs before step {step}'s all_reduce at monotonic "
                  f"{time.monotonic_ns()} ns", flush=True)
            while True:
                time.sleep(3600)
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad /= world
        optimizer.step()
    print(f"rank {rank}: {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
