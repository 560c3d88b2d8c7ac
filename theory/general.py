r"""The closed forms of THEORY.md §2 proved for *every* size (n, T, d, m), in index notation.

The model is written with sympy ``Sum``s whose upper bounds are the positive integer symbols n, T, d, m,
and ``IndexedBase`` data X[i, t, p], z[i, q], Y[i], v[p], W[p, q] (K[p, r], Q[q, r], M[p, q]):

.. math::

    a_{it} = \sum_{p,q} X_{itp} W_{pq} z_{iq},\quad s_{it} = \frac{e^{a_{it}}}{\sum_\sigma
    e^{a_{i\sigma}}},\quad \gamma_{it} = Y_i \sum_p v_p X_{itp},\quad L(W) = \frac1n\sum_i \ell\Big(\sum_t
    \gamma_{it} s_{it}\Big).

Each identity lhs = rhs is proved in two machine steps:

1. ``sympy.diff`` differentiates the Sum expression with respect to a *generic* entry W[j, k] (K[a, b],
   Q[a, b], a[tau]); sympy moves the derivative under the finite sums and produces Kronecker deltas,
   which the normal form sifts using the range hypotheses 1 <= j <= d etc.
   ``ell`` is an undefined function, so the result holds for every differentiable loss.
2. :func:`theory.sums.is_zero` decides lhs - rhs = 0 with rules valid for every positive integer value
   of the bounds (linearity, finite Fubini, renaming of bound variables, sifting, folds of known sums).

The right-hand sides are the matrix closed forms written entry by entry (the definition of a matrix
product: [X^T c z^T]_{jk} = sum_tau X_{tau j} c_tau z_k), so a proof here is a proof of the matrix
identity for all sizes. Wrong variants (no -s s^T, swapped transposes, no mean term) leave a non-empty
normal form ("not proved"); their refutation by a concrete counter-value is at fixed sizes
(:mod:`theory.derivations`).

Examples
--------
>>> r = softmax_jacobian_general()
>>> r.holds, r.sizes
(True, 'all T')
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache

import sympy as sp

from numerics.errors import InvalidInputError

from .proofcache import disk_cached
from .sums import index, is_zero

n, T, d, m = (index(s) for s in ("n", "T", "d", "m"))
X, W, z = sp.IndexedBase("X", real=True), sp.IndexedBase("W", real=True), sp.IndexedBase("z", real=True)
Y, v = sp.IndexedBase("Y", real=True), sp.IndexedBase("v", real=True)
K, Q, M = sp.IndexedBase("K", real=True), sp.IndexedBase("Q", real=True), sp.IndexedBase("M", real=True)
#: The undefined loss and its derivatives at a margin (shown as ell'(u), ell''(u)).
ell = sp.Function("ell", real=True)
ellp = sp.Function("ell'", real=True)
ellpp = sp.Function("ell''", real=True)


@dataclass(frozen=True)
class Step:
    """One machine-checked step: what it states, whether it held, how it was decided."""

    what: str
    holds: bool
    method: str  # "normal-form" | "sign" | "sympy"


@dataclass(frozen=True)
class GeneralProof:
    """The outcome of one all-size proof."""

    id: str
    variant: str
    statement: str
    sizes: str  # "all n, T, d" etc.
    steps: tuple
    seconds: float

    @property
    def holds(self) -> bool:
        return all(s.holds for s in self.steps)


def _proof(pid, variant, statement, sizes, steps, t0) -> GeneralProof:
    return GeneralProof(id=pid, variant=variant, statement=statement, sizes=sizes, steps=tuple(steps),
                        seconds=time.perf_counter() - t0)


def _check_variant(variant: str, allowed: tuple) -> None:
    if variant not in allowed:
        raise InvalidInputError(f"variant must be one of {allowed}, got {variant!r}")


# -- the model in index notation ----------------------------------------------------------------------

def logit(i, t, Wf=None):
    """a_it = sum_{p,q} X[i,t,p] W[p,q] z[i,q] (``Wf(p, q)`` replaces W[p, q], e.g. by (K Q^T)[p, q])."""
    p, q = index("p"), index("q")
    w = W[p, q] if Wf is None else Wf(p, q)
    return sp.Sum(X[i, t, p] * w * z[i, q], (p, 1, d), (q, 1, d))


def gamma(i, t):
    """gamma_it = Y_i v^T x_it (linear head; independent of W)."""
    p = index("p")
    return Y[i] * sp.Sum(v[p] * X[i, t, p], (p, 1, d))


def normaliser(i, Wf=None):
    sig = index("sigma")
    return sp.Sum(sp.exp(logit(i, sig, Wf)), (sig, 1, T))


def soft(i, t, Wf=None):
    """s_it = e^{a_it} / sum_sigma e^{a_i sigma}."""
    return sp.exp(logit(i, t, Wf)) / normaliser(i, Wf)


def margin(i, Wf=None):
    """u_i = gamma_i^T s_i."""
    t = index("t")
    return sp.Sum(gamma(i, t) * soft(i, t, Wf), (t, 1, T))


def loss(Wf=None):
    i = index("i")
    return sp.Sum(ell(margin(i, Wf)), (i, 1, n)) / n


def token_weight(i, tau, Wf=None, variant="correct"):
    """c_i,tau = [(diag(s_i) - s_i s_i^T) gamma_i]_tau (variant "no-outer": [diag(s_i) gamma_i]_tau)."""
    t = index("t")
    first = soft(i, tau, Wf) * gamma(i, tau)
    if variant == "no-outer":
        return first
    return first - soft(i, tau, Wf) * sp.Sum(soft(i, t, Wf) * gamma(i, t), (t, 1, T))


def closed_form_entry(j, k, Wf=None, variant="correct"):
    """[grad L(W)]_jk = (1/n) sum_i ell'(u_i) sum_tau X[i,tau,j] c_i,tau z[i,k]."""
    i, tau = index("i"), index("tau")
    inner = sp.Sum(X[i, tau, j] * token_weight(i, tau, Wf, variant) * z[i, k], (tau, 1, T))
    return sp.Sum(ellp(margin(i, Wf)) * inner, (i, 1, n)) / n


def derivatives_as_functions(expr):
    """sympy's Subs(Derivative(ell(xi), xi [, xi]), xi, u) -> ell'(u) / ell''(u)."""
    def rep(e):
        der = e.expr
        if not isinstance(der, sp.Derivative) or der.expr.func != ell:
            raise InvalidInputError(f"unexpected derivative {e}")
        order = sum(c for _, c in der.variable_count)
        return {1: ellp, 2: ellpp}[order](e.point[0])
    return expr.replace(lambda e: isinstance(e, sp.Subs), rep)


@cache
def derived_gradient_entry():
    """dL/dW[j,k] by sympy.diff (free indices j, k in [1, d]), ell's derivative shown as ell'(u)."""
    j, k = index("j"), index("k")
    return derivatives_as_functions(sp.diff(loss(), W[j, k]))


# -- 1. softmax Jacobian ------------------------------------------------------------------------------

@disk_cached
def softmax_jacobian_general(variant: str = "correct") -> GeneralProof:
    r"""ds_t/da_tau = s_t (delta_{t tau} - s_tau) for every T and every t, tau in [1, T] ("no-outer": s_t
    delta)."""
    _check_variant(variant, ("correct", "no-outer"))
    t0 = time.perf_counter()
    a = sp.IndexedBase("a", real=True)
    t, tau, sig = index("t"), index("tau"), index("sigma")
    S = sp.Sum(sp.exp(a[sig]), (sig, 1, T))
    s = lambda x: sp.exp(a[x]) / S  # noqa: E731
    lhs = sp.diff(s(t), a[tau])
    rhs = s(t) * sp.KroneckerDelta(t, tau) - (0 if variant == "no-outer" else s(t) * s(tau))
    ok = is_zero(lhs - rhs, ranges={t: T, tau: T})
    return _proof(
        "softmax-jacobian",
        variant,
        "dS(a)_t/da_tau = s_t (delta_t,tau - s_tau)",
        "all T",
        [
            Step(
                "sympy.diff of e^{a_t} / sum_sigma e^{a_sigma} (symbolic T) equals s_t(delta - s_tau)",
                ok,
                "normal-form",
            )
        ],
        t0,
    )


# -- 2. gradient closed form --------------------------------------------------------------------------

@disk_cached
def gradient_general(variant: str = "correct") -> GeneralProof:
    r"""dL/dW_jk = [(1/n) sum_i ell'(u_i) X_i^T (diag s_i - s_i s_i^T) gamma_i z_i^T]_jk for all n, T, d."""
    _check_variant(variant, ("correct", "no-outer"))
    t0 = time.perf_counter()
    j, k, p, q = index("j"), index("k"), index("p"), index("q")
    lhs = derived_gradient_entry()
    # gamma does not depend on W (linear head): its derivative vanishes identically
    g_ok = is_zero(sp.diff(gamma(index("i"), index("t")), W[p, q]), ranges={p: d, q: d})
    ok = is_zero(lhs - closed_form_entry(j, k, variant=variant), ranges={j: d, k: d})
    return _proof("gradient-closed-form", variant,
                  "grad L(W) = (1/n) sum_i ell'(gamma_i^T s_i) X_i^T (diag s_i - s_i s_i^T) gamma_i z_i^T",
                  "all n, T, d", [
                      Step("gamma_it = Y_i v^T x_it does not depend on W (sympy.diff = 0)", g_ok, "sympy"),
                      Step("sympy.diff of L(W) (sums over symbolic n, T, d; undefined loss ell) in a generic "
                           "entry W[j,k] equals the closed form's entry", ok, "normal-form")], t0)


@disk_cached
def stationarity_conditions_general() -> GeneralProof:
    r"""grad L(W) = 0 iff for all j, k: (1/n) sum_i ell'_i sum_t s_it (gamma_it - s_i^T gamma_i) X[i,t,j]
    z[i,k] = 0."""
    t0 = time.perf_counter()
    i, t, j, k, x = index("i"), index("t"), index("j"), index("k"), index("x")
    gbar = sp.Sum(soft(i, x) * gamma(i, x), (x, 1, T))
    cond = (
        sp.Sum(
            ellp(margin(i)) * sp.Sum(soft(i, t) * (gamma(i, t) - gbar) * X[i, t, j] * z[i, k], (t, 1, T)),
            (i, 1, n),
        )
        / n
    )
    ok = is_zero(derived_gradient_entry() - cond, ranges={j: d, k: d})
    return _proof(
        "stationary-conditions",
        "correct",
        "grad L(W) = 0 <=> sum_i ell'_i sum_t s_it (gamma_it - gamma_bar_i) x_it z_i^T = 0",
        "all n, T, d",
        [Step("the (j,k) stationarity equation is exactly dL/dW_jk (sympy.diff)", ok, "normal-form")],
        t0,
    )


# -- 3. (K, Q) chain rule -----------------------------------------------------------------------------

def _kq(p, q):
    r = index("r")
    return sp.Sum(K[p, r] * Q[q, r], (r, 1, m))


@disk_cached
def kq_chain_rule_general(variant: str = "correct") -> GeneralProof:
    r"""grad_K L(K Q^T) = grad L(W) Q, grad_Q L(K Q^T) = grad L(W)^T K at W = K Q^T, for all n, T, d, m.

    Variant "swapped-transposes": grad L(W)^T Q and grad L(W) K."""
    _check_variant(variant, ("correct", "swapped-transposes"))
    t0 = time.perf_counter()
    a, b, q = index("a"), index("b"), index("q")
    Lkq = loss(_kq)
    gK = derivatives_as_functions(sp.diff(Lkq, K[a, b]))
    gQ = derivatives_as_functions(sp.diff(Lkq, Q[a, b]))
    rg = {a: d, b: m}
    G = lambda r, c: closed_form_entry(r, c, _kq)  # noqa: E731  [grad L(W)]_{rc} at W = K Q^T
    if variant == "correct":
        rK, rQ = sp.Sum(G(a, q) * Q[q, b], (q, 1, d)), sp.Sum(G(q, a) * K[q, b], (q, 1, d))
    else:
        rK, rQ = sp.Sum(G(q, a) * Q[q, b], (q, 1, d)), sp.Sum(G(a, q) * K[q, b], (q, 1, d))
    return _proof(
        "kq-chain-rule",
        variant,
        "grad_K L = grad L(W) Q, grad_Q L = grad L(W)^T K (W = K Q^T)",
        "all n, T, d, m",
        [
            Step(
                "sympy.diff of L(K Q^T) in K[a,b] equals [grad L(W) Q]_ab",
                is_zero(gK - rK, ranges=rg),
                "normal-form",
            ),
            Step(
                "sympy.diff of L(K Q^T) in Q[a,b] equals [grad L(W)^T K]_ab",
                is_zero(gQ - rQ, ranges=rg),
                "normal-form",
            ),
        ],
        t0,
    )


# -- 4. covariance identity ---------------------------------------------------------------------------

def cov(s, g, h, variant="correct"):
    """Cov_s(g, h) = sum_t s_t g_t h_t - (sum_t s_t g_t)(sum_t s_t h_t) for callables t -> entry."""
    t, u, w = index("t"), index("u"), index("w")
    second = sp.Sum(s(t) * g(t) * h(t), (t, 1, T))
    if variant == "no-mean":
        return second
    return second - sp.Sum(s(u) * g(u), (u, 1, T)) * sp.Sum(s(w) * h(w), (w, 1, T))


@disk_cached
def covariance_general(variant: str = "correct") -> GeneralProof:
    r"""(X M z)^T (diag s - s s^T) gamma = Cov_s(gamma, X M z) for every T (generic s, gamma, b = X M z), and
    <grad L(W), M> = (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i) for all n, T, d ("no-mean": drops the
    mean term)."""
    _check_variant(variant, ("correct", "no-mean"))
    t0 = time.perf_counter()
    s_, g_, b_ = (sp.IndexedBase(x, real=True) for x in ("s", "g", "b"))
    t, u = index("t"), index("u")
    quad = sp.Sum(b_[t] * (s_[t] * g_[t] - s_[t] * sp.Sum(s_[u] * g_[u], (u, 1, T))), (t, 1, T))
    one_line = is_zero(quad - cov(lambda x: s_[x], lambda x: g_[x], lambda x: b_[x], variant))
    i, j, k = index("i"), index("k0"), index("k1")
    lhs = sp.Sum(
        M[j, k] * derived_gradient_entry().xreplace({index("j"): j, index("k"): k}), (j, 1, d), (k, 1, d)
    )
    p, q = index("p"), index("q")
    bvec = lambda x: sp.Sum(X[i, x, p] * M[p, q] * z[i, q], (p, 1, d), (q, 1, d))  # noqa: E731
    rhs = (
        sp.Sum(ellp(margin(i)) * cov(lambda x: soft(i, x), lambda x: gamma(i, x), bvec, variant), (i, 1, n))
        / n
    )
    full = is_zero(lhs - rhs, ranges={})
    return _proof(
        "covariance-identity",
        variant,
        "<grad L(W), M> = (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i)",
        "all n, T, d",
        [
            Step(
                "(X M z)^T (diag s - s s^T) gamma = Cov_s(gamma, X M z) for generic s, gamma, b in R^T",
                one_line,
                "normal-form",
            ),
            Step(
                "sum_{j,k} M_jk dL/dW_jk (sympy.diff) = (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i)",
                full,
                "normal-form",
            ),
        ],
        t0,
    )


def all_general(include_variants: bool = True) -> list[GeneralProof]:
    """Every all-size proof of this module (and the wrong variants, which must come out not proved)."""
    out = [softmax_jacobian_general(), gradient_general(), stationarity_conditions_general(),
           kq_chain_rule_general(), covariance_general()]
    if include_variants:
        out += [softmax_jacobian_general("no-outer"), gradient_general("no-outer"),
                kq_chain_rule_general("swapped-transposes"), covariance_general("no-mean")]
    return out
