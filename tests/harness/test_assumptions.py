"""attnsvm assumptions and the shared sweep runner (checks/sweep.py): grid parsing, CSV contract,
figures, determinism across backends (inline, process pool, Dask LocalCluster), clear errors."""

from __future__ import annotations

import csv
import sys
from types import SimpleNamespace

import pytest

from checks.cli import main
from checks.experiments import assumptions as A
from checks.experiments import sweep
from numerics.errors import InvalidInputError

GRID = "n=2,T=3,d=2:4"


def _square(x):
    return x * x


def test_parse_grid():
    assert A.parse_grid("n=5,T=5,d=2:4:6:8") == {"n": [5], "T": [5], "d": [2, 4, 6, 8]}
    assert A.parse_grid(None) == A.parse_grid(A.DEFAULT_GRID)


@pytest.mark.parametrize("bad", ["n=5,T=5", "n=5,T=5,d=2;4", "n=5,T=5,d=x", "n=5,T=1,d=2", "n=5,n=4,T=5,d=2",
                                 "q=1,n=5,T=5,d=2", "n=5 T=5 d=2", "n=5,T=5,d=0", ""])
def test_bad_grid_is_invalid_input(bad):
    with pytest.raises(InvalidInputError, match="--grid"):
        A.parse_grid(bad)


def test_cli_bad_grid_exit_2(capsys):
    assert main(["assumptions", "--grid", "n=5,T=5,e=2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "bad --grid" in err and len(err.strip().splitlines()) == 1


def test_wilson_and_seeds():
    lo, hi = sweep.wilson_interval(0, 10)
    assert lo == 0.0 and 0.2 < hi < 0.35
    lo, hi = sweep.wilson_interval(10, 10)
    assert hi == 1.0 and 0.65 < lo < 0.75
    a = sweep.trial_rng(0, "x", (2, 3, 4), 5).random()
    assert a == sweep.trial_rng(0, "x", (2, 3, 4), 5).random()
    assert a != sweep.trial_rng(0, "x", (2, 3, 4), 6).random()


def test_run_sweep_order_inline_and_pool():
    tasks = list(range(7))
    assert sweep.run_sweep(_square, tasks, workers=1, progress=False) == [t * t for t in tasks]
    assert sweep.run_sweep(_square, tasks, workers=2, progress=False) == [t * t for t in tasks]


def test_assumptions_outputs(tmp_path):
    out = tmp_path / "a"
    rc = main(
        [
            "assumptions",
            "--grid",
            GRID,
            "--trials",
            "3",
            "--seed",
            "1",
            "--out",
            str(out),
            "--workers",
            "1",
            "--no-progress",
        ]
    )
    assert rc == 0
    with open(out / "assumptions.csv") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0][:9]) == ("n", "T", "d", "hypothesis", "trials", "held", "rate", "ci_low", "ci_high")
    assert len(rows) == 1 + 2 * len(A.HYPOTHESES)
    hyps = {r[3] for r in rows[1:]}
    assert hyps == set(A.HYPOTHESES)
    for r in rows[1:]:
        trials, held = int(r[4]), int(r[5])
        assert trials == 3 and 0 <= held <= trials
        assert float(r[7]) <= float(r[6]) <= float(r[8])
    assert (out / "assumptions.png").stat().st_size > 10_000
    md = (out / "assumptions.md").read_text()
    assert "| n | T | d |" in md and "feasible_all_alpha" in md


def test_same_results_inline_pool(tmp_path):
    grid = A.parse_grid("n=2,T=3,d=3")
    r1 = A.run_assumptions(grid, 2, 7, workers=1, progress=False)
    r2 = A.run_assumptions(grid, 2, 7, workers=2, progress=False)
    assert A.to_csv(r1) == A.to_csv(r2)


@pytest.mark.slow  # Dask (an optional extra): tox -e slow
def test_same_results_dask_local_cluster():
    pytest.importorskip("distributed")
    from dask.distributed import Client, LocalCluster

    grid = A.parse_grid("n=2,T=3,d=3")
    r1 = A.run_assumptions(grid, 2, 7, workers=1, progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as client:
        r2 = A.run_assumptions(grid, 2, 7, dask=client, progress=False)
        r3 = A.run_assumptions(grid, 2, 7, dask=cl.scheduler_address, progress=False)
    assert A.to_csv(r1) == A.to_csv(r2) == A.to_csv(r3)


def test_missing_dask_is_one_line_error(monkeypatch, capsys, tmp_path):
    for mod in ("dask", "dask.distributed", "distributed"):
        monkeypatch.setitem(sys.modules, mod, None)  # import of these now raises ImportError
    with pytest.raises(InvalidInputError, match="pip install"):
        sweep.run_sweep(_square, [1], dask="tcp://127.0.0.1:1", progress=False)
    rc = main(["assumptions", "--grid", "n=2,T=3,d=2", "--trials", "1", "--dask", "tcp://127.0.0.1:1",
               "--out", str(tmp_path), "--no-progress"])
    assert rc == 2
    assert "dask" in capsys.readouterr().err.lower()


def test_bad_trials():
    with pytest.raises(InvalidInputError):
        A.run_assumptions(A.parse_grid("n=2,T=3,d=2"), 0, 0, workers=1, progress=False)
    with pytest.raises(InvalidInputError):
        sweep.resolve_workers(0)


def test_cmd_accepts_namespace(tmp_path):
    args = SimpleNamespace(grid="n=2,T=2,d=2", trials=1, seed=0, out=str(tmp_path), dask=None, workers=1,
                           no_progress=True)
    assert A.cmd_assumptions(args) == 0
    assert (tmp_path / "assumptions.csv").exists()


def test_solver_error_is_counted_and_the_run_finishes(tmp_path, monkeypatch):
    """A trial whose Att-SVM(opt) cannot be certified leaves the SVM hypotheses undecided on that trial:
    counted with the solver's status, outside the rates, and the command finishes with exit 0."""
    import numerics.svm as S
    from numerics.errors import SolverError

    real = S.solve_att_svm
    calls = {"n": 0}

    def flaky(data, alpha=None, **kw):
        calls["n"] += 1
        if calls["n"] == 1:  # the first trial's Att-SVM(opt)
            raise SolverError("injected", status="max_iterations", solver="test")
        return real(data, alpha, **kw)

    monkeypatch.setattr(S, "solve_att_svm", flaky)
    out = tmp_path / "a"
    assert main(["assumptions", "--grid", "n=2,T=3,d=3", "--trials", "3", "--out", str(out), "--workers", "1",
                 "--no-progress"]) == 0
    with open(out / "assumptions.csv") as fh:
        rows = {r["hypothesis"]: r for r in csv.DictReader(fh)}
    for h in A.HYPOTHESES:
        errs = 0 if h in A.NO_SVM else 1
        assert int(rows[h]["solver_errors"]) == errs and int(rows[h]["trials"]) == 3 - errs, h
        assert rows[h]["solver_status"] == ("max_iterations×1" if errs else "")
    md = (out / "assumptions.md").read_text()
    assert "solver errors" in md and "max_iterations×1" in md
    assert not (out / ".assumptions.parts").exists()
