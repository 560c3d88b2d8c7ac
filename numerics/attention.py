"""Batched attention forward pass, loss and closed-form gradients (THEORY.md §1, §2).

Every function is pure torch, batched over a leading instance axis R, float64 unless the caller
passes other tensors. Shapes follow the paper's symbols:

    X (R, n, T, d) tokens x_it        Y (R, n) labels          Z (R, n, d) queries z_i (resolved)
    W (R, d, d)                       K, Q (R, d, m), W = K Q^T

    s_i(W) = softmax(X_i W z_i)                                  (R, n, T)
    f_W(X_i, z_i) = h(X_i^T s_i)          (linear head: h(u) = v^T u)
    L(W) = (1/n) sum_i loss(Y_i f_W(X_i, z_i))                   (R,)
    grad L(W) = (1/n) sum_i l'_i X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T,
        gamma_i = Y_i X_i grad h(X_i^T s_i)   (linear head: gamma_it = Y_i v^T x_it, W-independent)
    grad_K L = grad L(W) Q,   grad_Q L = grad L(W)^T K

The gradient never uses autograd. It is written as "token weights" c_i = l'_i (diag(s_i) - s_i s_i^T)
gamma_i (R, n, T), so that grad L(W) = (1/n) sum_i (X_i^T c_i) z_i^T: two small batched products,
no (R, n, d, d) outer products. :class:`TokenGram` applies the token Gram operator
M_(it),(j tau) = (x_it . x_j tau)(z_i . z_j), which maps token weights to the change of logits,
X_i G z_i = (M c)_i for G = sum_j X_j^T c_j z_j^T; batched GD (numerics.gd) runs in that logit space.

Examples
--------
>>> import numpy as np, torch
>>> from numerics.data import random_unit_sphere
>>> b = batch_from_data(random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0)))
>>> W = torch.zeros(1, 5, 5, dtype=torch.float64)
>>> tuple(grad_W(b.X, b.Y, b.Z, W, b.linear_head()).shape)
(1, 5, 5)

References
----------
Tarzanagh, Li, Thrampoulidis, Oymak, "Transformers as Support Vector Machines", arXiv 2308.16898, §2.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .data import AttentionData, stack
from .errors import InvalidInputError
from .losses import LOSSES, check_loss  # noqa: F401  (the one list of loss names, torch-free)

#: Dense token Gram matrices (R, nT, nT) are used up to this many float entries in total (64 MiB
#: in float64); beyond it :class:`TokenGram` applies M in factored form (three small products).
DENSE_GRAM_MAX_ENTRIES = 8 * 1024 * 1024


# -- losses ---------------------------------------------------------------------------------------

#: The one loss table of the numerics (THEORY.md §1): name -> (l, l') as elementwise torch maps, used by
#: attention, GD, prompt and sequence GD alike. Logistic l(u) = softplus(-u) (stable); l'(u) = -sigmoid(-u)
#: (no cancellation for large u, where sigmoid(u) - 1 would round to 0 beyond u ~ 37).
LOSS_FNS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[torch.Tensor], torch.Tensor]]] = {
    "logistic": (lambda u: torch.nn.functional.softplus(-u), lambda u: -torch.sigmoid(-u)),
    "exponential": (lambda u: torch.exp(-u), lambda u: -torch.exp(-u)),
    "linear": (lambda u: -u, lambda u: torch.full_like(u, -1.0)),
}


def loss_value(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """l(u): logistic log(1 + e^{-u}) (as softplus(-u), stable), exponential e^{-u}, linear -u."""
    return LOSS_FNS[check_loss(loss)][0](u)


def loss_derivative(u: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """l'(u): logistic -sigmoid(-u), exponential -e^{-u}, linear -1."""
    return LOSS_FNS[check_loss(loss)][1](u)


# -- heads ----------------------------------------------------------------------------------------

class Head(abc.ABC):
    """A prediction head h applied to the attention output u_i = X_i^T s_i.

    ``value(u)`` maps u (R, n, d) to h(u) (R, n); ``grad(u)`` to grad h(u) (R, n, d).
    Parameters may carry the instance axis R or not (then they are shared by all instances).
    """

    @abc.abstractmethod
    def value(self, u: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def grad(self, u: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def to(self, device: Any = None, dtype: Any = None) -> Head:
        """The same head with its parameters on ``device`` / in ``dtype``."""

    @abc.abstractmethod
    def repeat(self, k: int) -> Head:
        """The head for a batch whose instances are repeated k times (``X.repeat(k, ...)``)."""

    def fixed_scores(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor | None:
        """gamma (R, n, T) when it does not depend on W (linear heads), else None."""
        return None


def _as_tensor(a: Any) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a
    return torch.as_tensor(a, dtype=torch.float64)


@dataclass(frozen=True, eq=False)
class LinearHead(Head):
    """h(u) = v^T u with v (R, d) or (d,)."""

    v: torch.Tensor

    def __post_init__(self):
        object.__setattr__(self, "v", _as_tensor(self.v))
        if self.v.ndim not in (1, 2):
            raise InvalidInputError(f"LinearHead v must have shape (d,) or (R, d), got {tuple(self.v.shape)}")

    def _v(self) -> torch.Tensor:
        return self.v.unsqueeze(-2)  # (R, 1, d) or (1, d)

    def value(self, u: torch.Tensor) -> torch.Tensor:
        return (u * self._v()).sum(-1)  # (R, n)

    def grad(self, u: torch.Tensor) -> torch.Tensor:
        return self._v().expand_as(u)  # (R, n, d)

    def fixed_scores(self, X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
        v = self.v.to(X)
        v = v.unsqueeze(-2).unsqueeze(-1) if v.ndim == 2 else v  # (R, 1, d, 1) or (d,)
        xv = torch.matmul(X, v)  # (R, n, T, 1) or (R, n, T)
        return Y.unsqueeze(-1) * (xv.squeeze(-1) if self.v.ndim == 2 else xv)  # (R, n, T)

    def to(self, device: Any = None, dtype: Any = None) -> LinearHead:
        return LinearHead(self.v.to(device=device, dtype=dtype))

    def repeat(self, k: int) -> LinearHead:
        return self if self.v.ndim == 1 else LinearHead(self.v.repeat(k, 1))


@dataclass(frozen=True, eq=False)
class ReLUHead(Head):
    """h(u) = 1^T ReLU(V^T u) with V (R, d, h) or (d, h); grad h(u) = V 1[V^T u > 0]."""

    V: torch.Tensor

    def __post_init__(self):
        object.__setattr__(self, "V", _as_tensor(self.V))
        if self.V.ndim not in (2, 3):
            raise InvalidInputError(
                f"ReLUHead V must have shape (d, h) or (R, d, h), got {tuple(self.V.shape)}"
            )

    def value(self, u: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(u, self.V)).sum(-1)  # (R, n, h) -> (R, n)

    def grad(self, u: torch.Tensor) -> torch.Tensor:
        active = (torch.matmul(u, self.V) > 0).to(u.dtype)  # (R, n, h)
        return torch.matmul(active, self.V.mT)  # (R, n, d)

    def to(self, device: Any = None, dtype: Any = None) -> ReLUHead:
        return ReLUHead(self.V.to(device=device, dtype=dtype))

    def repeat(self, k: int) -> ReLUHead:
        return self if self.V.ndim == 2 else ReLUHead(self.V.repeat(k, 1, 1))


# -- data -----------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class AttentionBatch:
    """Batched tensors of R equal-shape datasets: X (R,n,T,d), Y (R,n), Z (R,n,d), v (R,d) or None."""

    X: torch.Tensor
    Y: torch.Tensor
    Z: torch.Tensor
    v: torch.Tensor | None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(R, n, T, d)."""
        return tuple(self.X.shape)  # type: ignore[return-value]

    def linear_head(self) -> LinearHead:
        if self.v is None:
            raise InvalidInputError(
                "a linear head is needed but some dataset has no head v; add key 'v' (shape (d,)) "
                "to the .npz or pass a head explicitly"
            )
        return LinearHead(self.v)


def batch_from_data(
    datas: AttentionData | Sequence[AttentionData],
    device: Any = "cpu",
    dtype: torch.dtype = torch.float64,
    *,
    require_head: bool = False,
) -> AttentionBatch:
    """Tensors for one dataset (R = 1) or a sequence of equal-shape ones (via numerics.data.stack).

    ``require_head=True`` raises :class:`InvalidInputError` naming the first dataset without v.
    """
    if isinstance(datas, AttentionData):
        datas = [datas]
    if not isinstance(datas, Sequence) or not all(isinstance(dt, AttentionData) for dt in datas):
        raise InvalidInputError(
            f"expected an AttentionData or a sequence of them, got {type(datas).__name__}"
        )
    if require_head:
        for k, dt in enumerate(datas):
            if dt.v is None:
                raise InvalidInputError(
                    f"dataset {k} has no linear head v, which is needed here; add key 'v' (shape (d,)) "
                    "or pass a head explicitly"
                )
    arrays = stack(datas)

    def t(a):
        return torch.as_tensor(a, device=device).to(dtype)

    return AttentionBatch(
        X=t(arrays["X"]), Y=t(arrays["Y"]), Z=t(arrays["Z"]), v=t(arrays["v"]) if "v" in arrays else None
    )


def _check_batch(
    X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor | None = None, Y: torch.Tensor | None = None
):
    if X.ndim != 4:
        raise InvalidInputError(f"X must have shape (R, n, T, d), got {tuple(X.shape)}")
    R, n, T, d = X.shape
    if tuple(Z.shape) != (R, n, d):
        raise InvalidInputError(f"Z must have shape (R, n, d) = {(R, n, d)}, got {tuple(Z.shape)}")
    if W is not None and tuple(W.shape) != (R, d, d):
        raise InvalidInputError(f"W must have shape (R, d, d) = {(R, d, d)}, got {tuple(W.shape)}")
    if Y is not None and tuple(Y.shape) != (R, n):
        raise InvalidInputError(f"Y must have shape (R, n) = {(R, n)}, got {tuple(Y.shape)}")


# -- forward --------------------------------------------------------------------------------------

def logits(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """x_it^T W z_i (R, n, T), computed as X_i (W z_i): one product for W z, one for X."""
    _check_batch(X, Z, W)
    Wz = torch.bmm(Z, W.mT)  # (R, n, d): row i is W z_i
    return torch.matmul(X, Wz.unsqueeze(-1)).squeeze(-1)  # (R, n, T, 1) -> (R, n, T)


def softmax_logits(lg: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis of any logits (torch.softmax subtracts the row max: stable at any
    scale). The one torch softmax of the numerics outside the GD steps (which use
    ``gd_common._softmax_rows``): attention, prompt, sequence and (v, p) paths call it, so that the
    power analysis (checks/power) reaches them all by replacing this one function (the seam scan in
    tests/harness keeps it so)."""
    return torch.softmax(lg, dim=-1)


def softmax(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """s_i(W) = softmax(X_i W z_i) (R, n, T), via :func:`softmax_logits` (stable at huge ||W||)."""
    return softmax_logits(logits(X, Z, W))


def _attend(X: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.matmul(s.unsqueeze(-2), X).squeeze(-2)  # (R, n, 1, T) @ (R, n, T, d) -> (R, n, d)


def forward(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, head: Head) -> torch.Tensor:
    """f_W(X_i, z_i) = h(X_i^T s_i(W)), shape (R, n)."""
    return head.value(_attend(X, softmax(X, Z, W)))


def loss(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, head: Head,
         loss: str = "logistic") -> torch.Tensor:
    """L(W) = (1/n) sum_i l(Y_i f_W(X_i, z_i)), shape (R,)."""
    check_loss(loss)
    _check_batch(X, Z, W, Y)
    return loss_value(Y * forward(X, Z, W, head), loss).mean(-1)


# -- closed-form gradients --------------------------------------------------------------------------

def token_weights(
    X: torch.Tensor, Y: torch.Tensor, s: torch.Tensor, head: Head, loss: str,
    gamma: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Margins Y_i f_i (R, n) and token weights c_i = l'(Y_i f_i) (diag(s_i) - s_i s_i^T) gamma_i (R, n, T).

    ``gamma`` (R, n, T) may be passed when it is W-independent (linear head, see Head.fixed_scores).
    Then Y_i f_i = gamma_i^T s_i and grad L(W) = (1/n) sum_i (X_i^T c_i) z_i^T.
    """
    if gamma is None:
        gamma = head.fixed_scores(X, Y)
    if gamma is None:  # general head: gamma_i = Y_i X_i grad h(u_i), u_i = X_i^T s_i
        u = _attend(X, s)  # (R, n, d)
        margin = Y * head.value(u)  # (R, n)
        gamma = Y.unsqueeze(-1) * torch.matmul(X, head.grad(u).unsqueeze(-1)).squeeze(-1)  # (R, n, T)
    else:
        margin = (s * gamma).sum(-1)  # (R, n) = s_i^T gamma_i
    c = s * centred_scores(s, gamma)  # s_t (gamma_t - s^T gamma)
    return margin, c * loss_derivative(margin, loss).unsqueeze(-1)


def centred_scores(s: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """gamma_t - s^T gamma (R, n, T), accurate when the softmax saturates.

    Computed against the most-attended token r: (gamma_t - gamma_r) - sum_u s_u (gamma_u - gamma_r).
    The naive gamma_t - s^T gamma cancels catastrophically for t = r once the other probabilities fall
    below ~1e-16 (the true value is ~e^{-margin}, the rounding error ~1e-16 |gamma|), and normalised GD
    then amplifies the noise into the direction of W.
    """
    r = s.argmax(-1, keepdim=True)  # (R, n, 1)
    gd = gamma - gamma.gather(-1, r)  # (R, n, T), exactly 0 at r
    return gd - (s * gd).sum(-1, keepdim=True)


def grad_from_weights(X: torch.Tensor, Z: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(1/n) sum_i (X_i^T c_i) z_i^T (R, d, d)."""
    n = X.shape[1]
    g = _attend(X, c)  # (R, n, d): X_i^T c_i
    return torch.bmm(g.mT, Z) / n  # (R, d, n) @ (R, n, d) -> (R, d, d)


def loss_and_grad_W(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, head: Head,
                    loss: str = "logistic") -> tuple[torch.Tensor, torch.Tensor]:
    """(L(W) (R,), grad L(W) (R, d, d)) in closed form (no autograd), sharing one forward pass."""
    check_loss(loss)
    _check_batch(X, Z, W, Y)
    s = softmax(X, Z, W)  # (R, n, T)
    margin, c = token_weights(X, Y, s, head, loss)
    return loss_value(margin, loss).mean(-1), grad_from_weights(X, Z, c)


def grad_W(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, head: Head,
           loss: str = "logistic") -> torch.Tensor:
    """grad L(W) = (1/n) sum_i l'_i X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T, shape (R, d, d)."""
    return loss_and_grad_W(X, Y, Z, W, head, loss)[1]


def _check_kq(X: torch.Tensor, K: torch.Tensor, Q: torch.Tensor) -> None:
    R, d = X.shape[0], X.shape[-1]
    if K.ndim != 3 or K.shape[:2] != (R, d) or Q.shape != K.shape:
        raise InvalidInputError(
            f"K and Q must both have shape (R, d, m) with (R, d) = {(R, d)}, got {tuple(K.shape)} and "
            f"{tuple(Q.shape)}"
        )


def loss_and_grad_KQ(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, K: torch.Tensor, Q: torch.Tensor,
                     head: Head, loss: str = "logistic") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(L(K Q^T) (R,), grad_K = grad L(W) Q, grad_Q = grad L(W)^T K), W = K Q^T."""
    _check_kq(X, K, Q)
    L, G = loss_and_grad_W(X, Y, Z, torch.bmm(K, Q.mT), head, loss)
    return L, torch.bmm(G, Q), torch.bmm(G.mT, K)


def grad_KQ(X: torch.Tensor, Y: torch.Tensor, Z: torch.Tensor, K: torch.Tensor, Q: torch.Tensor,
            head: Head, loss: str = "logistic") -> tuple[torch.Tensor, torch.Tensor]:
    """(grad_K L, grad_Q L) = (grad L(W) Q, grad L(W)^T K) at W = K Q^T, each (R, d, m)."""
    return loss_and_grad_KQ(X, Y, Z, K, Q, head, loss)[1:]


# -- the token Gram operator (GD in logit space) --------------------------------------------------

def gram_entry_bound(X: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """max_t |x_it|^2 max_i |z_i|^2 (R,): an entrywise bound on the token Gram M (see TokenGram), so
    eps * bound * ||c||_1^2 bounds the rounding error of c^T M = ||G||_F^2."""
    return X.square().sum(-1).amax((1, 2)) * Z.square().sum(-1).amax(-1)


class TokenGram:
    """M_(it),(j tau) = (x_it . x_j tau)(z_i . z_j): for G = sum_j X_j^T c_j z_j^T,
    X_i G z_i = (M c)_i and ||G||_F^2 = c^T M c.

    Dense (R, nT, nT) when small (one batched product per application), else factored:
    M c = X (K (X^T c)) with K = Z Z^T (R, n, n).
    """

    def __init__(self, X: torch.Tensor, Z: torch.Tensor, *, dense: bool | None = None):
        R, n, T, d = X.shape
        self.X, self.Z = X, Z
        self.shape = (R, n, T)
        K = torch.bmm(Z, Z.mT)  # (R, n, n): z_i . z_j
        if dense is None:
            dense = R * (n * T) ** 2 <= DENSE_GRAM_MAX_ENTRIES and (n * T) ** 2 <= 4 * (
                2 * n * T * d + n * n * d
            )
        self.dense = dense
        Xf = X.reshape(R, n * T, d)  # (R, nT, d)
        if dense:
            XX = torch.bmm(Xf, Xf.mT).view(R, n, T, n, T)  # (R, n, T, n, T): x_it . x_j tau
            self.M = (XX * K.view(R, n, 1, n, 1)).view(R, n * T, n * T).contiguous()  # (R, nT, nT), symmetric
        else:
            self.K = K
        self.entry_bound = gram_entry_bound(X, Z).view(R, 1, 1)  # (R, 1, 1)

    def apply(self, c: torch.Tensor) -> torch.Tensor:
        """M c for token weights c (R, n, T) -> (R, n, T)."""
        R, n, T = self.shape
        if self.dense:
            return torch.bmm(c.reshape(R, 1, n * T), self.M).view(R, n, T)  # row form: c^T M = (M c)^T
        g = _attend(self.X, c)  # (R, n, d): X_j^T c_j
        Kg = torch.bmm(self.K, g)  # (R, n, d): sum_j (z_i . z_j) X_j^T c_j
        return torch.matmul(self.X, Kg.unsqueeze(-1)).squeeze(-1)  # (R, n, T)

    def weights_to_W(self, c: torch.Tensor) -> torch.Tensor:
        """sum_j X_j^T c_j z_j^T (R, d, d) (no 1/n)."""
        return torch.bmm(_attend(self.X, c).mT, self.Z)  # (R, d, n) @ (R, n, d)
