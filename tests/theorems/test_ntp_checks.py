"""The NTP checks (checks/theorems/ntp_*.py): the decision rules on synthetic trajectories (each can confirm,
refute and stay undecided), --data on an NTP file, and the controls refuted for the reason that matters.
(Each theorem's verdict on the quick profile is in test_catalogue.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from checks import catalogue
from checks.harness import run_instances, run_theorem
from checks.theorem import REGISTRY
from checks.theorems._ntp import judge_direction, judge_finite
from numerics.data import random_unit_sphere
from numerics.ntp import NTPData

BASIS = np.zeros((1, 2, 2))
BASIS[0, 0, 1] = 1.0  # S_fin = span{e_0 e_1^T}
W_FIN = 0.5 * BASIS[0]
DIR = np.diag([1.0, 0.0])  # the directional part, ⊥ S_fin
HALF = np.arange(5)


@pytest.fixture(scope="module", autouse=True)
def _catalogue():
    catalogue.load_builtin()


def _traj(fin_err, R):
    """W(k) = W^fin + fin_err(k) B + R(k) DIR over the second half."""
    return np.array([W_FIN + e * BASIS[0] + r * DIR for e, r in zip(fin_err, R, strict=True)])


def test_finite_rule_confirms_converging_part():
    mass = np.geomspace(1e-2, 5e-3, 5)
    traj = _traj(mass, np.linspace(10, 20, 5))
    out = judge_finite(traj, HALF, BASIS, W_FIN, [np.zeros((2, 2)), 1.1 * W_FIN], mass, steps=0)
    assert out.status == "held"


def test_finite_rule_refutes_wrong_prediction():
    mass = np.geomspace(1e-2, 5e-3, 5)
    traj = _traj(mass, np.linspace(10, 20, 5))
    out = judge_finite(traj, HALF, BASIS, 0.8 * W_FIN, [W_FIN], mass, steps=0)
    assert out.status == "failed"


def test_finite_rule_undecided_when_mass_stalls():
    mass = np.full(5, 1e-2)
    out = judge_finite(_traj(mass, np.linspace(10, 20, 5)), HALF, BASIS, W_FIN, [0 * W_FIN], mass,
                       steps=0)
    assert out.status == "undecided"


def test_direction_rule():
    R = np.linspace(10, 20, 5)
    other = np.array([[0.0, 0.0], [1.0, 0.0]])
    traj = np.array([r * DIR + (20 / r) * other for r in R])  # turning from `other` towards DIR
    assert judge_direction(traj, HALF, DIR, {"other": other}).status == "held"
    assert judge_direction(traj, HALF, other, {"dir": DIR}).status == "failed"
    # still turning towards DIR but not yet nearer it than to `other`: undecided, never confirmed
    early = np.array([r * DIR + (400 / r) * other for r in R])
    assert judge_direction(early, HALF, DIR, {"other": other}).status == "undecided"


def _data():
    return NTPData(np.eye(2), [[0, 1]], [0])


def test_ntp_theorems_not_applicable_to_attention_data():
    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
    res = run_theorem(REGISTRY["ntp-graph-svm"], profile="quick", data=data)
    assert res.verdict == "VACUOUS" and "NTP dataset" in res.not_applicable


def test_graph_svm_control_refuted_by_farkas():
    res = run_instances(REGISTRY["ntp-graph-svm-control"], range(2), profile="quick", seed=0)
    assert all(r.outcome == "refuted" for r in res)
    assert all(r.predictions == {"single_token_feasible": "failed"} for r in res)
    assert all(np.isfinite(r.metrics["farkas_bound"]) or r.metrics["farkas_bound"] == np.inf for r in res)


def test_graph_svm_on_given_ntp_data():
    E = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 5)))[0].T
    data = NTPData(E, [[0, 1, 4], [1, 0, 4], [0, 1, 4], [2, 0, 4], [3, 2, 4]], [0, 1, 0, 2, 3])
    assert run_theorem(REGISTRY["ntp-graph-svm"], profile="quick", data=data).verdict == "PASS"
    # dependent embeddings (d < K): the hypothesis decides, vacuous, never PASS
    low = NTPData(np.random.default_rng(1).standard_normal((5, 3)), data.tokens, data.labels)
    assert run_theorem(REGISTRY["ntp-graph-svm"], profile="quick", data=low).verdict == "VACUOUS"


def test_graph_svm_changes_verdict_under_svm_sabotage():
    from checks.power.sabotage import sabotage

    with sabotage("scaled-svm"):
        res = run_theorem(REGISTRY["ntp-graph-svm"], profile="quick", seed=0)
    assert res.verdict != "PASS"  # every answer fails its certificate on every rung: ERROR with the status


def test_ntp_gd_refutes_a_noop_optimiser(monkeypatch):
    """A GD loop that does not move is refuted by the step-fidelity integrity check (never left vacuous)."""
    import checks.theorems._ntp as shared
    from numerics.ntp_gd import NTPGDResult

    def noop(datas, *, steps, lr, record_at=None, init=None, device="cpu"):
        rec = np.array(sorted({int(k) for k in record_at}))
        W0 = np.zeros((len(datas), datas[0].d, datas[0].d)) if init is None else np.asarray(init)
        return NTPGDResult(rec, np.repeat(W0[None], len(rec), 0), np.zeros((len(rec), len(datas))), 0.1)

    monkeypatch.setattr(shared, "run_ntp_gd", noop)
    res = run_instances(REGISTRY["ntp-gd"], range(2), profile="quick", seed=0)
    assert all(r.outcome == "refuted" and r.predictions["is_gradient_descent"] == "failed" for r in res)
