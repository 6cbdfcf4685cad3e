"""Hybrid sharded data parallel (HSDP) with FSDP2's fully_shard on a 2-D DeviceMesh, as a user
writes it.

    torchrun --nproc-per-node 4 examples/pytorch/hsdp_train.py
    partrain launch -n 4 -- python3 examples/pytorch/hsdp_train.py

Nothing of partrain is imported (docs/pytorch.md). The mesh is (replicate, shard) = (world / 2,
2): each block of a small MLP and the model itself are fully_shard units sharded over the
`shard` group and replicated over `replicate`. Every step gathers each unit's parameters within
its shard group before its forward and again before its backward (reshard after forward),
reduce-scatters its gradients within the shard group and all-reduces the resulting shard across
the replicas (what `partrain launch --shard 2` does in the built-in workloads, and what
`recommend` costs as the layout's shard, docs/recommend.md). Rank 0 prints the loss of every
step and a digest of the final parameters. train() returns the collectives its tensors imply,
which partrain's tests find in the trace.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--shard", type=int, default=2, help="ranks a unit is sharded over")
    parser.add_argument("--backend", default="gloo")
    return parser.parse_args(argv)


def shard_bytes(parameters, shard):
    """A unit's all_gather (and reduce_scatter) size within its shard group, and the one shard
    each rank all-reduces across the replicas: FSDP2 shards each parameter on dim 0 in `shard`
    chunks of ceil(dim0 / shard) rows, padding the last."""
    gathered = 0
    for p in parameters:
        rows = -(-p.shape[0] // shard)
        gathered += shard * rows * (p.numel() // p.shape[0]) * p.element_size()
    return gathered, gathered // shard


def train(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % args.shard != 0 or world == args.shard:
        raise SystemExit(f"hsdp_train: --shard {args.shard} must divide the world ({world}) "
                         "and leave at least 2 replicas")
    device = "cuda" if args.backend == "nccl" else "cpu"
    mesh = init_device_mesh(device, (world // args.shard, args.shard),
                            mesh_dim_names=("replicate", "shard"))
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(args.hidden, args.hidden), nn.GELU())
              for _ in range(args.blocks)]
    model = nn.Sequential(*blocks, nn.Linear(args.hidden, 1)).to(device)
    units = [shard_bytes(block.parameters(), args.shard) for block in blocks]
    units.append(shard_bytes(model[-1].parameters(), args.shard))  # the root: what is left
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(100 + rank)
    for step in range(args.steps):
        x = torch.randn(args.batch, args.hidden, generator=data).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rank == 0:
            print(f"hsdp_train: step {step} loss {loss.item():.6f}", flush=True)
    digest = sum(float(p.detach().full_tensor().double().abs().sum()) for p in model.parameters())
    if rank == 0:
        print(f"hsdp_train: parameters digest {digest:.6f}", flush=True)
    per_step = []
    for index, (gathered, shard) in enumerate(units):
        root = index == len(units) - 1
        # The root is not resharded after forward: it is gathered once.
        per_step.append({"group": "mesh_shard", "op": "all_gather", "bytes": gathered,
                         "times": 1 if root else 2})
        per_step.append({"group": "mesh_shard", "op": "reduce_scatter", "bytes": gathered,
                         "times": 1})
        per_step.append({"group": "mesh_replicate", "op": "all_reduce", "bytes": shard,
                         "times": 1})
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
