"""When Work without a usable future completes: a thread polls Work.is_completed().

gloo's send/recv return Work whose get_future() is not implemented, and an NCCL Work's host
future completes when the op is enqueued on its stream, not when the GPU ran it;
is_completed() answers for both. The completion time is when the poll saw it, at most one
interval (1 ms) late, more when the program holds the GIL. Work that is done another way (its
wait() returned: the recorder's wrapper of Work.wait) is dropped at the next poll. The thread
runs only while such Work is in flight.
"""

import os
import threading
import time

monotonic_ns = time.monotonic_ns


class CompletionWatcher:
    INTERVAL_S = 0.001

    def __init__(self, on_completed, wanted):
        self._on_completed = on_completed  # (work, entry, completed_ns, outcome)
        self._wanted = wanted  # (entry) -> whether it is still waiting for its completion
        self._condition = threading.Condition()
        self._incoming = []
        self._thread = None
        self._pid = None
        self._stopped = False

    def watch(self, work, entry):
        with self._condition:
            self._incoming.append((work, entry))
            if self._thread is None or self._pid != os.getpid():  # none yet, or a fork()ed child
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="partrain-completion",
                                                daemon=True)
                self._thread.start()
            self._condition.notify()

    def stop(self):
        with self._condition:
            self._stopped = True
            self._condition.notify()

    def _run(self):
        watched = []
        while True:
            with self._condition:
                while not watched and not self._incoming and not self._stopped:
                    self._condition.wait()
                if self._stopped:
                    return
                watched.extend(self._incoming)
                self._incoming.clear()
            still = []
            for work, entry in watched:
                if not self._wanted(entry):
                    continue
                try:
                    done = work.is_completed()
                except Exception:
                    self._on_completed(work, entry, monotonic_ns(), 1)
                    continue
                if done:
                    # Whether it failed is not asked: Work.exception() and is_success() print a
                    # deprecation warning on the program's stderr; a failure raises in the
                    # program's own wait() anyway.
                    self._on_completed(work, entry, monotonic_ns(), 0)
                else:
                    still.append((work, entry))
            watched = still
            if watched:
                time.sleep(self.INTERVAL_S)
