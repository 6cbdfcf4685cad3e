from torch.distributed import distributed_c10d  # noqa: F401
