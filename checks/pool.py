"""The process pool of ``attnsvm check --workers N``: the worker side (set-up, one instance block, one
figure), the scheduling hint (each theorem's seconds per instance from earlier runs: the longest blocks
start first; results never depend on it), and the parent's event loop that submits blocks, streams every
finished instance and ends the workers on an interrupt. Results are identical for any N (tested)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue as _queue
import signal
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .runner import CheckConfig, _chunks, _extra_args, _with_counterexample, load_catalogue

if TYPE_CHECKING:
    from .harness import InstanceResult, TheoremResult

# -- the worker side of the process pool (module level: a worker finds these by name) --------------
_WORKER: dict[str, Any] = {}


def _worker_init(results_queue: Any, cfg: CheckConfig, out: str, data: Any) -> None:
    """Set up one pool worker: the parent handles SIGINT/SIGTERM and ends the workers itself; under a
    start method other than fork the catalogue (and plugins) is loaded here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    load_catalogue(cfg.plugins)
    _WORKER.update(queue=results_queue, cfg=cfg, out=Path(out), data=data, extra=_extra_args(cfg))


def _worker_block(tid: str, ks: list[int]) -> list[InstanceResult]:
    """Run one instance block of theorem ``tid`` in a worker; each finished instance is also put on the
    results queue at once (the parent streams it to results.jsonl and the progress bar)."""
    from .harness import run_instances
    from .theorem import REGISTRY

    w = _WORKER
    cfg: CheckConfig = w["cfg"]
    done: list[InstanceResult] = []

    def on_result(r: InstanceResult, inst: Any) -> None:
        r = _with_counterexample(w["out"], cfg, w["extra"], tid, r, inst)
        done.append(r)
        w["queue"].put(r)

    run_instances(REGISTRY[tid], ks, profile=cfg.profile, seed=cfg.seed, device=cfg.device, data=w["data"],
                  on_result=on_result)
    return done


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


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now (an interrupt: their unfinished blocks are redone by --resume)."""
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)


# C901: the pool's one event loop (submit blocks, collect, stream, draw figures, handle an interrupt); it is
# exempt until run_check's named-step split (issue 13) gives each of those a function.
def _execute_pool(cfg, plan, data, out: Path, previous: dict, run: dict, bar, stream, per_thm, summary,  # noqa: C901
                  workers: int, figures: bool, plotted: set[str]) -> list[TheoremResult]:
    """The plan on a pool of ``workers`` processes, one task per instance block (the blocks of
    :func:`_chunks`, the longest first by the last run's timings). Every finished instance is streamed
    as it arrives; a theorem is summarised (and its figure drawn on the pool) when its last block is
    done; the partial report.json is rewritten then. On an interrupt the workers are ended at once and
    KeyboardInterrupt propagates (finished instances are already in results.jsonl)."""
    from . import report

    order = {cls.id: i for i, (cls, _, _) in enumerate(plan)}
    timings = _load_timings(cfg.profile)
    done_thm: dict[str, TheoremResult] = {}
    pending_blocks: dict[str, int] = {}
    tasks: list[tuple[float, int, str, list[int]]] = []
    for cls, ks, _ in plan:
        blocks = _chunks(cls, [k for k in ks if (cls.id, k) not in previous], cfg.profile)
        pending_blocks[cls.id] = len(blocks)
        for b in blocks:
            tasks.append((-timings.get(cls.id, 0.0) * len(b), order[cls.id], cls.id, b))
    tasks.sort(key=lambda x: (x[0], x[1], x[3][0]))
    seen: set[tuple[str, int]] = {(r.theorem, r.instance) for rs in per_thm.values() for r in rs}
    nas = {cls.id: na for cls, _, na in plan}
    classes = {cls.id: cls for cls, _, _ in plan}

    ctx = _pool_context(cfg.device)
    results_queue = ctx.Queue()
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                               initargs=(results_queue, cfg, str(out), data))
    plots: list[Any] = []

    def take(r: InstanceResult) -> None:
        key = (r.theorem, r.instance)
        if key in seen:
            return
        seen.add(key)
        stream.write(r)
        per_thm[r.theorem].append(r)
        if bar is not None:
            bar.set_description(r.theorem)
            bar.update(1)

    def drain(block: bool = False) -> None:
        try:
            r = results_queue.get(timeout=0.05) if block else results_queue.get_nowait()
            while True:
                take(r)
                r = results_queue.get_nowait()
        except _queue.Empty:
            pass

    def finish(tid: str) -> None:
        t = summary(classes[tid], nas[tid])
        done_thm[tid] = t
        report.write_json(out, run, sorted(done_thm.values(), key=lambda x: order[x.id]))
        if figures and not t.not_applicable:
            rs = sorted(per_thm.get(tid, []), key=lambda r: r.instance)
            plots.append(pool.submit(_worker_plot, tid, t, rs))
            plotted.add(tid)

    try:
        futures = {pool.submit(_worker_block, tid, b): tid for _, _, tid, b in tasks}
        for tid, n in pending_blocks.items():
            if n == 0:
                finish(tid)
        left = set(futures)
        while left:
            done, left = wait(left, timeout=0.1, return_when=FIRST_COMPLETED)
            drain(block=not done)
            for f in done:
                for r in f.result():  # authoritative: queue items may still be in flight
                    take(r)
                tid = futures[f]
                pending_blocks[tid] -= 1
                if pending_blocks[tid] == 0:
                    finish(tid)
        for f in plots:
            f.result()
        drain()
    except BaseException:
        try:
            drain()
        except Exception:  # noqa: BLE001 - a worker ended mid-message: those instances are redone on resume
            pass
        _stop_pool(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        results_queue.close()
        results_queue.cancel_join_thread()
    return [done_thm[cls.id] for cls, _, _ in plan]
