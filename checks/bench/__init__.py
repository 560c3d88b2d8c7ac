"""``attnsvm bench``: the performance suite — our batched / certified numerics against the naive
per-instance research-code baseline, measured in the same process, reported as ratios.

Groups (``--only GROUP``, repeatable; default: all but a *fresh* catalogue run):

``gd``         100 instances x 2000 normalised GD steps at n=6, T=8, d=10, for W and for (K, Q):
               ours = one batched :func:`numerics.gd.run_gd` call, on the compiled CPU kernels
               (what ``backend="auto"`` takes at this size) and on the torch path; naive = one
               instance at a time through torch autograd (a Python loop, ``torch.autograd.grad``,
               normalised step), measured on a subset and extrapolated per instance. All from the
               same init; the final directions must agree (corr > 0.98). Also the kernels' compile
               time (fresh cache) and a later process's first call, ours' achieved FLOP/s against a
               same-shape batched matmul and a large GEMM measured in the same run, and a
               torch.profiler breakdown of where the torch path's time goes.
``svm``        Frobenius Att-SVM at n=10, T=10, d=20: :func:`numerics.svm.solve_att_svm` vs
               :func:`checks.bench_naive.naive_att_svm` (one cvxpy constraint per token pair, default
               solver), same optimal value to 1e-6 relative; nuclear norm: ranks (ours: relative
               singular-value gap on a certified solution; naive: #sigma > 1e-7) and time ratio.
``ntp``        100 next-token-prediction instances (numerics.ntp.random_ntp, cyclic, n=8, T=4, K=5, d=8) x
               2000 plain GD steps at η = 1/L: ours = one batched :func:`numerics.ntp_gd.run_ntp_gd`
               call (run_gd's NTP model), naive = one instance at a time through torch autograd,
               measured on a subset and extrapolated; the final W must agree to 1e-9 relative (issue
               25's target: 100x). The same for the linear NTP model (100 problems m=4, d=8, V=6:
               :func:`numerics.ntp_linear.run_linear_gd` against a per-problem autograd loop).
``md``         100 instances of the md checks' B.2 family (checks.strategies.b2_data, n=4, T=6, d=8, start
               0.01 N(0, 1)) x 2000 ℓp mirror-descent steps: plain at p = 3 and 1.75 (η = 0.4, md-global's)
               and normalised at p = 3 (η = 0.1, md-global-normalized's): ours = one batched
               :func:`numerics.gd.run_gd` call with :class:`numerics.gd.Mirror` (the fused mirror program,
               numerics.gd_torch.run_mirror), naive = one instance at a time through torch autograd with the
               mirror step by hand (core.naive_gd), on a subset and extrapolated; plain: the final W must
               agree to 1e-9 relative, normalised: the same final direction (corr > 0.98; core.MD_W_RTOL says
               why). Target 100x (issue 25).
``gd-curve``   time per instance-step of batched GD from 1 to 10^4 instances (log grid), per backend.
``svm-curve``  SVM solve time vs (n, T, d), both norms, ours and naive.
``profiles``   (opt-in, only with ``--only profiles``, ~6 min) the full and paper profiles of the whole
               catalogue in fresh processes: wall and CPU time against issue 17's 90 s and 4 min goals.
``catalogue``  quick-profile time of the whole theorem catalogue and where it goes, read from
               reports/latest/results.jsonl (per-theorem sum of ``seconds``); with ``--only catalogue``
               and no such file, ``attnsvm check --profile quick`` is run in a subprocess first.

Every comparison runs with ``torch.set_num_threads(1)`` (and BLAS pools limited to one thread
through threadpoolctl) on both sides. Timings are the minimum over repeats (wall clock), so a
loaded machine inflates them as little as possible. Results go to ``--out`` (default
reports/bench): bench.json (every number), bench.csv (flat), bench.md (the table), bench.png
(the figure), all written atomically. Progress goes to stderr, the table to stdout.

Solver trouble is an outcome: an SVM instance that numerics.svm cannot certify (SolverError, after its
solver ladder) is left out of that row's timings and counted — ``solver_errors`` / ``solver_status`` in
bench.json and bench.csv, "solver errors" in the table's check column (the row's target is then not met),
an ``x`` in the figure — and the bench finishes.
"""


from __future__ import annotations

from .core import (  # noqa: F401
    _CLOCK,
    FULL,
    FULL_PROFILE_GOAL_S,
    GD_CORR_MIN,
    GD_FRESH_TARGET,
    GD_LR,
    GD_TARGET,
    GROUPS,
    NAIVE_RANK_ABS,
    OPT_IN_GROUPS,
    PAPER_PROFILE_GOAL_S,
    QUICK,
    QUICK_PROFILE_GOAL_S,
    STARTUP_GOAL_S,
    SVM_FRO_OBJ_RTOL,
    SVM_FRO_TARGET,
    SVM_NUC_LARGE,
    SVM_NUC_MAX_SLOWDOWN,
    SVM_NUC_OBJ_RTOL,
    SVM_NUC_TARGET,
    Bench,
    BenchSizes,
    Row,
    _corr,
    _fmt_flops,
    _fmt_s,
    _log,
    _one_thread,
    _sync,
    _timeit,
    gd_step_flops,
    machine,
    naive_gd,
)
from .gd import (  # noqa: F401
    _gd_data,
    _gd_init,
    _kernel_backend,
    _kernel_setup_times,
    _profile_ops,
    _span,
    bench_gd,
    bench_gd_curve,
)
from .output import cmd_bench, render_figure, render_table, run_bench, write_outputs  # noqa: F401
from .svm import _solver_errors, _svm_data, bench_svm, bench_svm_curve  # noqa: F401
from .system import (  # noqa: F401
    CATALOGUE_IDS,
    _catalogue_from,
    _child_cpu,
    _child_env,
    _wall_min,
    bench_catalogue,
    bench_profiles,
    bench_startup,
)
