"""``attnsvm reproduce NAME``: regenerate one of the paper's experiments (TLTO, arXiv 2308.16898;
THEORY.md §6) as NAME.csv, NAME.png and NAME.md in --out.

================= =============================================================================== name
experiment ================= ===============================================================================
gd-paths n=2, T=3, d=2 hand-placed tokens; normalised GD (2000 steps) on W and on (K, Q)
                   from --trials initialisations; 2-D paths of W(k) z_i / ‖W(k)‖_F against the
                   directions of W^mm z_i (Frobenius) and W^mm_⋆ z_i (nuclear).
local-convergence  n=6, T=8, d=10 cross-attention, --trials seeds (default 100), normalised GD
                   2000 steps, step 0.1, for W and for (K, Q) (m = d); α = final argmax of softmax;
                   curves of mean max-softmax and corr with the Frobenius and nuclear Att-SVM(α).
svm-rank           n ∈ {5,10,15} (T=5) and T ∈ {5,10,15} (n=5), d ∈ {1,2,3,4,5,10,15,20}: ranks of
                   certified Att-SVM(opt) solutions (Frobenius and nuclear) over --trials feasible
                   instances per cell (at most SVM_RANK_MAX_DRAWS × trials draws); infeasible count.
global-vs-d        share of GD runs (normalised, step 0.1, 2000 steps) whose final softmax selects
                   the optimal tokens (the global Att-SVM solution) as d grows, Wilson intervals.
multi-token        Gen-SVM: n=3, T=4, d ∈ {4,6,8,10}, ReLU head h(u) = 1ᵀReLU(Vᵀu) with fixed random V,
                   normalised GD 2001 iterates; 1 − corr(W(k), ·) for W^svmeq, W^dir and the
                   one-token Att-SVM, on unambiguous runs (ambiguous ones counted, not dropped silently).
mirror-descent     3×3 table of mean corr(W_p, W^mm_q(α)), p, q ∈ {1.75, 2, 3}: normalised ℓp mirror
                   descent on n=4, T=5, d=6 unit-sphere data (arXiv 2410.14581) against the certified
                   ℓq-AttSVM of the selected tokens α, and its heat map (mirror_descent.py).
ntp-cyclic         next-token prediction (Li et al., AISTATS 2024, arXiv 2403.08081), the paper's cyclic
                   setting n=3, T=3, K=5, d=8: --trials cyclic draws, plain GD from 0 at η = 1/L, 20000
                   steps; against τ: corr(W, W^svm), ‖Π_Sfin W − W^fin‖, corr(W, W^fin + R W^svm).
=================  ===============================================================================

Every trial's random numbers come from (seed, name, cell, trial) via SeedSequence
(:func:`checks.experiments.sweep.trial_rng`); work is split into fixed-size chunks and run by
:func:`checks.experiments.sweep.run_sweep` (process pool, or Dask with --dask), so results do not depend on
the backend or the worker count.

Solver trouble is an outcome, never a crash: an instance whose SVM no rung of numerics.svm's solver ladder
can certify (:class:`numerics.errors.SolverError`) is recorded as an *error* with the solver's status,
counted in the CSV (``solver_errors``, ``solver_status``), the Markdown table and the figure, and the run
finishes. Every finished task is kept on disk as it completes (``OUT/.NAME.parts/``, one pickle per task,
written atomically), so an interrupted run loses nothing: the same command resumes, re-running only the
tasks that had not finished, and the directory is removed once NAME.csv/png/md are written. (With --dask
ADDRESS the workers may not share the disk, so tasks are not kept; --dask local:N keeps them.)
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from numerics.errors import InvalidInputError
from numerics.fileio import write_bytes, write_text

from .common import kept_sweep
from .gd_paths import report_gd_paths, run_gd_paths
from .global_vs_d import report_global_vs_d, run_global_vs_d
from .local_convergence import report_local_convergence, run_local_convergence
from .mirror_descent import report_mirror_descent, run_mirror_descent
from .multi_token import report_multi_token, run_multi_token
from .ntp_cyclic import report_ntp_cyclic, run_ntp_cyclic
from .svm_rank import report_svm_rank, run_svm_rank

# One module per experiment (gd_paths.py, ..., common.py): their constants and chunk functions are imported
# from there.
__all__ = ["DEFAULT_TRIALS", "EXPERIMENTS", "cmd_reproduce", "reproduce"]

DEFAULT_TRIALS = {
    "gd-paths": 4,
    "local-convergence": 100,
    "svm-rank": 10,
    "global-vs-d": 50,
    "multi-token": 40,
    "mirror-descent": 20,
    "ntp-cyclic": 4,
}


EXPERIMENTS = {
    "gd-paths": (run_gd_paths, report_gd_paths),
    "local-convergence": (run_local_convergence, report_local_convergence),
    "svm-rank": (run_svm_rank, report_svm_rank),
    "global-vs-d": (run_global_vs_d, report_global_vs_d),
    "multi-token": (run_multi_token, report_multi_token),
    "mirror-descent": (run_mirror_descent, report_mirror_descent),
    "ntp-cyclic": (run_ntp_cyclic, report_ntp_cyclic),
}


def reproduce(name: str, *, trials: int | None = None, seed: int = 0, out: str | Path = "reports/reproduce",
              workers=None, dask=None, progress: bool = True) -> dict[str, Path]:
    """Run experiment ``name`` and write NAME.csv, NAME.png, NAME.md into ``out``; returns their paths."""
    if name not in EXPERIMENTS:
        raise InvalidInputError(f"unknown experiment {name!r}; choose one of: {', '.join(EXPERIMENTS)}")
    trials = DEFAULT_TRIALS[name] if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidInputError(f"--trials must be an integer >= 1, got {trials!r}")
    run, rep = EXPERIMENTS[name]
    out = Path(out)
    keep = out / f".{name}.parts"  # finished tasks, kept until the outputs are written (see the module doc)
    t0 = time.perf_counter()
    res = run(seed, trials, workers=workers, dask=dask, progress=progress, keep=keep)
    resumed = kept_sweep.resumed
    csv_text, png, md = rep(res, trials, seed)
    md += (
        f"\n_{time.perf_counter() - t0:.1f} s; `attnsvm reproduce {name} --trials {trials} --seed {seed}`_\n"
    )
    if resumed:
        md += f"\n_{resumed} finished task(s) reloaded from an interrupted run ({keep})._\n"
    paths = {ext: out / f"{name}.{ext}" for ext in ("csv", "png", "md")}
    write_text(paths["csv"], csv_text)
    write_bytes(paths["png"], png)
    write_text(paths["md"], md)
    shutil.rmtree(keep, ignore_errors=True)
    return paths


def cmd_reproduce(args) -> int:
    t0 = time.perf_counter()
    paths = reproduce(args.name, trials=args.trials, seed=args.seed, out=args.out, workers=args.workers,
                      dask=args.dask, progress=not args.no_progress)
    print(f"reproduce {args.name}: {time.perf_counter() - t0:.1f} s; wrote "
          + ", ".join(str(p) for p in paths.values()))
    return 0
