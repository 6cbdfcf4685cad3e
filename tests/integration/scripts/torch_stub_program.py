"""A program on the stand-in torch (torch_stub/): a default group and three optimizer steps
(four micro-batches of two steps with TORCH_STUB_ACCUMULATING)."""
import os
import time

import torch
import torch.distributed.distributed_c10d as c10d
from torch.optim import Optimizer


class Sharded(Optimizer):
    """ZeroRedundancyOptimizer's shape: its inner optimizer steps, then the shards are broadcast
    (0.3 s here) inside the wrapper's step()."""

    def __init__(self):
        super().__init__([], {})
        self.inner = Optimizer([], {})
        self.raise_first = os.environ.get("TORCH_STUB_SHARDED") == "raise-first"

    def _update(self):
        self.inner.step()
        if self.raise_first:
            self.raise_first = False
            raise RuntimeError("the first broadcast failed")
        time.sleep(0.3)


class Accumulating(Optimizer):
    """accelerate's AcceleratedOptimizer's shape under gradient accumulation: it never runs
    Optimizer.__init__, and its step() steps the inner optimizer on every second call only."""

    def __init__(self):
        self.optimizer = Optimizer([], {})
        self.calls = 0

    def step(self):
        self.calls += 1
        if self.calls % 2 == 0:
            self.optimizer.step()


c10d.init_process_group()
accumulating = os.environ.get("TORCH_STUB_ACCUMULATING")
if accumulating:
    optimizer = Accumulating()
else:
    optimizer = Sharded() if os.environ.get("TORCH_STUB_SHARDED") else Optimizer([], {})
for _ in range(4 if accumulating else 3):
    if os.environ.get("TORCH_STUB_SHARDED"):
        time.sleep(0.1)  # forward and backward
    try:
        optimizer.step()
    except RuntimeError:
        pass  # the program goes on: its next step() is a step again
print(f"program done on torch {torch.__version__}")
