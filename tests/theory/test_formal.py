"""Tests of the formal layer: the all-size proofs (theory.general, theory.stationarity, theory.smoothness),
the sums normal form they rest on, the PROOFS records, and the connection of the proved expressions to
numerics."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch

from numerics import attention as att
from numerics import tolerances as tol
from numerics.errors import InvalidInputError
from theory import general as g
from theory import instantiate as ins
from theory import sums
from theory.proofs import BY_ID, PROOFS, status_table, verify
from theory.smoothness import FORMS, lipschitz_bound

ROOT = Path(__file__).resolve().parents[2]


# -- the normal form: sound rules, and no false "proved" ------------------------------------------------

T = sums.index("T")
t, u, o = sums.index("t"), sums.index("u"), sums.index("o")
a, b, s = sp.IndexedBase("a"), sp.IndexedBase("b"), sp.IndexedBase("s", positive=True)


def test_normal_form_rules():
    # Fubini and renaming
    assert sums.is_zero(
        sp.Sum(a[t], (t, 1, T)) * sp.Sum(b[u], (u, 1, T)) - sp.Sum(a[u] * b[t], (t, 1, T), (u, 1, T))
    )
    # constant summand: Sum(c) = T c
    assert sums.is_zero(sp.Sum(a[o], (t, 1, T)) - T * a[o])
    # sifting needs the range of the free index
    sift = sp.Sum(sp.KroneckerDelta(t, o) * a[t], (t, 1, T)) - a[o]
    assert sums.is_zero(sift, ranges={o: T})
    assert not sums.is_zero(sift)  # o not known to lie in [1, T]: not proved
    # folds are used only when given
    assert not sums.is_zero(sp.Sum(s[t], (t, 1, T)) - 1)
    assert sums.is_zero(sp.Sum(s[t], (t, 1, T)) - 1, {sp.Sum(s[t], (t, 1, T)): 1})


@pytest.mark.parametrize(
    "wrong",
    [
        sp.Sum(a[t] * b[t], (t, 1, T))
        - sp.Sum(a[t], (t, 1, T)) * sp.Sum(b[u], (u, 1, T)),  # sum of products != product
        sp.Sum(a[t] ** 2, (t, 1, T)) - sp.Sum(a[t], (t, 1, T)) ** 2,
        sp.Sum(a[t], (t, 1, T)) - a[o],
        sp.Sum(s[t] ** 2, (t, 1, T)) - 1,  # the fold sum s = 1 says nothing about sum s^2
    ],
)
def test_normal_form_never_proves_a_false_identity(wrong):
    assert not sums.is_zero(wrong, {sp.Sum(s[t], (t, 1, T)): 1}, ranges={o: T})
    # and each is false at a concrete size: T = 2 with explicit values
    concrete = wrong.xreplace({T: 2, o: 1}).doit()
    point = {a[1]: 1, a[2]: 2, b[1]: 3, b[2]: 5, s[1]: sp.Rational(1, 3), s[2]: sp.Rational(2, 3)}
    assert concrete.xreplace(point) != 0


def test_bad_sums_rejected():
    with pytest.raises(InvalidInputError, match="from 1"):
        sums.normal_form(sp.Sum(a[t], (t, 0, T)))


# -- every proof record verifies ---------------------------------------------------------------------

@pytest.mark.parametrize("pid", [r.id for r in PROOFS])
def test_proof_verifies(pid):
    out = verify(pid)
    assert out["holds"], [st for st in out["steps"] if not st[1]]
    assert out["steps"] and all(st[1] for st in out["steps"])
    assert out["seconds"] < 30


def test_all_size_claims_are_the_general_ones():
    general_ids = {
        "softmax-jacobian",
        "gradient-closed-form",
        "stationary-conditions",
        "kq-chain-rule",
        "covariance-identity",
        "b1-covariance-bound",
        "b2-covariance-bound",
        "no-stationary-points",
        "smoothness-bound",
    }
    assert {r.id for r in PROOFS if r.sizes == "all"} == general_ids
    for r in PROOFS:
        assert r.statement and r.symbolic and r.numerical and r.check
    with pytest.raises(InvalidInputError, match="unknown proof"):
        verify("riemann")


# wrong variants: not proved for all sizes, and refuted by a counter-value at a fixed size
WRONG = [
    (g.softmax_jacobian_general, "no-outer", "softmax_jacobian", {}),
    (g.gradient_general, "no-outer", "gradient_closed_form", {}),
    (g.kq_chain_rule_general, "swapped-transposes", "kq_chain_rule", {}),
    (g.covariance_general, "no-mean", "covariance_identity", {}),
]


@pytest.mark.parametrize(("general", "variant", "fixed", "kw"), WRONG, ids=[w[1] for w in WRONG])
def test_wrong_variant_not_proved_and_refuted(general, variant, fixed, kw):
    from theory import derivations

    assert not general(variant).holds
    r = getattr(derivations, fixed)(variant=variant, **kw)
    assert not r.holds and r.counter_value is not None and r.counter_value.residual_value != 0


def test_wrong_covariance_bounds_not_proved():
    """The B.2 identity without its non-negative remainder, or with 2 Delta, is not an identity."""
    from theory.stationarity import _simplex

    sm, folds = _simplex()
    g0, ho, D = sp.Symbol("g0"), sp.Symbol("h_o"), sp.Symbol("Delta", positive=True)
    xi = sp.IndexedBase("xi", nonnegative=True)
    gam = lambda x: g0 + D * sp.KroneckerDelta(x, o)  # noqa: E731
    h = lambda x: ho - (1 - sp.KroneckerDelta(x, o)) * (1 + xi[x])  # noqa: E731
    C = g.cov(lambda x: sm[x], gam, h)
    rem = sp.Sum(sm[t] * (1 - sp.KroneckerDelta(t, o)) * xi[t], (t, 1, T))
    assert sums.is_zero(C - D * sm[o] * (1 - sm[o]) - D * sm[o] * rem, folds, ranges={o: T})
    assert not sums.is_zero(C - D * sm[o] * (1 - sm[o]), folds, ranges={o: T})
    assert not sums.is_zero(C - 2 * D * sm[o] * (1 - sm[o]) - D * sm[o] * rem, folds, ranges={o: T})


# -- the proved expressions vs numerics/attention.py ------------------------------------------------------

def _inst(n, T_, d, m=1, seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        X=rng.standard_normal((n, T_, d)),
        Y=rng.choice([-1.0, 1.0], n),
        Z=rng.standard_normal((n, d)),
        v=rng.standard_normal(d),
        W=rng.standard_normal((d, d)),
        K=rng.standard_normal((d, m)),
        Q=rng.standard_normal((d, m)),
        M=rng.standard_normal((d, d)),
    )


def _t(a_):
    return torch.as_tensor(np.array(a_), dtype=torch.float64)[None]


def _rel(x, ref):
    return float(np.max(np.abs(np.asarray(x) - np.asarray(ref))) / max(1.0, float(np.max(np.abs(ref)))))


@pytest.mark.parametrize("sizes", [(1, 2, 1), (2, 3, 2), (3, 4, 3)])
@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_proved_gradient_equals_numerics(sizes, loss):
    e = _inst(*sizes, seed=sum(sizes))
    ref = att.grad_W(_t(e["X"]), _t(e["Y"]), _t(e["Z"]), _t(e["W"]), att.LinearHead(_t(e["v"])), loss)[
        0
    ].numpy()
    assert _rel(ins.grad_W(e["X"], e["Y"], e["Z"], e["v"], e["W"], loss=loss), ref) < tol.FORMAL_RTOL
    inner = ins.cov_inner(e["X"], e["Y"], e["Z"], e["v"], e["W"], e["M"], loss=loss)
    assert _rel(inner, np.sum(ref * e["M"])) < tol.FORMAL_RTOL
    # power: the wrong closed form (no -s s^T) is far from numerics at the same point
    bad = ins.grad_W(e["X"], e["Y"], e["Z"], e["v"], e["W"], loss=loss, variant="no-outer")
    assert _rel(bad, ref) > 1e3 * tol.FORMAL_RTOL


def test_comparison_detects_sabotaged_numerics():
    """Power of the theory-to-numerics link: with numerics' gradient transposed (checks.power.sabotage), the
    proved expression no longer matches numerics.attention."""
    from checks.power.sabotage import sabotage

    e = _inst(2, 3, 2, seed=5)
    mine = ins.grad_W(e["X"], e["Y"], e["Z"], e["v"], e["W"])
    with sabotage("transposed-gradient"):
        from numerics import attention as att_s

        ref = att_s.grad_W(_t(e["X"]), _t(e["Y"]), _t(e["Z"]), _t(e["W"]), att_s.LinearHead(_t(e["v"])))[
            0
        ].numpy()
    assert _rel(mine, ref) > 1e3 * tol.FORMAL_RTOL
    assert _rel(mine.T, ref) < tol.FORMAL_RTOL  # it is exactly the transpose, nothing else


@pytest.mark.parametrize("sizes", [(1, 2, 1, 1), (2, 3, 2, 1), (1, 2, 2, 2)])
def test_proved_kq_gradients_equal_numerics(sizes):
    e = _inst(*sizes, seed=7)
    rK, rQ = att.grad_KQ(
        _t(e["X"]), _t(e["Y"]), _t(e["Z"]), _t(e["K"]), _t(e["Q"]), att.LinearHead(_t(e["v"]))
    )
    gK, gQ = ins.grad_KQ(e["X"], e["Y"], e["Z"], e["v"], e["K"], e["Q"])
    assert _rel(gK, rK[0].numpy()) < tol.FORMAL_RTOL
    assert _rel(gQ, rQ[0].numpy()) < tol.FORMAL_RTOL
    # consistency with the proved grad_W, and power: the swapped-transposes variant is far from numerics (d >
    # 1)
    G = ins.grad_W(e["X"], e["Y"], e["Z"], e["v"], e["K"] @ e["Q"].T)
    assert _rel(G @ e["Q"], rK[0].numpy()) < tol.FORMAL_RTOL
    if sizes[2] > 1:
        assert _rel(G.T @ e["Q"], rK[0].numpy()) > 1e3 * tol.FORMAL_RTOL


def test_instantiate_bad_input():
    with pytest.raises(InvalidInputError, match="X must"):
        ins.grad_W(np.zeros((2, 2)), np.ones(2), np.zeros((2, 2)), np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match="variant"):
        ins.grad_W(
            np.zeros((1, 2, 1)), np.ones(1), np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1)), variant="x"
        )


# -- stationarity: the proved bound holds on B.1 / B.2 instances ------------------------------------------

#: The certified W^mm meets its constraints to FEAS_TOL and its support constraints to ACTIVE_TOL, so the
#: margins h_o - h_t entering Cov are 1 up to ~1e-6 relative: the bound is checked with that slack (10x).
BOUND_SLACK = 10 * max(tol.ACTIVE_TOL, tol.FEAS_TOL)


@pytest.mark.parametrize("kind", ["B1", "B2"])
def test_covariance_bound_on_b_data(kind):
    from checks.hypotheses import b1_or_b2
    from checks.strategies import b1_data, b2_data
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(4):
        n, T_ = int(rng.integers(1, 3)), int(rng.integers(2, 5))
        data = b1_data(n, T_, n * T_ + 1, rng=rng) if kind == "B1" else b2_data(n, T_, 4, rng=rng)
        sol = solve_att_svm(data, norm="fro")
        gam, opt = scores(data), optimal_tokens(data).index
        assert sol.feasible and b1_or_b2(sol, gam, opt)[0 if kind == "B1" else 1]
        h = np.einsum("itp,pq,iq->it", data.X, sol.W, data.Z)
        for scale in (0.0, 0.3, 1.0, 3.0):
            W = rng.standard_normal((data.d, data.d))
            W *= scale / max(np.linalg.norm(W), 1e-300)
            a_ = np.einsum("itp,pq,iq->it", data.X, W, data.Z)
            sm = np.exp(a_ - a_.max(1, keepdims=True))
            sm /= sm.sum(1, keepdims=True)
            for i in range(n):
                oi = opt[i]
                others = [x for x in range(T_) if x != oi]
                cov = np.sum(sm[i] * gam[i] * h[i]) - np.sum(sm[i] * gam[i]) * np.sum(sm[i] * h[i])
                delta = min(gam[i, oi] - gam[i, x] for x in others)
                bound = delta * sm[i, oi] * (1 - sm[i, oi])
                assert bound > 0 and cov >= bound * (1 - BOUND_SLACK), (kind, cov, bound)
                checked += 1
            G = att.grad_W(_t(data.X), _t(data.Y), _t(data.Z), _t(W), att.LinearHead(_t(data.v)))[0].numpy()
            assert np.sum(G * sol.W) < 0
    assert checked >= 8


def test_covariance_bound_fails_without_b():
    """At the boundary: generic unit-sphere data (neither B.1 nor B.2) have examples and W where
    Cov_s(gamma, h) < Delta s_o (1 - s_o) -- the bound is not a property of every feasible instance."""
    from numerics.data import random_unit_sphere
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    rng = np.random.default_rng(3)
    violated = 0
    for _ in range(6):
        data = random_unit_sphere(3, 5, 6, rng=rng)
        sol = solve_att_svm(data, norm="fro")
        if not sol.feasible:
            continue
        gam, opt = scores(data), optimal_tokens(data).index
        h = np.einsum("itp,pq,iq->it", data.X, sol.W, data.Z)
        for _ in range(20):
            W = rng.standard_normal((data.d, data.d)) * 3
            a_ = np.einsum("itp,pq,iq->it", data.X, W, data.Z)
            sm = np.exp(a_ - a_.max(1, keepdims=True))
            sm /= sm.sum(1, keepdims=True)
            for i in range(data.n):
                oi = opt[i]
                cov = np.sum(sm[i] * gam[i] * h[i]) - np.sum(sm[i] * gam[i]) * np.sum(sm[i] * h[i])
                delta = min(gam[i, oi] - gam[i, x] for x in range(data.T) if x != oi)
                violated += cov < delta * sm[i, oi] * (1 - sm[i, oi]) * (1 - BOUND_SLACK)
    assert violated > 0


# -- the smoothness bound ------------------------------------------------------------------------------

def _grad(data, W, loss):
    return att.grad_W(_t(data.X), _t(data.Y), _t(data.Z), _t(W), att.LinearHead(_t(data.v)), loss)[0].numpy()


def _measured_lipschitz(data, loss, rng, pairs=40, grad=None):
    """max ||grad L(W) - grad L(W')|| / ||W - W'|| over random pairs (near and far) and a power iteration on
    the Hessian (finite differences) from the best pair's direction. ``grad``: W -> grad L(W) of another loss
    (then ``data`` is the dimension d and ``loss`` is unused)."""
    if grad is None:
        d = data.d

        def grad(W):
            return _grad(data, W, loss)
    else:
        d = data
    best, best_dir, best_W = 0.0, None, None
    for k in range(pairs):
        W = rng.standard_normal((d, d)) * [0.3, 1.0, 3.0][k % 3]
        D = rng.standard_normal((d, d)) * [1e-3, 0.1, 1.0][k % 3]
        r = np.linalg.norm(grad(W + D) - grad(W)) / np.linalg.norm(D)
        if r > best:
            best, best_dir, best_W = r, D / np.linalg.norm(D), W
    D = best_dir
    for _ in range(15):  # power iteration on the Hessian at best_W, central differences (step 1e-5)
        HD = (grad(best_W + 1e-5 * D) - grad(best_W - 1e-5 * D)) / 2e-5
        nrm = np.linalg.norm(HD)
        best = max(best, nrm)
        D = HD / nrm
    return best


def _former_bound(data):
    """The checks' former bound (1/n) Σ ‖X_i‖₂²‖z_i‖²(Δ_i²/16 + Δ_i), replaced by the proved one."""
    from numerics.tokens import scores

    g = scores(data)
    D = g.max(1) - g.min(1)
    Xn = np.linalg.norm(data.X, ord=2, axis=(1, 2))
    return float(np.mean(Xn**2 * np.linalg.norm(data.Z, axis=1) ** 2 * (D**2 / 16 + D)))


@pytest.mark.parametrize("loss", ["logistic", "exponential"])
def test_lipschitz_bound_dominates_measured_ratios(loss):
    from checks.theorems._smoothness import smoothness_bound
    from numerics.data import random_unit_sphere

    rng = np.random.default_rng(5)
    ratios = []
    for n, T_, d in [(1, 2, 2), (2, 3, 3), (3, 4, 2), (2, 5, 4)]:
        for scale in (1.0, 3.0):
            base = random_unit_sphere(n, T_, d, rng=rng)
            from numerics.data import AttentionData

            data = AttentionData(base.X * scale, base.Y, base.Z, base.v)
            meas = _measured_lipschitz(data, loss, rng)
            bs, bn = (lipschitz_bound(data, loss, f) for f in FORMS)
            assert meas <= bs * (1 + 1e-6) and bs <= bn * (1 + 1e-12), (meas, bs, bn)
            if loss == "logistic":
                assert bs == smoothness_bound(data)  # one bound: the checks use the proved one
                assert bs <= _former_bound(data) * (1 + 1e-12)
            ratios.append(meas / bs)
    assert max(ratios) > 1e-3  # the bound is not vacuous-by-hugeness on every instance


@pytest.mark.parametrize("causal", [False, True])
def test_seq_lipschitz_bound_dominates_central_differences(causal):
    """theory.smoothness.seq_lipschitz_bound (the per-query reduction in its docstring) dominates the
    gradient-Lipschitz ratio of the sequence / causal loss measured on random pairs and by a Hessian power
    iteration with central differences of numerics.sequence.seq_grad, on random and on B.2 sequence data."""
    from checks.strategies import b2_data
    from numerics.sequence import seq_grad
    from numerics.svm import seq_scores
    from theory.smoothness import seq_lipschitz_bound

    rng = np.random.default_rng(7)
    ratios = []
    for n, T_, d, scale in [(2, 3, 3, 1.0), (2, 4, 6, 1.0), (3, 4, 2, 2.0)]:
        if d == 6:
            data = b2_data(n, T_, d, rng=rng)
            X, Ylab, v = np.array(data.X), np.repeat(data.Y[:, None], T_, axis=1), np.array(data.v)
        else:
            X = scale * rng.standard_normal((n, T_, d)) / np.sqrt(d)
            Ylab, v = rng.choice([-1.0, 1.0], size=(n, T_)), rng.standard_normal(d)
        G = seq_scores(X, Ylab, v)

        def grad(W, X=X, G=G):
            return seq_grad(_t(X), _t(G), _t(W), causal)[0].numpy()

        meas = _measured_lipschitz(d, None, rng, grad=grad)
        bound = seq_lipschitz_bound(X, G, causal)
        assert meas <= bound * (1 + 1e-6), (meas, bound)
        ratios.append(meas / bound)
    assert max(ratios) > 1e-2  # not vacuous by hugeness
    with pytest.raises(InvalidInputError, match="gamma"):
        seq_lipschitz_bound(np.zeros((2, 3, 2)), np.zeros((2, 3, 2)))


def test_lipschitz_bound_input():
    from numerics.data import random_unit_sphere

    data = random_unit_sphere(2, 3, 2, rng=np.random.default_rng(0))
    with pytest.raises(InvalidInputError, match="form"):
        lipschitz_bound(data, form="tight")


# -- the records are shown in README.md and docs/theory.md ------------------------------------------------

@pytest.mark.parametrize("doc", ["README.md", "docs/theory.md"])
def test_formal_layer_section_lists_every_proof(doc):
    text = (ROOT / doc).read_text()
    assert "Formal layer" in text
    for r in PROOFS:
        rows = [ln for ln in text.splitlines() if re.match(rf"\|\s*{re.escape(r.id)}\s*\|", ln)]
        assert any(r.status in ln for ln in rows), f"{doc}: no row for {r.id} with status '{r.status}'"
    assert status_table().count("\n") == len(BY_ID) + 1
