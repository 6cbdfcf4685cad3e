"""partrain's PyTorch recorder at the program's exit, on stand-ins for torch's group, Work and future.

    PYTHONPATH=share/python python3 torch_module_exit.py [--outcomes]

Two ops are left to the recorder's threads when the program ends, as a loaded machine leaves
them: a send, whose Work the polling thread holds (its is_completed() takes 0.3 s, a
descheduled thread), and an all_reduce, whose future's callback a stand-in gloo thread runs and
then holds 0.3 s more before dropping it. An exit handler that runs after the recorder's (it
was registered first) says whether either is still at it: from there on the interpreter
finalizes, and a thread that then takes the GIL inside torch's C++ aborts the process.
A third op, a broadcast, raises in its call (its pre hook ran, its post hook never does, as
DETAIL's fingerprint check does). With --outcomes the handler also prints what the recorder
reported of each op to the library, in order: 3 called, 2 issued, 4 issued untimed (gloo Work
without a future: the send), 0 completed, 1 failed.
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

from partrain_torch import _native, _process_groups  # noqa: E402
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
    def __init__(self):
        self.outcomes = {}  # HookOpName -> the outcomes reported, in order

    def collective(self, record, size):
        fields = _native.COLLECTIVE.unpack(record)
        op = fields[11].rstrip(b"\0").decode()
        self.outcomes.setdefault(op, []).append(str(fields[2]))

    def __getattr__(self, name):
        return lambda *args: 1


HookOpName = enum.Enum("HookOpName", ["SEND", "ALLREDUCE", "BROADCAST"])


future = GlooFuture()


def after_the_recorders_exit():
    polling = any(t.name == "partrain-completion" and t.is_alive() for t in threading.enumerate())
    print(f"after the recorder's exit: polling thread alive: {polling}; "
          f"callbacks held by gloo: {len(future.held)}", flush=True)
    if "--outcomes" in sys.argv:
        print("; ".join(f"{op} {','.join(reported)}"
                        for op, reported in native.outcomes.items()), flush=True)


atexit.register(after_the_recorders_exit)
c10d = C10d()
native = Native()
recorder = _process_groups.Recorder(Session(native), c10d, hooks=True)
recorder.install()
group = Group()
c10d._register_pg_in_world(group)
group.run(HookOpName.SEND, [tensor()], 1, Work(), op_id=0)
group.run(HookOpName.ALLREDUCE, [tensor()], -1, Work(future), op_id=1)
group.run(HookOpName.BROADCAST, [tensor()], 0, None, op_id=2, raised=True)
print("program done", flush=True)
