import torch
import torch.distributed as dist

from deepspeed.runtime._standin import InnerOptimizer
from deepspeed.runtime.base_optimizer import DeepSpeedOptimizer


class DeepSpeedZeroOptimizer(DeepSpeedOptimizer, InnerOptimizer):
    def __init__(self, init_optimizer):
        self.optimizer = init_optimizer
        self.flat = torch.nn.utils.parameters_to_vector(
            [p for group in init_optimizer.param_groups for p in group["params"]]).detach()

    def step(self, closure=None):
        self.optimizer.step()
        self.all_gather_dp_groups()

    def all_gather_dp_groups(self):
        partition = self.flat.numel() // dist.get_world_size()
        shard = self.flat[:partition].clone()
        dist.all_gather_into_tensor(self.flat[:partition * dist.get_world_size()], shard)
