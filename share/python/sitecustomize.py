"""partrain's entry into the Python processes of a traced job.

`partrain trace` and `partrain launch` put this directory first on the traced command's
PYTHONPATH, so every Python process of the job imports this file at start-up (site.py imports
the first `sitecustomize` it finds). It installs partrain_torch's import hooks, which record
PyTorch's collectives and steps without touching the script (docs/pytorch.md), then runs the
sitecustomize this one shadows, if there is one, so a distribution's or the user's keeps
working. It costs a process that never imports torch next to nothing: no torch import, no
native library until torch.distributed is imported.
"""


def _install_partrain():
    import sys
    try:
        import partrain_torch
        partrain_torch.install()
    except Exception as error:  # never the program's problem
        print(f"partrain: the PyTorch recorder was not installed ({type(error).__name__}: "
              f"{error}); the program runs untraced by it", file=sys.stderr)


def _run_shadowed_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _give_python_its_sigint():
    """Ctrl-C raises KeyboardInterrupt, as in an untraced run.

    A launched rank's injection library takes SIGINT before the interpreter starts (to dump its
    flight recorder), and CPython installs its own SIGINT handler only over the default one: the
    program's `except KeyboardInterrupt` and `finally` then never ran, the rank died of the
    signal. Python's handler goes back in; its exit runs the recorder's flush like any other.
    The library then takes SIGINT again in front of it (partrain_retake_stop_signal): a Ctrl-C
    dumps the rank's flight recorder first, as a SIGTERM does, so the launcher can diagnose the
    hang the user gave up on, then reaches Python's handler.
    """
    import os
    import signal
    if os.environ.get("PARTRAIN_FLIGHT_DIR") and signal.getsignal(signal.SIGINT) is None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import ctypes
        try:
            retake = ctypes.CDLL(None).partrain_retake_stop_signal
        except (OSError, AttributeError):  # not the injection library's process
            return
        retake.argtypes = [ctypes.c_int]
        retake(int(signal.SIGINT))


try:
    _give_python_its_sigint()
except Exception:  # never the program's problem (an embedded interpreter off its main thread)
    pass
_install_partrain()
_run_shadowed_sitecustomize()
