import torch
import torch.distributed as dist


class DeepSpeedEngine(torch.nn.Module):
    def __init__(self, model, optimizer, config):
        super().__init__()
        self.module = model
        self.zero_stage = config.get("zero_stage", 0)
        self.ga_steps = config.get("gradient_accumulation_steps", 1)
        self.micro_steps = 0
        self.global_steps = 0
        if self.zero_stage > 0:
            from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer
            self.optimizer = DeepSpeedZeroOptimizer(optimizer)
        elif config.get("fp16"):
            from deepspeed.runtime.fp16.fused_optimizer import FP16_Optimizer
            self.optimizer = FP16_Optimizer(optimizer)
        else:
            self.optimizer = optimizer

    def forward(self, *args):
        return self.module(*args)

    def is_gradient_accumulation_boundary(self):
        return (self.micro_steps + 1) % self.ga_steps == 0

    def allreduce_gradients(self):
        for param in self.module.parameters():
            dist.all_reduce(param.grad)

    def backward(self, loss):
        loss.backward()
        if self.zero_stage >= 2 or self.is_gradient_accumulation_boundary():
            self.allreduce_gradients()

    def _take_model_step(self):
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.global_steps += 1

    def step(self):
        if self.is_gradient_accumulation_boundary():
            self._take_model_step()
        self.micro_steps += 1
