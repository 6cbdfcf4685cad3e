import torch

from deepspeed.runtime._standin import InnerOptimizer
from deepspeed.runtime.base_optimizer import DeepSpeedOptimizer


class FP16_Optimizer(DeepSpeedOptimizer, InnerOptimizer):
    def __init__(self, init_optimizer):
        self.optimizer = init_optimizer
        self.initialize_optimizer_states()

    def initialize_optimizer_states(self):
        for group in self.optimizer.param_groups:
            for param in group["params"]:
                param.grad = torch.zeros_like(param)
        self.optimizer.step()
        for group in self.optimizer.param_groups:
            for param in group["params"]:
                param.grad = None

    def step(self, closure=None):
        self.optimizer.step()
