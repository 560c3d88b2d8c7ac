"""Where the independent tasks of a command run: the one executor interface of ``attnsvm check``,
``assumptions``, ``reproduce`` and ``power``.

An :class:`Executor` is one of

- ``inline``: in the calling process, one task after another;
- ``pool``: local worker processes (``--workers N``): :class:`checks.pool.SupervisedPool` for ``check``
  (crashed workers replaced, ``--instance-timeout``), a spawned ``ProcessPoolExecutor`` for the sweeps;
- ``dask``: a Dask distributed cluster (``--dask ADDRESS``, or ``--dask local:N``, which starts a
  ``distributed.LocalCluster`` of N worker processes, one thread each, for the length of the command).

Every task carries its own seed, so where a task ran never changes its result. :func:`map_completed` is the
executor's one loop: it yields ``(task index, result)`` as each task finishes, so the callers stream results
to disk as they arrive and keep what is finished when interrupted. A Dask worker that dies is replaced by
Dask and its task run again elsewhere; a task that kills ``distributed.scheduler.allowed-failures`` + 1
workers raises ``KilledWorker``, which the command line turns into its ``fault:`` line (exit 1; see
:func:`lost_worker`). The instance time limit of ``check`` is the supervised pool's: Dask cannot stop a
running task, so under ``--dask`` there is none.

Dask is an optional extra (``pip install 'attnsvm[dask]'``): ``--dask`` without it is a one-line error
(exit 2)."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from numerics.errors import InvalidInputError

__all__ = ["DASK_CONNECT_TIMEOUT_S", "Executor", "choose", "dask_client", "lost_worker", "map_completed",
           "require_dask", "worker_init"]

#: Seconds to wait for a Dask scheduler before giving up with a one-line error.
DASK_CONNECT_TIMEOUT_S = 15

_LOCAL = "local:"


@dataclass(frozen=True)
class Executor:
    """Where tasks run: ``kind`` is ``inline``, ``pool`` (``workers`` local processes) or ``dask``
    (``address``: a scheduler address, ``local:N``, or a ``distributed.Client`` passed through)."""

    kind: str = "inline"
    workers: int = 1
    address: Any = None

    def describe(self) -> dict[str, Any]:
        """For report.json's ``run.executor`` (and power.json): which executor ran the tasks."""
        if self.kind == "dask":
            where = self.address if isinstance(self.address, str) else "client"
            d: dict[str, Any] = {"kind": "dask", "address": where}
            if isinstance(self.address, str) and self.address.startswith(_LOCAL):
                d["processes"] = self.workers
            return d
        if self.kind == "pool":
            return {"kind": "pool", "processes": self.workers}
        return {"kind": "inline"}


def _local_size(address: str) -> int:
    text = address[len(_LOCAL):]
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidInputError(f"--dask {address}: local:N needs a number of worker processes N >= 1")
    return n


def choose(workers: int | None, dask: Any, *, default: int) -> Executor:
    """The executor of a command's ``--workers`` and ``--dask`` (``default``: the pool size when neither is
    given). ``--dask`` wins over ``--workers``; a pool of 1 (or 0, for ``check``) runs inline."""
    if dask is not None:
        if isinstance(dask, str):
            if not dask.strip():
                raise InvalidInputError("--dask needs a scheduler address (tcp://HOST:PORT) or local:N")
            n = _local_size(dask) if dask.startswith(_LOCAL) else 0
            return Executor("dask", n, dask)
        return Executor("dask", 0, dask)
    n = default if workers is None else workers
    return Executor("pool", n) if n > 1 else Executor("inline")


def require_dask() -> Any:
    """The ``distributed`` module; not installed: InvalidInputError naming the extra to install."""
    try:
        import distributed
    except ImportError:
        raise InvalidInputError(
            "--dask needs the Dask distributed package, which is not installed; "
            "install it with: pip install 'attnsvm[dask]' (or pip install 'dask[distributed]')"
        ) from None
    return distributed


@contextlib.contextmanager
def dask_client(ex: Executor) -> Iterator[Any]:
    """A ``distributed.Client`` for a Dask executor: the Client passed through, one connected to the
    scheduler address, or one on a ``LocalCluster`` of N processes (``local:N``) started here and closed on
    exit. Not installed or not reachable: InvalidInputError (one line, exit 2)."""
    distributed = require_dask()
    if isinstance(ex.address, distributed.Client):
        yield ex.address
        return
    if ex.address.startswith(_LOCAL):
        # one thread per worker: the tasks are CPU-bound numerics, each process supplies the parallelism
        with warnings.catch_warnings():  # another cluster's port 8787: the health page moves, say nothing
            warnings.filterwarnings("ignore", message="Port .* is already in use", category=UserWarning)
            cluster = distributed.LocalCluster(n_workers=ex.workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None, silence_logs=logging.ERROR)
        with cluster, distributed.Client(cluster) as client:
            client.run(_ignore_interrupt)  # Ctrl-C reaches the whole process group: the caller handles it
            yield client
        return
    try:
        client = distributed.Client(ex.address, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InvalidInputError(f"--dask {ex.address}: could not connect to a Dask scheduler ({exc})"
                                ) from None
    with client:
        yield client


def _ignore_interrupt() -> None:
    """In a worker process of ``local:N`` (run in its main thread): leave SIGINT to the calling process,
    which cancels the tasks and closes the cluster, as the supervised pool's workers do."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def lost_worker(exc: BaseException) -> bool:
    """Is ``exc`` Dask's ``KilledWorker`` (a task whose workers kept dying)? Checked only when distributed
    was imported, so a command that never used it does not import it."""
    import sys

    sched = sys.modules.get("distributed.scheduler")
    return sched is not None and isinstance(exc, getattr(sched, "KilledWorker", ()))


def worker_init() -> None:
    """One BLAS / torch thread per worker process: the executor supplies the parallelism."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def _call(fn: Callable, task: Any, star: bool) -> Any:
    return fn(*task) if star else fn(task)


def map_completed(ex: Executor, fn: Callable, tasks: Sequence[Any], *, star: bool = False,
                  client: Any = None) -> Iterator[tuple[int, Any]]:
    """``(k, fn(tasks[k]))`` (``fn(*tasks[k])`` with ``star``) for every task, as each finishes.

    ``fn`` must be a module-level function (it is pickled by reference) and deterministic given its task.
    ``inline`` runs in task order here; ``pool`` on a spawned ``ProcessPoolExecutor`` of ``ex.workers``
    processes; ``dask`` on ``client`` if given, else on :func:`dask_client`. An exception in a task
    propagates, and so does KeyboardInterrupt: the tasks not yet finished are cancelled."""
    tasks = list(tasks)
    if ex.kind == "dask":
        if client is None:
            with dask_client(ex) as c:
                yield from _dask_completed(c, fn, tasks, star)
        else:
            yield from _dask_completed(client, fn, tasks, star)
        return
    if ex.kind == "inline" or ex.workers <= 1 or len(tasks) <= 1:
        for k, t in enumerate(tasks):
            yield k, _call(fn, t, star)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: torch's thread pools do not survive a fork reliably
    with ProcessPoolExecutor(max_workers=min(ex.workers, len(tasks)), mp_context=mp.get_context("spawn"),
                             initializer=worker_init) as pool:
        futs = {pool.submit(_call, fn, t, star): k for k, t in enumerate(tasks)}
        try:
            for f in as_completed(futs):
                yield futs[f], f.result()
        except BaseException:
            for f in futs:
                f.cancel()
            raise


def _dask_completed(client: Any, fn: Callable, tasks: list[Any], star: bool) -> Iterator[tuple[int, Any]]:
    from distributed import as_completed

    futs = [client.submit(_call, fn, t, star, pure=False) for t in tasks]
    index = {f.key: k for k, f in enumerate(futs)}
    try:
        for f in as_completed(futs):
            yield index[f.key], f.result()
    except BaseException:
        client.cancel(futs)
        raise
