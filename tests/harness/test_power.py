"""The sabotage seam (checks/power/sabotage.py) and the power matrix (checks/power.py, `attnsvm power`).

Seam: a sabotage reaches every reference to the broken function (theorem modules import names with
``from numerics.gd import run_gd``), is undone on exit wherever a reference went, and never leaks
into a normal run. Matrix: a small profile -- two cheap theorems and a fixture plugin with one honest
and one hollow GD check -- whose detections and survivor are known in advance.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from checks import Profile, Theorem, catalogue, held, register
from checks.cli import main
from checks.power import sabotage as sab
from checks.power import sabotage_gd
from checks.theorem import REGISTRY
from numerics import gd, prompt, regpath, sequence, svm, tokens
from numerics.data import AttentionData, random_unit_sphere
from numerics.errors import InvalidInputError, SolverError

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "data" / "power_plugin.py"


@pytest.fixture
def power_plugin():
    """Load the fixture plugin; afterwards take its theorems out of the registry again (no other test
    that selects the whole catalogue may pick up a deliberately hollow check)."""
    ids = catalogue.load_plugin(PLUGIN)
    yield ids
    for i in ids:
        mod = REGISTRY.pop(i).__module__
        sys.modules.pop(mod, None)


def _data(seed=0, R=None):
    return random_unit_sphere(3, 4, 5, rng=np.random.default_rng(seed), R=R)


# -- the seam -----------------------------------------------------------------------------------------

def test_normal_run_has_no_sabotage():
    # the suite itself must never run sabotaged: nothing installed, nothing leaked
    assert sab.active() == ()
    assert sab.leaks() == []


def test_sabotage_reaches_every_reference_and_is_restored():
    catalogue.load_builtin()
    gd_local = importlib.import_module("checks.theorems.gd_local")
    orig = [tokens.optimal_tokens, gd.run_gd]  # held in a list: module globals are rebound too
    with sab.sabotage("argmin-optimal-token"):
        assert tokens.optimal_tokens is not orig[0]
        assert gd_local.optimal_tokens is tokens.optimal_tokens  # the theorem's own `from ... import`
        assert sab.active() == ("argmin-optimal-token",)
        assert any("gd_local.optimal_tokens" in x for x in sab.leaks())
        assert gd.step_hooks() == ()  # only what the sabotage names
    assert tokens.optimal_tokens is orig[0] and gd_local.optimal_tokens is orig[0]
    assert sab.active() == () and sab.leaks() == []
    # GD sabotages enter through run_gd's step hook, registered while in force; run_gd itself is untouched
    with sab.sabotage("noop-gd"):
        assert gd.run_gd is orig[1] and len(gd.step_hooks()) == 1
        assert any("step hook (noop-gd)" in x for x in sab.leaks())
    assert gd.step_hooks() == () and sab.leaks() == []


def test_sabotage_restored_after_exception():
    orig = [tokens.optimal_tokens]
    with pytest.raises(ZeroDivisionError), sab.sabotage("argmin-optimal-token"):
        assert tokens.optimal_tokens is not orig[0]
        1 / 0  # noqa: B018
    assert tokens.optimal_tokens is orig[0] and sab.leaks() == []


def test_module_imported_during_sabotage_is_patched_then_restored(tmp_path, monkeypatch):
    (tmp_path / "late_import_mod.py").write_text("from numerics.tokens import optimal_tokens as ot\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    orig = [tokens.optimal_tokens]
    try:
        with sab.sabotage("argmin-optimal-token"):
            late = importlib.import_module("late_import_mod")
            assert late.ot is tokens.optimal_tokens is not orig[0]
        assert late.ot is orig[0]
    finally:
        sys.modules.pop("late_import_mod", None)


def test_one_sabotage_at_a_time_and_unknown_names():
    with sab.sabotage("scaled-svm"), pytest.raises(RuntimeError, match="one at a time"):
        with sab.sabotage("noop-gd"):
            pass
    assert sab.active() == ()
    with pytest.raises(InvalidInputError, match="unknown sabotage 'nope'"):
        with sab.sabotage("nope"):
            pass
    assert sab.active() == ()


def test_check_sabotage_option_breaks_every_worker_and_is_recorded(tmp_path, capsys):
    """`attnsvm check --sabotage NAME`: the named component is broken in every worker (forked ones inherit
    it), the run says so and records it, and a replay line carries it; importing checks installs nothing."""
    from checks.cli import main

    out = tmp_path / "sab"
    rc = main(["check", "svm-feasibility", "--sabotage", "dropped-constraint-svm", "--workers", "2",
               "--out", str(out), "--no-progress"])
    printed = capsys.readouterr()
    assert rc == 1 and "numerics sabotaged (--sabotage dropped-constraint-svm)" in printed.err
    assert json.loads((out / "run.json").read_text())["sabotage"] == "dropped-constraint-svm"
    rep = json.loads((out / "report.json").read_text())
    assert {t["id"]: t["verdict"] for t in rep["theorems"]}["svm-feasibility"] != "PASS"
    assert "--sabotage dropped-constraint-svm" in printed.out  # the replay line
    assert sab.active() == () and sab.leaks() == []  # undone after the run
    assert main(["check", "svm-feasibility", "--sabotage", "nope", "--out", str(tmp_path / "x")]) == 2
    code = "import checks, numerics; from checks.power import sabotage; print(sabotage.active())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT), "ATTNSVM_SABOTAGE": "noop-gd"})
    assert r.returncode == 0 and r.stdout.strip() == "()", r.stderr  # no environment hook any more


def test_catalogue_names_known_components():
    for s in sab.CATALOGUE.values():
        assert s.breaks and set(s.breaks) <= set(sab.COMPONENTS)
    assert {
        "noop-gd",
        "ascent-gd",
        "random-gd",
        "frobenius-for-nuclear",
        "dropped-constraint-svm",
        "scaled-svm",
        "softmax-no-normaliser",
        "causal-mask-off",
    } <= set(sab.default_names())


# -- what each sabotage does ----------------------------------------------------------------------------

def test_descent_hook_matches_run_gd():
    # the "descent" step hook (softmax / gradient sabotages) changes nothing but the code path (the explicit
    # loop): unsabotaged it is the same GD. 50 steps from a small start stay far from saturation, where both
    # paths agree to rounding (1e-12 relative)
    datas = _data(R=3)
    for cfg in ({}, {"param": "KQ"}, {"geometry": "plain"}, {"wd": 1e-3}, {"param": "KQ", "wd": 1e-3}):
        c = gd.GDConfig(steps=50, lr=0.1, **cfg)
        a = gd.run_gd(datas, c, record_every=25)
        with gd.step_hook(sabotage_gd.gd_hook("descent")):
            b = gd.run_gd(datas, c, record_every=25)
        assert np.allclose(a.W, b.W, rtol=1e-12, atol=1e-12) and np.array_equal(a.iterations, b.iterations)


@pytest.mark.parametrize("name,factor", [("lr-half", 0.5), ("lr-double", 2.0)])
def test_step_size_sabotages_scale_every_step(name, factor):
    # the subtle sabotages (issue 23 item 5): the same GD with lr scaled; normalised GD moves lr per step,
    # so the distance travelled in one step is exactly the scaled step (up to rounding)
    datas = _data(R=2)
    start = gd.run_gd(datas, gd.GDConfig(steps=0, lr=0.1)).W
    for backend in ("torch", "numba"):
        clean = gd.run_gd(datas, gd.GDConfig(steps=30, lr=0.1 * factor, backend="torch"))
        with sab.sabotage(name):
            res = gd.run_gd(datas, gd.GDConfig(steps=30, lr=0.1, backend=backend))
            one = gd.run_gd(datas, gd.GDConfig(steps=1, lr=0.1, backend=backend))
        np.testing.assert_allclose(res.W, clean.W, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(one.W - start, axis=(1, 2)), 0.1 * factor, rtol=1e-12)
    assert not gd.step_hooks() and sab.leaks() == []


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_noop_gd_returns_the_initialisation_on_both_backends(backend):
    datas = _data(R=2)
    W0 = gd.run_gd(datas, gd.GDConfig(steps=0, lr=0.1)).W
    with sab.sabotage("noop-gd"):
        res = gd.run_gd(datas, gd.GDConfig(steps=30, lr=0.1, backend=backend), record_every=10)
    assert np.array_equal(res.W, W0) and res.W_traj.shape == (4, 2, 5, 5)
    assert np.array_equal(res.W_traj[-1], W0)


def test_ascent_and_random_gd_do_not_descend():
    datas = _data(R=2)
    clean = gd.run_gd(datas, gd.GDConfig(steps=40, lr=0.1))
    start = gd.run_gd(datas, gd.GDConfig(steps=0, lr=0.1)).loss
    with sab.sabotage("ascent-gd"):
        up = gd.run_gd(datas, gd.GDConfig(steps=40, lr=0.1))
    with sab.sabotage("random-gd"):
        rnd = gd.run_gd(datas, gd.GDConfig(steps=40, lr=0.1))
    assert np.all(up.loss > start) and np.all(clean.loss < start)
    moved = np.linalg.norm(rnd.W - gd.run_gd(datas, gd.GDConfig(steps=0, lr=0.1)).W, axis=(1, 2))
    assert np.all(moved > 0.1) and np.all(moved <= 40 * 0.1 + 1e-12)  # 40 steps of length lr
    assert np.all(rnd.loss > clean.loss)


def test_noop_gd_reaches_prompt_sequence_and_regularisation_path():
    rng = np.random.default_rng(1)
    K, g = rng.standard_normal((2, 3, 4, 2)), rng.standard_normal((2, 3, 4))
    X, G = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 3))
    with sab.sabotage("noop-gd"):
        p = prompt.run_prompt_gd(K, g, steps=20, lr=0.1, init=np.ones((2, 2)))
        s = sequence.run_seq_gd(X, G, steps=20, lr=0.1)
        rp = regpath.regularization_path(_data(), [1.0, 2.0], steps=20)
    assert np.array_equal(p.p, np.ones((2, 2))) and not p.stalled.any()  # silent: no 'stalled' flag
    assert np.array_equal(s.W, np.zeros((4, 4))) and not s.stalled.any()
    clean = regpath.regularization_path(_data(), [1.0, 2.0], steps=20)
    assert np.all(clean.loss <= rp.loss + 1e-12) and np.any(clean.loss < rp.loss - 1e-6)


def _svm_data():
    X = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
                  [[0.0, 1.0, 0.5], [1.0, 0.0, 0.0], [0.3, 0.2, 0.0]]])
    return AttentionData(X, [1.0, -1.0], Z=np.array([[1.0, 0.5, 0.2], [0.1, 1.0, 0.4]]))


def test_svm_sabotages_are_caught_by_the_certificate_unless_it_is_silenced():
    data, alpha = _svm_data(), [0, 0]
    clean = svm.solve_att_svm(data, alpha)
    nuc = svm.solve_att_svm(data, alpha, norm="nuc")
    for name in ("scaled-svm", "dropped-constraint-svm"):
        with sab.sabotage(name), pytest.raises(SolverError, match="no attempt certified an answer"):
            svm.solve_att_svm(data, alpha)
    with sab.sabotage("frobenius-for-nuclear"), pytest.raises(SolverError):
        svm.solve_att_svm(data, alpha, norm="nuc")
    with sab.sabotage("scaled-svm-uncertified"):
        assert np.allclose(svm.solve_att_svm(data, alpha).W, sab.SCALE * clean.W)
    with sab.sabotage("dropped-constraint-svm-uncertified"):
        assert svm.solve_att_svm(data, alpha).objective < clean.objective - 1e-6  # a constraint gone
    with sab.sabotage("frobenius-for-nuclear-uncertified"):
        fake = svm.solve_att_svm(data, alpha, norm="nuc")
    assert np.allclose(fake.W, clean.W) and not np.allclose(nuc.W, clean.W, atol=1e-6)


def test_small_sabotages():
    data = _svm_data()
    with sab.sabotage("causal-mask-off"):
        assert sequence.causal_mask(3).all()
    with sab.sabotage("argmin-optimal-token"):
        data_v = data.with_head([1.0, 0.0, 0.0])
        assert np.array_equal(tokens.optimal_tokens(data_v).index, np.argmin(tokens.scores(data_v), axis=1))
    with sab.sabotage("softmax-no-normaliser"):
        assert not np.allclose(tokens.softmax_probs(data, np.eye(3)).sum(1), 1.0)
    with sab.sabotage("absolute-rank-threshold"):
        assert svm.rank_by_gap(1e-7 * np.eye(3))[0] == 0
    assert svm.rank_by_gap(1e-7 * np.eye(3))[0] == 3


def test_subtle_sabotages_break_what_they_say():
    """One token of the mask, one row of the SVM, a temperature of 1.1 (issue 23 item 5)."""
    data = _svm_data()
    W = np.arange(9.0).reshape(3, 3) / 10
    clean = tokens.softmax_probs(data, W)
    with sab.sabotage("softmax-temperature"):
        hot = tokens.softmax_probs(data, W)
    assert np.allclose(hot, tokens.softmax_probs(data, W / sab.TEMPERATURE)) and not np.allclose(hot, clean)
    with sab.sabotage("causal-mask-off-by-one"):
        m = sequence.causal_mask(4).numpy()
    assert np.array_equal(m, np.tril(np.ones((4, 4), dtype=bool), 1)) and not m[0, 2]
    A, b = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, 2.0])
    with sab.sabotage("last-row-dropped-svm"):
        core = svm.core._hard_margin_core(A, b)
    assert np.allclose(core.w, [1.0, 0.0]) and core.lam[-1] == 0.0  # the row x_2 >= 2 is gone
    with sab.sabotage("last-row-dropped-svm"), pytest.raises(SolverError):
        svm.solve_att_svm(data, [0, 0])  # the certificate sees the full rows


# -- depends_on ----------------------------------------------------------------------------------------

def test_register_rejects_unknown_components():
    with pytest.raises(TypeError, match="unknown component.*'sgd'"):
        @register
        class Bad(Theorem):
            id = "power-bad-deps"
            title = "bad"
            depends_on = ("gd", "sgd")
            profiles = {"quick": Profile(instances=1, min_confirmed=1)}

            def check_x(self, inst, state, ctx):
                return held()
    with pytest.raises(TypeError, match="tuple of component names"):
        @register
        class Bad2(Theorem):
            id = "power-bad-deps"
            title = "bad"
            depends_on = "gd"

            def check_x(self, inst, state, ctx):
                return held()
    assert "power-bad-deps" not in REGISTRY


def test_every_builtin_theorem_declares_its_components():
    catalogue.load_builtin()
    builtin = [c for c in REGISTRY.values() if c.__module__.startswith("checks.theorems.")]
    assert builtin and all(set(c.depends_on) <= set(sab.COMPONENTS) for c in builtin)
    symbolic = {"loss-assumptions", "overparam-landscape"}  # no numeric component of the catalogue
    assert all(c.depends_on for c in builtin if (c.control_of or c.id) not in symbolic)


# -- the matrix ------------------------------------------------------------------------------------------

def test_power_matrix_small_profile(power_plugin, tmp_path, capsys):
    code = main(["power", "svm-feasibility", *power_plugin, "--plugin", str(PLUGIN), "--no-progress",
                 "--sabotage", "noop-gd", "scaled-svm", "dropped-constraint-svm", "argmin-optimal-token",
                 "--out", str(tmp_path)])
    rep = json.loads((tmp_path / "power.json").read_text())
    cells = {r["id"]: {n: c["status"] for n, c in r["cells"].items()} for r in rep["theorems"]}
    assert cells["svm-feasibility"] == {
        "noop-gd": "not relevant",
        "scaled-svm": "detected",
        "dropped-constraint-svm": "detected",
        "argmin-optimal-token": "not relevant",
    }
    assert cells["power-gd-lowers-loss"]["noop-gd"] == "detected"
    assert cells["power-hollow-gd"]["noop-gd"] == "SURVIVED"
    assert rep["survivors"] == [["power-hollow-gd", "noop-gd"]] and code == 1
    assert all(r["clean"]["verdict"] == ("FAIL" if r["control_of"] else "PASS") for r in rep["theorems"])
    # controls run too: under the SVM sabotages svm-feasibility-control stays FAIL or ERROR (power kept)
    assert cells["svm-feasibility-control"]["scaled-svm"] == "kept"
    assert "power-hollow-gd survives noop-gd" in capsys.readouterr().out
    assert "**SURVIVED**" in (tmp_path / "power.md").read_text()
    # every finished row streamed as it ended (an interrupted run keeps them), the same rows as power.json
    streamed = [json.loads(line) for line in (tmp_path / "power-rows.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in streamed) == sorted(r["id"] for r in rep["theorems"])
    assert sab.active() == () and sab.leaks() == []


def test_power_matrix_judges_controls_by_lost_power(monkeypatch):
    """A control kept FAIL (or ERROR) under a sabotage kept its power; PASS / INCONCLUSIVE / VACUOUS lost it
    and fails the matrix, unless the cell is a listed blind spot."""
    from checks.power import matrix

    catalogue.load_builtin()
    under = iter(["FAIL", "ERROR", "PASS", "INCONCLUSIVE", "FAIL", "ERROR", "PASS", "INCONCLUSIVE"])

    def fake_run(cls, profile, seed, limit):
        v = "FAIL" if not sab.active() else next(under)
        return {"verdict": v, "counts": {}, "fails_run": v != "FAIL", "seconds": 0.0, "reasons": {}}

    monkeypatch.setattr(matrix, "_run", fake_run)
    names = ["scaled-svm", "dropped-constraint-svm", "last-row-dropped-svm", "lax-certificate"]
    rep = matrix.run_power(["svm-rank-bound-control"], sabotages=names)
    (row,) = rep["theorems"]
    assert [row["cells"][n]["status"] for n in names] == ["kept", "kept", "LOST", "LOST"]
    assert rep["survivors"] == [["svm-rank-bound-control", n] for n in names[2:]]
    assert rep["figures"]["LOST"] == 2 and rep["figures"]["kept"] == 2
    monkeypatch.setitem(matrix.BLIND_SPOTS, ("svm-rank-bound-control", "lax-certificate"), "a reason")
    rep = matrix.run_power(["svm-rank-bound-control"], sabotages=names)
    assert rep["survivors"] == [["svm-rank-bound-control", "last-row-dropped-svm"]]
    assert rep["blind_spots"] == [["svm-rank-bound-control", "lax-certificate", "a reason"]]
    assert "known blind spot" in matrix.text_table(rep) and "Known blind spots" in matrix.markdown(rep)


def test_power_exit_zero_when_every_relevant_sabotage_is_detected(power_plugin, tmp_path):
    assert main(["power", "power-gd-lowers-loss", "--plugin", str(PLUGIN), "--no-progress",
                 "--sabotage", "noop-gd", "ascent-gd", "--out", str(tmp_path)]) == 0


def test_power_bad_usage(tmp_path, capsys):
    assert main(["power", "--sabotage", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown sabotage 'nope'" in capsys.readouterr().err
    assert main(["power", "no-such-theorem", "--out", str(tmp_path)]) == 2


def test_power_resume_keeps_finished_rows(power_plugin, tmp_path, monkeypatch):
    """``--resume`` keeps the rows an interrupted run streamed (a line cut by the kill is dropped) and runs
    only the other theorems; a run with other sabotages starts afresh."""
    from checks.power import matrix

    args = ["power", "svm-feasibility", *power_plugin, "--no-progress", "--sabotage", "scaled-svm",
            "--out", str(tmp_path)]
    main(args)
    first = json.loads((tmp_path / "power.json").read_text())["theorems"]
    stream = tmp_path / "power-rows.jsonl"
    lines = stream.read_text().splitlines()
    stream.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed while writing row 2
    ran: list[str] = []
    real = matrix.power_row
    monkeypatch.setattr(matrix, "power_row", lambda tid, *a, **k: (ran.append(tid), real(tid, *a, **k))[1])
    main([*args, "--resume"])
    again = json.loads((tmp_path / "power.json").read_text())["theorems"]
    kept = json.loads(lines[0])["id"]
    assert kept not in ran and sorted(ran) == sorted(r["id"] for r in first if r["id"] != kept)
    assert [r["id"] for r in again] == [r["id"] for r in first]
    assert next(r for r in again if r["id"] == kept) == json.loads(lines[0])
    assert len(stream.read_text().splitlines()) == len(first)
    ran.clear()
    main([*args[:-4], "--sabotage", "dropped-constraint-svm", "--out", str(tmp_path), "--resume"])
    assert sorted(ran) == sorted(r["id"] for r in first)  # another matrix: nothing of the old one kept
