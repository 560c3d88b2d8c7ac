"""The process pool of ``attnsvm check --workers N``: the worker side (set-up, one instance block, one
figure), the scheduling hint (each theorem's seconds per instance from earlier runs: the longest blocks
start first; results never depend on it), and the parent's event loop that submits blocks, streams every
finished instance and ends the workers on an interrupt. Results are identical for any N (tested)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import signal
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerics.errors import EnvironmentFault

from .executor import Executor
from .plan import CheckConfig, instance_blocks, load_catalogue, replay_args, with_counterexample

if TYPE_CHECKING:
    from .harness import InstanceResult, TheoremResult

# -- the worker side of the process pool (module level: a worker process finds these by name) -----
_WORKER: dict[str, Any] = {}


def _worker_init(cfg: CheckConfig, out: str, data: Any) -> None:
    """Set up one pool worker: the parent handles SIGINT/SIGTERM and ends the workers itself; under a
    start method other than fork the catalogue (and plugins) is loaded here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    load_catalogue(cfg.plugins)
    if cfg.sabotage:  # --sabotage: a forked worker inherited the broken component, a spawned one installs it
        from .power.sabotage import install

        install(cfg.sabotage)
    _WORKER.update(cfg=cfg, out=Path(out), data=data, extra=replay_args(cfg))


def _worker_main(conn: Connection, cfg: CheckConfig, out: str, data: Any) -> None:
    """A worker process: set up, say ready, then run the jobs the parent sends over ``conn`` (its own
    pipe: a worker killed mid-message corrupts only that pipe) until it sends None.

    Every message back is a tuple: ``("start", job, phase, instances)`` before each step that could kill
    or hang the process, ``("result", job, InstanceResult)`` as each instance finishes, ``("done", job)``,
    or ``("fail", job, message)`` when a job raised (a bug of the harness: instance errors are results)."""
    _worker_init(cfg, out, data)
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        kind, jid, args = msg
        try:
            if kind == "block":
                _worker_block(conn, jid, **args)
            else:
                _worker_plot(**args)
            conn.send(("done", jid))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops the run
            conn.send(("fail", jid, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


def _worker_block(conn: Connection, jid: int, tid: str, ks: list[int], skip: list[int], drop: list[int],
                  isolate: bool) -> None:
    """Run one instance block of theorem ``tid``; each finished instance goes to the parent at once (it
    streams it to results.jsonl and the progress bar), and so does each step it starts."""
    from .harness import run_instances
    from .theorem import REGISTRY

    w = _WORKER
    cfg: CheckConfig = w["cfg"]

    def on_result(r: InstanceResult, inst: Any) -> None:
        conn.send(("result", jid, with_counterexample(w["out"], cfg, w["extra"], tid, r, inst)))

    def on_start(phase: str, which: list[int]) -> None:
        conn.send(("start", jid, phase, which))

    run_instances(REGISTRY[tid], ks, profile=cfg.profile, seed=cfg.seed, device=cfg.device, data=w["data"],
                  on_result=on_result, on_start=on_start, skip=set(skip), drop=set(drop), isolate=isolate)


def _worker_plot(tid: str, t: TheoremResult, results: list[InstanceResult]) -> None:
    from . import report
    from .theorem import REGISTRY

    report.plot_theorem(_WORKER["out"], REGISTRY[tid], t, results)


# -- timings of earlier runs: the pool starts the longest blocks first (results never depend on it) ---
def _timings_path(profile: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("ATTNSVM_CACHE") or Path(base) / "attnsvm") / f"timings-{profile}.json"


def _load_timings(profile: str) -> dict[str, float]:
    try:
        d = json.loads(_timings_path(profile).read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in d.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _save_timings(profile: str, results: Sequence[TheoremResult]) -> None:
    """Remember each theorem's seconds per instance (a scheduling hint only; failures are ignored)."""
    d = _load_timings(profile)
    for t in results:
        n = t.counts.get("instances", 0)
        if n and not t.not_applicable:
            d[t.id] = t.seconds / n
    try:
        path = _timings_path(profile)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(d, indent=0, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def _pool_context(device: str = "cpu") -> Any:
    """fork where the platform has it (the workers inherit the loaded catalogue and start at once),
    spawn elsewhere (each worker loads the catalogue in :func:`_worker_init`). A CUDA run always spawns:
    the parent has already asked the CUDA runtime for its devices (``--device`` is checked up front), and a
    forked child cannot initialise CUDA after that."""
    fork = "fork" in mp.get_all_start_methods() and not device.startswith("cuda")
    return mp.get_context("fork" if fork else "spawn")



# -- the supervised pool: crashed workers are replaced, hung instances are timed out -------------------
#: A block that kills its worker this many times at the same instance gets ERROR for that instance (the
#: first loss may be the environment's: the OOM killer, a node going away; the block is simply run again).
FAULT_STRIKES = 2

#: Worker processes that die before they are ready, in a row, before the run stops as a fault.
START_FAILURES = 3


def _death(exitcode: int | None) -> str:
    """How a worker process ended, in words ("killed by SIGKILL", "exited with status 3")."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


@dataclass
class _Job:
    """One task of the pool: an instance block of a theorem, or one theorem's figure. A block that lost
    its worker is sent again with what is known so far: its finished instances (``skip``), those given
    ERROR at generation or at an isolated prepare (``drop``), whether to prepare one at a time."""

    jid: int
    kind: str  # "block" | "plot"
    tid: str
    ks: list[int] = field(default_factory=list)
    skip: set[int] = field(default_factory=set)
    drop: set[int] = field(default_factory=set)
    isolate: bool = False
    strikes: dict[Any, int] = field(default_factory=dict)
    plot: dict[str, Any] = field(default_factory=dict)

    def message(self) -> tuple[str, int, dict[str, Any]]:
        if self.kind == "plot":
            return ("plot", self.jid, self.plot)
        return ("block", self.jid, {"tid": self.tid, "ks": self.ks, "skip": sorted(self.skip),
                                    "drop": sorted(self.drop), "isolate": self.isolate})

    def unfinished(self) -> list[int]:
        return [k for k in self.ks if k not in self.skip and k not in self.drop]


@dataclass
class _Slot:
    """One worker process of the pool and what it is doing."""

    proc: Any
    conn: Connection
    ready: bool = False
    job: _Job | None = None
    phase: tuple[str, list[int]] | None = None
    since: float = 0.0


class SupervisedPool:
    """``workers`` processes, each with its own pipe, that run :class:`_Job` s. A worker that dies is
    replaced and its job sent again (see :meth:`_fault`); a step that runs past ``timeout`` seconds per
    instance has its worker killed and replaced, and the instance is ERROR. ``take(result)`` receives
    every instance result, those the pool makes for faults included; ``done(job)`` each finished job."""

    def __init__(self, workers: int, ctx: Any, initargs: tuple, timeout: float | None,
                 take: Callable[[InstanceResult], None], done: Callable[[_Job], None]):
        self.ctx, self.initargs, self.timeout = ctx, initargs, timeout
        self.take, self.done = take, done
        self.queue: deque[_Job] = deque()
        self.faults: list[dict[str, Any]] = []  # one entry per lost worker (run.json / report.json)
        self.notes: list[str] = []
        self._start_failures = 0
        self.slots = [self._spawn() for _ in range(workers)]

    # -- processes ------------------------------------------------------------------------------------
    def _spawn(self) -> _Slot:
        parent, child = self.ctx.Pipe(duplex=True)
        proc = self.ctx.Process(target=_worker_main, args=(child, *self.initargs), daemon=True)
        proc.start()
        child.close()
        return _Slot(proc, parent)

    def _replace(self, slot: _Slot) -> None:
        try:
            slot.conn.close()
        except OSError:
            pass
        slot.proc.join(timeout=5)
        self.slots[self.slots.index(slot)] = self._spawn()

    def stop(self, *, now: bool = False) -> None:
        """End every worker: politely when the work is done, at once (SIGKILL after SIGTERM) on an
        interrupt or an error (their unfinished blocks are redone by --resume)."""
        for s in self.slots:
            try:
                if now:
                    s.proc.terminate()
                else:
                    s.conn.send(None)
            except (OSError, ValueError):
                pass
        for s in self.slots:
            s.proc.join(timeout=1 if now else 30)
            if s.proc.is_alive():
                s.proc.kill()
                s.proc.join(timeout=5)
            try:
                s.conn.close()
            except OSError:
                pass

    # -- the event loop ---------------------------------------------------------------------------------
    def submit(self, job: _Job, *, first: bool = False) -> None:
        (self.queue.appendleft if first else self.queue.append)(job)

    def busy(self) -> bool:
        return bool(self.queue) or any(s.job is not None for s in self.slots)

    def step(self, wait_s: float = 0.1) -> None:
        """Hand queued jobs to idle workers, read what the workers sent, and handle dead or hung ones."""
        for s in self.slots:
            if s.ready and s.job is None and self.queue:
                s.job, s.since = self.queue.popleft(), time.monotonic()
                s.phase = ("plot", [0]) if s.job.kind == "plot" else None  # a figure has one time limit
                s.conn.send(s.job.message())
        waitables: list[Any] = [s.conn for s in self.slots] + [s.proc.sentinel for s in self.slots]
        mp_wait(waitables, timeout=wait_s)
        for s in list(self.slots):
            alive = self._read(s)
            if not alive or not s.proc.is_alive():
                self._read(s)  # what it sent before it died
                if s.proc.is_alive():  # its pipe broke: it cannot be told anything any more
                    s.proc.kill()
                s.proc.join(timeout=5)
                self._fault(s, _death(s.proc.exitcode), timed_out=False)
            elif s.job is not None and self.timeout and s.phase is not None:
                budget = self.timeout * max(1, len(s.phase[1]))
                if time.monotonic() - s.since > budget:
                    s.proc.kill()
                    s.proc.join(timeout=5)
                    self._read(s)
                    self._fault(s, f"timed out after {budget:g} s", timed_out=True)

    def _read(self, s: _Slot) -> bool:
        """Handle every message waiting on a worker's pipe; False when the pipe is closed or broken."""
        try:
            while s.conn.poll():
                self._handle(s, s.conn.recv())
        except (EOFError, OSError, pickle.UnpicklingError):
            return False
        return True

    def _handle(self, s: _Slot, msg: tuple) -> None:
        kind = msg[0]
        if kind == "ready":
            s.ready = True
            self._start_failures = 0
            return
        job = s.job
        if job is None or msg[1] != job.jid:
            return  # a late message of a job already given up
        if kind == "start":
            s.phase, s.since = (msg[2], list(msg[3])), time.monotonic()
        elif kind == "result":
            r = msg[2]
            job.skip.add(r.instance)
            self.take(r)
        elif kind == "done":
            s.job, s.phase = None, None
            self.done(job)
        elif kind == "fail":
            raise RuntimeError(f"a pool worker's {job.kind} job for {job.tid} raised {msg[2]}")

    # -- faults -------------------------------------------------------------------------------------------
    def _fault(self, s: _Slot, what: str, *, timed_out: bool) -> None:
        """A worker died (``what`` says how) or was killed for running past the time limit: replace it,
        and decide what happens to the job it held (see the README's "Faults")."""
        job, phase, elapsed = s.job, s.phase, time.monotonic() - s.since
        if not s.ready:
            self._start_failures += 1
            if self._start_failures >= START_FAILURES:
                raise EnvironmentFault(f"worker processes die as they start ({what}, {START_FAILURES} times "
                                       "in a row); the finished instances are in results.jsonl")
        self._replace(s)
        if job is None:
            self.faults.append({"what": what, "job": None})
            return
        entry: dict[str, Any] = {"what": what, "theorem": job.tid, "job": job.kind}
        self.faults.append(entry)
        if job.kind == "plot":
            n = job.strikes["plot"] = job.strikes.get("plot", 0) + 1
            if timed_out or n >= FAULT_STRIKES:
                self.notes.append(f"no figure for {job.tid}: its worker {what}")
                self.done(job)
            else:
                self.submit(job, first=True)
            return
        name, which = phase if phase is not None else ("start", job.unfinished())
        entry.update(phase=name, instances=which)
        if name in ("instance", "evaluate") or (name == "prepare" and len(which) == 1):
            k = which[0]
            n = job.strikes[k] = job.strikes.get(k, 0) + 1
            if timed_out or n >= FAULT_STRIKES:
                why = (f"{what} ({name} of instance {k}); its worker was replaced" if timed_out else
                       f"worker {what} while running instance {k} ({name}), {n} times")
                self._error(job, [k], why, elapsed)
                (job.skip if name == "evaluate" else job.drop).add(k)
        elif name == "prepare":  # a batch: prepare its instances one at a time from now on
            n = job.strikes["prepare"] = job.strikes.get("prepare", 0) + 1
            if timed_out or n >= FAULT_STRIKES:
                job.isolate = True
        else:  # it died before starting any step of the job
            n = job.strikes["start"] = job.strikes.get("start", 0) + 1
            if n >= FAULT_STRIKES:
                self._error(job, job.unfinished(), f"worker {what} before it ran instances "
                            f"{job.unfinished()}, {n} times", elapsed)
                job.drop.update(job.unfinished())
        if job.unfinished():
            self.submit(job, first=True)
        else:
            self.done(job)

    def _error(self, job: _Job, ks: list[int], why: str, elapsed: float) -> None:
        from .harness import InstanceResult

        for k in ks:
            self.take(InstanceResult(job.tid, k, "error", reason=why, seconds=elapsed))


def _ordered_blocks(cfg: CheckConfig, plan,
                    previous: dict) -> tuple[list[tuple[str, list[int]]], dict[str, int]]:
    """The instance blocks still to run, the longest first by the last run's timings (then in plan order),
    and the number of blocks per theorem."""
    order = {cls.id: i for i, (cls, _, _) in enumerate(plan)}
    timings = _load_timings(cfg.profile)
    pending: dict[str, int] = {}
    tasks: list[tuple[float, int, str, list[int]]] = []
    for cls, ks, _ in plan:
        blocks = instance_blocks(cls, [k for k in ks if (cls.id, k) not in previous], cfg.profile)
        pending[cls.id] = len(blocks)
        for b in blocks:
            tasks.append((-timings.get(cls.id, 0.0) * len(b), order[cls.id], cls.id, b))
    tasks.sort(key=lambda x: (x[0], x[1], x[3][0]))
    return [(tid, b) for _, _, tid, b in tasks], pending


class _Streamed:
    """The parent's bookkeeping of a run on an executor: every finished instance is streamed once (to
    results.jsonl and the progress bar), and a theorem is summarised when its last block is done (the
    partial report.json is rewritten then)."""

    def __init__(self, cfg: CheckConfig, plan, previous: dict, out: Path, run: dict, bar, stream, per_thm,
                 summary):
        self.out, self.run, self.bar, self.stream, self.per_thm, self.summary = (out, run, bar, stream,
                                                                                  per_thm, summary)
        self.order = {cls.id: i for i, (cls, _, _) in enumerate(plan)}
        self.tasks, self.pending = _ordered_blocks(cfg, plan, previous)
        self.seen: set[tuple[str, int]] = {(r.theorem, r.instance) for rs in per_thm.values() for r in rs}
        self.nas = {cls.id: na for cls, _, na in plan}
        self.classes = {cls.id: cls for cls, _, _ in plan}
        self.done_thm: dict[str, TheoremResult] = {}

    def take(self, r: InstanceResult) -> None:
        key = (r.theorem, r.instance)
        if key in self.seen:
            return
        self.seen.add(key)
        self.stream.write(r)
        self.per_thm[r.theorem].append(r)
        if self.bar is not None:
            self.bar.set_description(r.theorem)
            self.bar.update(1)

    def finish(self, tid: str) -> TheoremResult:
        from . import report

        t = self.summary(self.classes[tid], self.nas[tid])
        self.done_thm[tid] = t
        report.write_json(self.out, self.run, sorted(self.done_thm.values(), key=lambda x: self.order[x.id]))
        return t

    def block_done(self, tid: str) -> bool:
        """One more block of ``tid`` is done; True when it was its last."""
        self.pending[tid] -= 1
        return self.pending[tid] == 0

    def results(self) -> list[TheoremResult]:
        return [self.done_thm[tid] for tid in sorted(self.classes, key=self.order.__getitem__)]


def _execute_pool(cfg, plan, data, out: Path, previous: dict, run: dict, bar, stream, per_thm, summary,
                  workers: int, figures: bool, plotted: set[str],
                  timeout: float | None) -> list[TheoremResult]:
    """The plan on a :class:`SupervisedPool` of ``workers`` processes, one job per instance block (the
    blocks of :func:`instance_blocks`, the longest first by the last run's timings). Every finished
    instance is streamed as it arrives; a theorem is summarised (and its figure drawn on the pool) when its
    last block is done; the partial report.json is rewritten then. Lost workers are replaced and recorded in
    ``run["workers"]``. On an interrupt the workers are ended at once and KeyboardInterrupt propagates
    (finished instances are already in results.jsonl)."""
    st = _Streamed(cfg, plan, previous, out, run, bar, stream, per_thm, summary)
    jids = iter(range(1 << 62))

    def finish(tid: str) -> None:
        t = st.finish(tid)
        if figures and not t.not_applicable:
            rs = sorted(per_thm.get(tid, []), key=lambda r: r.instance)
            pool.submit(_Job(next(jids), "plot", tid, plot={"tid": tid, "t": t, "results": rs}))
            plotted.add(tid)

    def done(job: _Job) -> None:
        if job.kind == "block" and st.block_done(job.tid):
            finish(job.tid)

    pool = SupervisedPool(workers, _pool_context(cfg.device), (cfg, str(out), data), timeout, st.take, done)
    try:
        for tid, b in st.tasks:
            pool.submit(_Job(next(jids), "block", tid, ks=b))
        for tid, n in st.pending.items():
            if n == 0:
                finish(tid)
        while pool.busy():
            pool.step()
    except BaseException:
        pool.stop(now=True)
        raise
    else:
        pool.stop()
    finally:
        run["workers"] = {"processes": workers, "lost": len(pool.faults), "faults": pool.faults,
                          "instance_timeout_s": timeout, **({"notes": pool.notes} if pool.notes else {})}
    return st.results()


# -- the Dask executor (--dask): one task per instance block, the same blocks as the pool's -----------------
def dask_block(cfg: CheckConfig, out: str, data: Any, tid: str, ks: list[int]) -> list[InstanceResult]:
    """Run one instance block of theorem ``tid`` on a Dask worker and return its instance results (a
    refuted instance's counterexample is written there, under ``out``). The worker loads the catalogue
    (and plugins) once per process; a ``--sabotage`` is in force for this task only, since a Dask worker
    may run other work after it."""
    import contextlib

    from .executor import worker_init
    from .harness import run_instances
    from .theorem import REGISTRY

    worker_init()
    load_catalogue(cfg.plugins)
    extra = replay_args(cfg)
    got: list[InstanceResult] = []

    def on_result(r: InstanceResult, inst: Any) -> None:
        got.append(with_counterexample(Path(out), cfg, extra, tid, r, inst))

    broken: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if cfg.sabotage:
        from .power.sabotage import sabotage

        broken = sabotage(cfg.sabotage)
    with broken:
        run_instances(REGISTRY[tid], ks, profile=cfg.profile, seed=cfg.seed, device=cfg.device, data=data,
                      on_result=on_result)
    return got


def _execute_dask(cfg, plan, data, out: Path, previous: dict, run: dict, bar, stream, per_thm, summary,
                  executor: Executor) -> list[TheoremResult]:
    """The plan on a Dask cluster (:func:`checks.executor.dask_client`), one task per instance block (the
    same blocks, longest first, as the pool). Each block's instances are streamed when the block
    finishes; a theorem is summarised when its last block is done (its figure is drawn here afterwards).
    A worker that dies is Dask's to replace (its task runs again elsewhere); a block that keeps killing
    workers (``KilledWorker``) stops the run as an :class:`EnvironmentFault` (exit 1, ``fault:``; the
    finished instances are in results.jsonl and ``--resume`` goes on from there). There is no instance time
    limit: Dask cannot stop a running task."""
    from .executor import dask_client, lost_worker, map_completed

    st = _Streamed(cfg, plan, previous, out, run, bar, stream, per_thm, summary)
    for tid, n in st.pending.items():
        if n == 0:
            st.finish(tid)
    with dask_client(executor) as client:
        shared = client.scatter(data, broadcast=True, hash=False) if data is not None else None
        tasks = [(cfg, str(out.resolve()), shared, tid, b) for tid, b in st.tasks]
        try:
            for k, rs in map_completed(executor, dask_block, tasks, star=True, client=client):
                for r in rs:
                    st.take(r)
                if st.block_done(st.tasks[k][0]):
                    st.finish(st.tasks[k][0])
        except Exception as exc:
            if lost_worker(exc):
                raise EnvironmentFault(
                    f"an instance block kept killing its Dask workers ({type(exc).__name__}: {exc}); the "
                    "finished instances are in results.jsonl, and `--resume` goes on from there") from None
            raise
    return st.results()
