r"""Stationary points: the stationarity conditions, and proofs that under B.1 or B.2 they have no solution.

Fixed sizes (kept from :mod:`theory.derivations`, where they are re-exported):

* :func:`stationary_conditions` -- grad L(W) = 0 written per example, at explicit (n, T, d);
* :func:`no_stationary_point_lemma` -- n = 1, T = 2: grad L(W) = ell' s_1 s_2 (gamma_1 - gamma_2)(x_1 - x_2)
z^T.

All sizes (:func:`b2_covariance_bound`, :func:`b1_covariance_bound`, :func:`no_stationary_point_general`),
with sums over a symbolic T decided by :mod:`theory.sums` (softmax s on the simplex: s_t > 0, the fold
sum_t s_t = 1). For one example with optimal token o, scores gamma and the margin profile h = X W^mm z of the
Att-SVM solution (h_o - h_t >= 1 for t != o):

* B.2 (all non-optimal scores equal, gamma_t = g0 + Delta delta_to, Delta > 0):
  Cov_s(gamma, h) = Delta s_o (1 - s_o) + Delta s_o sum_t s_t (1 - delta_to) xi_t with xi_t = h_o - h_t - 1 >=
  0;
* B.1 (every non-optimal token a support token, h_o - h_t = 1; gaps gamma_o - gamma_t = Delta + zeta_t,
  Delta = the smallest gap > 0, zeta_t >= 0):
  Cov_s(gamma, h) = Delta s_o (1 - s_o) + s_o sum_t s_t (1 - delta_to) zeta_t.

In both cases the remainder is a sum of non-negative terms (sign checked by sympy on the summand for
delta in {0, 1}) and 1 - s_o = sum_t s_t (1 - delta_to) > 0 for T >= 2, so Cov_{s_i}(gamma_i, h_i) >=
Delta_i s_io (1 - s_io) > 0 at every finite W. With the covariance identity (proved for all sizes in
:mod:`theory.general`) and ell' < 0 (Assumption A), <grad L(W), W^mm> = (1/n) sum_i ell'_i Cov_i < 0: every
summand is negative (sympy sign), so the stationarity equations grad L(W) = 0, which would force
<grad L(W), W^mm> = 0, have no solution. checks/theorems/no_stationary_points.py confirms it numerically.

References
----------
TLTO (arXiv 2308.16898) §4 (global convergence under B.1/B.2, reconstructed in THEORY.md §4); the
covariance form of the gradient in its appendix.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sympy as sp

from .derivations import (
    VARIANTS,
    Derivation,
    _check_method,
    _check_variant,
    _prove,
    covariance_identity,
    gradient_closed_form,
    kq_chain_rule,
    softmax_jacobian,
    symbolic_gradient,
)
from .general import GeneralProof, Step, T, _proof, cov, covariance_general, stationarity_conditions_general
from .model import symbolic_model, to_exp
from .proofcache import disk_cached
from .sums import index, is_zero

# -- 5. stationary-point conditions ----------------------------------------------------------------

@disk_cached
def stationary_conditions(n: int = 2, T: int = 2, d: int = 2, variant: str = "correct",
                          method: str = "auto") -> Derivation:
    r"""grad L(W) = 0 written per example: sum_i ell'_i sum_t s_it (gamma_it - gamma_bar_i) x_it z_i^T = 0.

    gamma_bar_i = s_i^T gamma_i is the softmax-mean score, because X_i^T (diag(s) - s s^T) gamma =
    sum_t s_t (gamma_t - s^T gamma) x_t. ``extra["equations"]`` are the d^2 scalar equations (with exp),
    ``extra["per_example"]`` the n matrices G_i with grad L = (1/n) sum_i G_i. ``holds`` certifies that
    these equations are exactly grad L(W) = 0. Variant ``"no-mean"`` drops gamma_bar_i and must fail.

    Examples
    --------
    >>> r = stationary_conditions(1, 2, 1)
    >>> r.holds, len(r.extra["equations"])
    (True, 1)
    """
    _check_variant("stationary-conditions", variant)
    _check_method(method)
    t0 = time.perf_counter()
    mod = symbolic_model(n, T, d)
    per = []
    for i in range(n):
        s, g = mod.softmax(i), mod.gamma(i)
        gbar = 0 if variant == "no-mean" else (s.T * g)[0, 0]
        acc = sp.zeros(d, 1)
        for t in range(T):
            acc += s[t] * (g[t] - gbar) * mod.X[i][t, :].T
        per.append(sp.ImmutableMatrix(mod.ellp[i] * acc * mod.z[i].T))
    rhs = sp.ImmutableMatrix(sum(per, sp.zeros(d, d)) / n)
    eqs = tuple(sp.Eq(to_exp(rhs[j, k]), 0) for j in range(d) for k in range(d))
    tex = (r"\nabla L(W) = 0 \iff \sum_{i=1}^n \ell'_i \sum_{t=1}^T s_{it}\,(\gamma_{it}"
           + ("" if variant == "no-mean" else r" - \bar\gamma_i") + r")\, x_{it} z_i^\top = 0,\ "
           + r"\bar\gamma_i = s_i^\top\gamma_i" + rf"\ (n={n}, T={T}, d={d})")
    return _prove("stationary-conditions", variant, {"n": n, "T": T, "d": d},
                  "grad L(W) = 0 <=> sum_i ell'_i sum_t s_it (gamma_it - s_i^T gamma_i) x_it z_i^T = 0", tex,
                  symbolic_gradient(n, T, d), rhs, mod.ellp, method, t0=t0,
                  extra={"equations": eqs, "per_example": tuple(to_exp(p) for p in per)})


# -- lemma: n = 1, T = 2 has no finite stationary point ---------------------------------------------

LEMMA_ARGUMENT = (
    "grad L(W) = ell'(u) s_1 s_2 (gamma_1 - gamma_2) (x_1 - x_2) z^T (proved below as an identity).",
    "ell'(u) < 0 for every u under Assumption A (theory.losses.assumption_a proves it for each catalogue "
    "loss).",
    "s_1 s_2 = e^{a_1} e^{a_2} / (e^{a_1} + e^{a_2})^2 > 0 for every finite W (sympy: is_positive).",
    "gamma_1 - gamma_2 = Y v^T (x_1 - x_2); so gamma_1 != gamma_2 forces x_1 != x_2, and the scalar "
    "ell' s_1 s_2 (gamma_1 - gamma_2) is non-zero.",
    "A rank-one matrix a b^T is zero iff a = 0 or b = 0; hence grad L(W) = 0 iff z = 0. For any query z != 0 "
    "the gradient never vanishes: ||grad L(W)||_F^2 = ell'^2 s_1^2 s_2^2 (gamma_1-gamma_2)^2 ||x_1-x_2||^2 "
    "||z||^2 > 0, "
    "so L has no finite stationary point.",
)


@disk_cached
def no_stationary_point_lemma(d: int = 2, variant: str = "correct", method: str = "auto") -> Derivation:
    r"""n = 1, T = 2: grad L(W) = ell'(u) s_1 s_2 (gamma_1 - gamma_2) (x_1 - x_2) z^T, never 0 if gamma_1 !=
    gamma_2, z != 0.

    ``extra`` holds the ``factorisation`` (scalar factor and rank-one matrix), ``norm_squared`` of the
    gradient, ``softmax_product_positive`` (sympy's verdict that s_1 s_2 > 0), ``loss_derivative_negative``
    (Assumption A's ell' < 0 per catalogue loss) and the ``argument`` (see :data:`LEMMA_ARGUMENT`).
    Variant ``"no-softmax-factor"`` omits s_1 s_2 and must fail.

    Examples
    --------
    >>> r = no_stationary_point_lemma(1)
    >>> r.holds, r.extra["softmax_product_positive"]
    (True, True)

    References
    ----------
    TLTO §2-3 (no finite stationary points; ||W|| diverges under GD); THEORY.md §4 no-stationary-points.
    """
    from .losses import LOSSES, assumption_a

    _check_variant("no-stationary-point-n1-T2", variant)
    _check_method(method)
    t0 = time.perf_counter()
    mod = symbolic_model(1, 2, d)
    s, g = mod.softmax(0), mod.gamma(0)
    dx = (mod.X[0][0, :] - mod.X[0][1, :]).T  # (d, 1)
    soft = 1 if variant == "no-softmax-factor" else s[0] * s[1]
    scalar = mod.ellp[0] * soft * (g[0] - g[1])
    rank_one = sp.ImmutableMatrix(dx * mod.z[0].T)
    rhs = sp.ImmutableMatrix(scalar * rank_one)
    sq = lambda v: sp.Add(*[e**2 for e in v])  # noqa: E731
    extra = {
        "factorisation": (to_exp(scalar), rank_one),
        "norm_squared": to_exp(scalar**2 * sq(dx) * sq(mod.z[0])),
        "gamma_difference": sp.factor(g[0] - g[1]),
        "softmax_product_positive": bool((s[0] * s[1]).is_positive),
        "loss_derivative_negative": {k: assumption_a(k).decreasing for k in LOSSES},
        "argument": LEMMA_ARGUMENT,
    }
    fac = "" if variant == "no-softmax-factor" else r"s_1 s_2\,"
    tex = (
        r"\nabla L(W) = \ell'(u)\, "
        + fac
        + r"(\gamma_1 - \gamma_2)\,(x_1 - x_2)\, z^\top"
        + rf"\ (n=1, T=2, d={d});\ \ell' < 0,\ s_1 s_2 > 0,\ \gamma_1 \ne \gamma_2 \Rightarrow \nabla L(W) "
            rf"\ne 0 \text{{ for }} z \ne 0"
    )
    return _prove("no-stationary-point-n1-T2", variant, {"n": 1, "T": 2, "d": d},
                  "n=1, T=2: grad L(W) = ell' s_1 s_2 (gamma_1 - gamma_2)(x_1 - x_2) z^T != 0", tex,
                  symbolic_gradient(1, 2, d), rhs, mod.ellp, method, t0=t0, extra=extra,
                  notes=" ".join(LEMMA_ARGUMENT))



# -- all sizes: B.1 / B.2 -------------------------------------------------------------------------------

def _simplex():
    """Softmax probabilities s_t > 0 and the fold sum_t s_t = 1."""
    s = sp.IndexedBase("s", positive=True)
    t = index("t")
    return s, {sp.Sum(s[t], (t, 1, T)): 1}


def _nonneg_for_both_deltas(summand_of_delta, symbols: dict) -> bool:
    """sympy decides summand >= 0 for delta_to = 0 and = 1, with each Indexed replaced by a symbol carrying
    its hypothesis (``symbols``: Indexed -> Symbol with assumptions)."""
    return all(bool(sp.expand(summand_of_delta(dl).xreplace(symbols)).is_nonnegative)
               or bool(summand_of_delta(dl).xreplace(symbols).is_nonnegative) for dl in (0, 1))


def _one_minus_so_steps(s, folds, o):
    t = index("t")
    rest = sp.Sum(s[t] * (1 - sp.KroneckerDelta(t, o)), (t, 1, T))
    st = sp.Symbol("s_t", positive=True)
    return [
        Step(
            "1 - s_o = sum_t s_t (1 - delta_to)",
            is_zero(rest - (1 - s[o]), folds, ranges={o: T}),
            "normal-form",
        ),
        Step(
            "for t != o the summand s_t (1 - delta_to) = s_t > 0, and T >= 2 gives such a t: 1 - s_o > 0",
            bool((st * (1 - 0)).is_positive),
            "sign",
        ),
    ]


@disk_cached
def b2_covariance_bound() -> GeneralProof:
    r"""B.2: Cov_s(gamma, h) >= Delta s_o (1 - s_o) > 0 for every T, every s in the open simplex, when
    gamma_t = g0 + Delta delta_to (Delta > 0) and h_o - h_t >= 1 for t != o."""
    t0 = time.perf_counter()
    s, folds = _simplex()
    o, t = index("o"), index("t")
    g0, ho = sp.Symbol("g0", real=True), sp.Symbol("h_o", real=True)
    Delta = sp.Symbol("Delta", positive=True)
    xi = sp.IndexedBase("xi", nonnegative=True)
    gam = lambda x: g0 + Delta * sp.KroneckerDelta(x, o)  # noqa: E731
    h = lambda x: ho - (1 - sp.KroneckerDelta(x, o)) * (1 + xi[x])  # noqa: E731
    C = cov(lambda x: s[x], gam, h)
    rem = sp.Sum(s[t] * (1 - sp.KroneckerDelta(t, o)) * xi[t], (t, 1, T))
    ident = is_zero(C - Delta * s[o] * (1 - s[o]) - Delta * s[o] * rem, folds, ranges={o: T})
    syms = {s[t]: sp.Symbol("s_t", positive=True), xi[t]: sp.Symbol("xi_t", nonnegative=True)}
    sign = _nonneg_for_both_deltas(lambda dl: s[t] * (1 - dl) * xi[t], syms)
    return _proof(
        "b2-covariance-bound",
        "correct",
        "B.2: Cov_s(gamma, X W^mm z) >= Delta s_opt (1 - s_opt) > 0",
        "all T",
        [
            Step(
                "Cov_s(gamma, h) = Delta s_o(1 - s_o) + Delta s_o sum_t s_t (1 - delta_to) xi_t "
                "(gamma_t = g0 + Delta delta_to, h_t = h_o - (1 - delta_to)(1 + xi_t), sum_t s_t = 1)",
                ident,
                "normal-form",
            ),
            Step("each remainder summand s_t (1 - delta_to) xi_t >= 0 (s_t > 0, xi_t >= 0)", sign, "sign"),
            *_one_minus_so_steps(s, folds, o),
        ],
        t0,
    )


@disk_cached
def b1_covariance_bound() -> GeneralProof:
    r"""B.1: Cov_s(gamma, h) >= Delta s_o (1 - s_o) > 0 for every T when h_o - h_t = 1 for every t != o
    (all support tokens) and gamma_o - gamma_t >= Delta > 0."""
    t0 = time.perf_counter()
    s, folds = _simplex()
    o, t = index("o"), index("t")
    go, ho = sp.Symbol("gamma_o", real=True), sp.Symbol("h_o", real=True)
    Delta = sp.Symbol("Delta", positive=True)
    zeta = sp.IndexedBase("zeta", nonnegative=True)
    gam = lambda x: go - (1 - sp.KroneckerDelta(x, o)) * (Delta + zeta[x])  # noqa: E731
    h = lambda x: ho - (1 - sp.KroneckerDelta(x, o))  # noqa: E731
    C = cov(lambda x: s[x], gam, h)
    rem = sp.Sum(s[t] * (1 - sp.KroneckerDelta(t, o)) * zeta[t], (t, 1, T))
    ident = is_zero(C - Delta * s[o] * (1 - s[o]) - s[o] * rem, folds, ranges={o: T})
    syms = {s[t]: sp.Symbol("s_t", positive=True), zeta[t]: sp.Symbol("zeta_t", nonnegative=True)}
    sign = _nonneg_for_both_deltas(lambda dl: s[t] * (1 - dl) * zeta[t], syms)
    return _proof(
        "b1-covariance-bound",
        "correct",
        "B.1: Cov_s(gamma, X W^mm z) >= Delta_min s_opt (1 - s_opt) > 0",
        "all T",
        [
            Step(
                "Cov_s(gamma, h) = Delta s_o(1 - s_o) + s_o sum_t s_t (1 - delta_to) zeta_t "
                "(h_t = h_o - (1 - delta_to), gamma_t = gamma_o - (1 - delta_to)(Delta + zeta_t))",
                ident,
                "normal-form",
            ),
            Step("each remainder summand s_t (1 - delta_to) zeta_t >= 0", sign, "sign"),
            *_one_minus_so_steps(s, folds, o),
        ],
        t0,
    )


@disk_cached
def no_stationary_point_general() -> GeneralProof:
    r"""Under Assumption A and B.1 or B.2 (Att-SVM(opt) feasible): <grad L(W), W^mm> < 0 at every W, for all
    n, T, d; hence the stationarity equations grad L(W) = 0 have no solution."""
    from .losses import LOSSES, assumption_a

    t0 = time.perf_counter()
    ellp = sp.Symbol("ell'_i", negative=True)
    Delta, so, so_bar = sp.Symbol("Delta_i", positive=True), sp.Symbol("s_io", positive=True), \
        sp.Symbol("1-s_io", positive=True)
    rho = sp.Symbol("rho_i", nonnegative=True)  # Cov_i - Delta_i s_io (1 - s_io) >= 0 (the remainders above)
    summand_negative = bool((ellp * (Delta * so * so_bar + rho)).is_negative)
    loss_neg = all(assumption_a(k).decreasing for k in LOSSES)
    pieces = [
        stationarity_conditions_general(),
        covariance_general(),
        b1_covariance_bound(),
        b2_covariance_bound(),
    ]
    steps = [
        Step(f"uses {p.id} ({p.sizes}): " + ("proved" if p.holds else "NOT proved"), p.holds, "normal-form")
        for p in pieces
    ]
    steps += [
        Step(
            "Assumption A: ell' < 0 on R for every catalogue loss (theory.losses.assumption_a)",
            loss_neg,
            "sympy",
        ),
        Step(
            "each summand ell'_i Cov_i = ell'_i (Delta_i s_io (1 - s_io) + rho_i) < 0 (ell' < 0, Delta, "
            "s_io, "
            "1 - s_io > 0, rho_i >= 0); a non-empty sum of negatives is negative",
            summand_negative,
            "sign",
        ),
        Step(
            "grad L(W) = 0 would give <grad L(W), W^mm> = sum_jk W^mm_jk [grad L(W)]_jk = 0 < 0: "
            "contradiction, "
            "so the stationarity equations have no solution",
            summand_negative and all(p.holds for p in pieces),
            "logic",
        ),
    ]
    return _proof(
        "no-stationary-points",
        "correct",
        "A, Att-SVM(opt) feasible, B.1 or B.2 => <grad L(W), W^mm> < 0 for every W (no stationary point)",
        "all n, T, d",
        steps,
        t0,
    )


#: Every derivation by its VARIANTS name: those of theory.derivations and the two of this module (the one
#: module that sees both).
DERIVATIONS: dict[str, Callable[..., Derivation]] = {
    "softmax-jacobian": softmax_jacobian,
    "gradient-closed-form": gradient_closed_form,
    "kq-chain-rule": kq_chain_rule,
    "covariance-identity": covariance_identity,
    "stationary-conditions": stationary_conditions,
    "no-stationary-point-n1-T2": no_stationary_point_lemma,
}


def all_derivations(method: str = "auto") -> list[Derivation]:
    """Every derivation at its default sizes, correct variant and every wrong variant (cached)."""
    return [DERIVATIONS[name](variant=v, method=method) for name, vs in VARIANTS.items() for v in vs]
