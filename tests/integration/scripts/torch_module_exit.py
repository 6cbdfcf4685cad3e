"""partrain's PyTorch recorder at the program's exit, on stand-ins for torch's group, Work and future.

    PYTHONPATH=share/python python3 torch_module_exit.py

Two ops are left to the recorder's threads when the program ends, as a loaded machine leaves
them: a send, whose Work the polling thread holds (its is_completed() takes 0.3 s, a
descheduled thread), and an all_reduce, whose future's callback a stand-in gloo thread runs and
then holds 0.3 s more before dropping it. An exit handler that runs after the recorder's (it
was registered first) says whether either is still at it: from there on the interpreter
finalizes, and a thread that then takes the GIL inside torch's C++ aborts the process.
"""

import atexit
import enum
import sys
import threading
import time
import types

sys.modules["torch"] = types.SimpleNamespace(
    _C=types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(
        Work=type("Work", (), {"wait": lambda self: True}))))

from partrain_torch import _process_groups  # noqa: E402
from recorder_standins import C10d, Group, Session, tensor  # noqa: E402


class Work:
    def __init__(self, future=None):
        self._future = future

    def get_future(self):
        if self._future is None:
            raise RuntimeError("Work::getFuture not implemented")
        return self._future

    def is_completed(self):
        time.sleep(0.3)
        return False


class GlooFuture:
    """Completes at once on a thread of its own, which holds the callback 0.3 s longer."""

    def __init__(self):
        self.held = []

    def add_done_callback(self, callback):
        self.held.append(callback)
        threading.Thread(target=self._complete, daemon=True).start()

    def _complete(self):
        self.held[0](self)
        time.sleep(0.3)
        self.held.clear()

    def value(self):
        return []


class Native:
    def __getattr__(self, name):
        return lambda *args: 1


HookOpName = enum.Enum("HookOpName", ["SEND", "ALLREDUCE"])


future = GlooFuture()


def after_the_recorders_exit():
    polling = any(t.name == "partrain-completion" and t.is_alive() for t in threading.enumerate())
    print(f"after the recorder's exit: polling thread alive: {polling}; "
          f"callbacks held by gloo: {len(future.held)}", flush=True)


atexit.register(after_the_recorders_exit)
c10d = C10d()
recorder = _process_groups.Recorder(Session(Native()), c10d, hooks=True)
recorder.install()
group = Group()
c10d._register_pg_in_world(group)
group.run(HookOpName.SEND, [tensor()], 1, Work(), op_id=0)
group.run(HookOpName.ALLREDUCE, [tensor()], -1, Work(future), op_id=1)
print("program done", flush=True)
