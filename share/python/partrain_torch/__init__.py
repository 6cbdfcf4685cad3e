"""Records an unmodified PyTorch job's collectives and steps into partrain's trace.

Installed by partrain's sitecustomize in the Python processes of `partrain trace` and
`partrain launch` commands (docs/pytorch.md). Nothing happens until the program imports torch:
then, in a process libpartrain_inject.so traces,

  - every c10d process group gets ProcessGroup pre/post hooks (torch >= 2.15): each collective
    and p2p op is recorded with its group's name and members, a per-group sequence number equal
    on all members, its tensors' dtype and element counts, and its host times (called, issued,
    completed: from the Work's future, or by polling Work.is_completed where there is none);
  - steps come from torch.profiler's ProfilerStep#N when a profiler with a schedule runs, else
    from the optimizer's step() (DeepSpeed's engine step when the program uses DeepSpeed);
  - an exception that ends a rank is noted, also in a rank torch.multiprocessing.spawn started
    (spawn catches it before sys.excepthook could see it);
  - an older torch gets one notice and its steps; NCCL's own calls are still recorded by the
    injection library, with host times.

Records enter the trace through the injection library's C entry points
(profiler/inject/torch_abi.cpp), never on their own. Any failure of this module is reported
once and recording stops; the program never sees it.
"""

import os

_installed = False


def install():
    """Installs the import hooks, once, when the process is traced by partrain."""
    global _installed
    if _installed or not os.environ.get("PARTRAIN_COLLECTOR"):
        return
    _installed = True
    from partrain_torch import _import_hooks, _session
    session = _session.Session()
    _import_hooks.patch_on_import({
        "torch.distributed.distributed_c10d": session.c10d_imported,
        "torch.optim.optimizer": session.optimizer_imported,
        "torch.profiler.profiler": session.profiler_imported,
        # DeepSpeed's engines mark steps (never imported here: only if the program does)
        "deepspeed.runtime.engine": session.deepspeed_engine_imported,
        "deepspeed.runtime.pipe.engine": session.deepspeed_engine_imported,
        "torch.multiprocessing.spawn": session.spawn_imported,
    })
