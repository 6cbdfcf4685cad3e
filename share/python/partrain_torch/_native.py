"""libpartrain_inject.so's entry points for PyTorch (profiler/inject/torch_abi.cpp) via ctypes.

The library is preloaded into every process of a traced command, so its symbols are in the
process's global scope: ctypes opens that scope (dlopen(NULL)) instead of a path. The calls
keep the GIL (PyDLL): each is a few hundred nanoseconds of buffering, cheaper than releasing
and taking the GIL again.
"""

import ctypes
import struct

ABI_VERSION = 4

_c_int32_p = ctypes.POINTER(ctypes.c_int32)

_SIGNATURES = {
    "partrain_torch_abi_version": (ctypes.c_int, []),
    "partrain_torch_start": (ctypes.c_int, [ctypes.c_int]),
    "partrain_torch_group": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, _c_int32_p,
                                            ctypes.c_int32, ctypes.c_int32]),
    "partrain_torch_collective": (None, [ctypes.c_char_p, ctypes.c_size_t]),
    "partrain_torch_window_open": (ctypes.c_uint64, []),
    "partrain_torch_window_close": (None, []),
    "partrain_torch_step_begin": (None, [ctypes.c_int64]),
    "partrain_torch_step_end": (None, [ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "partrain_torch_notice": (None, [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p]),
    "partrain_torch_program_ended": (None, []),
}

SEVERITY_INFO, SEVERITY_DATA_LOSS, SEVERITY_ERROR = 0, 1, 2

# partrain_torch_collective's record (TorchCollectiveAbi in torch_abi.cpp): group, root, outcome
# (0 completed, 1 failed, 2 issued, 3 called, 4 issued untimed: completes only once waited on,
# 5 waited: the program now waits on such an op; the calls before it completes move its one
# entry in the library's flight recorder on),
# element bytes, input and output elements, seq, issue/issued/completed ns, window, HookOpName,
# dtype. One packed buffer: ctypes' per-argument conversion cost more than the rest together.
COLLECTIVE = struct.Struct("<iiiIQQQqqqQ32s16s")


class Native:
    """The entry points as Python callables (same names without the prefix)."""

    def __init__(self, library):
        for symbol, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(library, symbol)
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, symbol[len("partrain_torch_"):], function)

    def register_group(self, name, desc, ranks, group_rank):
        array = (ctypes.c_int32 * len(ranks))(*ranks)
        return self.group(name.encode(), desc.encode(), array, len(ranks), group_rank)

    def say(self, name, severity, text):
        self.notice(name.encode(), severity, text.encode())


def load():
    """The entry points, or None with the reason (no injection library in this process, or one
    of another ABI)."""
    try:
        library = ctypes.PyDLL(None)
        version = library.partrain_torch_abi_version
    except (OSError, AttributeError):
        return None, ("libpartrain_inject.so is not loaded in this process (LD_PRELOAD was "
                      "removed, or the partrain that traces it predates PyTorch recording)")
    version.restype = ctypes.c_int
    found = version()
    if found != ABI_VERSION:
        return None, (f"libpartrain_inject.so speaks version {found} of the PyTorch entry "
                      f"points, this module version {ABI_VERSION}: the share/ directory and "
                      "the library come from different partrain installations")
    try:
        return Native(library), None
    except AttributeError as error:
        return None, f"libpartrain_inject.so lacks an entry point ({error})"
