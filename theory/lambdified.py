r"""The closed forms of :mod:`theory.derivations`, lambdified to numpy and torch.

.. math::

    \nabla L(W) = \frac1n \sum_i \ell'(u_i)\, X_i^\top(\operatorname{diag}(s_i) - s_i s_i^\top)\gamma_i
    z_i^\top, \quad \nabla_K L = \nabla L(W) Q,\quad \nabla_Q L = \nabla L(W)^\top K, \quad \langle\nabla
    L(W), M\rangle = \frac1n\sum_i \ell'(u_i) \operatorname{Cov}_{s_i}(\gamma_i, X_i M z_i).

These are *reference* implementations generated from the very sympy expressions that the derivations
prove (with ``ell'_i`` replaced by the chosen catalogue loss's derivative at the margin u_i), so
numerics can be tested against the symbolic source. Every function:

* takes arrays shaped like the paper's symbols with any leading batch axes: X (..., n, T, d),
  Y (..., n), Z (..., n, d), v (..., d) (linear head) or V (..., d, k) (``head="softplus"``),
  W/M (..., d, d), K/Q (..., d, m);
* runs on numpy arrays (``backend="numpy"``) or torch tensors (``backend="torch"``; differentiable, so
  torch autograd can be taken through :func:`loss_value`); the default picks torch iff X is a tensor;
* compiles once per (sizes, head, loss, backend) and caches the compiled function (``lru_cache``).

They build the symbolic expression entry by entry, so they are meant for small sizes (n, T, d <= ~4).
W enters every closed form only through the softmax numerators e^{a_it}; those are passed in shifted
by the row maximum (the ratios s_it are unchanged), so large ||W|| does not overflow.
Production numerics live in ``numerics/attention.py``.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X, Y, Z = rng.standard_normal((2, 3, 2)), np.array([1.0, -1.0]), rng.standard_normal((2, 2))
>>> v, W = rng.standard_normal(2), np.zeros((2, 2))
>>> grad_W(X, Y, Z, v, W).shape
(2, 2)
>>> bool(np.allclose(softmax_probs(X, Z, W), 1 / 3))
True

References
----------
TLTO (arXiv 2308.16898) §2-3; THEORY.md §2.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import sympy as sp

from numerics.errors import InvalidInputError

from .derivations import _cov, closed_form_gradient
from .losses import loss_expr
from .model import HEADS, Exp, U, symbolic_model, to_exp

BACKENDS = ("numpy", "torch")


def _is_torch(a: Any) -> bool:
    return type(a).__module__.startswith("torch")


def _backend(X: Any, backend: str | None) -> str:
    if backend is None:
        return "torch" if _is_torch(X) else "numpy"
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def _ellp_values(mod, loss: sp.Expr, W=None) -> dict:
    """{ell'_i: ell'(u_i)} for a concrete loss ell(u), u_i the symbolic margin of example i."""
    d1 = sp.diff(loss, U)
    return {mod.ellp[i]: d1.xreplace({U: mod.margin(i, W)}) for i in range(mod.n)}


def _head_symbols(mod) -> list:
    return list(mod.v)


def _args(mod, extra: list) -> list:
    out: list = []
    for i in range(mod.n):
        out += list(mod.X[i])
    out += list(mod.Y)
    for i in range(mod.n):
        out += list(mod.z[i])
    return out + _head_symbols(mod) + extra


def _exp_symbols(mod) -> dict:
    """{Exp(a_it): E_it}: the softmax numerators as their own symbols (see _compile)."""
    return {Exp(mod.scores(i)[t]): sp.Symbol(f"E_{{{i + 1},{t + 1}}}", positive=True)
            for i in range(mod.n) for t in range(mod.T)}


@cache
def _compile(kind: str, n: int, T: int, d: int, m: int, head: str, k: int, loss: sp.Expr, backend: str):
    """Build the sympy entries of one closed form, lambdify them (with CSE), cache the result.

    Every closed form depends on W only through the softmax numerators e^{a_it}, a_it = x_it^T W z_i,
    and only through the ratios s_it = e^{a_it} / sum_t e^{a_it}. The numerators are therefore made
    arguments E_it, and callers pass E_it = exp(a_it - max_t a_it): the same s_it (the shift cancels
    exactly in every ratio), no overflow at large ||W||, and a far smaller expression to compile.
    """
    mod = symbolic_model(n, T, d, m, head=head, k=k)
    if kind == "softmax":
        entries = [mod.softmax(i)[t] for i in range(n) for t in range(T)]
        extra = []
    elif kind == "loss":
        entries = [mod.loss(loss=loss)]
        extra = []
    elif kind == "grad_W":
        G = closed_form_gradient(mod)
        entries = list(G.xreplace(_ellp_values(mod, loss)))
        extra = []
    elif kind == "grad_KQ":
        # G(W) Q and G(W)^T K at W = K Q^T (the caller computes the numerators from W = K Q^T).
        G = closed_form_gradient(mod).xreplace(_ellp_values(mod, loss))
        entries = list(G * mod.Q) + list(G.T * mod.K)
        extra = list(mod.K) + list(mod.Q)
    elif kind == "cov_inner":
        ev = _ellp_values(mod, loss)
        c = (
            sp.Add(
                *[
                    ev[mod.ellp[i]]
                    * _cov(mod.softmax(i), mod.gamma(i), mod.X[i] * mod.M * mod.z[i], "correct")
                    for i in range(n)
                ]
            )
            / n
        )
        entries = [c]
        extra = list(mod.M)
    else:  # pragma: no cover - internal
        raise AssertionError(kind)
    E = _exp_symbols(mod)
    entries = [to_exp(sp.sympify(e).xreplace(E)) for e in entries]
    assert not any(e.has(*mod.W) for e in entries), "W must enter only through the softmax numerators"
    return sp.lambdify(_args(mod, extra) + list(E.values()), entries, modules=backend, cse=True)


def _numerators(X, Z, W, backend: str):
    """E_it = exp(a_it - max_t a_it), a_it = x_it^T W z_i, shape (..., n, T)."""
    if backend == "torch":
        import torch

        a = torch.einsum("...ntd,...de,...ne->...nt", X, W, Z)  # (..., n, T)
        return torch.exp(a - a.amax(-1, keepdim=True).detach())
    a = np.einsum("...ntd,...de,...ne->...nt", X, W, Z)  # (..., n, T)
    return np.exp(a - a.max(-1, keepdims=True))


def _shape_of(a: Any) -> tuple:
    return tuple(a.shape)


def _check(name: str, a: Any, tail: tuple, batch: tuple) -> None:
    shp = _shape_of(a)
    if shp[len(shp) - len(tail):] != tail or len(shp) < len(tail):
        raise InvalidInputError(f"{name} must have trailing shape {tail}, got {shp}")
    b = shp[: len(shp) - len(tail)]
    try:
        np.broadcast_shapes(b, batch)
    except ValueError:
        raise InvalidInputError(
            f"{name} batch shape {b} does not broadcast with X's batch shape {batch}"
        ) from None


def _flat(a: Any, tail_ndim: int) -> list:
    """Entries a[..., idx] for every trailing index, in row-major order."""
    shp = _shape_of(a)
    tail = shp[len(shp) - tail_ndim:]
    return [a[(Ellipsis, *idx)] for idx in np.ndindex(*tail)]


def _stack(entries: list, batch: tuple, tail: tuple, backend: str, like: Any):
    if backend == "torch":
        import torch

        ts = [
            e if torch.is_tensor(e) else torch.as_tensor(e, dtype=like.dtype, device=like.device)
            for e in entries
        ]
        ts = [t.to(like.dtype).expand(batch) if t.shape != batch else t for t in ts]
        return torch.stack(ts, dim=-1).reshape(*batch, *tail)
    arrs = [np.broadcast_to(np.asarray(e, dtype=np.float64), batch) for e in entries]
    return np.stack(arrs, axis=-1).reshape(*batch, *tail)


def _common(X, Y, Z, v, head: str):
    if head not in HEADS:
        raise InvalidInputError(f"head must be one of {HEADS}, got {head!r}")
    shp = _shape_of(X)
    if len(shp) < 3:
        raise InvalidInputError(f"X must have shape (..., n, T, d), got {shp}")
    n, T, d = shp[-3:]
    batch = shp[:-3]
    _check("Y", Y, (n,), batch)
    _check("Z", Z, (n, d), batch)
    vt = _shape_of(v)
    if head == "linear":
        _check("v", v, (d,), batch)
        k = 2
    else:
        if len(vt) < 2 or vt[-2] != d:
            raise InvalidInputError(
                f"V (softplus head) must have shape (..., d, k) = (..., {d}, k), got {vt}"
            )
        k = vt[-1]
    args = _flat(X, 3) + _flat(Y, 1) + _flat(Z, 2) + _flat(v, 1 if head == "linear" else 2)
    return n, T, d, k, batch, args


def _call(kind, X, Y, Z, v, mats, *, loss, head, backend, m=None, out_tail=None):
    be = _backend(X, backend)
    n, T, d, k, batch, args = _common(X, Y, Z, v, head)
    lexpr = loss_expr("logistic" if loss is None else loss)  # validates, with a clear message
    W = None
    for name, a, tail in mats:
        _check(name, a, tail, batch)
        if name == "W":
            W = a
        else:
            args += _flat(a, len(tail))
    args += _flat(_numerators(X, Z, W, be), 2)
    fn = _compile(kind, n, T, d, d if m is None else m, head, k, lexpr, be)
    out = fn(*args)
    batch = (
        tuple(np.broadcast_shapes(batch, *(_shape_of(a)[: -len(t)] for _, a, t in mats))) if mats else batch
    )
    return _stack(out, batch, out_tail(n, T, d), be, X)


def softmax_probs(X, Z, W, *, backend: str | None = None):
    """s_i(W) = S(X_i W z_i), shape (..., n, T)."""
    n, T, d = _shape_of(X)[-3:]
    batch = _shape_of(X)[:-3]
    Y = np.ones(batch + (n,)) if not _is_torch(X) else X.new_ones(batch + (n,))
    v = np.zeros(batch + (d,)) if not _is_torch(X) else X.new_zeros(batch + (d,))
    return _call("softmax", X, Y, Z, v, [("W", W, (d, d))], loss=None, head="linear", backend=backend,
                 out_tail=lambda n, T, d: (n, T))


def loss_value(X, Y, Z, v, W, *, loss="logistic", head: str = "linear", backend: str | None = None):
    """L(W) = (1/n) sum_i ell(Y_i f_W(X_i, z_i)), shape (...,). Differentiable under torch."""
    d = _shape_of(X)[-1]
    return _call("loss", X, Y, Z, v, [("W", W, (d, d))], loss=loss, head=head, backend=backend,
                 out_tail=lambda n, T, d: ())


def grad_W(X, Y, Z, v, W, *, loss="logistic", head: str = "linear", backend: str | None = None):
    """grad L(W) = (1/n) sum_i ell'(u_i) X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T, shape (..., d, d)."""
    d = _shape_of(X)[-1]
    return _call("grad_W", X, Y, Z, v, [("W", W, (d, d))], loss=loss, head=head, backend=backend,
                 out_tail=lambda n, T, d: (d, d))


def grad_KQ(X, Y, Z, v, K, Q, *, loss="logistic", head: str = "linear", backend: str | None = None):
    """(grad_K, grad_Q) = (grad L(K Q^T) Q, grad L(K Q^T)^T K), each (..., d, m)."""
    d = _shape_of(X)[-1]
    m = _shape_of(K)[-1]
    _check("K", K, (d, m), _shape_of(X)[:-3])
    _check("Q", Q, (d, m), _shape_of(X)[:-3])
    W = K @ (Q.mT if _is_torch(Q) else np.swapaxes(Q, -1, -2))  # (..., d, d)
    out = _call("grad_KQ", X, Y, Z, v, [("W", W, (d, d)), ("K", K, (d, m)), ("Q", Q, (d, m))], loss=loss,
                head=head, backend=backend, m=m, out_tail=lambda n, T, d: (2, d, m))
    return out[..., 0, :, :], out[..., 1, :, :]


def cov_inner(X, Y, Z, v, W, M, *, loss="logistic", backend: str | None = None):
    """(1/n) sum_i ell'(u_i) Cov_{s_i}(gamma_i, X_i M z_i) (= <grad L(W), M>), shape (...,). Linear head."""
    d = _shape_of(X)[-1]
    return _call("cov_inner", X, Y, Z, v, [("W", W, (d, d)), ("M", M, (d, d))], loss=loss, head="linear",
                 backend=backend, out_tail=lambda n, T, d: ())
