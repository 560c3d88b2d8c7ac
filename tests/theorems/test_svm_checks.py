"""Power of the rebuilt SVM / path / loss checks: each theorem PASSes, its boundary control FAILs for the
reason that matters, and a sabotage of the component it depends on makes it FAIL."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from checks import catalogue
from checks.harness import run_instances, run_theorem
from checks.theorem import REGISTRY
from theory.losses import assumption_a
from theory.model import U


@pytest.fixture(scope="module", autouse=True)
def _catalogue():
    catalogue.load_builtin()


# -- loss-assumptions ---------------------------------------------------------------------------
def test_sqrt_kink_is_decreasing_c1_but_not_lipschitz():
    r = assumption_a("sqrt-kink")
    assert r.decreasing and not r.holds
    assert r.lipschitz_counter == (0, sp.oo)


def test_discontinuous_second_derivative_alone_does_not_refute_lipschitz():
    r = assumption_a(-U - U * sp.Abs(U) / 2)  # l' = -1 - |u|: Lipschitz, l'' = -sign(u) discontinuous
    assert r.decreasing and r.lipschitz_counter is None


def test_loss_control_refuted_by_lipschitz_only():
    res = run_instances(REGISTRY["loss-assumptions-control"], range(4), profile="quick", seed=0)
    assert all(r.outcome == "refuted" for r in res)
    assert all(r.predictions == {"decreasing": "held", "bounded_lipschitz": "failed"} for r in res)
    assert run_theorem(REGISTRY["loss-assumptions-control"], profile="quick", seed=0).verdict == "FAIL"


@pytest.mark.parametrize("expr, ok", [
    (sp.exp(-3 * U), True),  # l' = -3e^{-3u}: float64 overflows at u < -237 and underflows at u > 248
    # l' = e^{-u}(u - 900) > 0 for u > 900, where e^{-u} < 1e-390
    (-sp.exp(-U) * (U - 900) - sp.exp(-U), False),
])
def test_sign_cross_check_is_exact_where_float64_is_out_of_range(expr, ok, monkeypatch):
    """The grid cross-check of l' < 0 (with the proof forced to claim "decreasing") decides the points where
    float64 under- or overflows with mpmath: a true negative tail is not a fake 0, a positive one is found."""
    from checks.theorems.loss_assumptions import LossAssumptions, LossInstance

    thm = LossAssumptions()
    monkeypatch.setattr(thm, "proof", lambda inst: assumption_a(sp.exp(-U), B=1))  # "decreasing"
    res = thm.check_decreasing(LossInstance("t", expr, 20), None, None)
    assert res.status == ("held" if ok else "failed")
    if not ok:  # found by mpmath (l' ~ 1e-390 > 0 there; float64 would round the grid maximum to 0)
        assert "grid finds" in res.reason


# -- svm-feasibility ------------------------------------------------------------------------------
def test_feasibility_control_at_boundary_refuted_by_farkas():
    cls = REGISTRY["svm-feasibility-control"]
    res = run_instances(cls, range(8), profile="quick", seed=0)
    refuted = [r for r in res if r.outcome == "refuted"]
    assert refuted and all(r.metrics["infeasible_verified"] > 0 for r in refuted)
    for r in res:  # every instance sits exactly one below the threshold
        assert r.hypotheses["overparameterised"] is True
    assert run_theorem(REGISTRY["svm-feasibility"], profile="quick", seed=0).verdict == "PASS"


def test_feasibility_sabotage_dropped_certificate_check(monkeypatch):
    """A solver whose infeasibility answers carry no verified certificate cannot refute the control."""
    from dataclasses import replace

    import checks.theorems.svm_feasibility as mod

    real = mod.solve_att_svm

    def unverified(*a, **k):
        sol = real(*a, **k)
        return sol if sol.feasible else replace(sol, certificate=replace(sol.certificate, verified=False))

    monkeypatch.setattr(mod, "solve_att_svm", unverified)
    assert run_theorem(REGISTRY["svm-feasibility-control"], profile="quick", seed=0).verdict != "FAIL"


# -- regularisation paths ---------------------------------------------------------------------------
def test_separation_threshold_makes_theorem_and_control_exclusive():
    """1 − cos θ_p < (1 − cos θ_s)/4 implies 1 − cos(θ_s − θ_p) ≥ (1 − cos θ_s)/4 (SEPARATION_K = 4)."""
    from checks.theorems._paths import SEPARATION_K

    th_s = np.linspace(1e-3, np.pi, 400)[:, None]
    sep = 1 - np.cos(th_s)
    th_p = (
        np.arccos(1 - sep / SEPARATION_K) * np.linspace(0, 0.999999, 200)[None]
    )  # every path error below sep/K
    assert np.all(1 - np.cos(th_s - th_p) >= sep / SEPARATION_K - 1e-15)


def test_rp_w_frobenius_passes_and_control_fails():
    r = run_theorem(REGISTRY["rp-w-frobenius"], profile="quick", seed=0)
    c = run_theorem(REGISTRY["rp-w-frobenius-control"], profile="quick", seed=0)
    assert r.verdict == "PASS" and c.verdict == "FAIL"


def test_rp_w_frobenius_fails_when_the_svm_returns_the_other_norm(monkeypatch):
    """Sabotage: the Frobenius SVM answers with the nuclear solution (and vice versa)."""
    import checks.theorems._paths as mod  # the path check (PathCheck) looks solve_att_svm up here

    real = mod.solve_att_svm
    monkeypatch.setattr(
        mod,
        "solve_att_svm",
        lambda data, *a, norm="fro", **k: real(data, *a, norm="nuc" if norm == "fro" else "fro", **k),
    )
    assert run_theorem(REGISTRY["rp-w-frobenius"], profile="quick", seed=0).verdict == "FAIL"


@pytest.mark.slow
def test_rp_kq_nuclear_passes_control_fails_and_sabotage_fails(monkeypatch):
    assert run_theorem(REGISTRY["rp-kq-nuclear"], profile="quick", seed=0).verdict == "PASS"
    assert run_theorem(REGISTRY["rp-kq-nuclear-control"], profile="quick", seed=0).verdict == "FAIL"
    import checks.theorems._paths as mod  # the path check (PathCheck) looks solve_att_svm up here

    real = mod.solve_att_svm
    monkeypatch.setattr(
        mod,
        "solve_att_svm",
        lambda data, *a, norm="fro", **k: real(data, *a, norm="nuc" if norm == "fro" else "fro", **k),
    )
    assert run_theorem(REGISTRY["rp-kq-nuclear"], profile="quick", seed=0).verdict == "FAIL"


@pytest.mark.parametrize("tid", ["rp-w-frobenius-self", "rp-kq-nuclear-self"])
def test_self_attention_path_variants_draw_first_token_queries_and_decide(tid):
    """The -self variants (issue 24 §4) draw the shared path family with z_i = x_i1 and decide it: instance 0
    confirmed, and refuted under the control's cross-norm claim (their whole quick runs are in `tox -e
    slow` / `tox -e checks`, test_catalogue.SLOW_QUICK)."""
    from checks.harness import _contexts

    catalogue.load_builtin()
    cls = REGISTRY[tid]
    gens, ctxs = _contexts(cls, [0], profile="quick", seed=0, device="cpu", data=None)
    data = cls().instance(gens[0], ctxs[0]).data
    assert data.self_attention and np.array_equal(data.Z, data.X[:, 0])
    (r,) = run_instances(cls, [0], profile="quick", seed=0)
    assert r.outcome == "confirmed", (r.outcome, r.reason)
    (c,) = run_instances(REGISTRY[f"{tid}-control"], [0], profile="quick", seed=0)
    assert c.outcome == "refuted", (c.outcome, c.reason)
