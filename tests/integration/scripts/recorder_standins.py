"""Stand-ins for what partrain's PyTorch recorder (share/python/partrain_torch/_process_groups.py)
touches of torch.distributed: its session, c10d's module and a process group that runs ops
through the recorder's hooks. For the scripts that test the recorder without a real torch
(torch_module_exit.py, torch_backend_choice.py); each puts its own stand-in `torch` in
sys.modules first.
"""

import types


class Session:
    failed = False

    def __init__(self, native):
        self.native = native

    def _guarded(self, what, function, *args):
        function(*args)

    def fail(self, what, error):
        raise AssertionError(f"the recorder failed while {what}") from error


class Group:
    """A process group named `name`, made with backend `config` (get_backend_config's words)."""

    group_desc = "default_pg"

    def __init__(self, name="0", config="gloo"):
        self.group_name = name
        self.config = config
        self.hooks = {}

    def rank(self):
        return 0

    def register_pre_hook(self, hook_id, hook):
        self.hooks["pre"] = hook

    def register_post_hook(self, hook_id, hook):
        self.hooks["post"] = hook

    def run(self, name, tensors, root, work, op_id=1, raised=False):
        """One op through the hooks, as c10d calls them around the backend's call; `raised`: the
        call raised before the backend had the op (its post hook never runs)."""
        self.hooks["pre"](types.SimpleNamespace(name=name, input_tensors=tensors,
                                                output_tensors=[], root=root, op_id=op_id))
        if not raised:
            self.hooks["post"](types.SimpleNamespace(work=work, op_id=op_id))


def tensor(is_cuda=False):
    """Four float32 elements, on the GPU when `is_cuda`."""
    return types.SimpleNamespace(numel=lambda: 4, dtype="torch.float32", element_size=lambda: 4,
                                 is_cuda=is_cuda)


class C10d:
    """torch.distributed.distributed_c10d for a world of 2, this process rank 0. A group made
    without a backend (`undefined`: the default group "0" when `default_undefined`) names its
    backends only in get_backend_config()."""

    def __init__(self, default_undefined=False):
        self.registered = []
        self.default_undefined = default_undefined

    def _register_pg_in_world(self, pg, *args):
        self.registered.append(pg)

    def is_initialized(self):
        return True

    def get_rank(self):
        return 0

    def get_process_group_ranks(self, pg):
        return [0, 1]

    def get_backend(self, pg):
        return "undefined" if self.default_undefined and pg.group_name == "0" else pg.config

    def get_backend_config(self, pg):
        return pg.config
