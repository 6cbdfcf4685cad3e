from torch._C import _distributed_c10d  # noqa: F401
