r"""Symbolic proofs of the closed forms of THEORY.md §2, with deliberately wrong variants.

Each derivation returns a :class:`Derivation`: the symbolically derived side (``lhs``, from
``sympy.diff``), the closed form claimed for it (``rhs``, per ``variant``), ``holds``, the
``method`` that decided it, a concrete ``counter_value`` when it fails, and ``latex``.

How an identity lhs = rhs is proved (``method``):

``"simplify"``
    Each entry of lhs - rhs is split by the loss-derivative symbols ell'_i (it is linear in them),
    every ``Exp(...)`` atom is replaced by an independent positive symbol, and the result is brought
    to rational-function normal form with ``sympy.cancel``. Zero there is a proof: a rational function
    that vanishes identically in independent variables still vanishes after the exponentials are put
    back, and differentiation used only Exp' = Exp (see :mod:`theory.model`). Because ell is an
    undefined function, the gradient identities hold for *every* differentiable loss.
``"exact-rational-points"``
    For sizes where normal forms get slow, the same relaxed expression is evaluated *exactly* (rational
    arithmetic) at ``POINTS`` random rational points. A non-zero rational function of N variables whose
    numerator has degree D vanishes at a point drawn uniformly from S^N with probability <= D/|S|
    (Schwartz-Zippel), so k exact zeros leave a false-positive chance <= (D/|S|)^k. This is evidence,
    not proof, and the result says so.

A failing identity is never declared false on the relaxed expression alone: ``holds=False`` comes with
a real counter-value -- rational data and weights, exponentials evaluated honestly (residual shown
exactly and to 30 digits), and ell'_i = -1 (the catalogue's linear loss ell(u) = -u) where ell is
abstract.

Examples
--------
>>> r = softmax_jacobian(3)
>>> r.holds, r.method
(True, 'simplify')
>>> bad = softmax_jacobian(3, variant="no-outer")
>>> bad.holds, abs(bad.counter_value.residual_value) > 0
(False, True)

References
----------
TLTO (arXiv 2308.16898) §2 (gradient of the attention loss; the covariance form used in the proofs
of its Appendix on the optimization landscape) and §3 (the (K, Q) parameterisation, W = K Q^T).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

import sympy as sp

from numerics.errors import AttnSVMError, InvalidInputError

from .model import Exp, SymbolicModel, softmax, symbolic_model, to_exp
from .proofcache import disk_cached

#: Exact random rational points used by method "exact-rational-points".
POINTS = 5

#: Above this many free symbols in one identity, method="auto" switches to exact rational points.
SIMPLIFY_MAX_SYMBOLS = 48

#: Variants each derivation accepts; every one but "correct" must come out holds=False.
VARIANTS: dict[str, tuple[str, ...]] = {
    "softmax-jacobian": ("correct", "no-outer"),
    "gradient-closed-form": ("correct", "no-outer"),
    "kq-chain-rule": ("correct", "swapped-transposes"),
    "covariance-identity": ("correct", "no-mean"),
    "stationary-conditions": ("correct", "no-mean"),
    "no-stationary-point-n1-T2": ("correct", "no-softmax-factor"),
}

METHODS = ("auto", "simplify", "exact-rational-points")


class UndecidedIdentityError(AttnSVMError):
    """An identity was neither proved nor refuted by a concrete counter-value (should not happen)."""


@dataclass(frozen=True)
class CounterValue:
    """A concrete point where lhs != rhs: rational values per symbol, and the residual lhs - rhs."""

    point: MappingProxyType  # symbol name -> sympy Rational
    loss: str  # how ell' was fixed (abstract ell): "linear (ell' = -1)"
    entry: tuple  # index of the differing entry of lhs - rhs
    residual: sp.Expr  # exact (may contain exp of rationals)
    residual_value: float  # residual to 30 significant digits, as float


@dataclass(frozen=True)
class Derivation:
    """The outcome of one symbolic derivation (frozen; render reports from it)."""

    name: str
    variant: str
    sizes: MappingProxyType
    statement: str
    lhs: sp.ImmutableMatrix  # derived with sympy.diff (ell'(u_i) shown as ell'_i)
    rhs: sp.ImmutableMatrix  # the claimed closed form for this variant
    holds: bool
    method: str  # "simplify" | "exact-rational-points"
    counter_value: CounterValue | None
    latex: str
    seconds: float
    notes: str = ""
    extra: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @property
    def expressions(self) -> dict[str, Any]:
        """lhs, rhs and any extra expressions (equations, factorisations), with exp shown as exp."""
        out = {"lhs": to_exp(self.lhs), "rhs": to_exp(self.rhs)}
        out.update(self.extra)
        return out


# -- the proof engine ----------------------------------------------------------------------------

def _relax(expr: sp.Expr) -> sp.Expr:
    """Replace every Exp(...) atom by an independent positive symbol (outermost first)."""
    atoms = sorted(expr.atoms(Exp), key=sp.default_sort_key)
    return expr.xreplace({a: sp.Symbol(f"E_{j}", positive=True) for j, a in enumerate(atoms)})


def _pieces(expr: sp.Expr, ellp: tuple) -> list[sp.Expr]:
    """Split an expression linear in the ell'_i into its coefficients (plus the ell'-free part)."""
    present = [g for g in ellp if expr.has(g)]
    if not present:
        return [expr]
    zero = {g: 0 for g in present}
    out = [expr.xreplace(zero)]
    for g in present:
        out.append(expr.xreplace({**zero, g: 1}))
    return out


def _is_zero_cancel(expr: sp.Expr) -> bool:
    return sp.cancel(sp.together(expr)) == 0


def _rand_rational(rng: random.Random, positive: bool = False) -> sp.Rational:
    p = rng.randint(1, 97) if positive else rng.randint(-97, 97)
    return sp.Rational(p, rng.randint(1, 89))


def _is_zero_points(expr: sp.Expr, rng: random.Random) -> bool:
    syms = sorted(expr.free_symbols, key=sp.default_sort_key)
    for _ in range(POINTS):
        pt = {s: _rand_rational(rng, positive=bool(s.is_positive)) for s in syms}
        val = expr.xreplace(pt)
        if val != 0:
            return False
    return True


def _decide(diffs: list[tuple[tuple, sp.Expr]], ellp: tuple, method: str, seed: int) -> bool:
    """True iff every entry of lhs - rhs is zero by ``method`` (on the relaxed expression)."""
    rng = random.Random(seed)
    for _, d in diffs:
        for piece in _pieces(d, ellp):
            r = _relax(piece)
            ok = _is_zero_cancel(r) if method == "simplify" else _is_zero_points(r, rng)
            if not ok:
                return False
    return True


def _counter_value(diffs, ellp: tuple, seed: int, tries: int = 8) -> CounterValue:
    """Search rational points (honest exponentials, ell' = -1) for a non-zero residual."""
    rng = random.Random(seed + 1)
    real = [(idx, to_exp(d).xreplace({g: -1 for g in ellp})) for idx, d in diffs]
    syms = sorted(set().union(*(d.free_symbols for _, d in real)), key=sp.default_sort_key)
    for _ in range(tries):
        pt = {s: sp.Rational(rng.randint(-3, 3), rng.randint(1, 3)) for s in syms}
        for idx, d in real:
            res = d.xreplace(pt)
            val = sp.N(res, 30)
            if val.is_number and abs(val) > sp.Float("1e-20", 30):
                return CounterValue(
                    point=MappingProxyType({s.name: pt[s] for s in syms}),
                    loss="linear (ell(u) = -u, ell' = -1)"
                    if any(d.has(g) for g in ellp for _, d in diffs)
                    else "n/a",
                    entry=idx,
                    residual=res,
                    residual_value=float(val),
                )
    raise UndecidedIdentityError(
        "the relaxed identity is not zero but no rational counter-value was found; "
        "try more points or method='simplify'"
    )


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise InvalidInputError(f"method must be one of {METHODS}, got {method!r}")


def _check_variant(name: str, variant: str) -> None:
    if variant not in VARIANTS[name]:
        raise InvalidInputError(f"{name}: variant must be one of {VARIANTS[name]}, got {variant!r}")


def _resolve_method(method: str, lhs, rhs) -> str:
    if method != "auto":
        return method
    nsym = len(lhs.free_symbols | rhs.free_symbols)
    return "simplify" if nsym <= SIMPLIFY_MAX_SYMBOLS else "exact-rational-points"


def _prove(
    name, variant, sizes, statement, tex, lhs, rhs, ellp, method, seed=0, notes="", extra=None, t0=None
):
    t0 = time.perf_counter() if t0 is None else t0
    lhs, rhs = sp.ImmutableMatrix(lhs), sp.ImmutableMatrix(rhs)
    if lhs.shape != rhs.shape:
        raise InvalidInputError(f"{name}: shapes differ, lhs {lhs.shape} vs rhs {rhs.shape}")
    method = _resolve_method(method, lhs, rhs)
    diffs = [((a, b), lhs[a, b] - rhs[a, b]) for a in range(lhs.shape[0]) for b in range(lhs.shape[1])]
    holds = _decide(diffs, ellp, method, seed)
    counter = None if holds else _counter_value(diffs, ellp, seed)
    verdict = (
        rf"\quad\text{{[holds; {method}]}}"
        if holds
        else rf"\quad\text{{[FAILS at a rational point; residual }}\approx "
            rf"{sp.latex(sp.Float(counter.residual_value, 6))}]"
    )
    if method == "exact-rational-points" and holds:
        notes = (notes + " " if notes else "") + (
            f"Evidence, not proof: exact zero at {POINTS} random rational points (Schwartz-Zippel bound)."
        )
    return Derivation(
        name=name, variant=variant, sizes=MappingProxyType(dict(sizes)), statement=statement,
        lhs=lhs, rhs=rhs, holds=holds, method=method, counter_value=counter, latex=tex + verdict,
        seconds=time.perf_counter() - t0, notes=notes, extra=MappingProxyType(dict(extra or {})),
    )


# -- shared symbolic pieces (cached) -----------------------------------------------------------

def _ellp_replace(expr: sp.Expr, margins: list, ellp: tuple) -> sp.Expr:
    """Replace sympy's Subs(Derivative(ell(xi), xi), xi, u_i) by the symbol ell'_i."""
    rep = {}
    for s in expr.atoms(sp.Subs):
        pt = s.point[0]
        for i, u in enumerate(margins):
            if pt == u:
                rep[s] = ellp[i]
                break
        else:  # pragma: no cover - internal invariant
            raise AssertionError(f"unexpected derivative atom {s}")
    return expr.xreplace(rep)


@cache
def symbolic_gradient(n: int, T: int, d: int, head: str = "linear") -> sp.ImmutableMatrix:
    r"""[dL/dW_jk] by ``sympy.diff`` of L(W) = (1/n) sum_i ell(u_i), with ell'(u_i) shown as ell'_i.

    Examples
    --------
    >>> symbolic_gradient(1, 2, 1).shape
    (1, 1)
    """
    mod = symbolic_model(n, T, d, head=head)
    L = mod.loss()
    margins = [mod.margin(i) for i in range(n)]
    return sp.ImmutableMatrix(d, d, lambda j, k: _ellp_replace(sp.diff(L, mod.W[j, k]), margins, mod.ellp))


def _outer_factor(s: sp.MatrixBase, variant: str) -> sp.Matrix:
    """diag(s) - s s^T, or diag(s) alone for variant "no-outer"."""
    D = sp.diag(*list(s))
    return D if variant == "no-outer" else D - s * s.T


def closed_form_gradient(mod: SymbolicModel, variant: str = "correct", W=None) -> sp.ImmutableMatrix:
    r"""(1/n) sum_i ell'_i X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T (gamma_i: effective scores of the
    head)."""
    G = sp.zeros(mod.d, mod.d)
    for i in range(mod.n):
        s = mod.softmax(i, W)
        G += mod.ellp[i] * mod.X[i].T * _outer_factor(s, variant) * mod.gamma(i, W) * mod.z[i].T
    return sp.ImmutableMatrix(G / mod.n)


# -- 1. softmax Jacobian --------------------------------------------------------------------------

@disk_cached
def softmax_jacobian(T: int = 3, variant: str = "correct", method: str = "auto") -> Derivation:
    r"""dS(a)/da = diag(s) - s s^T for s = S(a) in R^T.

    Variants: ``"no-outer"`` claims dS/da = diag(s) (drops -s s^T) and must fail.

    Examples
    --------
    >>> softmax_jacobian(2).holds
    True

    References
    ----------
    TLTO §2, the softmax derivative used in every gradient formula.
    """
    _check_variant("softmax-jacobian", variant)
    _check_method(method)
    if int(T) != T or T < 2:
        raise InvalidInputError(f"T must be an integer >= 2, got {T!r}")
    t0 = time.perf_counter()
    a = sp.ImmutableMatrix(T, 1, lambda t, _: sp.Symbol(f"a_{{{t + 1}}}", real=True))
    s = softmax(a)
    J = s.jacobian(a)
    rhs = _outer_factor(s, variant)
    tex = r"\frac{\partial \mathbb{S}(a)}{\partial a} = " + (
        r"\operatorname{diag}(s)" if variant == "no-outer" else r"\operatorname{diag}(s) - s s^\top"
    ) + rf",\ s = \mathbb{{S}}(a) \in \mathbb{{R}}^{{{T}}}"
    return _prove("softmax-jacobian", variant, {"T": T}, "dS(a)/da = diag(s) - s s^T", tex,
                  J, rhs, (), method, t0=t0)


# -- 2. gradient closed form ------------------------------------------------------------------------

@disk_cached
def gradient_closed_form(n: int = 2, T: int = 3, d: int = 2, head: str = "linear", variant: str = "correct",
                         method: str = "auto") -> Derivation:
    r"""grad L(W) = (1/n) sum_i ell'(Y_i f_i) X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T.

    ell is an undefined function, so the identity is proved for every differentiable loss. For the linear head
    gamma_i = Y_i X_i v (THEORY.md §2); for the softplus head gamma_i = Y_i X_i V sigmoid(V^T X_i^T s_i).
    Variant ``"no-outer"`` drops the -s_i s_i^T term and must fail.

    Examples
    --------
    >>> gradient_closed_form(1, 2, 1).holds
    True

    References
    ----------
    TLTO §2 (gradient of the empirical risk); THEORY.md §2.
    """
    _check_variant("gradient-closed-form", variant)
    _check_method(method)
    t0 = time.perf_counter()
    mod = symbolic_model(n, T, d, head=head)
    lhs = symbolic_gradient(n, T, d, head)
    rhs = closed_form_gradient(mod, variant)
    outer = (
        r"\operatorname{diag}(s_i)"
        if variant == "no-outer"
        else r"\left(\operatorname{diag}(s_i) - s_i s_i^\top\right)"
    )
    tex = (r"\nabla L(W) = \frac1n \sum_{i=1}^n \ell'(Y_i f_i)\, X_i^\top " + outer + r" \gamma_i z_i^\top"
           + rf"\ (n={n}, T={T}, d={d}, \text{{{head} head}})")
    return _prove(
        "gradient-closed-form",
        variant,
        {"n": n, "T": T, "d": d, "head": head},
        "grad L(W) = (1/n) sum_i ell'_i X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T",
        tex,
        lhs,
        rhs,
        mod.ellp,
        method,
        t0=t0,
        notes="ell is an undefined sympy function: the identity holds for every differentiable loss.",
    )


# -- 3. (K, Q) chain rule ---------------------------------------------------------------------------

@cache
def _kq_pieces(n: int, T: int, d: int, m: int):
    mod = symbolic_model(n, T, d, m)
    Wmap = {mod.W[j, k]: mod.KQt()[j, k] for j in range(d) for k in range(d)}
    L = mod.loss().xreplace(Wmap)
    margins = [mod.margin(i).xreplace(Wmap) for i in range(n)]
    gK = sp.ImmutableMatrix(d, m, lambda a, b: _ellp_replace(sp.diff(L, mod.K[a, b]), margins, mod.ellp))
    gQ = sp.ImmutableMatrix(d, m, lambda a, b: _ellp_replace(sp.diff(L, mod.Q[a, b]), margins, mod.ellp))
    G = symbolic_gradient(n, T, d).xreplace(Wmap)  # grad L(W) evaluated at W = K Q^T
    return mod, gK, gQ, G


@disk_cached
def kq_chain_rule(n: int = 1, T: int = 2, d: int = 2, m: int = 2, variant: str = "correct",
                  method: str = "auto") -> Derivation:
    r"""grad_K L(K Q^T) = grad L(W) Q and grad_Q L(K Q^T) = grad L(W)^T K at W = K Q^T.

    Both sides come from ``sympy.diff``: the left of L(K Q^T) in K and Q, the right of L(W) in W,
    then evaluated at W = K Q^T. ``lhs``/``rhs`` stack [grad_K; grad_Q] vertically (2d x m).
    Variant ``"swapped-transposes"`` claims grad_K = grad L(W)^T Q, grad_Q = grad L(W) K and must fail.

    Examples
    --------
    >>> kq_chain_rule(1, 2, 1, 1).holds
    True

    References
    ----------
    TLTO §3 ((K, Q) parameterisation); THEORY.md §2 "Factored".
    """
    _check_variant("kq-chain-rule", variant)
    _check_method(method)
    t0 = time.perf_counter()
    mod, gK, gQ, G = _kq_pieces(n, T, d, m)
    if variant == "correct":
        rK, rQ = G * mod.Q, G.T * mod.K
    else:
        rK, rQ = G.T * mod.Q, G * mod.K
    lhs = sp.Matrix.vstack(gK, gQ)
    rhs = sp.Matrix.vstack(rK, rQ)
    T_ = "" if variant == "correct" else r"^\top"
    T2 = r"^\top" if variant == "correct" else ""
    tex = (rf"\nabla_K L = \nabla L(W){T_} Q,\quad \nabla_Q L = \nabla L(W){T2} K\quad (W = K Q^\top,\ "
           rf"n={n}, T={T}, d={d}, m={m})")
    return _prove("kq-chain-rule", variant, {"n": n, "T": T, "d": d, "m": m},
                  "grad_K L = grad L(W) Q, grad_Q L = grad L(W)^T K", tex, lhs, rhs, mod.ellp, method, t0=t0)


# -- 4. covariance identity -------------------------------------------------------------------------

def _cov(s, a, b, variant: str):
    """Cov_s(a, b) = sum s_t a_t b_t - (sum s_t a_t)(sum s_t b_t); "no-mean" drops the product of means."""
    T = s.shape[0]
    second = sp.Add(*[s[t] * a[t] * b[t] for t in range(T)])
    if variant == "no-mean":
        return second
    return second - sp.Add(*[s[t] * a[t] for t in range(T)]) * sp.Add(*[s[t] * b[t] for t in range(T)])


@disk_cached
def covariance_identity(
    n: int = 2, T: int = 3, d: int = 2, variant: str = "correct", method: str = "auto"
) -> Derivation:
    r"""<grad L(W), M> = (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i) for every direction M.

    Cov_s(a, b) = sum_t s_t a_t b_t - (sum_t s_t a_t)(sum_t s_t b_t). M is a matrix of free symbols, so
    the identity is proved for all directions at once. Variant ``"no-mean"`` drops the product of means.

    Examples
    --------
    >>> covariance_identity(1, 2, 1).holds
    True

    References
    ----------
    TLTO §2 and the landscape proofs of its appendix (descent directions); THEORY.md §2.
    """
    _check_variant("covariance-identity", variant)
    _check_method(method)
    t0 = time.perf_counter()
    mod = symbolic_model(n, T, d)
    G = symbolic_gradient(n, T, d)
    lhs = sp.Add(*[G[j, k] * mod.M[j, k] for j in range(d) for k in range(d)])
    rhs = sp.Add(*[mod.ellp[i] * _cov(mod.softmax(i), mod.gamma(i), mod.X[i] * mod.M * mod.z[i], variant)
                   for i in range(n)]) / n
    cov = (r"\sum_t s_{it} a_t b_t" if variant == "no-mean"
           else r"\operatorname{Cov}_{s_i}(\gamma_i, X_i M z_i)")
    tex = (r"\langle \nabla L(W), M\rangle = \frac1n\sum_{i=1}^n \ell'_i\, " + cov
           + rf"\ (n={n}, T={T}, d={d})")
    return _prove("covariance-identity", variant, {"n": n, "T": T, "d": d},
                  "<grad L(W), M> = (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i)", tex,
                  sp.ImmutableMatrix([[lhs]]), sp.ImmutableMatrix([[rhs]]), mod.ellp, method, t0=t0)


__all__ = [
    "CounterValue", "Derivation", "UndecidedIdentityError", "VARIANTS", "METHODS", "POINTS",
    "softmax_jacobian", "gradient_closed_form", "kq_chain_rule", "covariance_identity",
    "symbolic_gradient", "closed_form_gradient",
]
