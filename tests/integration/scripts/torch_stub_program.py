"""A program on the stand-in torch (torch_stub/): a default group and three optimizer steps."""
import torch
import torch.distributed.distributed_c10d as c10d
from torch.optim import Optimizer

c10d.init_process_group()
optimizer = Optimizer([], {})
for _ in range(3):
    optimizer.step()
print(f"program done on torch {torch.__version__}")
