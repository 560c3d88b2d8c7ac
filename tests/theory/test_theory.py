"""Tests of theory/: every identity proved, every wrong variant refuted with a concrete counter-value,
Assumption A per loss, and the lambdified closed forms against torch autograd and numerics.attention."""

from __future__ import annotations

import time

import numpy as np
import pytest
import sympy as sp
import torch

from numerics.errors import InvalidInputError
from theory import (
    CONTROL_LOSSES,
    LOSSES,
    VARIANTS,
    all_derivations,
    assumption_a,
    gradient_closed_form,
    no_stationary_point_lemma,
    softmax_jacobian,
    stationary_conditions,
    to_exp,
)
from theory import lambdified as lf
from theory.stationarity import DERIVATIONS

WRONG = [(name, v) for name, vs in VARIANTS.items() for v in vs if v != "correct"]

#: Closed form vs autograd / numerics.attention: both float64 evaluations of the same function with
#: O(1) inputs, differing only in rounding order (~1e-15); 1e-10 leaves wide room and still catches any
#: wrong term (those are O(1e-2) or larger).
AGREE_TOL = 1e-10


# -- symbolic identities -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(DERIVATIONS))
def test_identity_proved(name):
    r = DERIVATIONS[name](variant="correct")
    assert r.holds, f"{name} not proved: {r.counter_value}"
    assert r.method == "simplify"
    assert r.counter_value is None
    assert r.name == name and r.variant == "correct"
    assert isinstance(r.latex, str) and "holds" in r.latex
    sp.latex(r.expressions["rhs"])  # renders


def _recheck_counter(r):
    """Re-evaluate lhs - rhs at the reported point independently of the engine (ell' = -1)."""
    cv = r.counter_value
    diff = to_exp(r.lhs - r.rhs)[cv.entry]
    rep = {s: cv.point[s.name] for s in diff.free_symbols if s.name in cv.point}
    rep.update({s: -1 for s in diff.free_symbols if s.name.startswith("\\ell'")})
    return float(sp.N(diff.xreplace(rep), 30))


@pytest.mark.parametrize(("name", "variant"), WRONG)
def test_wrong_variant_refuted_with_counter_value(name, variant):
    r = DERIVATIONS[name](variant=variant)
    assert not r.holds
    cv = r.counter_value
    assert cv is not None
    assert all(isinstance(v, sp.Rational) for v in cv.point.values())
    assert cv.residual_value != 0.0
    assert _recheck_counter(r) == pytest.approx(cv.residual_value, rel=1e-12)
    assert "FAILS" in r.latex


def test_exact_rational_points_method():
    good = gradient_closed_form(1, 3, 2, method="exact-rational-points")
    bad = gradient_closed_form(1, 3, 2, variant="no-outer", method="exact-rational-points")
    assert good.holds and good.method == "exact-rational-points" and "Evidence, not proof" in good.notes
    assert not bad.holds and bad.counter_value is not None


def test_auto_method_switches_on_large_sizes(monkeypatch):
    from theory import derivations

    monkeypatch.setattr(derivations, "SIMPLIFY_MAX_SYMBOLS", 3)
    r = softmax_jacobian(4)  # 4 free symbols > 3
    assert r.holds and r.method == "exact-rational-points"


def test_softplus_head_gradient():
    assert gradient_closed_form(1, 2, 2, head="softplus").holds
    assert not gradient_closed_form(1, 2, 2, head="softplus", variant="no-outer").holds


def test_lemma_factorisation_and_argument():
    r = no_stationary_point_lemma()
    assert r.holds
    scalar, rank_one = r.extra["factorisation"]
    assert sp.simplify(to_exp(r.rhs) - scalar * rank_one) == sp.zeros(2, 2)
    assert r.extra["softmax_product_positive"] is True
    assert r.extra["loss_derivative_negative"] == {k: True for k in LOSSES}
    assert len(r.extra["argument"]) >= 4
    assert "s_1 s_2" in r.latex


def test_stationary_equations():
    r = stationary_conditions()
    d = r.sizes["d"]
    assert len(r.extra["equations"]) == d * d
    assert all(isinstance(e, sp.Eq) and e.rhs == 0 for e in r.extra["equations"])
    assert len(r.extra["per_example"]) == r.sizes["n"]


def test_bad_variant_and_method_rejected():
    with pytest.raises(InvalidInputError, match="variant"):
        gradient_closed_form(variant="no-mean")
    with pytest.raises(InvalidInputError, match="method"):
        softmax_jacobian(3, method="guess")
    with pytest.raises(InvalidInputError, match="T must"):
        softmax_jacobian(1)


def test_whole_symbolic_suite_is_fast():
    t0 = time.perf_counter()
    results = all_derivations()
    assert len(results) == sum(len(v) for v in VARIANTS.values())
    assert time.perf_counter() - t0 < 60
    assert [r.holds for r in results] == [r.variant == "correct" for r in results]


# -- Assumption A ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LOSSES))
def test_assumption_a_holds(name):
    r = assumption_a(name)
    assert r.holds and r.decreasing and r.smooth and r.bounded and r.lipschitz
    assert r.decreasing_counter is None and r.smooth_counter is None
    assert r.lipschitz_constant.is_finite and r.derivative_bound.is_finite


def test_assumption_a_fails_for_squared():
    r = assumption_a("squared")
    assert "squared" in CONTROL_LOSSES
    assert not r.holds and not r.decreasing
    u0, d0 = r.decreasing_counter
    assert (
        sp.diff(CONTROL_LOSSES["squared"], sp.Symbol("u", real=True)).subs(sp.Symbol("u", real=True), u0)
        == d0
    )
    assert d0 >= 0


def test_assumption_a_expression_and_constants():
    t = sp.Symbol("t")
    assert assumption_a(sp.log(1 + sp.exp(-t))).holds
    assert assumption_a("logistic").lipschitz_constant == sp.Rational(1, 4)
    assert assumption_a("linear").lipschitz_constant == 0
    assert not assumption_a(t**3 - t).holds
    with pytest.raises(InvalidInputError, match="unknown loss"):
        assumption_a("hinge")


# -- lambdified closed forms -----------------------------------------------------------------------------

def _instance(R=4, n=2, T=3, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((R, n, T, d))
    Y = rng.choice(np.array([-1.0, 1.0]), size=(R, n))
    Z = rng.standard_normal((R, n, d))
    v = rng.standard_normal((R, d))
    W = rng.standard_normal((R, d, d))
    return X, Y, Z, v, W


def _t(*arrays):
    return [torch.as_tensor(a, dtype=torch.float64) for a in arrays]


def _close(a, b, tol=AGREE_TOL):
    a = np.asarray(a.detach() if torch.is_tensor(a) else a)
    b = np.asarray(b.detach() if torch.is_tensor(b) else b)
    assert a.shape == b.shape
    err = np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))
    assert err < tol, f"max relative error {err:.3e}"


@pytest.mark.parametrize("loss", [*LOSSES, "squared"])
def test_grad_W_matches_autograd(loss):
    X, Y, Z, v, W = _t(*_instance())
    Wr = W.clone().requires_grad_(True)
    lf.loss_value(X, Y, Z, v, Wr, loss=loss).sum().backward()
    _close(lf.grad_W(X, Y, Z, v, W, loss=loss), Wr.grad)


def test_softplus_head_grad_matches_autograd():
    X, Y, Z, v, W = _t(*_instance())
    V = torch.as_tensor(np.random.default_rng(1).standard_normal((4, 2, 3)))
    Wr = W.clone().requires_grad_(True)
    lf.loss_value(X, Y, Z, V, Wr, head="softplus").sum().backward()
    _close(lf.grad_W(X, Y, Z, V, W, head="softplus"), Wr.grad)


def test_grad_KQ_matches_autograd():
    X, Y, Z, v, _ = _t(*_instance())
    K, Q = _t(*np.random.default_rng(2).standard_normal((2, 4, 2, 3)))
    Kr, Qr = K.clone().requires_grad_(True), Q.clone().requires_grad_(True)
    lf.loss_value(X, Y, Z, v, Kr @ Qr.mT).sum().backward()
    gK, gQ = lf.grad_KQ(X, Y, Z, v, K, Q)
    _close(gK, Kr.grad)
    _close(gQ, Qr.grad)


def test_cov_inner_matches_gradient_inner_product():
    X, Y, Z, v, W = _instance()
    M = np.random.default_rng(3).standard_normal(W.shape)
    _close(lf.cov_inner(X, Y, Z, v, W, M), np.sum(lf.grad_W(X, Y, Z, v, W) * M, axis=(-2, -1)))


def test_numpy_and_torch_backends_agree_and_unbatched_works():
    X, Y, Z, v, W = _instance()
    g_np = lf.grad_W(X, Y, Z, v, W)
    assert isinstance(g_np, np.ndarray) and g_np.shape == (4, 2, 2)
    _close(g_np, lf.grad_W(*_t(X, Y, Z, v, W)))
    _close(lf.grad_W(X[0], Y[0], Z[0], v[0], W[0]), g_np[0])
    _close(lf.softmax_probs(X, Z, W).sum(-1), np.ones((4, 2)))


def test_lambdified_input_validation():
    X, Y, Z, v, W = _instance()
    with pytest.raises(InvalidInputError, match="Z must"):
        lf.grad_W(X, Y, Z[..., :1], v, W)
    with pytest.raises(InvalidInputError, match="unknown loss"):
        lf.grad_W(X, Y, Z, v, W, loss="hinge")
    with pytest.raises(InvalidInputError, match="backend"):
        lf.grad_W(X, Y, Z, v, W, backend="jax")


# -- against numerics/attention.py ---------------------------------------------------------------------

def test_matches_numerics_attention():
    att = pytest.importorskip("numerics.attention")
    X, Y, Z, v, W = _t(*_instance(R=5, n=2, T=3, d=3, seed=4))
    head = att.LinearHead(v)
    for loss in LOSSES:
        _close(lf.grad_W(X, Y, Z, v, W, loss=loss), att.grad_W(X, Y, Z, W, head, loss=loss))
        _close(lf.loss_value(X, Y, Z, v, W, loss=loss), att.loss(X, Y, Z, W, head, loss=loss))
    _close(lf.softmax_probs(X, Z, W), att.softmax(X, Z, W))
    K, Q = _t(*np.random.default_rng(5).standard_normal((2, 5, 3, 2)))
    for mine, theirs in zip(
        lf.grad_KQ(X, Y, Z, v, K, Q), att.grad_KQ(X, Y, Z, K, Q, head, loss="logistic"), strict=True
    ):
        _close(mine, theirs)
