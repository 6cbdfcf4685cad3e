"""When Work completes, and the threads that say so gone before the interpreter's finalization.

gloo's send/recv return Work whose get_future() is not implemented, and an NCCL Work's host
future completes when the op is enqueued on its stream, not when the GPU ran it;
is_completed() answers for both: a thread polls it. The completion time is when the poll saw
it, at most one interval (1 ms) late, more when the program holds the GIL. Work that is done
another way (its wait() returned: the recorder's wrapper of Work.wait) is dropped at the next
poll. The thread runs only while such Work is in flight.

Other Work completes through its future's done-callback, which a gloo worker thread runs.

Neither thread may touch Python once the interpreter is finalizing: CPython 3.11 and older end
a thread that takes the GIL then with pthread_exit, whose unwinding through a C++ destructor
(pybind11's gil_scoped_release after dropping a Work without the GIL, a callback's holder
taking the GIL to release it) calls std::terminate: "terminate called without an active
exception" and SIGABRT instead of the program's exit status. So at exit, before finalization,
the recorder waits for the callbacks to be released (FutureCallbacks) and joins the polling
thread (CompletionWatcher.stop).
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
            if self._stopped:
                return  # the program is exiting: nothing more is polled
            self._incoming.append((work, entry))
            if self._thread is None or self._pid != os.getpid():  # none yet, or a fork()ed child
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="partrain-completion",
                                                daemon=True)
                self._thread.start()
            self._condition.notify()

    def stop(self, timeout):
        """Stops polling and waits, at most `timeout` seconds, until the thread has ended and
        dropped the Work it held. False when it had not ended by then."""
        with self._condition:
            self._stopped = True
            self._condition.notify()
            thread = self._thread if self._pid == os.getpid() else None
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

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
            watched = self._poll(watched)
            if watched:
                time.sleep(self.INTERVAL_S)

    def _poll(self, watched):
        """The Work still in flight. The rest is reported and dropped here, so that no Work
        outlives its completion in this thread's frame."""
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
        return still


class FutureCallbacks:
    """The done-callbacks given to Work futures, counted until released: a gloo worker thread
    takes the GIL to run one and again to drop it (torch's holder of a Python callable), after
    the program's own wait on the op may have returned (a future's waiters are woken before its
    callbacks run: DDP's reducer waits so). The count goes to zero once no such thread needs
    the GIL for them any more."""

    def __init__(self):
        self._condition = threading.Condition()
        self._pending = 0
        os.register_at_fork(after_in_child=self._forget)

    def make(self, function, *args):
        """function(*args, future) as a done-callback, counted until it is released."""
        return _Callback(self, function, args)

    def wait_released(self, timeout):
        """Waits, at most `timeout` seconds, until every callback made is released; False when
        some are still held (their op never completed: the program left it in flight)."""
        with self._condition:
            return self._condition.wait_for(lambda: self._pending == 0, timeout)

    def _made(self):
        with self._condition:
            self._pending += 1

    def _released(self):
        with self._condition:
            self._pending -= 1
            if self._pending == 0:
                self._condition.notify_all()

    def _forget(self):
        # A fork()ed child has none of the parent's gloo threads: nothing will release these.
        self._condition = threading.Condition()
        self._pending = 0


class FinishedWork:
    """Work whose future a gloo worker thread completed, held until a thread of the program's
    own drops it. The worker drops its reference after running the future's callbacks; were it
    the last, freeing the op's tensors would take the GIL on that thread (a tensor whose Python
    object the program dropped while the op ran is freed with it), and once the interpreter is
    finalizing, CPython ends such a thread: SIGABRT instead of the program's exit status
    (above). The done-callback that runs the recorder's Python makes the worker take the GIL
    after the program's wait returned, so without this the worker was that last holder at exit
    more often than in an untraced program (a 1-rank gloo job's sys.exit(3) on a loaded 2-core
    host: 9 aborts in 160 runs, 2 with the hold, 1 untraced; docs/pytorch.md). Held here, the
    last reference is the program's: dropped at its next collective (where a worker still
    inside the callback may yet free it, the interpreter whole), and once the program has ended
    never (the process is ending)."""

    def __init__(self):
        self._held = []
        self._ending = False

    def hold(self, work):
        """From the worker thread's done-callback (the GIL held)."""
        self._held.append(work)

    def drop(self):
        """From a thread of the program's, between its collectives: the worker threads are done
        with these long since, or, if not, the interpreter is whole for them."""
        if self._held and not self._ending:
            self._held = []

    def keep_to_the_end(self):
        """At exit, before the finalization: what is held now, and after, is never freed."""
        self._ending = True
        try:
            import ctypes
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(self._held))
        except Exception:  # no ctypes: the finalization frees them, on the main thread
            pass


class _Callback:
    __slots__ = ("_callbacks", "_function", "_args")

    def __init__(self, callbacks, function, args):
        self._callbacks = callbacks
        self._function = function
        self._args = args
        callbacks._made()

    def __call__(self, future):
        self._function(*self._args, future)

    def __del__(self):
        try:
            self._callbacks._released()
        except Exception:  # at the interpreter's very end: nothing waits any more
            pass
