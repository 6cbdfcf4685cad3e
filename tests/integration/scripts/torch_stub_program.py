"""A program on the stand-in torch (torch_stub/): a default group and three optimizer steps."""
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


c10d.init_process_group()
optimizer = Sharded() if os.environ.get("TORCH_STUB_SHARDED") else Optimizer([], {})
for _ in range(3):
    if os.environ.get("TORCH_STUB_SHARDED"):
        time.sleep(0.1)  # forward and backward
    try:
        optimizer.step()
    except RuntimeError:
        pass  # the program goes on: its next step() is a step again
print(f"program done on torch {torch.__version__}")
