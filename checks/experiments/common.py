"""Shared pieces of the reproductions (:mod:`checks.experiments.reproduce`): the output writers (CSV, PNG),
the certified nuclear solve, solver-status bookkeeping, and sweeps whose finished tasks are kept on disk."""

from __future__ import annotations

import csv
import hashlib
import io
import pickle
from collections import Counter
from pathlib import Path

from numerics.errors import SolverError
from numerics.fileio import write_bytes

from .sweep import run_sweep

#: Iterations between recorded iterates for the curves.
RECORD_EVERY = 50
#: Runs per task (one batched run_gd call each). Fixed, so results do not depend on the split.
CHUNK = 20
#: svm-rank: stop drawing in a cell after this many draws per requested feasible instance (at d = 1
#: feasibility is essentially impossible; the infeasible count says how many draws were needed).
SVM_RANK_MAX_DRAWS = 20



# -- helpers ------------------------------------------------------------------------------------
def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([(f"{r[c]:.6g}" if isinstance(r[c], float) else r[c]) for c in columns])
    return buf.getvalue()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    return buf.getvalue()


def solve_nuc(data, alpha):
    """Certified nuclear Att-SVM(α) by numerics.svm's solver ladder; returns (solution, retried) where
    retried says the certified answer is not the first rung's polished one (a later rung, or the first
    rung's unpolished answer; see ``solution.attempts``).
    Raises :class:`SolverError` (with the solver's status) when no rung certifies."""
    from numerics.svm import solve_att_svm

    sol = solve_att_svm(data, alpha, norm="nuc")
    return sol, sol.attempts[-1] != "clarabel+reduced+polish: certified"


def error_status(exc: SolverError) -> str:
    """The solver's status of a failed instance, as recorded in the outputs."""
    return str(exc.status or "error")


def status_summary(statuses) -> str:
    """'uncertified×2; max_iterations×1' (most frequent first), '' when there were none."""
    return "; ".join(f"{k}×{v}" for k, v in Counter(statuses).most_common())


# -- sweeps whose finished tasks are kept --------------------------------------------------------------
def _task_path(parts: Path, fn, task) -> Path:
    key = hashlib.sha1(repr((fn.__module__, fn.__qualname__, tuple(task))).encode()).hexdigest()[:20]
    return parts / f"{key}.pkl"


def _kept_call(fn, path: str, task: tuple):
    """fn(*task), loaded from ``path`` if a finished copy is there, else computed and written atomically."""
    p = Path(path)
    if p.exists():
        try:
            return pickle.loads(p.read_bytes())
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            pass  # a damaged part is recomputed
    res = fn(*task)
    write_bytes(p, pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
    return res


def kept_sweep(fn, tasks, parts: Path | None, **kw) -> list:
    """:func:`checks.experiments.sweep.run_sweep` (``star=True``) keeping every finished task in ``parts``
    (None, or a remote Dask cluster: plain run_sweep; ``--dask local:N`` shares this disk and keeps them).
    Returns the results in task order; ``kept_sweep.resumed`` holds how many were reloaded."""
    tasks = [tuple(t) for t in tasks]
    kept_sweep.resumed = 0
    dask = kw.get("dask")
    remote = dask is not None and not (isinstance(dask, str) and dask.startswith("local:"))
    if parts is None or remote:  # a remote cluster's workers may not share this disk
        return run_sweep(fn, tasks, star=True, **kw)
    parts = Path(parts)
    parts.mkdir(parents=True, exist_ok=True)
    paths = [_task_path(parts, fn, t) for t in tasks]
    kept_sweep.resumed = sum(p.exists() for p in paths)
    return run_sweep(
        _kept_call, [(fn, str(p), t) for p, t in zip(paths, tasks, strict=True)], star=True, **kw
    )


kept_sweep.resumed = 0


#: Scale of the random initialisation (entries INIT_SCALE * N(0, 1), drawn by numerics.gd.run_gd from each
#: run's own seed), as run_gd's default.
INIT_SCALE = 0.01
