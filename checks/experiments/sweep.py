"""The shared sweep runner: map one function over independent, seeded tasks — in this process, on a
local process pool (default) or on a Dask distributed cluster (``--dask ADDRESS`` or ``--dask local:N``),
through the one executor interface of :mod:`checks.executor`.

Results do not depend on where a task ran. Every task carries everything it needs (its parameters and
the root seed) and derives its random numbers from :func:`trial_rng` — a ``SeedSequence`` of
(root seed, experiment name, cell values, trial index) — so the same seed gives the same numbers
inline, on a pool of any size, or on a cluster. Results come back in task order whatever order
they finish in. Progress is a tqdm bar on stderr.

Examples
--------
>>> run_sweep(pow, [(2, 3), (3, 2)], workers=1, progress=False, star=True)
[8, 9]
"""

from __future__ import annotations

import os
import sys
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from numerics.errors import InvalidInputError

from ..executor import Executor, choose, map_completed

__all__ = [
    "trial_seed", "trial_rng", "wilson_interval", "newcombe_interval", "trend_z", "run_sweep",
    "resolve_workers", "sweep_executor",
]

#: z-quantile of a two-sided 95% interval (Wilson score intervals in assumption/reproduce tables).
Z95 = 1.959963984540054


def trial_seed(seed: int, name: str, cell: Sequence[int], trial: int) -> np.random.SeedSequence:
    """SeedSequence of one trial: (root seed, crc32(experiment name), *cell values, trial index).

    Keyed on the cell's *values* (e.g. (n, T, d)), not its position in a grid, so a cell gives the
    same trials whatever else the grid holds.
    """
    return np.random.SeedSequence([int(seed), zlib.crc32(name.encode()), *(int(c) for c in cell), int(trial)])


def trial_rng(seed: int, name: str, cell: Sequence[int], trial: int) -> np.random.Generator:
    """The numpy Generator of one trial (see :func:`trial_seed`)."""
    return np.random.default_rng(trial_seed(seed, name, cell, trial))


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (NaN, NaN when n = 0).

    >>> tuple(round(x, 4) for x in wilson_interval(5, 10))
    (0.2366, 0.7634)
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, float(centre - half))  # exact ends: rounding leaves 1 - 1e-16
    hi = 1.0 if k == n else min(1.0, float(centre + half))
    return lo, hi


def newcombe_interval(k1: int, m1: int, k2: int, m2: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's hybrid score interval (method 10) for p2 − p1, built from the two Wilson intervals.

    >>> tuple(round(x, 4) for x in newcombe_interval(10, 20, 15, 20))
    (-0.0468, 0.4936)
    """
    p1, p2 = k1 / m1, k2 / m2
    lo1, hi1 = wilson_interval(k1, m1, z)
    lo2, hi2 = wilson_interval(k2, m2, z)
    d = p2 - p1
    return d - float(np.hypot(p2 - lo2, hi1 - p1)), d + float(np.hypot(hi2 - p2, p1 - lo1))


def trend_z(k: Sequence[int], m: Sequence[int], scores: Sequence[float]) -> float:
    """Cochran–Armitage test for a linear trend of binomial proportions k_j/m_j in the scores s_j: the
    standardised statistic z = Σ k_j (s_j − s̄) / √(p̄(1 − p̄) Σ m_j (s_j − s̄)²), s̄ and p̄ weighted by m_j.
    Approximately N(0, 1) without a trend; z > 0 means the proportion grows with the score. 0 when every
    proportion is 0 or every one is 1 (no variation to test).

    >>> round(trend_z([2, 5, 8], [10, 10, 10], [0, 1, 2]), 4)
    2.6833
    """
    k_, m_, s_ = (np.asarray(a, float) for a in (k, m, scores))
    M = m_.sum()
    pbar, sbar = k_.sum() / M, float(m_ @ s_) / M
    var = pbar * (1 - pbar) * float(m_ @ (s_ - sbar) ** 2)
    return float(k_ @ (s_ - sbar)) / float(np.sqrt(var)) if var > 0 else 0.0


def resolve_workers(workers: int | None) -> int:
    """Pool size: ``workers`` if given (>= 1), else the number of CPUs."""
    if workers is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidInputError(f"--workers must be an integer >= 1, got {workers!r}")
    return workers


def _bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(
        total=total, desc=desc or None, unit="task", file=sys.stderr, dynamic_ncols=True, mininterval=0.5
    )


def sweep_executor(workers: int | None, dask: Any) -> Executor:
    """The executor of a sweep (:func:`checks.executor.choose`): Dask if ``dask`` is given, else a process
    pool of ``workers`` processes (default: the CPU count; 1 runs inline)."""
    return choose(None if dask is not None else resolve_workers(workers), dask, default=1)


def run_sweep(
    fn: Callable,
    tasks: Sequence[Any],
    *,
    workers: int | None = None,
    dask: Any = None,
    progress: bool = True,
    desc: str = "",
    star: bool = False,
) -> list[Any]:
    """``[fn(t) for t in tasks]`` (``fn(*t)`` with ``star=True``), in task order.

    fn must be a module-level function (it is pickled by reference) and deterministic given its task.
    Where the tasks run is :func:`sweep_executor` (:mod:`checks.executor`): ``dask`` (a scheduler address,
    ``local:N`` or a ``dask.distributed.Client``) if given; else a process pool of ``workers`` processes
    (default: the CPU count); ``workers=1`` or a single task runs inline. An exception in a task propagates
    (the pool is shut down, pending tasks cancelled).
    """
    tasks = list(tasks)
    out: list[Any] = [None] * len(tasks)
    ex = sweep_executor(workers, dask)
    bar = _bar(len(tasks), desc, progress)
    try:
        for k, res in map_completed(ex, fn, tasks, star=star):
            out[k] = res
            if bar is not None:
                bar.update(1)
        return out
    finally:
        if bar is not None:
            bar.close()
