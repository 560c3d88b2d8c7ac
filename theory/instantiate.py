r"""The expressions proved for all sizes (:mod:`theory.general`), instantiated at concrete sizes and
lambdified.

The proofs of :mod:`theory.general` are about index expressions with symbolic bounds n, T, d, m. Here the
*same* expression objects are given concrete sizes (``xreplace`` of the bound symbols, ``doit`` to unroll
the sums), the abstract ell'(u) is replaced by a catalogue loss's derivative, every entry X[i, t, p]
becomes a plain symbol, and the result is compiled with ``sympy.lambdify`` (numpy, CSE). Tests compare
these functions with numerics/attention.py to float64 rounding (``numerics.tolerances.FORMAL_RTOL``), so the
production closed forms are held to the proved expressions, not to a re-typed copy of them.

Arrays are the paper's shapes without a batch axis: X (n, T, d), Y (n,), Z (n, d), v (d,), W / M (d, d),
K / Q (d, m). Meant for small sizes (the unrolled expression grows like n T d^2).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X, Y = rng.standard_normal((2, 3, 2)), np.array([1.0, -1.0])
>>> Z, v = rng.standard_normal((2, 2)), rng.standard_normal(2)
>>> grad_W(X, Y, Z, v, np.zeros((2, 2))).shape
(2, 2)
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy as sp

from numerics.errors import InvalidInputError

from . import general as g
from .losses import loss_expr
from .model import U

KINDS = ("grad_W", "grad_K", "grad_Q", "cov_inner")


def _entries(kind: str, d: int, m: int, variant: str = "correct") -> list:
    """The proved right-hand sides, entry by entry (concrete free indices); ``variant="no-outer"`` (grad_W
    only) is the wrong closed form without -s s^T, kept to show the comparison with numerics has power."""
    if kind == "grad_W":
        return [g.closed_form_entry(j, k, variant=variant) for j in range(1, d + 1) for k in range(1, d + 1)]
    q = g.index("q")
    G = lambda r, c: g.closed_form_entry(r, c, g._kq)  # noqa: E731
    if kind == "grad_K":
        return [sp.Sum(G(a, q) * g.Q[q, b], (q, 1, g.d)) for a in range(1, d + 1) for b in range(1, m + 1)]
    if kind == "grad_Q":
        return [sp.Sum(G(q, a) * g.K[q, b], (q, 1, g.d)) for a in range(1, d + 1) for b in range(1, m + 1)]
    if kind == "cov_inner":
        i, p, qq = g.index("i"), g.index("p"), g.index("qq")
        bvec = lambda x: sp.Sum(g.X[i, x, p] * g.M[p, qq] * g.z[i, qq], (p, 1, g.d), (qq, 1, g.d))  # noqa: E731, E501
        return [sp.Sum(g.ellp(g.margin(i)) * g.cov(lambda x: g.soft(i, x), lambda x: g.gamma(i, x), bvec),
                       (i, 1, g.n)) / g.n]
    raise InvalidInputError(f"kind must be one of {KINDS}, got {kind!r}")


def unroll(e, env: dict, leaves: dict, fns: dict, memo: dict):
    """Evaluate the sums of ``e`` with concrete bounds by expansion, top-down with lexical scoping: ``env``
    maps bound indices to integers, ``leaves`` maps (IndexedBase, concrete indices) to symbols, ``fns`` maps
    functions (ell') to sympy Lambdas. No simplification; shared subexpressions are expanded once."""
    key = (e, tuple(sorted(env.items(), key=lambda kv: kv[0].name)))
    if key in memo:
        return memo[key]
    if isinstance(e, sp.Sum):
        envs = [env]
        for x, lo, hi in e.limits:
            lo, hi = unroll(lo, env, leaves, fns, memo), unroll(hi, env, leaves, fns, memo)
            if not (lo.is_Integer and hi.is_Integer):
                raise InvalidInputError(f"unroll: bounds of {x} are not concrete: {lo}, {hi}")
            envs = [{**en, x: sp.Integer(k)} for en in envs for k in range(int(lo), int(hi) + 1)]
        out = sp.Add(*[unroll(e.function, en, leaves, fns, memo) for en in envs])
    elif isinstance(e, sp.Indexed):
        idx = tuple(unroll(ix, env, leaves, fns, memo) for ix in e.indices)
        out = leaves[(e.base, idx)]
    elif isinstance(e, sp.Symbol):
        out = env.get(e, e)
    elif e.args:
        args = [unroll(x, env, leaves, fns, memo) for x in e.args]
        out = fns[e.func](*args) if e.func in fns else e.func(*args)
    else:
        out = e
    memo[key] = out
    return out


@cache
def compiled(kind: str, n: int, T: int, d: int, m: int = 1, loss: str = "logistic", variant: str = "correct"):
    """lambdify(X, Y, Z, v, W or (K, Q), [M]) of the proved expression at sizes (n, T, d, m)."""
    for name, val in (("n", n), ("T", T), ("d", d), ("m", m)):
        if int(val) != val or val < 1:
            raise InvalidInputError(f"{name} must be a positive integer, got {val!r}")
    sizes = {g.n: sp.Integer(n), g.T: sp.Integer(T), g.d: sp.Integer(d), g.m: sp.Integer(m)}
    fns = {g.ellp: sp.Lambda(U, sp.diff(loss_expr(loss), U))}
    leaves, args = {}, []
    tables = [(g.X, (n, T, d), "X"), (g.Y, (n,), "Y"), (g.z, (n, d), "z"), (g.v, (d,), "v")]
    tables += (
        [(g.K, (d, m), "K"), (g.Q, (d, m), "Q")] if kind in ("grad_K", "grad_Q") else [(g.W, (d, d), "W")]
    )
    if kind == "cov_inner":
        tables.append((g.M, (d, d), "M"))
    for base, shape, name in tables:
        syms = []
        for idx in np.ndindex(*shape):
            sym = sp.Symbol(f"{name}_" + "_".join(map(str, idx)), real=True)
            leaves[(base, tuple(sp.Integer(k + 1) for k in idx))] = sym
            syms.append(sym)
        args.append(syms)
    memo: dict = {}
    out = [unroll(e, sizes, leaves, fns, memo) for e in _entries(kind, d, m, variant)]
    return sp.lambdify(args, out, modules="numpy", cse=True)


def _call(kind, arrays, shape, m=1, loss="logistic", variant="correct"):
    X = np.asarray(arrays[0], dtype=float)
    if X.ndim != 3:
        raise InvalidInputError(f"X must have shape (n, T, d), got {X.shape}")
    n, T, d = X.shape
    fn = compiled(kind, n, T, d, m, loss, variant)
    return np.asarray(fn(*[np.asarray(a, dtype=float).ravel() for a in arrays]), dtype=float).reshape(shape)


def grad_W(X, Y, Z, v, W, *, loss="logistic", variant="correct"):
    """The proved closed form of grad L(W), (d, d)."""
    if variant not in ("correct", "no-outer"):
        raise InvalidInputError(f"variant must be 'correct' or 'no-outer', got {variant!r}")
    d = np.shape(X)[-1]
    return _call("grad_W", (X, Y, Z, v, W), (d, d), loss=loss, variant=variant)


def grad_KQ(X, Y, Z, v, K, Q, *, loss="logistic"):
    """The proved (grad L(W) Q, grad L(W)^T K) at W = K Q^T, each (d, m)."""
    d, m = np.shape(K)
    return (_call("grad_K", (X, Y, Z, v, K, Q), (d, m), m, loss),
            _call("grad_Q", (X, Y, Z, v, K, Q), (d, m), m, loss))


def cov_inner(X, Y, Z, v, W, M, *, loss="logistic"):
    """The proved (1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i) (= <grad L(W), M>)."""
    return float(_call("cov_inner", (X, Y, Z, v, W, M), (), loss=loss))
