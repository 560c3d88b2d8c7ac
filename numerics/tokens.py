"""Token scores, optimal tokens, margins, softmax maps and correlation (THEORY.md §1, §3).

All functions take an :class:`~numerics.data.AttentionData` and numpy arrays, float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import tolerances as tol
from .data import AttentionData
from .errors import InvalidInputError


def scores(data: AttentionData, v: Any = None) -> np.ndarray:
    """Token scores gamma_it = Y_i v^T x_it, shape (n, T). ``v`` defaults to the dataset's head."""
    v = data.require_head() if v is None else np.asarray(v, dtype=np.float64)
    return data.Y[:, None] * (data.X @ v)  # (n, T)


@dataclass(frozen=True)
class OptimalTokens:
    """opt_i = argmax_t gamma_it, with ties detected (``tied[i]``: another token within ``tie_tol``)."""

    index: np.ndarray  # (n,) int
    tied: np.ndarray  # (n,) bool
    gap: np.ndarray  # (n,) best score minus second best

    @property
    def unique(self) -> bool:
        return not bool(self.tied.any())


def optimal_tokens(data: AttentionData, *, v: Any = None, tie_tol: float = tol.TIE_TOL) -> OptimalTokens:
    """Indices of the highest-scoring token of every example, and which examples have ties."""
    g = scores(data, v)
    idx = np.argmax(g, axis=1)
    srt = np.sort(g, axis=1)
    gap = srt[:, -1] - srt[:, -2]
    return OptimalTokens(index=idx, tied=gap <= tie_tol, gap=gap)


def check_alpha(data: AttentionData, alpha: Any) -> np.ndarray:
    """Validate a selection vector alpha (one token index per example); returns an int array."""
    a = np.asarray(alpha)
    if a.shape != (data.n,):
        raise InvalidInputError(
            f"alpha must have one token index per example, shape ({data.n},), got {a.shape}"
        )
    if a.dtype.kind not in "iu":
        if a.dtype.kind == "f" and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise InvalidInputError(f"alpha must hold integer token indices, got dtype {a.dtype}")
    if np.any(a < 0) or np.any(a >= data.T):
        raise InvalidInputError(f"alpha entries must lie in 0..{data.T - 1}, got {a.tolist()}")
    return a.astype(np.int64)


def resolve_alpha(data: AttentionData, alpha: Any = None) -> np.ndarray:
    """``alpha`` validated, or the optimal tokens when ``alpha`` is None."""
    return optimal_tokens(data).index if alpha is None else check_alpha(data, alpha)


def margins(data: AttentionData, W: Any, alpha: Any = None) -> np.ndarray:
    """(x_{i alpha_i} - x_it)^T W z_i for every (i, t), shape (n, T); +inf at t = alpha_i."""
    a = resolve_alpha(data, alpha)
    W = np.asarray(W, dtype=np.float64)
    logits = np.einsum("ntd,de,ne->nt", data.X, W, data.Z)  # (n, T) x_it^T W z_i
    m = logits[np.arange(data.n), a][:, None] - logits
    m[np.arange(data.n), a] = np.inf
    return m


def min_margin(data: AttentionData, W: Any, alpha: Any = None) -> float:
    """min over i, t != alpha_i of the margins: >= 1 iff W is feasible for Att-SVM(alpha)."""
    return float(np.min(margins(data, W, alpha)))


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row softmax over the last axis, max-subtracted (stable at any scale): the one numpy softmax of the
    numerics (softmax_probs, GenFin, the kernels' loss), so that the power analysis (checks/power) reaches
    them all by replacing this one function (the seam scan in tests/harness keeps it so)."""
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_probs(data: AttentionData, W: Any) -> np.ndarray:
    """s_i(W) = softmax(X_i W z_i), shape (n, T), stable at huge ||W||."""
    return softmax_rows(np.einsum("ntd,de,ne->nt", data.X, np.asarray(W, dtype=np.float64), data.Z))


def corr(A: Any, B: Any, axis: int | tuple[int, ...] = (-2, -1)) -> np.ndarray | float:
    """corr(A, B) = <A, B> / (||A||_F ||B||_F) over the last two axes (batched over leading ones);
    ``axis=-1`` for vectors. NaN where a norm is 0. The one definition of corr in the project.

    Examples
    --------
    >>> import numpy as np
    >>> float(corr(np.eye(2), 3 * np.eye(2)))
    1.0
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    num = np.sum(A * B, axis=axis)
    den = np.linalg.norm(A, axis=axis) * np.linalg.norm(B, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out
