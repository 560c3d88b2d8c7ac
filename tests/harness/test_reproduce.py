"""attnsvm reproduce: every experiment runs with tiny trial counts and writes a non-empty CSV (with its
column contract), figure and Markdown table."""

from __future__ import annotations

import csv

import pytest

from checks.cli import main
from checks.experiments import (  # the experiments whose constants are patched
    global_vs_d,
    local_convergence,
    multi_token,
    ntp_cyclic,
    svm_rank,
)
from checks.experiments import reproduce as R
from numerics.errors import InvalidInputError
from numerics.gd import AUTHORS


def _header(path):
    with open(path) as fh:
        return next(csv.reader(fh))


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def _outputs_ok(out, name):
    for ext, min_size in (("csv", 50), ("png", 10_000), ("md", 50)):
        p = out / f"{name}.{ext}"
        assert p.exists() and p.stat().st_size > min_size, p


def test_unknown_name(capsys, tmp_path):
    with pytest.raises(InvalidInputError, match="unknown experiment"):
        R.reproduce("nope", out=tmp_path, progress=False)
    assert main(["reproduce", "nope", "--out", str(tmp_path), "--no-progress"]) == 2


def test_gd_paths(tmp_path):
    assert main(["reproduce", "gd-paths", "--trials", "1", "--out", str(tmp_path), "--workers", "1",
                 "--no-progress"]) == 0
    _outputs_ok(tmp_path, "gd-paths")
    rows = _rows(tmp_path / "gd-paths.csv")
    final = [r for r in rows if int(r["iteration"]) == AUTHORS.steps and r["param"] == "W"]
    assert float(final[0]["corr_fro"]) > 0.99  # W-GD follows the Frobenius SVM on the hand-placed data


def test_local_convergence(tmp_path):
    R.reproduce("local-convergence", trials=2, out=tmp_path, workers=1, progress=False)
    _outputs_ok(tmp_path, "local-convergence")
    head = _header(tmp_path / "local-convergence.csv")
    assert head[:5] == ["iteration", "param", "mean_max_softmax", "corr_fro_mean", "corr_nuc_mean"] or \
        {"iteration", "param", "mean_max_softmax", "corr_fro_mean", "corr_nuc_mean"} <= set(head)
    rows = _rows(tmp_path / "local-convergence.csv")
    assert {r["param"] for r in rows} == {"W", "KQ"}
    assert "protocol" in head and {r["protocol"] for r in rows} == {"authors", "plain"}
    for protocol in ("authors", "plain"):
        w_final = [r for r in rows if r["param"] == "W" and r["protocol"] == protocol][-1]
        assert int(w_final["iteration"]) == AUTHORS.steps and float(w_final["corr_fro_mean"]) > 0.95
    kq_final = [r for r in rows if r["param"] == "KQ" and r["protocol"] == "authors"][-1]
    assert float(kq_final["corr_nuc_mean"]) > 0.95  # the authors' eps weight decay keeps (K, Q) GD moving
    md = (tmp_path / "local-convergence.md").read_text()
    assert "authors" in md and "plain" in md and "weight decay" in md


def test_svm_rank(tmp_path, monkeypatch):
    monkeypatch.setattr(svm_rank, "RANK_D", (1, 3, 6))
    R.reproduce("svm-rank", trials=1, out=tmp_path, workers=1, progress=False)
    _outputs_ok(tmp_path, "svm-rank")
    head = _header(tmp_path / "svm-rank.csv")
    assert head[:7] == ["n", "T", "d", "feasible", "infeasible", "fro_rank_mean", "nuc_rank_mean"]
    rows = _rows(tmp_path / "svm-rank.csv")
    assert len(rows) == len(svm_rank.RANK_NT) * 3
    d1 = [r for r in rows if r["d"] == "1"]
    assert all(int(r["infeasible"]) > 0 for r in d1)  # infeasible draws are counted, never skipped silently
    for r in rows:
        if int(r["feasible"]) and int(r["d"]) >= int(r["n"]):
            assert float(r["fro_rank_mean"]) == min(int(r["d"]), int(r["n"]))


def test_global_vs_d(tmp_path, monkeypatch):
    monkeypatch.setattr(global_vs_d, "GLOBAL_D", (2, 8))
    R.reproduce("global-vs-d", trials=3, out=tmp_path, workers=1, progress=False)
    _outputs_ok(tmp_path, "global-vs-d")
    rows = _rows(tmp_path / "global-vs-d.csv")
    assert len(rows) == 2 * len(global_vs_d.GLOBAL_NT)
    for r in rows:
        assert float(r["ci_low"]) <= float(r["share"]) <= float(r["ci_high"])


def test_multi_token(tmp_path, monkeypatch):
    monkeypatch.setattr(multi_token, "MT_D", (4, 6))
    monkeypatch.setattr(multi_token, "MT_GD", AUTHORS.but(steps=400))
    R.reproduce("multi-token", trials=3, out=tmp_path, workers=1, progress=False)
    _outputs_ok(tmp_path, "multi-token")
    rows = _rows(tmp_path / "multi-token.csv")
    assert {r["candidate"] for r in rows} == set(multi_token.CANDIDATES)
    md = (tmp_path / "multi-token.md").read_text()
    assert "ambiguous" in md


# ---- solver trouble is an outcome; finished tasks are kept -------------------------------------------


def _inject_solver_error(monkeypatch, *, norm, nth, status="uncertified"):
    """numerics.svm.solve_att_svm raising SolverError on its nth call with this norm (counted across the
    run)."""
    import numerics.svm as S
    from numerics.errors import SolverError

    real = S.solve_att_svm
    calls = {"n": 0}

    def flaky(data, alpha=None, **kw):
        if kw.get("norm", "fro") == norm:
            calls["n"] += 1
            if calls["n"] == nth:
                raise SolverError("injected: no rung certified", status=status, solver="test")
        return real(data, alpha, **kw)

    monkeypatch.setattr(S, "solve_att_svm", flaky)
    return calls


def test_svm_rank_counts_a_solver_error_and_finishes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(svm_rank, "RANK_NT", ((5, 5),))
    monkeypatch.setattr(svm_rank, "RANK_D", (3, 6))
    _inject_solver_error(monkeypatch, norm="nuc", nth=2, status="max_iterations")
    assert main(["reproduce", "svm-rank", "--trials", "3", "--out", str(tmp_path), "--workers", "1",
                 "--no-progress"]) == 0
    rows = _rows(tmp_path / "svm-rank.csv")
    assert [int(r["solver_errors"]) for r in rows] == [1, 0]
    assert rows[0]["solver_status"] == "max_iterations×1"
    assert all(
        int(r["feasible"]) == 3 for r in rows
    )  # the cell kept drawing: the error is not a feasible instance
    md = (tmp_path / "svm-rank.md").read_text()
    assert "solver errors" in md and "1 (max_iterations×1)" in md
    assert not (tmp_path / ".svm-rank.parts").exists()  # removed once the outputs are written


def test_global_vs_d_counts_a_solver_error_and_finishes(tmp_path, monkeypatch):
    monkeypatch.setattr(global_vs_d, "GLOBAL_NT", ((5, 5),))
    monkeypatch.setattr(global_vs_d, "GLOBAL_D", (8,))
    _inject_solver_error(monkeypatch, norm="fro", nth=1)
    R.reproduce("global-vs-d", trials=3, out=tmp_path, workers=1, progress=False)
    (row,) = _rows(tmp_path / "global-vs-d.csv")
    assert int(row["solver_errors"]) == 1 and int(row["trials"]) == 2  # undecided: outside the share
    assert row["solver_status"] == "uncertified×1"


def test_local_convergence_counts_a_solver_error(monkeypatch):
    _inject_solver_error(monkeypatch, norm="nuc", nth=1)
    out = local_convergence.lc_chunk(0, [0, 1])
    assert out["error_statuses"] == ["uncertified"]
    protocols = local_convergence.LC_PROTOCOLS
    assert sum(out[(pr, pa)]["solver_errors"] for pr in protocols for pa in ("W", "KQ")) == 1


def test_multi_token_counts_a_solver_error(monkeypatch):
    import numerics.svm as S
    from numerics.errors import SolverError

    def broken(*a, **k):
        raise SolverError("injected", status="uncertified")

    monkeypatch.setattr(multi_token, "MT_GD", AUTHORS.but(steps=200))
    monkeypatch.setattr(S, "gen_svm", broken)
    out = multi_token.mt_chunk(0, 4, [0, 1])
    assert out["solver_errors"] == 2 and out["error_statuses"] == ["uncertified"] * 2


def test_interrupted_run_loses_no_finished_task(tmp_path, monkeypatch):
    """An interruption after some cells finished keeps them on disk; the same command then re-runs only the
    rest and writes the same table as an uninterrupted run."""
    monkeypatch.setattr(svm_rank, "RANK_NT", ((5, 5),))
    monkeypatch.setattr(svm_rank, "RANK_D", (3, 4, 6))
    clean = tmp_path / "clean"
    R.reproduce("svm-rank", trials=2, out=clean, workers=1, progress=False)
    import numerics.svm as S

    real = S.solve_att_svm

    def interrupt_later(data, alpha=None, **kw):
        if data.d == 6:  # the cells run in order d = 3, 4, 6 (workers=1): interrupted in the last one
            raise KeyboardInterrupt
        return real(data, alpha, **kw)

    monkeypatch.setattr(S, "solve_att_svm", interrupt_later)
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        R.reproduce("svm-rank", trials=2, out=out, workers=1, progress=False)
    kept = list((out / ".svm-rank.parts").glob("*.pkl"))
    assert len(kept) == 2  # d = 3 and d = 4 finished and were kept
    monkeypatch.setattr(S, "solve_att_svm", real)
    R.reproduce("svm-rank", trials=2, out=out, workers=1, progress=False)
    assert (out / "svm-rank.csv").read_text() == (clean / "svm-rank.csv").read_text()
    assert "2 finished task(s) reloaded" in (out / "svm-rank.md").read_text()
    assert not (out / ".svm-rank.parts").exists()


def test_mirror_descent(tmp_path, monkeypatch):
    """Two runs per p on smaller data: the 3×3 table is complete, every run counted, and each MD-p run is
    closest to the SVM of its own p (the claim; at p = 2 the normalised MD is normalised GD)."""
    from checks.experiments import mirror_descent as md

    monkeypatch.setattr(md, "MD_N", 3)
    monkeypatch.setattr(md, "MD_T", 3)
    monkeypatch.setattr(md, "MD_D", 4)
    R.reproduce("mirror-descent", trials=2, out=tmp_path, workers=1, progress=False)
    _outputs_ok(tmp_path, "mirror-descent")
    rows = _rows(tmp_path / "mirror-descent.csv")
    pairs = [(float(r["p"]), float(r["q"])) for r in rows]
    assert pairs == [(p, q) for p in md.EXPONENTS for q in md.EXPONENTS]
    for r in rows:
        assert int(r["runs"]) + int(r["infeasible"]) + int(r["solver_errors"]) == 2
    diag = [r for r in rows if r["p"] == r["q"]]
    assert all(int(r["best_of_row"]) == int(r["runs"]) for r in diag)


def test_ntp_cyclic(tmp_path, monkeypatch):
    monkeypatch.setattr(ntp_cyclic, "NTP_STEPS", 300)
    paths = R.reproduce("ntp-cyclic", trials=2, out=tmp_path, progress=False)
    _outputs_ok(tmp_path, "ntp-cyclic")
    assert _header(paths["csv"]) == ["trial", "iteration", "W_norm", "corr_svm", "fin_resid", "corr_svmeq"]
    rows = _rows(paths["csv"])
    last = [r for r in rows if int(r["iteration"]) == 300]
    assert len(last) == 2
    # GD from 0 heads towards W^fin + R W^svm: the finite-part residual at the end is below its start
    for k in ("0", "1"):
        mine = [float(r["fin_resid"]) for r in rows if r["trial"] == k]
        assert mine[-1] < mine[0]
