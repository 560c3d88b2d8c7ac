"""The attention objective of one dataset, numpy in and numpy out: what a theorem author needs to state a
gradient-level claim about an :class:`~numerics.data.AttentionData` (THEORY.md §1, §2).

    s_i(W) = softmax(X_i W z_i)                            softmax_probs(data, W)   (n, T)
    L(W) = (1/n) sum_i l(Y_i v^T X_i^T s_i(W))             loss(data, W)            float
    grad L(W)                                              grad_W(data, W)          (d, d)
    (grad_K, grad_Q) = (grad L(W) Q, grad L(W)^T K)        grad_KQ(data, K, Q)      (d, m), (d, m)

Each is the batched torch form of :mod:`numerics.attention` (``loss_and_grad_W``, ``loss_and_grad_KQ``) at
R = 1 with the dataset's linear head v, in float64, so it goes through the seam the power analysis breaks
(checks/power) like every other caller. For many datasets or many W at once, use the torch form directly
(the fast path): ``b = attention.batch_from_data(datas)`` then
``attention.grad_W(b.X, b.Y, b.Z, W, b.linear_head())`` with W of shape (R, d, d).

Examples
--------
>>> import numpy as np
>>> from numerics.data import random_unit_sphere
>>> data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
>>> grad_W(data, np.zeros((5, 5))).shape, round(loss(data, np.zeros((5, 5))), 6) > 0
((5, 5), True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import attention as att
from .data import AttentionData
from .errors import InvalidInputError
from .tokens import softmax_probs


def _batch(data: AttentionData) -> att.AttentionBatch:
    if not isinstance(data, AttentionData):
        raise InvalidInputError(f"expected an AttentionData, got {type(data).__name__}")
    return att.batch_from_data(data, require_head=True)


def _square(data: AttentionData, W: Any, name: str = "W") -> torch.Tensor:
    Wa = np.asarray(W, dtype=np.float64)
    if Wa.shape != (data.d, data.d):
        raise InvalidInputError(f"{name} must have shape (d, d) = {(data.d, data.d)}, got {Wa.shape}")
    return torch.as_tensor(Wa)[None]


def loss_and_grad_W(data: AttentionData, W: Any, loss: str = "logistic") -> tuple[float, np.ndarray]:
    """(L(W), grad L(W) (d, d)) of one dataset with its linear head v, sharing one forward pass."""
    b = _batch(data)
    L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, _square(data, W), b.linear_head(), loss)
    return float(L[0]), G[0].numpy()


def loss(data: AttentionData, W: Any, loss: str = "logistic") -> float:
    """L(W) = (1/n) sum_i l(Y_i v^T X_i^T s_i(W)) of one dataset with its linear head v."""
    return loss_and_grad_W(data, W, loss)[0]


def grad_W(data: AttentionData, W: Any, loss: str = "logistic") -> np.ndarray:
    """grad L(W) (d, d) in closed form (no autograd), THEORY.md §2."""
    return loss_and_grad_W(data, W, loss)[1]


def grad_KQ(data: AttentionData, K: Any, Q: Any, loss: str = "logistic") -> tuple[np.ndarray, np.ndarray]:
    """(grad_K L, grad_Q L) = (grad L(W) Q, grad L(W)^T K) at W = K Q^T, each (d, m)."""
    b = _batch(data)
    Ka, Qa = np.asarray(K, dtype=np.float64), np.asarray(Q, dtype=np.float64)
    if Ka.ndim != 2 or Ka.shape[0] != data.d or Qa.shape != Ka.shape:
        raise InvalidInputError(f"K and Q must both have shape (d, m) with d = {data.d}, got {Ka.shape} and "
                                f"{Qa.shape}")
    gK, gQ = att.grad_KQ(b.X, b.Y, b.Z, torch.as_tensor(Ka)[None], torch.as_tensor(Qa)[None],
                         b.linear_head(), loss)
    return gK[0].numpy(), gQ[0].numpy()


__all__ = ["grad_KQ", "grad_W", "loss", "loss_and_grad_W", "softmax_probs"]
