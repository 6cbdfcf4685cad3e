"""Tensor parallel plus data parallel on a 2-D DeviceMesh, as a user writes it.

    torchrun --nproc-per-node 4 examples/pytorch/tensor_parallel_2d.py

Nothing of partrain is imported (docs/pytorch.md). The mesh is (dp, tp) = (world / 2, 2):
an MLP is split over tp with parallelize_module (column-parallel up projection, row-parallel
down projection: one all_reduce of the activations in forward on the `tp` group; the input
needs no gradient, so backward needs none), and each gradient is averaged over dp by hand
(one all_reduce per parameter shard on the `dp` group). Rank 0 prints the loss of every step
and a digest of the final parameters. train() returns the collectives its tensors imply,
which partrain's tests find in the trace.
"""

import argparse

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--backend", default="gloo")
    return parser.parse_args(argv)


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    device = "cuda" if args.backend == "nccl" else "cpu"
    mesh = init_device_mesh(device, (world // 2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(Mlp(args.hidden).to(device), mesh["tp"],
                               {"up": ColwiseParallel(), "down": RowwiseParallel()})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    dp_group = mesh["dp"].get_group()
    data = torch.Generator().manual_seed(100 + mesh["dp"].get_local_rank())
    for step in range(args.steps):
        x = torch.randn(args.batch, args.hidden, generator=data).to(device)
        loss = (model(x) - x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad.to_local(), op=dist.ReduceOp.AVG, group=dp_group)
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"tensor_parallel_2d: step {step} loss {loss.item():.6f}", flush=True)
    digest = sum(float(p.full_tensor().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"tensor_parallel_2d: parameters digest {digest:.6f}", flush=True)
    activation_bytes = args.batch * args.hidden * 4
    per_step = [{"group": "mesh_tp", "op": "all_reduce", "bytes": activation_bytes, "times": 1}]
    for p in model.parameters():
        local = p.to_local()
        per_step.append({"group": "mesh_dp", "op": "all_reduce",
                         "bytes": local.numel() * local.element_size(), "times": 1})
    return {"steps": args.steps, "per_step": per_step}


def main(argv=None):
    args = parse_args(argv)
    dist.init_process_group(args.backend)
    try:
        train(args)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
