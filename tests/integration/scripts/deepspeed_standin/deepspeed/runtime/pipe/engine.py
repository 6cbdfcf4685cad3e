import torch
import torch.distributed as dist

from deepspeed.runtime.engine import DeepSpeedEngine


class PipelineError(Exception):
    pass


class PipelineEngine(DeepSpeedEngine):
    def train_batch(self, data_iter):
        total_loss = torch.zeros(())
        for _ in range(self.ga_steps):
            loss = self.module(next(data_iter)).pow(2).mean()
            loss.backward()
            total_loss += loss.detach()
        self.allreduce_gradients()
        self._take_model_step()
        self.agg_train_loss = self._aggregate_total_loss(total_loss)
        return self.agg_train_loss

    def _aggregate_total_loss(self, total_loss):
        dist.broadcast(total_loss, src=dist.get_world_size() - 1)
        return total_loss

    def step(self, *args, **kwargs):
        raise PipelineError("Only train_batch() is accessible in pipeline mode.")
