"""Theorem checks on given data (``attnsvm check --data digits|FILE.npz``): theorems whose claim is meaningful
on a dataset run on it, the others are reported not applicable with a specific reason, and the exit code
stays 0 (the run must not look broken just because real data do not meet a theorem's hypotheses)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from checks import catalogue
from checks.cli import main
from checks.harness import run_instances
from checks.theorem import REGISTRY, Theorem
from numerics.data import AttentionData, load_digits_data, random_unit_sphere

GENERIC = Theorem().not_applicable(object())  # the base class's reason for a theorem that ignores --data


def _report(out):
    rep = json.loads((out / "report.json").read_text())
    return rep, {t["id"]: t for t in rep["theorems"]}


@pytest.fixture(scope="module")
def digits():
    return load_digits_data()


def test_every_theorem_decides_on_given_data(digits):
    """No theorem falls back to the generic 'draws its own instances' reason: each either runs on the data
    or says specifically why it cannot."""
    catalogue.load_builtin()
    for cls in catalogue.ordered():
        if cls.__module__.startswith("checks.theorems."):
            reason = cls().not_applicable(digits)
            assert reason != GENERIC, f"{cls.id} gives the generic not-applicable reason"
            assert reason is None or (isinstance(reason, str) and reason and "\n" not in reason), cls.id


def test_check_digits_exits_0_and_reports_applicability(tmp_path):
    out = tmp_path / "digits"
    ids = ["loss-assumptions", "svm-rank-bound", "svm-feasibility", "gd-local-normalized", "seq-svm"]
    assert main(["check", *ids, "--data", "digits", "--out", str(out), "--no-progress"]) == 0
    rep, by_id = _report(out)
    assert rep["run"]["data"] == "digits"
    md = (out / "report.md").read_text()

    # not applicable: a specific reason, no instances, status n/a, shown in report.md
    for tid in (
        "loss-assumptions",
        "loss-assumptions-control",
        "seq-svm",
        "seq-svm-control",
        "svm-feasibility-control",
    ):
        t = by_id[tid]
        assert t["status"] == "n/a" and t["not_applicable"] and t["not_applicable"] != GENERIC, tid
        assert t["counts"]["instances"] == 0
        assert t["not_applicable"] in md
    assert "d = 16" in by_id["svm-feasibility-control"]["not_applicable"]
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert not {x["theorem"] for x in lines} & {"loss-assumptions", "seq-svm", "svm-feasibility-control"}

    # applies and runs on the 60 digits: rank bound (every instance on n = 60, alpha = opt or random)
    t = by_id["svm-rank-bound"]
    assert t["verdict"] == "PASS" and t["not_applicable"] is None and t["given_data"] is True
    assert t["metrics"]["data_n"]["min"] == t["metrics"]["data_n"]["max"] == 60
    assert t["metrics"]["data_d"]["min"] == 16
    assert (
        0 < t["metrics"]["alpha_is_opt"]["mean"] < 1
    )  # instances differ: their alphas come from their seeds
    assert by_id["svm-rank-bound-control"]["verdict"] == "FAIL"  # the control keeps its power on real data
    assert "--data digits" in t["reproduce"]

    # applies but the data do not meet the hypothesis: honestly vacuous, with the numbers, not a finding
    t = by_id["svm-feasibility"]
    assert t["verdict"] == "VACUOUS" and t["status"] == "hyp. unmet" and t["counts"]["vacuous"] == 8
    assert any("d = 16 < max(T-1, n) = 60" in r for r in t["reasons"])
    assert "**svm-feasibility**" not in md  # not flagged as a finding (gd-local-normalized: inconclusive)

    # GD from the cone boundary of a locally optimal alpha of the digits: still converging, but the 2000-step
    # budget does not reach the ten-fold fall of 1 - corr on n = 60 (inconclusive, never a hollow PASS)
    t = by_id["gd-local-normalized"]
    assert t["verdict"] == "INCONCLUSIVE" and t["metrics"]["data_n"]["max"] == 60
    assert t["status"] == "undecided"  # quiet on given data (exit 0 above), never PASS
    assert t["counts"]["refuted"] == 0
    # starts that leave an example without support tokens unheld are outside the theorem's cone: vacuous,
    # with the reason (seed 0: instances 1, 9, 10, 11), not a refutation of a narrower cone (_cone.start_held)
    assert t["counts"]["vacuous"] >= 1 and any("start_held" in r for r in t["reasons"])
    assert by_id["gd-local-normalized-control"]["verdict"] == "FAIL"


def test_check_npz_file(tmp_path):
    rng = np.random.default_rng(7)
    path = tmp_path / "small.npz"
    random_unit_sphere(3, 4, 6, rng=rng).save(path)  # d = 6 >= max(T-1, n) = 3: feasibility applies
    out = tmp_path / "npz"
    assert main(["check", "svm-feasibility", "svm-rank-bound", "--data", str(path), "--out", str(out),
                 "--no-progress"]) == 0
    rep, by_id = _report(out)
    assert rep["run"]["data"] == str(path)
    t = by_id["svm-feasibility"]
    assert t["verdict"] == "PASS" and t["metrics"]["data_n"]["max"] == 3
    assert by_id["svm-rank-bound"]["verdict"] == "PASS"
    assert by_id["svm-rank-bound"]["metrics"]["data_n"]["max"] == 3

    # without a head v: theorems built on the token scores say so; the rank bound still runs (random alpha)
    d = AttentionData.load(path)
    nohead = tmp_path / "nohead.npz"
    AttentionData(d.X, d.Y, d.Z).save(nohead)
    out2 = tmp_path / "nohead"
    assert main(["check", "no-stationary-points", "svm-rank-bound", "--data", str(nohead), "--out", str(out2),
                 "--no-progress"]) == 0
    _, by_id = _report(out2)
    assert "linear head v" in by_id["no-stationary-points"]["not_applicable"]
    assert by_id["svm-rank-bound"]["verdict"] == "PASS"
    assert by_id["svm-rank-bound"]["metrics"]["alpha_is_opt"]["max"] == 0


@pytest.mark.parametrize("tid", ["svm-rank-bound", "rp-w-frobenius"])
def test_given_data_instances_replay(digits, tid):
    """An instance on given data replays alone exactly as in its batch (its randomness is its own seed)."""
    catalogue.load_builtin()
    cls = REGISTRY[tid]
    batch = run_instances(cls, [0, 1, 2], profile="quick", seed=3, data=digits)
    alone = run_instances(cls, [2], profile="quick", seed=3, data=digits)
    assert batch[2].outcome == alone[0].outcome
    assert batch[2].metrics == alone[0].metrics


def test_controls_that_could_not_fail_on_the_data_are_not_applicable(digits):
    """A negative control whose false claim holds (or cannot be refuted) on the given data is reported not
    applicable, with the numbers, instead of running and coming out not-FAIL."""
    catalogue.load_builtin()
    X = np.array([[[1.0], [-1.0]], [[1.0], [0.5]]])  # n = 2, T = 2, d = 1
    tiny = AttentionData(X, np.array([1.0, -1.0]), np.array([[1.0], [1.0]]), np.array([1.0]))
    assert "min(n, d) = 1" in REGISTRY["svm-rank-bound-control"]().not_applicable(tiny)
    assert (
        REGISTRY["svm-feasibility-control"]().not_applicable(tiny) is None
    )  # d = 1 = max(T-1, n) - 1: the boundary
    assert "d = 16" in REGISTRY["svm-feasibility-control"]().not_applicable(digits)
    assert REGISTRY["svm-rank-bound-control"]().not_applicable(digits) is None
    # on digits: the controls of theorems whose hypotheses the digits miss
    assert "d = 16 < n = 60" in REGISTRY["kq-gd-nuclear-control"]().not_applicable(digits)
    assert "d = 16, n = 60" in REGISTRY["overparam-landscape-control"]().not_applicable(digits)
    # ... while the path controls apply: on the first 5 + 5 digits the two SVM solutions differ
    assert REGISTRY["rp-w-frobenius-control"]().not_applicable(digits) is None
    assert REGISTRY["rp-kq-nuclear-control"]().not_applicable(digits) is None
