"""DeepSpeed's engine under partrain, with the stand-in beside this script (deepspeed_standin/,
its README.md): torch_deepspeed.py CASE on gloo, each rank one process.

zero      ZeRO-2: 3 updates, 2 micro-batches each (engine.step() every micro-batch); each
          update's all-gather of the partitions runs inside the ZeRO optimizer's step()
fp16      no ZeRO, fp16: FP16_Optimizer steps its inner optimizer once while it is made; 2 updates
pipeline  3 train_batch() calls, each ending with the loss broadcast after the model step
bad_config  a train_batch_size DeepSpeed's config check rejects in deepspeed.initialize(),
          the stand-in on sys.path outside site-packages (a `pip install --target` or a checkout)
"""

import datetime
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed_standin"))

import deepspeed  # noqa: E402  (the stand-in)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.nn  # noqa: E402, F401  (before init_process_group: docs/pytorch.md)


def engine_for(config):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    engine, _ = deepspeed.initialize(model, torch.optim.AdamW(model.parameters(), lr=0.01),
                                     config)
    return engine


def train(engine, micro_batches):
    for _ in range(micro_batches):
        loss = engine(torch.randn(4, 8)).pow(2).mean()
        engine.backward(loss)
        engine.step()


def zero():
    train(engine_for({"zero_stage": 2, "gradient_accumulation_steps": 2}), 6)


def fp16():
    train(engine_for({"fp16": True}), 2)


def pipeline():
    engine = engine_for({"pipeline": True, "gradient_accumulation_steps": 4})
    data = iter(lambda: torch.randn(4, 8), None)
    for _ in range(3):
        engine.train_batch(data)


def bad_config():
    engine_for({"train_batch_size": 3, "gradient_accumulation_steps": 1})


def main():
    case = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    globals()[case]()
    print(f"rank {dist.get_rank()}: {case} done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
