import os

from torch._C._distributed_c10d import ProcessGroup

_groups = []


def _register_pg_in_world(pg, backend_name, store, group_name, *args, **kwargs):
    _groups.append(pg)


def is_initialized():
    return bool(_groups)


def get_rank():
    if os.environ.get("TORCH_STUB_BROKEN"):  # for the test of the module's own failure
        raise RuntimeError("get_rank is broken in this stand-in")
    return 0


def init_process_group(backend="gloo"):
    _register_pg_in_world(ProcessGroup("0", 0), backend, None, "0")
