"""Small gloo programs that use torch.distributed features beyond the hooked collectives, for
partrain's torch tests (tests/integration/torch_dist_features_torch_test.cpp).

    python torch_dist_features.py CASE        (under partrain launch or torchrun)

monitored_barrier        all_reduce; rank 1 late by 0.3 s; monitored_barrier; all_reduce;
                         monitored_barrier(wait_all_ranks=True); all_reduce
monitored_barrier_hang   all_reduce; rank 1 sleeps forever before a monitored_barrier (timeout
                         10 minutes) the others wait in
monitored_barrier_timeout  rank 0's monitored_barrier(timeout=2 s) times out while rank 1 sleeps
                         4 s (rank 0 catches the error); rank 1 never calls it
p2p_tags                 rank 0 isends 7 elements with tag 5, then 3 with tag 9; rank 1 irecvs
                         tag 9 first, then tag 5 (a correct program); then sends of tags 3
                         and 4 received 4 first, and a batch_isend_irecv exchange with tag 7
p2p_tag_hang             rank 0 sends with tag 1 while rank 1 receives with tag 2: both hang
post_local_sgd           8 steps of PostLocalSGDOptimizer over SGD (period 2, warm-up 2): the
                         wrapper averages the parameters (an all_reduce) in steps 2, 4 and 6
accumulating_wrapper     8 micro-batches through a wrapper shaped like accelerate's
                         AcceleratedOptimizer (no Optimizer.__init__) that steps its SGD only on
                         every 4th, after an all_reduce of the gradients: 2 optimizer steps
scaler_skips_every_step  4 iterations whose loss is inf: GradScaler skips every optimizer step;
                         an all_reduce of the loss in each
world_held_in_a_global   an all_reduce and a barrier, the default group kept in a global: it
                         outlives destroy_process_group()
world_never_destroyed    an all_reduce and a barrier; the program never calls
                         destroy_process_group()
"""

import datetime
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.nn  # noqa: F401  (before init_process_group: docs/pytorch.md)
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import PostLocalSGDOptimizer


def monitored_barrier(rank):
    dist.all_reduce(torch.ones(1))
    if rank == 1:
        time.sleep(0.3)
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(2))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=60), wait_all_ranks=True)
    dist.all_reduce(torch.ones(3))


def monitored_barrier_hang(rank):
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        print(f"rank {rank} hangs before the monitored_barrier", flush=True)
        while True:
            time.sleep(3600)
    dist.monitored_barrier(timeout=datetime.timedelta(minutes=10))


def monitored_barrier_timeout(rank):
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        time.sleep(4)
        return
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))
    except RuntimeError as error:
        print(f"rank {rank}: monitored_barrier failed: {str(error).splitlines()[0]}", flush=True)


def p2p_tags(rank):
    if rank == 0:
        works = [dist.isend(torch.arange(7.0), 1, tag=5), dist.isend(torch.arange(3.0), 1, tag=9)]
    else:
        late, early = torch.zeros(7), torch.zeros(3)
        works = [dist.irecv(early, 0, tag=9), dist.irecv(late, 0, tag=5)]
    for work in works:
        work.wait()
    if rank == 1:
        assert late.sum().item() == 21 and early.sum().item() == 3, (late, early)
    if rank == 0:
        dist.send(torch.ones(4), 1, tag=3)
        dist.send(torch.ones(2), 1, tag=4)
    else:
        works = [dist.irecv(torch.zeros(2), 0, tag=4), dist.irecv(torch.zeros(4), 0, tag=3)]
        for work in works:
            work.wait()
    peer = 1 - rank
    ops = [dist.P2POp(dist.isend, torch.ones(5), peer, tag=7),
           dist.P2POp(dist.irecv, torch.zeros(5), peer, tag=7)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    dist.all_reduce(torch.ones(1))


def p2p_tag_hang(rank):
    dist.all_reduce(torch.ones(1))
    if rank == 0:
        dist.send(torch.ones(2), 1, tag=1)
    else:
        dist.recv(torch.zeros(2), 0, tag=2)


def post_local_sgd(rank):
    torch.manual_seed(rank)
    model = torch.nn.Linear(8, 8)
    optimizer = PostLocalSGDOptimizer(optim=torch.optim.SGD(model.parameters(), lr=0.01),
                                      averager=PeriodicModelAverager(period=2, warmup_steps=2))
    for _ in range(8):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()


class AccumulatingOptimizer(torch.optim.Optimizer):
    """accelerate's AcceleratedOptimizer in small: Optimizer.__init__ never runs, and step()
    steps the inner optimizer only when the gradients were synchronized."""

    def __init__(self, optimizer, accumulation_steps):
        self.optimizer = optimizer
        self.accumulation_steps = accumulation_steps
        self.micro_batches = 0

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def synchronizes(self):
        return (self.micro_batches + 1) % self.accumulation_steps == 0

    def step(self, closure=None):
        if self.synchronizes():
            self.optimizer.step(closure)
        self.micro_batches += 1


def accumulating_wrapper(rank):
    model = torch.nn.Linear(8, 8)
    optimizer = AccumulatingOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), 4)
    for _ in range(8):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        if optimizer.synchronizes():
            for parameter in model.parameters():
                dist.all_reduce(parameter.grad)
        optimizer.step()
        if optimizer.micro_batches % 4 == 0:
            model.zero_grad()


def scaler_skips_every_step(rank):
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")
    for _ in range(4):
        loss = model(torch.randn(4, 8)).sum() * float("inf")
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # skipped: the gradients are inf or NaN
        scaler.update()
        optimizer.zero_grad()
        dist.all_reduce(loss.detach())


HELD = []  # what world_held_in_a_global keeps: the last op's tensor stays the program's


def world_held_in_a_global(rank):
    HELD.extend([dist.group.WORLD, torch.ones(2)])
    dist.all_reduce(HELD[1])
    dist.barrier()


def world_never_destroyed(rank):
    HELD.append(torch.ones(2))
    dist.all_reduce(HELD[0])
    dist.barrier()


def main():
    case = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    rank = dist.get_rank()
    globals()[case](rank)
    print(f"rank {rank}: {case} done", flush=True)
    if case != "world_never_destroyed":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
