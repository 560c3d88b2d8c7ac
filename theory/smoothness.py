r"""An explicit Lipschitz constant L_W of grad L(W), derived symbolically for every T (linear head).

Derivation (each step machine-checked in :func:`lipschitz_derivation`; sums over a symbolic T):

1. a_i(W + eps M) = a_i(W) + eps b_i with b_i = X_i M z_i, so
   d^2/d eps^2 L(W + eps M) = (1/n) sum_i phi_i''(0), phi_i(eps) = ell(gamma_i^T S(a_i + eps b_i)), and
   ``phi''(0) = ell''(u) Cov_s(gamma, b)^2 + ell'(u) E_s[(gamma - gbar)(b - bbar)^2]`` (sympy.diff, all T).
2. Cauchy-Schwarz (weighted Lagrange identity, all T): Cov_s(gamma, b)^2 <= Var_s(gamma) Var_s(b).
3. Bhatia-Davis (identity with sum_t s_t = 1, all T): Var_s(b) <= (hi - bbar)(bbar - lo) <= (hi - lo)^2 / 4
   for lo <= b_t <= hi; so Var_s(gamma) <= Delta^2/4 (Delta = max_t gamma_t - min_t gamma_t) and
   Var_s(b) <= rho^2/4 (rho = max_t b_t - min_t b_t).
4. |E_s[(gamma - gbar)(b - bbar)^2]| <= max_t |gamma_t - gbar| Var_s(b) <= Delta rho^2/4 (gbar lies in
   [min gamma, max gamma]: identities with sum_t s_t = 1).
5. Hence |phi''(0)| <= B2 Delta^2 rho^2/16 + B1 Delta rho^2/4 with B1 >= |ell'|, B2 >= |ell''| on the margins'
   range (u = gamma^T s is a convex combination: u in [min gamma, max gamma]); and
   rho <= max_{t,tau} ||x_t - x_tau|| ||z|| ||M||_F <= 2 R ||z|| ||M||_F, R = max_t ||x_t||.
   The Hessian is symmetric, so ||grad^2 L||_op = sup_{||M||_F = 1} |d^2/d eps^2 L| and by the mean value
   theorem

   .. math:: L_W \le \frac1n\sum_i \frac{D_i^2\|z_i\|^2}{4}\Big(\frac{B_{2,i}\Delta_i^2}{4} +
   B_{1,i}\Delta_i\Big)
             \le \frac1n\sum_i R_i^2\|z_i\|^2\Big(\frac{B_{2,i}\Delta_i^2}{4} + B_{1,i}\Delta_i\Big),
             \quad \Delta_i \le 2\|v\| R_i,

   (D_i the token diameter) -- the expression is built by sympy from the bounds of steps 2-4 and is
   increasing in Delta and rho (sympy sign of its partial derivatives), so the upper bounds may be plugged in.
   For the logistic loss sup |ell'| = 1 and sup ell'' = 1/4 (sympy: limits and ``maximum`` over R).

:func:`lipschitz_bound` evaluates the lambdified expression on data. Its ``"scores"`` form is the bound
every check uses (``checks.theorems._smoothness.smoothness_bound``: smoothness-step, gd-global); it replaced
the checks' former (1/n) sum_i ||X_i||_2^2 ||z_i||^2 (Delta_i^2/16 + Delta_i), which it never exceeds, and it
must dominate every measured ratio ||grad L(W) - grad L(W')|| / ||W - W'|| and every adversarial Hessian
Rayleigh quotient (tests/theory/test_formal.py, tests/theorems/test_smoothness_resolution.py,
smoothness-step).

Examples
--------
>>> lipschitz_derivation().holds
True
>>> [str(c) for c in logistic_constants()]
['1', '1/4']
"""

from __future__ import annotations

import time
from functools import cache

import numpy as np
import sympy as sp

from numerics.errors import InvalidInputError

from .general import (
    GeneralProof,
    M,
    Step,
    T,
    W,
    _proof,
    cov,
    derivatives_as_functions,
    ell,
    ellp,
    ellpp,
    logit,
)
from .losses import loss_expr
from .model import U
from .proofcache import disk_cached
from .sums import index, is_zero

FORMS = ("scores", "norms")

Delta, rho = sp.Symbol("Delta", nonnegative=True), sp.Symbol("rho", nonnegative=True)
B1, B2 = sp.Symbol("B1", nonnegative=True), sp.Symbol("B2", nonnegative=True)


def _per_example_bound() -> sp.Expr:
    """B2 Var_gamma Var_b + B1 Delta Var_b with Var_gamma <= Delta^2/4, Var_b <= rho^2/4 (steps 2-5)."""
    var_g, var_b = Delta**2 / 4, rho**2 / 4
    return sp.expand(B2 * var_g * var_b + B1 * Delta * var_b)


@disk_cached
def lipschitz_derivation() -> GeneralProof:
    """Steps 1-5 of the module docstring, each machine-checked (sums over a symbolic T)."""
    t0 = time.perf_counter()
    a, b, g = (sp.IndexedBase(x, real=True) for x in ("a", "b", "g"))
    s = sp.IndexedBase("s", positive=True)
    eps = sp.Symbol("epsilon", real=True)
    t, tau, sig, x, y = (index(c) for c in ("t", "tau", "sigma", "x", "y"))
    steps = []
    # 1a. the logits are affine along W + eps M
    i = index("i")
    aff = sp.diff(logit(i, t, lambda p, q: W[p, q] + eps * M[p, q]), eps)
    p, q = index("p"), index("q")
    steps.append(Step("d/d eps a_it(W + eps M) = (X_i M z_i)_t", is_zero(
        aff - sp.Sum(sp.IndexedBase("X", real=True)[i, t, p] * M[p, q] * sp.IndexedBase("z", real=True)[i, q],
                     (p, 1, index("d")), (q, 1, index("d")))), "normal-form"))
    # 1b. second directional derivative of phi
    S = lambda e: sp.Sum(sp.exp(a[sig] + e * b[sig]), (sig, 1, T))  # noqa: E731
    u = lambda e: sp.Sum(g[t] * sp.exp(a[t] + e * b[t]), (t, 1, T)) / S(e)  # noqa: E731
    d2 = derivatives_as_functions(sp.diff(ell(u(eps)), eps, 2).subs(eps, 0))
    sm = lambda c: sp.exp(a[c]) / S(0)  # noqa: E731
    gbar, bbar = sp.Sum(sm(x) * g[x], (x, 1, T)), sp.Sum(sm(y) * b[y], (y, 1, T))
    third = sp.Sum(sm(t) * (g[t] - gbar) * (b[t] - bbar) ** 2, (t, 1, T))
    hess = ellpp(u(0)) * cov(sm, lambda c: g[c], lambda c: b[c]) ** 2 + ellp(u(0)) * third
    steps.append(
        Step(
            "phi''(0) = ell''(u) Cov_s(gamma, b)^2 + ell'(u) E_s[(gamma - gbar)(b - bbar)^2] (sympy.diff)",
            is_zero(d2 - hess, {S(0): S(0)}),
            "normal-form",
        )
    )
    # 2. weighted Lagrange identity (Cauchy-Schwarz)
    A, B = sp.IndexedBase("A", real=True), sp.IndexedBase("B", real=True)
    lag = (sp.Sum(s[t] * A[t] ** 2, (t, 1, T)) * sp.Sum(s[tau] * B[tau] ** 2, (tau, 1, T))
           - sp.Sum(s[t] * A[t] * B[t], (t, 1, T)) ** 2
           - sp.Sum(s[t] * s[tau] * (A[t] * B[tau] - A[tau] * B[t]) ** 2, (t, 1, T), (tau, 1, T)) / 2)
    sq = sp.Symbol("s_t", positive=True) * sp.Symbol("s_tau", positive=True) * sp.Symbol("w", real=True) ** 2
    steps.append(
        Step(
            "(sum s A^2)(sum s B^2) - (sum s A B)^2 = 1/2 sum_{t,tau} s_t s_tau (A_t B_tau - A_tau B_t)^2 "
            ">= 0 (applied to the centred gamma, b)",
            is_zero(lag) and bool(sq.is_nonnegative),
            "normal-form",
        )
    )
    folds = {sp.Sum(s[t], (t, 1, T)): 1}
    sb = lambda c: s[c]  # noqa: E731
    cen = sp.Sum(
        s[t] * (A[t] - sp.Sum(s[x] * A[x], (x, 1, T))) * (B[t] - sp.Sum(s[y] * B[y], (y, 1, T))), (t, 1, T)
    )
    steps.append(Step("Cov_s(A, B) = sum_t s_t (A_t - Abar)(B_t - Bbar) (sum_t s_t = 1)",
                      is_zero(cen - cov(sb, lambda c: A[c], lambda c: B[c]), folds), "normal-form"))
    # 3. Bhatia-Davis and Popoviciu
    hi, lo, bb = sp.Symbol("hi", real=True), sp.Symbol("lo", real=True), sp.Symbol("bbar", real=True)
    Bbar = sp.Sum(s[x] * B[x], (x, 1, T))
    var = cov(sb, lambda c: B[c], lambda c: B[c])
    bd = (hi - Bbar) * (Bbar - lo) - var - sp.Sum(s[t] * (hi - B[t]) * (B[t] - lo), (t, 1, T))
    pq = (
        sp.Symbol("s_t", positive=True)
        * sp.Symbol("hi-B_t", nonnegative=True)
        * sp.Symbol("B_t-lo", nonnegative=True)
    )
    steps.append(
        Step(
            "(hi - Bbar)(Bbar - lo) - Var_s(B) = sum_t s_t (hi - B_t)(B_t - lo) >= 0 for lo <= B_t <= hi",
            is_zero(bd, folds) and bool(pq.is_nonnegative),
            "normal-form",
        )
    )
    pop = sp.expand((hi - lo) ** 2 / 4 - (hi - bb) * (bb - lo) - ((hi + lo) / 2 - bb) ** 2) == 0
    steps.append(Step("(hi - lo)^2/4 - (hi - bbar)(bbar - lo) = ((hi + lo)/2 - bbar)^2 >= 0", pop, "sympy"))
    # 4. the mean lies in [lo, hi]
    inside = (is_zero(Bbar - lo - sp.Sum(s[t] * (B[t] - lo), (t, 1, T)), folds)
              and is_zero(hi - Bbar - sp.Sum(s[t] * (hi - B[t]), (t, 1, T)), folds))
    steps.append(Step("Bbar - lo = sum_t s_t (B_t - lo) >= 0 and hi - Bbar = sum_t s_t (hi - B_t) >= 0, so "
                      "|B_t - Bbar| <= hi - lo", inside, "normal-form"))
    # 5. the assembled bound is increasing in Delta and rho
    e = _per_example_bound()
    pos = {Delta: sp.Symbol("D", positive=True), rho: sp.Symbol("r", positive=True),
           B1: sp.Symbol("b1", positive=True), B2: sp.Symbol("b2", positive=True)}
    mono = all(bool(sp.diff(e, v).xreplace(pos).is_positive) for v in (Delta, rho))
    steps.append(Step(f"|phi''(0)| <= {e} (steps 2-4), increasing in Delta and rho", mono, "sign"))
    c1, c2 = logistic_constants()
    steps.append(
        Step(
            "logistic loss: sup|ell'| = 1 (ell'' > 0, limits -1 and 0), sup ell'' = 1/4 (sympy maximum)",
            (c1, c2) == (1, sp.Rational(1, 4)),
            "sympy",
        )
    )
    return _proof("smoothness-bound", "correct",
                  "||grad L(W) - grad L(W')||_F <= L_W ||W - W'||_F with L_W = (1/n) sum_i R_i^2 ||z_i||^2 "
                  "(B2 Delta_i^2/4 + B1 Delta_i)", "all n, T, d", steps, t0)


@disk_cached
def logistic_constants() -> tuple:
    """(sup_u |ell'(u)|, sup_u |ell''(u)|) of the logistic loss, by sympy."""
    from sympy.calculus.util import maximum

    e = loss_expr("logistic")
    d1, d2 = sp.diff(e, U), sp.diff(e, U, 2)
    if not (sp.simplify(d2).is_positive and sp.limit(d1, U, sp.oo) == 0):
        raise AssertionError("logistic ell' is not increasing to 0")
    return -sp.limit(d1, U, -sp.oo), maximum(d2, U, sp.S.Reals)


@cache
def _sup_helpers(loss: str):
    """Lambdified |ell'|, |ell''| and the real critical points of ell', ell'' (zeros of ell'', ell''')."""
    e = loss_expr(loss)
    out = []
    for k in (1, 2):
        f = sp.diff(e, U, k)
        crit = sp.solveset(sp.diff(f, U), U, sp.S.Reals)
        if crit == sp.S.Reals or crit == sp.S.EmptySet:  # constant, or monotone: the endpoints suffice
            pts = []
        elif isinstance(crit, sp.FiniteSet):
            pts = [float(c) for c in crit]
        else:
            raise InvalidInputError(
                f"cannot locate the critical points of the {k}. derivative of {loss}: {crit}"
            )
        out.append((sp.lambdify(U, sp.Abs(f), "numpy"), pts))
    return tuple(out)


def loss_sup(loss: str, lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """(sup |ell'|, sup |ell''|) over [lo, hi] (arrays): max over the endpoints and interior critical
    points."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    res = []
    for f, pts in _sup_helpers(loss):
        vals = [np.broadcast_to(f(lo), lo.shape), np.broadcast_to(f(hi), hi.shape)]
        vals += [np.where((lo <= c) & (c <= hi), float(f(c)), 0.0) for c in pts]
        res.append(np.max(np.stack(vals), axis=0))
    return res[0], res[1]


@cache
def _bound_fn():
    return sp.lambdify((Delta, rho, B1, B2), _per_example_bound(), "numpy")


def lipschitz_bound(data, loss: str = "logistic", form: str = "scores") -> float:
    r"""L_W >= Lipschitz constant of grad L(W) on ``data`` (numerics.data.AttentionData with a head v).

    ``form="scores"``: Delta_i = score range, rho_i = token diameter ||z_i||, ell', ell'' bounded on the
    score range. ``form="norms"``: in terms of R_i = max_t ||x_it||, ||z_i||, ||v|| only
    (Delta_i = 2||v|| R_i, rho_i = 2 R_i ||z_i||, ell', ell'' bounded on [-||v|| R_i, ||v|| R_i]).
    """
    if form not in FORMS:
        raise InvalidInputError(f"form must be one of {FORMS}, got {form!r}")
    if getattr(data, "v", None) is None:
        raise InvalidInputError("lipschitz_bound needs a linear head v")
    X, Z, v = np.asarray(data.X), np.asarray(data.Z), np.asarray(data.v)
    zn = np.linalg.norm(Z, axis=1)  # (n,)
    if form == "scores":
        g = np.asarray(data.Y)[:, None] * (X @ v)  # (n, T)
        lo, hi = g.min(1), g.max(1)
        diam = np.linalg.norm(X[:, :, None, :] - X[:, None, :, :], axis=-1).max(axis=(1, 2))  # (n,)
        r = diam * zn
    else:
        R = np.linalg.norm(X, axis=2).max(1)  # (n,)
        hi = np.linalg.norm(v) * R
        lo = -hi
        r = 2 * R * zn
    return lipschitz_bound_logits(lo, hi, r, loss)


def lipschitz_bound_logits(lo, hi, rho, loss: str = "logistic") -> float:
    r"""The same proved bound (1/n) Σ_i bound(Δ_i, ρ_i, B1_i, B2_i) for ANY model whose logits are linear in
    the trained parameter θ, a_i(θ + εM) = a_i(θ) + ε b_i(M): steps 1–5 of the derivation use only that
    linearity, the fixed scores γ_i (range [lo_i, hi_i], Δ_i = hi_i − lo_i) and ρ_i ≥ max_{t,τ} |b_it − b_iτ|
    for ‖M‖ = 1. W-attention: ρ_i = D_i‖z_i‖ (:func:`lipschitz_bound`); prompt attention (TLZO, a_it =
    k_it^T p): ρ_i = the key diameter max_{t,τ} ‖k_it − k_iτ‖ (Cauchy–Schwarz)."""
    lo, hi, rho = (np.asarray(a, dtype=float) for a in (lo, hi, rho))
    return float(np.mean(_per_example(lo, hi, rho, loss)))


def _per_example(lo, hi, r, loss: str) -> np.ndarray:
    """Step 5's per-example bound from the score range [lo, hi] and the logit-direction range r (arrays)."""
    b1, b2 = loss_sup(loss, lo, hi)
    return np.asarray(_bound_fn()(hi - lo, r, b1, b2), dtype=float)


def seq_lipschitz_bound(X, gamma, causal: bool = False, loss: str = "logistic") -> float:
    r"""L_W >= Lipschitz constant of grad L(W) for the sequence (causal) loss of numerics.sequence,
    L(W) = (1/(nT)) sum_{i,k} ell(gamma_ik^T s_ik(W)), s_ik = S(X_i W x_ik) over the allowed keys.

    Reduction (no new proof): query (i, k) is one example of the single-query loss above, with query
    z = x_ik, keys the allowed x_it (t <= k if causal: masked keys get probability exactly 0, so the softmax
    is the softmax over the allowed keys alone) and scores gamma_ikt, so its term phi_ik(W) has the
    per-example bound of step 5 with Delta_ik the range of gamma_ikt and rho_ik <= D_ik ||x_ik|| ||M||_F
    over the allowed keys (D_ik their diameter); L is the mean of the nT terms, and the Lipschitz constant of
    a mean of gradients is at most the mean of theirs. A query with one allowed key (causal k = 0) has a
    constant softmax: D_ik = 0, bound 0. Checked against central differences of numerics.sequence.seq_grad
    (tests/theory/test_formal.py).

    X (n, T, d); gamma (n, T, T) with gamma[i, k, t] the score of key t for query k.
    """
    X, G = np.asarray(X, dtype=float), np.asarray(gamma, dtype=float)
    if X.ndim != 3 or G.shape != X.shape[:2] + (X.shape[1],):
        raise InvalidInputError(f"X must be (n, T, d) and gamma (n, T, T); got {X.shape} and {G.shape}")
    n, T, _ = X.shape
    total = 0.0
    for k in range(T):
        keys = slice(0, k + 1) if causal else slice(None)
        Xk, g = X[:, keys], G[:, k, keys]
        diam = np.linalg.norm(Xk[:, :, None, :] - Xk[:, None, :, :], axis=-1).max(axis=(1, 2))  # (n,)
        total += float(np.sum(_per_example(g.min(1), g.max(1), diam * np.linalg.norm(X[:, k], axis=1), loss)))
    return total / (n * T)
