r"""The attention model and its empirical loss as sympy expressions at small explicit sizes.

.. math::

    s_i(W) = \mathbb{S}(X_i W z_i),\qquad f_W(X_i, z_i) = h(X_i^\top s_i),\qquad
    L(W) = \frac1n \sum_{i=1}^n \ell\bigl(Y_i f_W(X_i, z_i)\bigr),\qquad L(K, Q) = L(K Q^\top).

Every entry of X_i (T x d), z_i (d), Y_i, v (d), W (d x d), K, Q (d x m) and of a direction M (d x d)
is its own real symbol, so an identity proved here holds for *all* data of that size.

Two choices make the derivations exact and fast, and both are documented where they are used:

* ``Exp`` is the exponential with the single rule ``Exp' = Exp`` (and ``Exp(real) > 0``), but it
  never merges (sympy rewrites ``exp(a)**2`` as ``exp(2a)``, which hides the softmax's structure).
  Every expression is converted to ``sympy.exp`` (:func:`to_exp`) before it is shown, evaluated
  or lambdified. The derivations use no other property of the exponential.
* The loss ``ell`` is an *undefined* sympy function by default, so a gradient identity proved here
  holds for every differentiable loss; its derivative at the i-th margin u_i is the symbol
  ``ellp_i`` (= ell'(u_i)) in closed forms. :func:`loss_expression` builds the loss with a concrete
  catalogue loss instead.

Heads (THEORY.md §1):

* ``"linear"``: h(r) = v^T r, so Y_i f = gamma_i^T s_i with gamma_i = Y_i X_i v.
* ``"softplus"``: h(r) = sum_j softplus((V^T r)_j), softplus(w) = log(1 + e^w), V in R^{d x k}.
  This smooth stand-in for the paper's 1^T ReLU(V^T r) is chosen so every derivative exists
  everywhere (softplus' = sigmoid); it differs from ReLU by at most log 2 per unit and has the
  same gradient structure (ReLU's with a fixed active pattern is its limit as the pre-activations
  grow). Its effective score vector is Y_i X_i grad h(X_i^T s_i) = Y_i X_i V sigmoid(V^T X_i^T s_i).

Examples
--------
>>> m = symbolic_model(1, 2, 2)
>>> m.X[0].shape, m.W.shape, m.z[0].shape
((2, 2), (2, 2), (2, 1))
>>> sp.simplify(to_exp(sum(m.softmax(0))))
1

References
----------
TLTO (arXiv 2308.16898) §2 "Preliminaries" (model, loss) and §3 (the (K, Q) parameterisation).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy as sp

from numerics.errors import InvalidInputError

HEADS = ("linear", "softplus")

#: The undefined loss function ell; a gradient identity proved with it holds for every smooth loss.
ell = sp.Function("ell", real=True)


class Exp(sp.Function):
    r"""exp with only the rules Exp' = Exp and Exp(real) > 0; never merged by sympy's auto-simplifier.

    Examples
    --------
    >>> a = sp.Symbol("a", real=True)
    >>> sp.diff(Exp(2 * a), a)
    2*Exp(2*a)
    >>> Exp(a).is_positive
    True
    """

    nargs = 1

    def fdiff(self, argindex=1):
        return Exp(self.args[0])

    def _eval_is_extended_real(self):
        if self.args[0].is_extended_real:
            return True
        return None

    def _eval_is_positive(self):
        if self.args[0].is_extended_real:
            return True
        return None

    def _eval_rewrite_as_exp(self, arg, **kwargs):
        return sp.exp(arg)


def to_exp(expr):
    """Replace every ``Exp`` by ``sympy.exp`` (for display, evaluation and lambdify)."""
    if isinstance(expr, (list, tuple)):
        return type(expr)(to_exp(e) for e in expr)
    if isinstance(expr, sp.MatrixBase):
        return expr.applyfunc(to_exp)
    return sp.sympify(expr).replace(Exp, sp.exp)


def _sym(name: str, **kw) -> sp.Symbol:
    return sp.Symbol(name, real=True, **kw)


def _matrix(prefix: str, rows: int, cols: int) -> sp.ImmutableMatrix:
    return sp.ImmutableMatrix(rows, cols, lambda a, b: _sym(f"{prefix}_{{{a + 1},{b + 1}}}"))


def softmax(a: sp.MatrixBase) -> sp.ImmutableMatrix:
    r"""S(a)_t = e^{a_t} / \sum_\tau e^{a_\tau} for a column vector a (with ``Exp``)."""
    e = [Exp(a[t]) for t in range(a.shape[0])]
    tot = sp.Add(*e)
    return sp.ImmutableMatrix([[et / tot] for et in e])


def softplus(w):
    r"""softplus(w) = log(1 + e^w); softplus' = sigmoid."""
    return sp.log(1 + Exp(w))


def sigmoid(w):
    r"""sigmoid(w) = e^w / (1 + e^w) (written with e^w, not e^{-w}, so it matches softplus')."""
    return Exp(w) / (1 + Exp(w))


@dataclass(frozen=True)
class SymbolicModel:
    """Symbols and model expressions for one size (n, T, d, m) and head. Build with :func:`symbolic_model`."""

    n: int
    T: int
    d: int
    m: int
    head: str
    k: int  # hidden width of the softplus head (0 for the linear head)
    X: tuple  # n x ImmutableMatrix (T, d)
    Y: tuple  # n x Symbol
    z: tuple  # n x ImmutableMatrix (d, 1)
    v: sp.ImmutableMatrix  # (d, 1) linear head, or V (d, k) for the softplus head
    W: sp.ImmutableMatrix  # (d, d)
    K: sp.ImmutableMatrix  # (d, m)
    Q: sp.ImmutableMatrix  # (d, m)
    M: sp.ImmutableMatrix  # (d, d) a direction
    ellp: tuple  # n x Symbol: ell'(u_i) placeholders in closed forms

    # -- model ---------------------------------------------------------------------------------
    def scores(self, i: int, W=None) -> sp.ImmutableMatrix:
        """a_i = X_i W z_i, the T attention logits x_it^T W z_i (column)."""
        W = self.W if W is None else W
        return sp.ImmutableMatrix(self.X[i] * W * self.z[i])

    def softmax(self, i: int, W=None) -> sp.ImmutableMatrix:
        """s_i(W) = S(X_i W z_i) (column of length T)."""
        return softmax(self.scores(i, W))

    def head_value(self, r: sp.MatrixBase):
        """h(r) for r = X_i^T s_i."""
        if self.head == "linear":
            return (self.v.T * r)[0, 0]
        w = self.v.T * r  # (k, 1) pre-activations V^T r
        return sp.Add(*[softplus(w[j, 0]) for j in range(self.k)])

    def head_grad(self, r: sp.MatrixBase) -> sp.ImmutableMatrix:
        """grad h(r): v for the linear head, V sigmoid(V^T r) for the softplus head."""
        if self.head == "linear":
            return self.v
        w = self.v.T * r
        return sp.ImmutableMatrix(self.v * sp.Matrix(self.k, 1, lambda j, _: sigmoid(w[j, 0])))

    def output(self, i: int, W=None):
        """f_W(X_i, z_i) = h(X_i^T s_i(W))."""
        return self.head_value(self.X[i].T * self.softmax(i, W))

    def margin(self, i: int, W=None):
        """u_i = Y_i f_W(X_i, z_i) (for the linear head, gamma_i^T s_i)."""
        return self.Y[i] * self.output(i, W)

    def gamma(self, i: int, W=None) -> sp.ImmutableMatrix:
        """Effective token scores Y_i X_i grad h(X_i^T s_i): gamma_i = Y_i X_i v for the linear head."""
        if self.head == "linear":
            return sp.ImmutableMatrix(self.Y[i] * self.X[i] * self.v)
        r = self.X[i].T * self.softmax(i, W)
        return sp.ImmutableMatrix(self.Y[i] * self.X[i] * self.head_grad(r))

    def loss(self, W=None, loss=None):
        """L(W) = (1/n) sum_i ell(u_i); ``loss`` is None (undefined ell) or a sympy expression in ``U``."""
        terms = []
        for i in range(self.n):
            u = self.margin(i, W)
            terms.append(ell(u) if loss is None else loss.xreplace({U: u}))
        return sp.Add(*terms) / self.n

    def KQt(self) -> sp.ImmutableMatrix:
        """W = K Q^T."""
        return sp.ImmutableMatrix(self.K * self.Q.T)

    @property
    def W_symbols(self) -> tuple:
        return tuple(self.W)

    @property
    def data_symbols(self) -> tuple:
        """Every symbol of the data (X, Y, z) and head, in a fixed order."""
        out: list = []
        for i in range(self.n):
            out += list(self.X[i]) + [self.Y[i]] + list(self.z[i])
        return tuple(out) + tuple(self.v)


#: The loss argument u (margins u = Y f) used by theory.losses.
U = sp.Symbol("u", real=True)


@cache
def symbolic_model(
    n: int, T: int, d: int, m: int | None = None, head: str = "linear", k: int = 2
) -> SymbolicModel:
    """Build (and cache) the symbols of one size. ``m`` defaults to d; ``k`` is the softplus head's width.

    Examples
    --------
    >>> mod = symbolic_model(2, 3, 2)
    >>> len(mod.data_symbols)  # 2 * (3*2 + 1 + 2) + 2
    20
    """
    m = d if m is None else m
    for name, val, lo in (("n", n, 1), ("T", T, 2), ("d", d, 1), ("m", m, 1), ("k", k, 1)):
        if int(val) != val or val < lo:
            raise InvalidInputError(f"{name} must be an integer >= {lo}, got {val!r}")
    if head not in HEADS:
        raise InvalidInputError(f"head must be one of {HEADS}, got {head!r}")
    X = tuple(_matrix(f"x^{{({i + 1})}}", T, d) for i in range(n))
    Y = tuple(_sym(f"y_{{{i + 1}}}") for i in range(n))
    z = tuple(_matrix(f"z^{{({i + 1})}}", d, 1) for i in range(n))
    if head == "linear":
        v = sp.ImmutableMatrix(d, 1, lambda a, _: _sym(f"v_{{{a + 1}}}"))
        kk = 0
    else:
        v = _matrix("V", d, k)
        kk = k
    return SymbolicModel(
        n=n, T=T, d=d, m=m, head=head, k=kk, X=X, Y=Y, z=z, v=v,
        W=_matrix("W", d, d), K=_matrix("K", d, m), Q=_matrix("Q", d, m), M=_matrix("M", d, d),
        ellp=tuple(sp.Symbol(f"\\ell'_{{{i + 1}}}", real=True) for i in range(n)),
    )
