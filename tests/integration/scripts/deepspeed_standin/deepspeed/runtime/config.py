import torch.distributed as dist


class DeepSpeedConfig(object):
    def __init__(self, config):
        self.train_batch_size = config.get("train_batch_size")
        self.train_micro_batch_size_per_gpu = config.get("train_micro_batch_size_per_gpu", 1)
        self.gradient_accumulation_steps = config.get("gradient_accumulation_steps", 1)
        self._batch_assertion()

    def _batch_assertion(self):
        train_batch = self.train_batch_size
        if train_batch is None:
            return
        micro_batch = self.train_micro_batch_size_per_gpu
        grad_acc = self.gradient_accumulation_steps
        assert train_batch == micro_batch * grad_acc * dist.get_world_size(), (
            f"Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu "
            f"* gradient_acc_step * world_size {train_batch} != {micro_batch} * {grad_acc} * "
            f"{dist.get_world_size()}")
