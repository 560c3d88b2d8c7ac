"""The landscape checks of smoothness-step, cone-no-stationary, kq-divergence and nuclear-factorisation
(issue 15).

For each: the theorem PASSes on quick/seed 0, its boundary control FAILs, and the relevant sabotages of the
numerics it depends on (checks.power.sabotage.sabotage) change its verdict. Plus the facts the checks rest on.
"""

from __future__ import annotations

import numpy as np
import pytest

from checks import catalogue
from checks.harness import _contexts, run_theorem
from checks.power.sabotage import sabotage
from checks.theorem import REGISTRY

catalogue.load_builtin()

IDS = ("smoothness-step", "cone-no-stationary", "kq-divergence", "nuclear-factorisation")


@pytest.mark.parametrize("tid", IDS)
def test_theorem_passes_on_quick(tid):
    r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict == "PASS", r.reasons
    assert r.counts["confirmed"] >= REGISTRY[tid].profile("quick").min_confirmed


@pytest.mark.parametrize("tid", IDS)
def test_control_is_refuted_on_quick(tid):
    cls = REGISTRY[f"{tid}-control"]
    assert cls.control_of == tid and cls.expected == "FAIL"
    r = run_theorem(cls, profile="quick", seed=0)
    assert r.verdict == "FAIL", r.reasons
    assert r.counts["refuted"] == r.counts["instances"] - r.counts["vacuous"] >= 5


@pytest.mark.parametrize("tid, sab, reason", [
    ("smoothness-step", "noop-gd", "descent_lemma"),
    ("smoothness-step", "ascent-gd", "descent_lemma"),
    ("smoothness-step", "transposed-gradient", "lipschitz"),
    ("cone-no-stationary", "transposed-gradient", "closed_form_agrees"),
    ("kq-divergence", "noop-gd", "norms_grow"),
    ("kq-divergence", "ascent-gd", "norms_grow"),
    ("kq-divergence", "transposed-gradient", "no_stationary_point"),
    ("nuclear-factorisation", "absolute-rank-threshold", "rank_constrained"),
    ("nuclear-factorisation", "lax-certificate", "certificate_rejects_wrong"),
])
def test_sabotage_is_detected(tid, sab, reason):
    with sabotage(sab):
        r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict == "FAIL", (sab, r.reasons)
    assert any(reason in k for k in r.reasons), r.reasons


def test_svm_sabotages_are_caught_by_the_certificate():
    with sabotage("frobenius-for-nuclear"):
        r = run_theorem(REGISTRY["nuclear-factorisation"], profile="quick", seed=0)
    assert r.verdict == "ERROR"


# -- the facts behind the checks ----------------------------------------------------------------------
def test_one_smoothness_bound_and_it_bounds_the_valley_curvature():
    from checks.strategies import valley_data
    from checks.theorems import _global, _smoothness, smoothness_step
    from checks.theorems.smoothness_step import valley_geometry, valley_point
    from numerics.gd import GDConfig, run_gd
    from theory.smoothness import lipschitz_bound

    # one definition: the GD step hypothesis (_global) and smoothness-step use the proved bound itself
    assert _global.smoothness_bound is _smoothness.smoothness_bound
    assert smoothness_step.smoothness_bound is _smoothness.smoothness_bound
    rng = np.random.default_rng(3)
    for _ in range(5):
        data = valley_data(int(rng.integers(2, 6)), rng=rng)
        F, delta, lam = valley_geometry(data)
        assert lam <= _smoothness.smoothness_bound(data) == lipschitz_bound(data)  # the proved bound
        # λ* is the curvature of L along F at the floor: central second difference of the loss
        W0 = valley_point(data, 0.0, rng)
        h = 1e-3
        L = [
            float(
                run_gd([data], GDConfig(steps=0, lr=1.0, geometry="plain"),
                       init=(W0 + s * h * F / np.sum(F * F))[None]).loss[0]
            )
            for s in (-1, 0, 1)
        ]
        curv = (L[0] - 2 * L[1] + L[2]) / h**2 * np.sum(F * F)
        assert curv == pytest.approx(lam, rel=1e-4)


def test_control_half_the_local_curvature_violates_the_descent_lemma():
    from checks.theorems.smoothness_step import LOSS_RTOL

    r = run_theorem(REGISTRY["smoothness-step-control"], profile="quick", seed=0)
    assert r.metrics["ladder_worst"]["min"] > 1e3 * LOSS_RTOL  # every instance, far above the float scale
    assert r.metrics["grad_top_corr"]["min"] > 1 - 1e-9  # rank-one data: ∇L along the top eigenvector


def test_kq_origin_is_a_stationary_point_and_full_rank_points_are_not():
    r = run_theorem(REGISTRY["kq-divergence"], profile="quick", seed=0)
    assert r.metrics["origin_grad_norm"]["max"] == 0.0  # the documented exception: (0, 0) is a saddle
    assert r.metrics["max_kq_inner"]["max"] < 0
    assert r.metrics["tangent_residual"]["max"] < 1e-9


def test_kq_control_data_are_infeasible_with_a_finite_minimiser():
    from checks.strategies import valley_data
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens

    rng = np.random.default_rng(0)
    data = valley_data(4, rng=rng)
    sol = solve_att_svm(data)
    assert not sol.feasible and sol.certificate.verified
    assert optimal_tokens(data).unique


def test_nuclear_binding_rank_is_decided_and_reports_the_relaxation_gap():
    """Where the rank bound binds (m < the relaxation's rank) the check decides (no longer undecided): the
    multi-start's factored point is feasible, balanced and never below the convex bound; a point that is not
    balanced is refuted."""
    from checks.harness import _contexts as ctxs_of
    from numerics.svm import factorised

    cls = REGISTRY["nuclear-factorisation"]
    thm = cls()
    gens, ctxs = ctxs_of(cls, list(range(4)), profile="quick", seed=0, device="cpu", data=None)
    binding = 0
    for g, c in zip(gens, ctxs, strict=True):
        inst = thm.instance(g, c)
        st = thm.prepare([inst], [c])[0]
        if not st.sol.feasible:
            continue
        out = thm.check_rank_constrained(inst, st, c)
        assert out.status == "held", out.reason
        binding += out.metrics["binding_cases"]
        if out.metrics["binding_cases"]:
            assert out.metrics["relaxation_gap"] > -1e-5 and out.metrics["balance_max"] < 1e-5
    assert binding >= 2

    real = factorised.solve_rank_constrained

    def unbalanced(*a, **k):
        r = real(*a, **k)
        r.K, r.Q = 2.0 * r.K, 0.5 * r.Q  # same product, energy above ‖KQ^T‖_⋆: not a KKT point
        r.balance = float(np.linalg.norm(r.K.T @ r.K - r.Q.T @ r.Q)) / float(np.sum(r.K * r.K))
        return r

    import checks.theorems.nuclear_factorisation as mod

    mod.solve_rank_constrained, saved = unbalanced, mod.solve_rank_constrained
    try:
        gens, ctxs = ctxs_of(cls, [1], profile="quick", seed=0, device="cpu", data=None)
        inst = thm.instance(gens[0], ctxs[0])
        st = thm.prepare([inst], [ctxs[0]])[0]
        assert thm.check_rank_constrained(inst, st, ctxs[0]).status == "failed"
    finally:
        mod.solve_rank_constrained = saved


def test_am_gm_is_certified_symbolically():
    from checks.theorems.nuclear_factorisation import am_gm_certified

    assert am_gm_certified() is True


def test_cone_points_lie_in_the_cone_including_its_boundary():
    cls = REGISTRY["cone-no-stationary"]
    thm = cls()
    gens, ctxs = _contexts(cls, [0, 1], profile="quick", seed=0, device="cpu", data=None)
    for g, c in zip(gens, ctxs, strict=True):
        inst = thm.instance(g, c)
        st = thm.prepare([inst], [c])[0]
        bnd, inner, adv, R, mu = thm._points(inst, st, c)
        W = st.sol.W
        for Ws, boundary in ((bnd, True), (adv, True), (inner, False)):
            cw = np.sum(Ws * W, axis=(1, 2)) / (np.linalg.norm(Ws, axis=(1, 2)) * np.linalg.norm(W))
            assert cw.min() >= 1 - mu - 1e-12
            assert np.linalg.norm(Ws, axis=(1, 2)).min() >= R * (1 - 1e-12)
            if boundary:
                np.testing.assert_allclose(cw, 1 - mu, atol=1e-12)


def test_kq_gd_accepts_non_contiguous_tokens():
    """b1_data's X is a transposed view (not C-contiguous): the (K, Q) path used to fail on X.view."""
    from checks.strategies import b1_data
    from numerics.data import AttentionData
    from numerics.gd import GDConfig, RandomInit, run_gd

    data = b1_data(2, 3, 6, rng=np.random.default_rng(0))
    assert not data.X.flags["C_CONTIGUOUS"]
    copy = AttentionData(np.ascontiguousarray(data.X), data.Y, data.Z, data.v)
    a = run_gd([data], GDConfig(param="KQ", steps=50, lr=0.5, geometry="plain"), init=RandomInit(1))
    b = run_gd([copy], GDConfig(param="KQ", steps=50, lr=0.5, geometry="plain"), init=RandomInit(1))
    np.testing.assert_allclose(a.W, b.W, rtol=1e-12, atol=1e-15)


def test_cone_hypotheses_on_an_infeasible_alpha_are_unmet_not_errors():
    from checks.theorems.cone_no_stationary import ConeNoStationaryInstance
    from numerics.data import random_unit_sphere

    cls = REGISTRY["cone-no-stationary"]
    thm = cls()
    _, ctxs = _contexts(cls, [0], profile="quick", seed=0, device="cpu", data=None)
    data = random_unit_sphere(
        4, 6, 2, rng=np.random.default_rng(0)
    )  # d = 2 < T - 1: this alpha is infeasible
    inst = ConeNoStationaryInstance(data=data, alpha=np.array([0, 1, 2, 3]), seed=1)
    st = thm.prepare([inst], ctxs)[0]
    assert not st.sol.feasible
    outs = {name: fn(thm, inst, st, ctxs[0]) for name, fn in cls._methods("assume_")}
    assert outs["alpha_locally_optimal"] is False
    assert outs["R_large"].status == "failed" and outs["feasible_exact"].status == "failed"
