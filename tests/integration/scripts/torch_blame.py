"""A 2-rank gloo training loop in which rank 1 goes wrong at step 1, for the tests of who analyze
says a failed run began with (tests/integration/torch_blame_torch_test.cpp).

    python torch_blame.py --fault sleep|exit0|deadlock [--pg-timeout-s 3]

Each step all_reduces the model's 2 gradients on the default group. At step 1, rank 1:
  sleep     sleeps 30 s in Python before its all_reduce: rank 0 times out waiting in it;
  exit0     returns with exit code 0 (sys.exit(0)): rank 0's all_reduce loses its peer;
  deadlock  all_reduces on a second group first, rank 0 on the default group first: each waits
            in an op the other never entered.
init_process_group's timeout is --pg-timeout-s: torch's own timeout, short for a short test.
"""

import argparse
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=("sleep", "exit0", "deadlock"), required=True)
    parser.add_argument("--pg-timeout-s", type=float, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout_s))
    rank = dist.get_rank()
    second = dist.new_group([0, 1]) if args.fault == "deadlock" else None
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 16)).square().mean().backward()
        grads = [p.grad for p in model.parameters()]
        if step == 1 and rank == 1:
            print(f"rank 1: {args.fault} at step 1", flush=True)
            if args.fault == "sleep":
                time.sleep(30)
            elif args.fault == "exit0":
                sys.exit(0)
        if step == 1 and args.fault == "deadlock":
            groups = (second, None) if rank == 1 else (None, second)
            for group in groups:
                dist.all_reduce(grads[0], group=group)
        for grad in grads:
            dist.all_reduce(grad)
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
