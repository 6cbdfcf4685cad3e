"""Regenerates the Kineto fixtures of tests/data/kineto (docs/import.md): small torch.profiler
traces of 4-rank gloo jobs, one file per rank as tensorboard_trace_handler writes them.

    python make_fixtures.py OUTDIR [ddp|two_groups ...]

ddp         DistributedDataParallel on the default group (bucketed, asynchronous all-reduces).
two_groups  the default group plus "tp" pairs [0, 1], [2, 3] (new_group, each rank creating
            both, as torch requires): all-reduces on the pairs, an all-reduce, an all-gather and
            a broadcast on the default group, and an all-reduce of the same size on the default
            group and on the pairs.
pipeline    two 2-stage pipelines, ranks (0, 1) and (2, 3): send and recv only, no collective.
            Per step 1F1B's two micro-batches (activations forward, gradients back), then an
            exchange both ways in one batch_isend_irecv([isend, irecv]).
rooted      a scatter of 8 floats per rank from rank 0, and an all_to_all_single of 16 floats.
Each job profiles steps 2-3 (schedule wait=1, warmup=1, active=2) with record_shapes and
profile_memory, and writes rank<N>.<time>.pt.trace.json.gz into OUTDIR/<job>/.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler

WORLD = 4
STEPS = 4


def profiler(out, rank):
    return profile(activities=[ProfilerActivity.CPU],
                   schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                   on_trace_ready=tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True),
                   record_shapes=True, profile_memory=True)


def ddp(rank, out):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    ddp_model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
    with profiler(out, rank) as prof:
        for _ in range(STEPS):
            x = torch.randn(16, 32)
            loss = ddp_model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            prof.step()


def two_groups(rank, out):
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    tp = pairs[rank // 2]
    with profiler(out, rank) as prof:
        for _ in range(STEPS):
            with record_function("train_step"):
                a = torch.randn(32, 32)
                b = a @ a
                x = torch.ones(64) * rank
                dist.all_reduce(x, group=tp)                  # the pair only: 64 floats
                y = torch.ones(256)
                dist.all_reduce(y)                            # the world: 256 floats
                outs = [torch.empty(32) for _ in range(WORLD)]
                dist.all_gather(outs, torch.full((32,), float(rank)))
                z = torch.arange(16, dtype=torch.float32)
                dist.broadcast(z, src=0)
                same = torch.ones(8)
                dist.all_reduce(same, group=tp)               # 8 floats on the pair ...
                dist.all_reduce(same)                         # ... then on the world
            prof.step()


def pipeline(rank, out):
    peer = rank ^ 1
    first_stage = rank % 2 == 0
    with profiler(out, rank) as prof:
        for _ in range(STEPS):
            for _micro_batch in range(2):
                activations, grads = torch.ones(2, 16), torch.empty(2, 16)
                if first_stage:
                    dist.send(activations, peer)
                    dist.recv(grads, peer)
                else:
                    dist.recv(activations, peer)
                    dist.send(torch.ones(2, 16), peer)
            sent, received = torch.ones(30), torch.empty(30)
            ops = [dist.P2POp(dist.isend, sent, peer), dist.P2POp(dist.irecv, received, peer)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            prof.step()


def rooted(rank, out):
    with profiler(out, rank) as prof:
        for _ in range(STEPS):
            chunk = torch.empty(8)
            dist.scatter(chunk, [torch.ones(8)] * WORLD if rank == 0 else None, src=0)
            received = torch.empty(16)
            dist.all_to_all_single(received, torch.ones(16))
            prof.step()


JOBS = {"ddp": ddp, "two_groups": two_groups, "pipeline": pipeline, "rooted": rooted}


def worker(rank, port, job, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    JOBS[job](rank, out)
    dist.destroy_process_group()


def main():
    root = sys.argv[1]
    for job in sys.argv[2:] or list(JOBS):
        out = os.path.join(root, job)
        os.makedirs(out, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(worker, args=(port, job, out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
