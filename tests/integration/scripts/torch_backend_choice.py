"""Which backend partrain's PyTorch recorder takes an op to run on, on stand-ins for torch's
groups (a GPU host's, which this machine's torch cannot make).

    PYTHONPATH=share/python python3 torch_backend_choice.py

Two groups as a GPU host's torch makes them: init_process_group() without a backend
(get_backend() "undefined", get_backend_config() "cpu:gloo,cuda:nccl") and one made with
"cpu:gloo,cuda:nccl" said outright. On each: an all_reduce of a CUDA tensor (NCCL: the op opens
an NCCL window, its Work is polled), one of a CPU tensor (gloo: no window, its Work's future
says when it completed) and a barrier (no tensors: on the GPU, NCCL). Prints, per op, whether it
opened a window and how its completion was followed, then the stat torch_backend.
"""

import enum
import sys
import types


class Cuda:
    @staticmethod
    def is_available():
        return True


sys.modules["torch"] = types.SimpleNamespace(
    cuda=Cuda,
    _C=types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(
        Work=type("Work", (), {"wait": lambda self: True}))))

from partrain_torch import _process_groups  # noqa: E402
from recorder_standins import C10d, Group, Session, tensor  # noqa: E402

HookOpName = enum.Enum("HookOpName", ["ALLREDUCE", "BARRIER"])


class Future:
    def add_done_callback(self, callback):
        callback(self)

    def value(self):
        return []


class Work:
    def __init__(self):
        self.followed = "polled"

    def get_future(self):
        self.followed = "future"
        return Future()

    def is_completed(self):
        return True


class Native:
    def __init__(self):
        self.windows = 0
        self.stats = []

    def window_open(self):
        self.windows += 1
        return self.windows

    def window_close(self):
        pass

    def register_group(self, *args):
        return 0

    def collective(self, *args):
        pass

    def say(self, name, severity, text):
        self.stats.append(f"{name}: {text}")

    def start(self, rank):
        return 1

    def program_ended(self):
        pass


native = Native()
c10d = C10d(default_undefined=True)
recorder = _process_groups.Recorder(Session(native), c10d, hooks=True)
recorder.install()
for name in ("0", "1"):
    group = Group(name, "cpu:gloo,cuda:nccl")
    c10d._register_pg_in_world(group)
    made = "init_process_group()" if name == "0" else f'"{group.config}"'
    for op, device in (("ALLREDUCE", "cuda"), ("ALLREDUCE", "cpu"), ("BARRIER", None)):
        windows, work = native.windows, Work()
        tensors = [] if device is None else [tensor(is_cuda=device == "cuda")]
        group.run(HookOpName[op], tensors, -1, work)
        window = "NCCL window" if native.windows > windows else "no window"
        print(f"{made}: {op} on {device or 'no tensor'}: {window}, {work.followed}")
print("\n".join(native.stats))
recorder._at_exit()
