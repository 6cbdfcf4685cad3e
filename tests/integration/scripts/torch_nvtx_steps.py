"""A program that marks its own steps with NVTX ranges named as PyTorch's profiler names them
(ProfilerStep#10, #11, #12) and steps an optimizer inside them: under partrain trace the NVTX
steps are the trace's steps, the optimizer's are not written a second time."""
import torch
from torch import nn

model = nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10, 13):
    torch.cuda.nvtx.range_push(f"ProfilerStep#{step}")
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    torch.cuda.nvtx.range_pop()
print("torch_nvtx_steps: done")
