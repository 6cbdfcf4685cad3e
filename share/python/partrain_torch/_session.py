"""One traced process's recording: what happens as torch's modules are imported.

Holds the native entry points, the process-group recorder and the step markers, and contains
every failure: the first one is said once (stderr and the trace's stats) and recording stops;
nothing is ever raised into the program.
"""

import os
import sys

from partrain_torch import _native

# What an older torch gets instead of collectives (docs/pytorch.md, "Versions").
_NO_HOOKS = ("torch {version} has no ProcessGroup.register_pre_hook (PyTorch 2.15 and later "
             "have it): its collectives are not recorded on gloo; on NCCL the injection library "
             "still records each NCCL call with host times. Steps are recorded.")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _under(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _is_library(filename):
    """A frame of a library (an installed package, the standard library, code the program
    imports from a sys.path entry of its own: `pip install --target`, a PYTHONPATH checkout), not
    of the user's program. The program's own code is under the script's directory or the
    working directory; the deepest of those and the sys.path entries that holds the file
    decides (a virtual environment inside the project is a library); a file under none is the
    program's (exec'd code, a script run from elsewhere)."""
    if filename.startswith("<"):
        return filename.startswith("<frozen ")  # importlib's frozen modules; <string>: exec'd
    import sysconfig
    path = os.path.abspath(filename)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    paths = sysconfig.get_paths()
    if any(_under(path, os.path.abspath(paths[key])) for key in ("stdlib", "platstdlib")
           if paths.get(key)):
        return True
    cwd = os.getcwd()
    own = {cwd}
    script = sys.argv[0] if sys.argv else ""
    if script and not script.startswith("-") and os.path.isfile(script):
        own.add(os.path.dirname(os.path.abspath(script)))
    deepest, library = "", False
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        root = os.path.abspath(entry) if entry else cwd
        if len(root) > len(deepest) and _under(path, root):
            deepest, library = root, root not in own
    for root in own:
        if len(root) >= len(deepest) and _under(path, root):
            deepest, library = root, False
    return library


def _exception_summary(kind, value, traceback):
    """The exception and where it came from: the program's own last line (the user's, not
    torch's) and, when the exception rose in a library below it, the library's last frame.
    partrain's own frames (Work.wait's wrapper) are left out."""
    import traceback as tracebacks
    frames = [f for f in tracebacks.extract_tb(traceback)
              if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR + os.sep)]
    own = [f for f in frames if not _is_library(f.filename)]
    where = own[-1:]
    if frames and (not own or frames[-1] is not own[-1]):
        where.append(frames[-1])
    lines = ['File "{}", line {}, in {}'.format(f.filename, f.lineno, f.name) for f in where]
    lines.append(tracebacks.format_exception_only(kind, value)[-1].strip())
    return " | ".join(lines)

class Session:
    def __init__(self):
        self.native = None
        self.recorder = None
        self.steps = None
        self.failed = False
        self._unavailable = None

    # -- import hooks ------------------------------------------------------------------------

    def c10d_imported(self, c10d):
        self._guarded("installing the process-group hooks", self._install_c10d, c10d)

    def spawn_imported(self, spawn_module):
        self._guarded("wrapping torch.multiprocessing.spawn", self._note_spawned_exceptions,
                      spawn_module)

    def optimizer_imported(self, optimizer_module):
        self._guarded("installing the optimizer step hooks", self._install_steps,
                      "optimizer", optimizer_module)

    def deepspeed_engine_imported(self, engine_module):
        self._guarded("wrapping DeepSpeed's engine step", self._install_steps, "deepspeed",
                      engine_module)

    def profiler_imported(self, profiler_module):
        self._guarded("wrapping torch.profiler.profile", self._install_steps, "profiler",
                      profiler_module)

    # -- installation ------------------------------------------------------------------------

    def _load_native(self):
        if self.native is None and self._unavailable is None:
            self.native, self._unavailable = _native.load()
            if self.native is not None:
                self.native.start(-1)  # a launcher's rank: traced from now on
        return self.native

    def _install_c10d(self, c10d):
        if self._load_native() is None:
            return
        from partrain_torch import _process_groups
        import torch
        hooks = hasattr(torch._C._distributed_c10d.ProcessGroup, "register_pre_hook")
        self.recorder = _process_groups.Recorder(self, c10d, hooks)
        self.recorder.install()
        self._note_uncaught_exceptions()
        if not hooks:
            self.recorder.on_first_group = lambda rank: self._say_no_hooks(torch.__version__, rank)

    def _say_no_hooks(self, version, rank):
        text = _NO_HOOKS.format(version=version)
        self.native.say("torch_collectives_unrecorded", _native.SEVERITY_INFO, text)
        if rank == 0:
            print(f"partrain: {text}", file=sys.stderr)

    def _install_steps(self, which, module):
        if self._load_native() is None:
            return
        if self.steps is None:
            from partrain_torch import _steps
            self.steps = _steps.StepMarkers(self)
        if which == "optimizer":
            self.steps.install_optimizer(module)
        elif which == "deepspeed":
            self.steps.install_deepspeed_engine(module)
        else:
            self.steps.install_profiler(module)

    def _note_uncaught_exceptions(self):
        """An exception that ends the rank goes into the trace too: the rank that failed first,
        with its traceback's last lines, even under a launcher partrain does not run."""
        previous = sys.excepthook
        native = self.native

        def excepthook(kind, value, traceback):
            try:
                native.say("rank_uncaught_exception", _native.SEVERITY_ERROR,
                           _exception_summary(kind, value, traceback))
            except Exception:
                pass
            previous(kind, value, traceback)

        sys.excepthook = excepthook

    def _note_spawned_exceptions(self, spawn_module):
        """A rank torch.multiprocessing.spawn started ends on an exception without the
        excepthook: spawn's _wrap catches it, hands its traceback to the parent and calls
        sys.exit(1), whose SystemExit carries the exception as its context. The parent pickles
        _wrap by name, and the child finds this one under that name."""
        import functools
        original = getattr(spawn_module, "_wrap", None)
        if original is None:
            return

        @functools.wraps(original)
        def _wrap(fn, i, args, error_file):
            try:
                original(fn, i, args, error_file)
            except SystemExit as exit:
                failure = exit.__context__
                if exit.code != 0 and isinstance(failure, Exception) and self.native is not None:
                    try:
                        self.native.say("rank_uncaught_exception", _native.SEVERITY_ERROR,
                                        _exception_summary(type(failure), failure,
                                                           failure.__traceback__))
                    except Exception:
                        pass
                raise

        spawn_module._wrap = _wrap

    # -- failures ----------------------------------------------------------------------------

    def _guarded(self, what, function, *args):
        if self.failed:
            return
        try:
            function(*args)
        except Exception as error:
            self.fail(what, error)

    def fail(self, what, error):
        """Recording stops for good; said once, here and in the trace."""
        if self.failed:
            return
        self.failed = True
        text = (f"partrain's PyTorch recorder failed while {what} ({type(error).__name__}: "
                f"{error}) and records nothing more on this rank; the program is unaffected")
        print(f"partrain: rank {os.environ.get('RANK', '?')}: {text}", file=sys.stderr)
        if self.native is not None:
            try:
                self.native.say("torch_recorder_failed", _native.SEVERITY_ERROR, text)
            except Exception:
                pass
