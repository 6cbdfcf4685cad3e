"""Training steps from PyTorch's own markers, so `partrain analyze` can window the run by step.

Two sources, the first that applies:
  - torch.profiler.profile with a schedule: its ProfilerStep#N ranges. Step N begins when the
    profiler enters ProfilerStep#N (start(), or the end of step()) and ends when it leaves it
    (the start of step(), or stop()); the profiler's own work between them is in no step. The
    range stop() ends is kept only if anything happened in it (the loop usually ends with a
    step() that opens an empty one).
  - otherwise the optimizer's step(): step 0 begins when the first optimizer is made, and each
    step ends when the optimizer that marks steps returns from step(); the next begins there.
    That optimizer is the first one to step; others (a GAN's second) do not mark steps until it
    is gone (a program that trains several models one after the other). A step() called inside
    another's (ZeroRedundancyOptimizer's inner optimizer, which returns before the wrapper
    broadcasts the updated shards) never marks one: the step ends when the outermost returns.
    A wrapper that never calls Optimizer.__init__ (PostLocalSGDOptimizer, which averages the
    parameters after its inner optimizer's step) has no step hooks of torch's: its step() is
    wrapped here to the same effect, so its averaging ends the step instead of opening the next.
    DeepSpeed's engine is such a wrapper (its ZeRO optimizers are no torch Optimizer): its
    step(), and the pipeline engine's train_batch(), are wrapped when the program imports them,
    so ZeRO's all-gather of the updated partitions after the inner optimizer's step ends the
    step. A step() called from the __init__ of an optimizer-shaped object holding it (DeepSpeed's
    FP16_Optimizer creating its inner optimizer's state) is no iteration and marks nothing.
    A wrapper's step() (an optimizer holding another) in which no optimizer stepped took no
    step: accelerate's AcceleratedOptimizer steps its inner optimizer only on the last
    micro-batch of a gradient accumulation, so the micro-batches before it are one step with it,
    as a step a GradScaler skips merges into the next.
Numbers continue across sources: a profiler started after N optimizer steps numbers its
ProfilerStep#0 as step N; after it stops, the optimizer marks steps again.
"""

import functools
import sys
import time
import weakref

monotonic_ns = time.monotonic_ns

_OPTIMIZER, _PROFILER = "optimizer", "profiler"


class StepMarkers:
    def __init__(self, session):
        self._session = session
        self._native = session.native
        self._source = _OPTIMIZER
        self._current = None  # the open step's number
        self._start_ns = 0
        self._activity_at_start = 0
        self._next = 0  # the next step's number
        self._driver = None  # weak reference to the optimizer whose step() marks steps
        self._offset = 0  # added to ProfilerStep numbers
        self._optimizer_steps = 0  # every optimizer's step() calls, for a range's activity
        # [id(), optimizer steps taken before it began] of each optimizer whose step() is under
        # way, outermost first
        self._stepping = []
        self._unhooked_stepping = set()  # id() of optimizers in a step() wrapped by _hook_step
        # Whether each optimizer holds another (_wraps_an_optimizer), worked out at its first
        # step() that stepped no other: a plain optimizer asks at every step.
        self._wrapper = weakref.WeakKeyDictionary()

    # -- steps -------------------------------------------------------------------------------

    def _activity(self):
        """Collectives issued and optimizer steps taken so far."""
        recorder = self._session.recorder
        return self._optimizer_steps + (recorder.issued if recorder is not None else 0)

    def _begin(self, step, now):
        self._current = step
        self._start_ns = now
        self._activity_at_start = self._activity()
        self._native.step_begin(step)

    def _end(self, now):
        if self._current is None:
            return
        self._native.step_end(self._current, self._start_ns, now)
        self._next = self._current + 1
        self._current = None

    def _guard(self, what, function, *args):
        if self._session.failed:
            return
        try:
            function(*args)
        except Exception as error:
            self._session.fail(what, error)

    # -- the optimizer -----------------------------------------------------------------------

    def install_optimizer(self, module):
        if hasattr(module, "register_optimizer_step_pre_hook"):
            module.register_optimizer_step_pre_hook(self._optimizer_stepping)
        module.register_optimizer_step_post_hook(self._optimizer_stepped)
        optimizer_class = module.Optimizer
        self._optimizer_class = optimizer_class
        original = optimizer_class.__init__

        @functools.wraps(original)
        def __init__(optimizer, *args, **kwargs):
            original(optimizer, *args, **kwargs)
            self._guard("marking the first step", self._optimizer_made)

        optimizer_class.__init__ = __init__
        self._hook_subclass_steps(optimizer_class)

    def _hook_subclass_steps(self, optimizer_class):
        """Every subclass's own step(), those defined so far and later, marks steps when torch's
        hooks do not run for it: torch hooks a class's step() (`hooked`) when an instance runs
        Optimizer.__init__, which a wrapper such as PostLocalSGDOptimizer never calls."""
        markers = self

        def hook(cls):
            step = cls.__dict__.get("step")
            if step is None or not callable(step) or getattr(step, "_partrain_steps", False):
                return

            cls.step = markers._marking_steps(
                step, lambda optimizer: getattr(type(optimizer).step, "hooked", False))

        pending = list(optimizer_class.__subclasses__())
        while pending:
            cls = pending.pop()
            hook(cls)
            pending.extend(cls.__subclasses__())
        previous = optimizer_class.__dict__.get("__init_subclass__")

        def __init_subclass__(cls, **kwargs):
            if previous is not None:
                previous.__func__(cls, **kwargs)
            else:
                super(optimizer_class, cls).__init_subclass__(**kwargs)
            markers._guard("watching an optimizer class", hook, cls)

        optimizer_class.__init_subclass__ = classmethod(__init_subclass__)

    def _marking_steps(self, step, torch_hooks_run=None, wrapper=False):
        """step (a function of an optimizer-like object) made to mark steps as an optimizer's
        step() does, where torch's hooks do not run for it (torch_hooks_run(instance) false).
        wrapper: its instances hold an optimizer (whether they do is not looked for)."""
        markers = self

        @functools.wraps(step)
        def wrapped_step(optimizer, *args, **kwargs):
            if ((torch_hooks_run is not None and torch_hooks_run(optimizer))
                    or id(optimizer) in markers._unhooked_stepping):
                return step(optimizer, *args, **kwargs)  # torch's hooks, or an outer call
            markers._unhooked_stepping.add(id(optimizer))
            try:
                if wrapper:
                    markers._guard("marking a step", markers._note_wrapper, optimizer)
                markers._guard("marking a step", markers._optimizer_stepping, optimizer, args,
                               kwargs)
                result = step(optimizer, *args, **kwargs)
                markers._optimizer_stepped(optimizer, args, kwargs)
                return result
            finally:
                markers._unhooked_stepping.discard(id(optimizer))

        wrapped_step._partrain_steps = True
        return wrapped_step

    def install_deepspeed_engine(self, module):
        """DeepSpeed's engine is the step: engine.step() (and the pipeline engine's
        train_batch()) runs its optimizer (a ZeRO optimizer, no torch Optimizer) and then the
        work of the update that follows it, ZeRO's all-gather of the updated partitions and the
        pipeline's loss broadcast. Its inner torch optimizer returning is not the step's end."""
        for class_name, method in (("DeepSpeedEngine", "step"), ("PipelineEngine",
                                                                  "train_batch")):
            cls = getattr(module, class_name, None)
            function = cls.__dict__.get(method) if cls is not None else None
            if (function is None or not callable(function)
                    or getattr(function, "_partrain_steps", False)):
                continue
            setattr(cls, method, self._marking_steps(function, wrapper=True))

    def _note_wrapper(self, optimizer):
        try:
            self._wrapper[optimizer] = True
        except TypeError:  # not weakly referable: its attributes are looked at each time
            pass

    def _optimizer_made(self):
        if self._source == _OPTIMIZER and self._current is None and self._next == 0:
            self._begin(0, monotonic_ns())

    def _optimizer_stepping(self, optimizer, args, kwargs):
        # The outermost optimizer stepping again: an earlier step() of it raised (no post-hook
        # ran), and what it left under way is over.
        if self._stepping and self._stepping[0][0] == id(optimizer):
            self._stepping.clear()
        self._stepping.append([id(optimizer), self._optimizer_steps])

    def _optimizer_stepped(self, optimizer, args, kwargs):
        now = monotonic_ns()
        self._guard("marking a step", self._optimizer_step_ended, optimizer, now)

    def _wraps_an_optimizer(self, optimizer):
        """Whether it holds an optimizer: torch's, or one shaped like it (DeepSpeed's ZeRO
        optimizers, which accelerate's DeepSpeed wrapper holds, are no torch Optimizer)."""
        try:
            return self._wrapper[optimizer]
        except KeyError:
            pass
        except TypeError:  # not weakly referable: worked out each time
            return self._holds_an_optimizer(optimizer)
        wraps = self._wrapper[optimizer] = self._holds_an_optimizer(optimizer)
        return wraps

    def _is_optimizer_like(self, value):
        """torch's Optimizer, or an object shaped like one (param_groups and step())."""
        if isinstance(value, self._optimizer_class):
            return True
        kind = type(value)
        groups = hasattr(kind, "param_groups") or "param_groups" in getattr(value, "__dict__", {})
        return groups and callable(getattr(kind, "step", None))

    def _holds_an_optimizer(self, optimizer):
        return any(
            self._is_optimizer_like(value)
            for value in getattr(optimizer, "__dict__", {}).values())

    def _in_a_wrappers_construction(self, optimizer):
        """Whether this step() is called from the __init__ of another optimizer (one with
        param_groups and step()) that holds it: a wrapper creating its inner optimizer's state
        (DeepSpeed's FP16_Optimizer with zero gradients) before any iteration. A training loop
        run from some other object's __init__ still marks steps."""
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name == "__init__":
                owner = frame.f_locals.get("self")
                if (owner is not None and owner is not optimizer
                        and self._is_optimizer_like(owner)
                        and any(value is optimizer
                                for value in getattr(owner, "__dict__", {}).values())):
                    return True
            frame = frame.f_back
        return False

    def _optimizer_step_ended(self, optimizer, now):
        # This step() and any it called that raised (their post-hooks never ran) are done.
        steps_before = None
        for index, (stepping, steps) in enumerate(self._stepping):
            if stepping == id(optimizer):
                steps_before = steps
                del self._stepping[index:]
                break
        if (steps_before is not None and self._optimizer_steps == steps_before
                and self._wraps_an_optimizer(optimizer)):
            return  # a wrapper that stepped no optimizer: a micro-batch, no step
        if not self._stepping and self._in_a_wrappers_construction(optimizer):
            return  # no iteration's step: the wrapper is being made
        self._optimizer_steps += 1
        if self._source != _OPTIMIZER or self._stepping:
            return  # inside another optimizer's step(): that one's end is the step's
        driver = self._driver() if self._driver is not None else None
        if driver is None:
            self._driver = weakref.ref(optimizer)
        elif driver is not optimizer:
            return
        if self._current is not None:
            self._end(now)
        self._begin(self._next, now)

    # -- torch.profiler ----------------------------------------------------------------------

    def install_profiler(self, module):
        profile = module.profile
        start, step, stop = profile.start, profile.step, profile.stop
        markers = self

        @functools.wraps(start)
        def wrapped_start(prof):
            start(prof)
            markers._guard("marking a profiler step", markers._profiler_started, prof)

        @functools.wraps(step)
        def wrapped_step(prof):
            markers._guard("marking a profiler step", markers._profiler_step_ending, prof)
            step(prof)
            markers._guard("marking a profiler step", markers._profiler_step_began, prof)

        @functools.wraps(stop)
        def wrapped_stop(prof):
            markers._guard("marking a profiler step", markers._profiler_stopping, prof)
            stop(prof)

        profile.start, profile.step, profile.stop = wrapped_start, wrapped_step, wrapped_stop

    @staticmethod
    def _records_steps(prof):
        return bool(getattr(prof, "record_steps", False))

    def _profiler_started(self, prof):
        if not self._records_steps(prof):
            return
        now = monotonic_ns()
        if self._source == _OPTIMIZER:
            # The optimizer's open step gives way (it has not ended: it is no step).
            self._source = _PROFILER
            self._current = None
            self._offset = self._next - int(prof.step_num)
        self._begin(int(prof.step_num) + self._offset, now)

    def _profiler_step_ending(self, prof):
        if self._source == _PROFILER and self._records_steps(prof):
            self._end(monotonic_ns())

    def _profiler_step_began(self, prof):
        if self._source == _PROFILER and self._records_steps(prof):
            self._begin(int(prof.step_num) + self._offset, monotonic_ns())

    def _profiler_stopping(self, prof):
        if self._source != _PROFILER or not self._records_steps(prof):
            return
        now = monotonic_ns()
        if self._current is not None and self._activity() > self._activity_at_start:
            self._end(now)
        elif self._current is not None:
            self._current = None  # the empty range the last step() opened
        self._source = _OPTIMIZER
        self._driver = None
        self._begin(self._next, now)
