"""Every c10d process group's collectives, from ProcessGroup's pre/post hooks (torch >= 2.15).

A group gets its hooks when c10d registers it (the default group, new_group, split_group,
DeviceMesh's and FSDP's groups alike, on their member ranks). The pre hook numbers the op as
every member does (collectives per group, p2p per direction, peer and tag, as gloo matches
them), notes its tensors and the time and reports it called (the library keeps it in flight in
its flight recorder, docs/reliability.md, from before the backend can abort the rank on it:
gloo's enforce on a size mismatch runs on its own thread); the post hook notes when it was
issued and follows its Work to completion: the Work's future where it has one (gloo
collectives), else polling Work.is_completed (send/recv on gloo, NCCL work, whose host future
does not wait for the GPU) or, whichever comes first, the return of its wait() called from
Python (gloo's reduce_scatter_tensor is a Work that completes only in wait(), where it copies
its result). The record then goes to the injection library, which turns it into the trace's
collective row (profiler/torch_collective.h). An op whose call raised (no post hook: DETAIL's
fingerprint check) is recorded failed when the program exits. On an NCCL group the op also
opens a window on its thread, so the NCCL calls it makes join its row instead of making their
own.
"""

import functools
import os
import threading
import time
import weakref

from partrain_torch import _completion, _native

HOOK_ID = 0x70A7  # after the hooks torch attaches itself (flight recorder, health check)
_P2P = (b"SEND", b"RECV", b"RECVANYSOURCE")
_OUTCOME_COMPLETED, _OUTCOME_FAILED, _OUTCOME_ISSUED, _OUTCOME_CALLED = 0, 1, 2, 3
# Work whose completion shows only once the program waits on it (gloo Work without a future:
# send, recv, reduce_scatter): in flight but untimed by the watchdog until its wait() is called
# from Python; then timed from there (profiler/inject/torch_abi.cpp).
_OUTCOME_ISSUED_UNTIMED, _OUTCOME_WAITED = 4, 5
# A p2p op's tag T in its seq: T * 2^32 + its number among (direction, peer, T); tag 0, negative
# tags and tags of 2^31 or more keep plain numbers (profiler/p2p_seq.h reads them back).
_TAG_SHIFT = 32
_MAX_TAG = 1 << 31


class _P2PTag(threading.local):
    tag = 0  # the tag of the isend/irecv this thread is in (0 outside one)

# How long the program's exit waits for the threads that run this recorder's code: a callback
# still held after its wait belongs to an op the program left in flight (it may never complete);
# the polling thread ends within one poll, longer only on a loaded machine.
_EXIT_WAIT_FOR_CALLBACKS_S = 2.0
_EXIT_WAIT_FOR_POLLING_S = 10.0

monotonic_ns = time.monotonic_ns
get_ident = threading.get_ident
_pack = _native.COLLECTIVE.pack
_RECORD_BYTES = _native.COLLECTIVE.size


class _Group:
    """One process group's recording state; its numbering lives on the issuing thread. It holds
    its group weakly: the group holds our hooks, which hold this, and a cycle through c10d's C++
    object would keep the group and gloo's threads alive into the interpreter's teardown (where
    stopping them aborted the process now and then)."""

    __slots__ = ("pg", "name", "handle", "nccl", "nccl_untensored", "collectives", "p2p",
                 "pending")

    def __init__(self, pg, name):
        self.pg = weakref.ref(pg)
        self.name = name
        self.handle = None  # registered with the library at its first op (its ranks are set then)
        self.nccl = False  # its ops on CUDA tensors run on NCCL
        self.nccl_untensored = False  # and its ops without tensors (a barrier) too
        self.collectives = 0
        self.p2p = {}
        self.pending = {}  # op_id -> (what the pre hook saw, the calling thread's ident)


def _backends(c10d, pg):
    """The group's backend as the job names it (the stat torch_backend), whether its ops on CUDA
    tensors run on NCCL, and whether its ops without tensors (a barrier) do. A backend is
    chosen per device: init_process_group() without one gives cpu:gloo, plus cuda:nccl on a
    host with GPUs, and get_backend() then says "undefined"; get_backend_config() names them
    ("cpu:gloo,cuda:nccl"; a plain "gloo" is "cpu:gloo,cuda:gloo")."""
    name = str(c10d.get_backend(pg))
    config = name
    if hasattr(c10d, "get_backend_config"):
        config = str(c10d.get_backend_config(pg))
    devices = {}
    for part in config.split(","):
        device, _, backend = part.strip().rpartition(":")
        devices[device or "*"] = backend
    nccl = devices.get("cuda", devices.get("*")) == "nccl"
    if name == "undefined" or not name:
        names = sorted(set(devices.values()))
        name = names[0] if len(names) == 1 else config
    # c10d runs a barrier on the accelerator when there is one (the CPU otherwise).
    untensored = nccl and ("cpu" not in devices or _cuda_available())
    return name, nccl, untensored


def _runs_gloo(c10d, pg):
    """Whether the group (None: gone) has a gloo backend, whose worker threads live as long as
    it does."""
    if pg is None:
        return False
    try:
        config = str(c10d.get_backend_config(pg)) if hasattr(c10d, "get_backend_config") else (
            str(c10d.get_backend(pg)))
    except Exception:
        return False
    return "gloo" in config


def _comm_id(group):
    """The group as the trace names it (comm_id: "default_pg:0"), by the library's rule for
    the name and description register_group hands it (profiler/torch_collective.h,
    torch_comm_id)."""
    pg = group.pg()
    desc = str(getattr(pg, "group_desc", "")) if pg is not None else ""
    return f"{desc}:{group.name}" if desc else group.name


def _listed(names):
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _cuda_available():
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def _restart_attempt():
    """How many times torchrun has restarted this worker's job (0: the first attempt)."""
    try:
        return max(0, int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    except ValueError:
        return 0


class Recorder:
    def __init__(self, session, c10d, hooks):
        self._session = session
        self._native = session.native
        self._c10d = c10d
        self._hooks = hooks
        self._groups = {}  # id(pg) -> _Group, until the group is destroyed
        self._destroyed = []  # (comm id, weakref) of the gloo groups destroyed, for the exit
        self._world = 1  # c10d's world: the next after each destroy_process_group() of all
        self._attempt = _restart_attempt()  # torchrun's restarts of its workers
        self._backend_said = False  # the stat torch_backend, from the first group used
        self._op_names = {}  # HookOpName -> bytes
        self._dtypes = {}  # torch.dtype -> (name bytes, element size)
        self._no_future = set()  # (backend is NCCL, op) whose Work has no future
        self._in_flight = {}  # id(entry) -> entry, until completed (recorded at exit otherwise)
        self._awaited = {}  # id(work) -> (work, entry): Work without a future, for its wait()
        self._any_source = {}  # id(entry) -> _Group: recvs from any source, until completed
        self._watcher = _completion.CompletionWatcher(
            self._polled, lambda entry: id(entry) in self._in_flight)
        self._callbacks = _completion.FutureCallbacks()
        self._finished = _completion.FinishedWork()  # gloo Work a worker thread completed
        self._first_group_seen = False
        self._traced = False
        self.on_first_group = None  # called with this process's rank when a group first registers
        self.issued = 0  # ops issued so far (the step markers read it)
        self._p2p_tag = _P2PTag()

    # -- registration ------------------------------------------------------------------------

    def install(self):
        c10d = self._c10d
        name = "_register_pg_in_world" if hasattr(c10d, "_register_pg_in_world") else (
            "_register_process_group" if hasattr(c10d, "_register_process_group") else None)
        if name is None:
            raise RuntimeError("torch.distributed.distributed_c10d has neither "
                               "_register_pg_in_world nor _register_process_group")
        original = getattr(c10d, name)
        pg_position = 0 if name == "_register_pg_in_world" else 1

        @functools.wraps(original)
        def register(*args, **kwargs):
            result = original(*args, **kwargs)
            pg = args[pg_position] if len(args) > pg_position else kwargs.get("pg")
            if pg is not None:
                self._session._guarded("attaching to a new process group", self._registered, pg)
            return result

        setattr(c10d, name, register)
        self._wrap_destroy()
        if self._hooks:
            self._wrap_work_wait()
            self._wrap_monitored_barrier()
            self._wrap_p2p_tags()
        import atexit
        atexit.register(self._at_exit)

    def _wrap_destroy(self):
        """destroy_process_group() of everything restarts c10d's group names at "0": the groups
        made after it are named "0#2", "1#2", ... (every rank destroys and makes them alike)."""
        c10d = self._c10d
        original = getattr(c10d, "destroy_process_group", None)
        if original is None:
            return

        @functools.wraps(original)
        def destroy_process_group(group=None):
            everything = group is None or group is c10d.GroupMember.WORLD
            destroyed = list(self._groups.values()) if everything else (
                [self._groups[id(group)]] if id(group) in self._groups else [])
            gone = [(_comm_id(g), g.pg) for g in destroyed if _runs_gloo(c10d, g.pg())]
            result = original(group)
            self._destroyed.extend(gone)
            if everything:
                self._world += 1
                self._groups.clear()
            else:
                self._groups.pop(id(group), None)
            return result

        c10d.destroy_process_group = destroy_process_group

    def _wrap_work_wait(self):
        import torch
        work_class = torch._C._distributed_c10d.Work
        original = work_class.wait
        awaited = self._awaited

        @functools.wraps(original)
        def wait(work, *args, **kwargs):
            if awaited:
                waited = awaited.get(id(work))
                if waited is not None:
                    self._waited(waited[1])
            result = original(work, *args, **kwargs)
            if awaited:
                waited = awaited.pop(id(work), None)
                if waited is not None:
                    self._completed(self._received(work, waited[1]), monotonic_ns(),
                                    _OUTCOME_COMPLETED)
            return result

        work_class.wait = wait

    def _wrap_monitored_barrier(self):
        """dist.monitored_barrier runs outside the process group's hooks (gloo's monitoredBarrier
        sends and receives on its backend, which calls no hook): recorded here, as a barrier of its
        group numbered among the group's collectives (every member calls it), in flight from its
        call until it returns, failed when it raises (its timeout)."""
        c10d = self._c10d
        original = getattr(c10d, "monitored_barrier", None)
        if original is None:
            return

        @functools.wraps(original)
        def monitored_barrier(group=None, *args, **kwargs):
            entry = None
            if not self._session.failed:
                try:
                    entry = self._barrier_entered(group)
                except Exception as error:
                    self._session.fail("recording a monitored_barrier's start", error)
            try:
                result = original(group, *args, **kwargs)
            except BaseException:
                if entry is not None:
                    self._completed(entry, monotonic_ns(), _OUTCOME_FAILED)
                raise
            if entry is not None:
                self._completed(entry, monotonic_ns(), _OUTCOME_COMPLETED)
            return result

        c10d.monitored_barrier = monitored_barrier

    def _wrap_p2p_tags(self):
        """The hooks do not carry a send's or receive's tag: dist.isend and dist.irecv note it for
        the pre hook they call on this thread. dist.send/recv call them (c10d's module globals),
        and so do batch_isend_irecv's P2POps, whose op is dist.isend or dist.irecv, which are
        these wrappers (torch.distributed takes c10d's names after this patch)."""
        c10d = self._c10d
        local = self._p2p_tag
        for name in ("isend", "irecv"):
            original = getattr(c10d, name, None)
            if original is None:
                continue

            def tagged(*args, _original=original, **kwargs):
                # isend(tensor, dst=None, group=None, tag=0, group_dst=None); irecv alike.
                tag = kwargs.get("tag", args[3] if len(args) > 3 else 0)
                local.tag = tag if isinstance(tag, int) else 0
                try:
                    return _original(*args, **kwargs)
                finally:
                    local.tag = 0

            setattr(c10d, name, functools.wraps(original)(tagged))

    def _barrier_entered(self, group):
        """The in-flight entry of a monitored_barrier of `group` (None: c10d's default group), or
        None where it is not recorded (untraced, not a member, a group without hooks)."""
        if not self._traced:
            return None
        c10d = self._c10d
        if c10d._rank_not_in_group(group):
            return None
        pg = group if group is not None else c10d._get_default_group()
        recorded = self._groups.get(id(pg))
        if recorded is None:
            return None
        called_ns = monotonic_ns()
        if recorded.handle is None:
            self._describe(recorded)
        if recorded.handle < 0:
            return None
        seq = recorded.collectives
        recorded.collectives = seq + 1
        self.issued += 1
        seen = (b"BARRIER", (b"", 0), 0, 0, -1, seq, called_ns, 0)
        entry = (recorded.handle, seen, called_ns)
        self._in_flight[id(entry)] = entry
        self._native.collective(
            _pack(recorded.handle, -1, _OUTCOME_ISSUED, 0, 0, 0, seq, called_ns, called_ns, 0, 0,
                  b"BARRIER", b""), _RECORD_BYTES)
        return entry

    def _registered(self, pg):
        if not self._first_group_seen:
            self._first_group_seen = True
            rank = self._c10d.get_rank() if self._c10d.is_initialized() else pg.rank()
            # A process without a launcher's rank is c10d's rank; one its parent's rank passed
            # over at load (`bash run.sh` starting python) takes that rank over here. One the
            # library will not trace (no collector, partrain's own worker) gets no hooks at all.
            self._traced = self._native.start(rank) == 1
            if self._traced:
                # The processes this one starts (an evaluation tool with a private group of its
                # own) are not the rank: the injection library leaves them untraced.
                os.environ["PARTRAIN_GROUPS_PID"] = str(os.getpid())
            if self._traced and self._attempt > 0:
                self._native.say(
                    "torchelastic_restart", _native.SEVERITY_INFO,
                    f"attempt {self._attempt} of the job: torchrun restarted its workers "
                    f"(TORCHELASTIC_RESTART_COUNT={self._attempt}); its groups are named "
                    f"...@restart{self._attempt}")
            if self.on_first_group is not None:
                self.on_first_group(rank)
        if not self._hooks or not self._traced or id(pg) in self._groups:
            return
        name = str(pg.group_name)
        if self._world > 1:
            name = f"{name}#{self._world}"
        if self._attempt > 0:
            # A restarted worker's groups start their numbering again: told apart from the
            # earlier attempts', so no collective is matched across attempts.
            name = f"{name}@restart{self._attempt}"
        group = _Group(pg, name)
        self._groups[id(pg)] = group
        pg.register_pre_hook(HOOK_ID, functools.partial(self._pre, group))
        pg.register_post_hook(HOOK_ID, functools.partial(self._post, group))

    def _describe(self, group):
        pg = group.pg()
        if pg is None:
            group.handle = -1
            return
        ranks = self._c10d.get_process_group_ranks(pg)
        backend, group.nccl, group.nccl_untensored = _backends(self._c10d, pg)
        group.handle = self._native.register_group(group.name, str(pg.group_desc), list(ranks),
                                                   pg.rank())
        if not self._backend_said:
            # The job's backend, once: what an export's distributedInfo names (HTA reads it).
            self._backend_said = True
            self._native.say("torch_backend", _native.SEVERITY_INFO, backend)

    # -- hooks (hot path) ----------------------------------------------------------------------

    def _pre(self, group, args):
        issue_ns = monotonic_ns()
        self._finished.drop()
        if self._session.failed:
            return
        try:
            if group.handle is None:
                self._describe(group)
            name = args.name
            op = self._op_names.get(name)
            if op is None:
                op = self._op_names[name] = name.name.encode()
            inputs = args.input_tensors
            outputs = args.output_tensors
            input_elements = 0
            for tensor in inputs:
                input_elements += tensor.numel()
            output_elements = 0
            for tensor in outputs:
                output_elements += tensor.numel()
            first = inputs[0] if inputs else (outputs[0] if outputs else None)
            dtype = (b"", 0)
            if first is not None:
                dtype = self._dtypes.get(first.dtype)
                if dtype is None:
                    dtype = self._dtypes[first.dtype] = (str(first.dtype).replace("torch.", "")
                                                         .encode(), first.element_size())
            root = args.root
            if op in _P2P:
                # Numbered per (direction, peer, tag): gloo matches a send with the receive of its
                # tag, whatever order either side posts them in. A tag T > 0 is carried in the seq
                # itself, T * 2^32 + n (the hooks do not say it; the isend/irecv wrappers do).
                tag = self._p2p_tag.tag
                if not 0 < tag < _MAX_TAG:
                    tag = 0
                key = (op, root, tag)
                number = group.p2p.get(key, 0)
                group.p2p[key] = number + 1
                seq = (tag << _TAG_SHIFT) | number
            else:
                seq = group.collectives
                group.collectives = seq + 1
            nccl = group.nccl and (first.is_cuda if first is not None else group.nccl_untensored)
            window = self._native.window_open() if nccl else 0
            group.pending[args.op_id] = ((op, dtype, input_elements, output_elements, root, seq,
                                          issue_ns, window), get_ident())
            self.issued += 1
            if group.handle >= 0:
                # In flight from its call: a backend that aborts the rank on it before the post
                # hook ran (gloo's enforce, on its own thread) leaves it in the rank's dump.
                self._native.collective(
                    _pack(group.handle, root, _OUTCOME_CALLED, dtype[1], input_elements,
                          output_elements, seq, issue_ns, 0, 0, window, op, dtype[0]),
                    _RECORD_BYTES)
        except Exception as error:
            self._session.fail("recording a collective's start", error)

    def _post(self, group, args):
        issued_ns = monotonic_ns()
        pending = group.pending.pop(args.op_id, None)
        seen = pending[0] if pending is not None else None
        nccl = seen is not None and seen[7] != 0  # an NCCL op: _pre opened its window
        if nccl:
            self._native.window_close()
        if self._session.failed:
            return
        try:
            if seen is None or group.handle is None or group.handle < 0:
                return
            entry = (group.handle, seen, issued_ns)
            self._in_flight[id(entry)] = entry
            work = args.work
            if work is None:
                self._completed(entry, issued_ns, _OUTCOME_COMPLETED)
                return
            op, dtype, input_elements, output_elements, root, seq, issue_ns, window = seen
            kind = (nccl, seen[0])
            future = None
            if not nccl and kind not in self._no_future:
                try:
                    future = work.get_future()
                except Exception:  # "Work::getFuture not implemented": send/recv, ...
                    self._no_future.add(kind)
            # gloo Work without a future completes when its wait() returns (is_completed() stays
            # false until then): a send never waited, a reduce_scatter waited from C++ would
            # stay in flight for good, so the watchdog times it only while Python waits on it.
            awaited = not nccl and future is None
            # Issued: its entry in the library's flight recorder moves on from called (a watchdog
            # times it, or leaves it to its wait; a dump shows it), before anything can complete
            # it.
            self._native.collective(
                _pack(group.handle, root, _OUTCOME_ISSUED_UNTIMED if awaited else _OUTCOME_ISSUED,
                      dtype[1], input_elements, output_elements, seq, issue_ns, issued_ns, 0,
                      window, op, dtype[0]),
                _RECORD_BYTES)
            if future is not None:
                future.add_done_callback(self._callbacks.make(self._future_done, entry, work))
                return
            if awaited:  # never NCCL Work: its wait() returns before the GPU has run it
                if op == b"RECV" and root < 0:  # from any source: numbered once it is known
                    self._any_source[id(entry)] = group
                self._awaited[id(work)] = (work, entry)  # held: its Python object stays the same
            self._watcher.watch(work, entry)
        except Exception as error:
            self._session.fail("following a collective to its completion", error)

    def _future_done(self, entry, work, future):
        completed_ns = monotonic_ns()
        self._finished.hold(work)
        try:
            future.value()
            outcome = _OUTCOME_COMPLETED
        except Exception:
            outcome = _OUTCOME_FAILED
        self._completed(entry, completed_ns, outcome)

    def _polled(self, work, entry, completed_ns, outcome):
        self._awaited.pop(id(work), None)
        self._completed(self._received(work, entry), completed_ns, outcome)

    def _waited(self, entry):
        """The program waits on an op issued untimed: the watchdog times it from now."""
        if id(entry) not in self._in_flight or self._session.failed:
            return
        try:
            handle, seen, issued_ns = entry
            op, dtype, input_elements, output_elements, root, seq, issue_ns, window = seen
            self._native.collective(
                _pack(handle, root, _OUTCOME_WAITED, dtype[1], input_elements, output_elements,
                      seq, issue_ns, issued_ns, 0, window, op, dtype[0]), _RECORD_BYTES)
        except Exception as error:
            self._session.fail("recording a wait on a collective", error)

    def _received(self, work, entry):
        """An any-source recv's entry once it completed, as one from its sender: peer and seq
        among the (recv, sender, tag) ops, as a recv given `src` is numbered, so that it pairs
        with the sender's send (gloo delivers one sender's sends in order). Other entries, and
        one whose sender torch does not say, as they are. The library matches the completion
        with the issue by group and call time, whatever the seq."""
        group = self._any_source.pop(id(entry), None) if self._any_source else None
        if group is None:
            return entry
        try:
            source = work._source_rank()
        except Exception:  # it failed, or a torch without _source_rank
            return entry
        if self._in_flight.pop(id(entry), None) is None:
            return entry  # completed already
        handle, seen, issued_ns = entry
        tag = seen[5] >> _TAG_SHIFT
        key = (b"RECV", source, tag)
        number = group.p2p.get(key, 0)
        group.p2p[key] = number + 1
        received = (handle, seen[:4] + (source, (tag << _TAG_SHIFT) | number) + seen[6:],
                    issued_ns)
        self._in_flight[id(received)] = received
        return received

    def _completed(self, entry, completed_ns, outcome):
        if self._in_flight.pop(id(entry), None) is None or self._session.failed:
            return
        try:
            handle, seen, issued_ns = entry
            op, dtype, input_elements, output_elements, root, seq, issue_ns, window = seen
            record = _pack(handle, root, outcome, dtype[1], input_elements, output_elements, seq,
                           issue_ns, issued_ns, completed_ns, window, op, dtype[0])
            self._native.collective(record, _RECORD_BYTES)
        except Exception as error:
            self._session.fail("recording a completed collective", error)

    def _at_exit(self):
        """The program ends (atexit: the interpreter is still whole). The threads that run this
        recorder's Python on their own are done with it first (_completion.py says why: they
        would abort the process during the interpreter's finalization): gloo's threads release
        the futures' callbacks, the polling thread ends. Then ops still in flight are recorded as
        issued, never completed, and ops whose call never returned on this thread (it raised:
        DETAIL's fingerprint check, before the post hook) as failed. Last, the hooks leave the
        groups still alive: a program that never calls destroy_process_group() leaves its groups
        to c10d's registry, which C++ destroys after the interpreter is gone, and a Python hook
        destroyed then takes the GIL of a finalized interpreter (SIGSEGV, the program's own exit
        status lost)."""
        self._callbacks.wait_released(_EXIT_WAIT_FOR_CALLBACKS_S)
        self._finished.keep_to_the_end()
        self._watcher.stop(_EXIT_WAIT_FOR_POLLING_S)
        for entry in list(self._in_flight.values()):
            self._completed(entry, 0, _OUTCOME_COMPLETED)
        self._record_calls_that_raised()
        # A failure here must not keep the hooks on the groups (see above): said, and passed.
        self._session._guarded("listing the gloo groups alive at exit", self._say_gloo_groups_alive)
        self._unhook_groups()
        self._native.program_ended()

    def _say_gloo_groups_alive(self):
        """The gloo groups still alive as the interpreter is about to finalize, as the stat
        torch_gloo_groups_at_exit (docs/pytorch.md, "A rank that aborts after its program
        ended"). Their worker threads run on into the finalization; one that drops a finished
        op's tensor then takes the GIL, and CPython ends it with pthread_exit inside a C++
        destructor: std::terminate, SIGABRT, the program's exit status lost. Torch's own bug,
        as likely under torchrun; said so that a rank that aborts so is told from one that
        failed. Only stated here, at exit: the stat also says the program got this far."""
        outlived = [name for name, pg in self._destroyed if pg() is not None]
        never = [_comm_id(group) for group in self._groups.values()
                 if _runs_gloo(self._c10d, group.pg())]
        if not outlived and not never:
            return
        parts = []
        if outlived:
            parts.append(
                f"{_listed(outlived)} outlived destroy_process_group(): something still held "
                f"{'it' if len(outlived) == 1 else 'them'} (a group, DDP model or DeviceMesh "
                "the program keeps; or torch, whose torch.distributed.nn.functional, "
                "torch.distributed.optim and ShardedGradScaler modules take the default group as "
                "a default argument when imported after init_process_group, as torch._dynamo, "
                "and with it the first optimizer made, imports the first)")
        if never:
            parts.append(f"{_listed(never)} never destroyed (no destroy_process_group())")
        self._native.say(
            "torch_gloo_groups_at_exit", _native.SEVERITY_INFO,
            f"gloo group {'; '.join(parts)}: "
            f"{'its' if len(outlived) + len(never) == 1 else 'their'} worker threads run into the "
            "interpreter's shutdown, where one that frees a collective's tensor aborts the process "
            "(\"terminate called without an active exception\", SIGABRT) after the program "
            "ended")

    def _record_calls_that_raised(self):
        """Ops called and never issued: on the exiting thread the call raised (the program is
        past it), so failed; on another thread the call may still be running, so in flight."""
        exiting = get_ident()
        for group in list(self._groups.values()):
            if group.handle is None or group.handle < 0:
                continue
            for seen, thread in list(group.pending.values()):
                entry = (group.handle, seen, 0)
                self._in_flight[id(entry)] = entry
                self._completed(entry, monotonic_ns() if thread == exiting else 0,
                                _OUTCOME_FAILED if thread == exiting else _OUTCOME_COMPLETED)
            group.pending.clear()

    def _unhook_groups(self):
        for group in list(self._groups.values()):
            pg = group.pg()
            if pg is None:
                continue
            for unregister in ("unregister_pre_hook", "unregister_post_hook"):
                remove = getattr(pg, unregister, None)
                if remove is not None:
                    remove(HOOK_ID)
        self._groups.clear()
