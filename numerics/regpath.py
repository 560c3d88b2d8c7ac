"""The regularisation path (THEORY.md §4): for each radius the best constrained minimiser of the loss,
by projected normalised GD from several restarts, batched over instances and restarts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from . import attention as att
from .data import AttentionData
from .errors import InvalidInputError
from .gd_common import (
    ACTIVE_RTOL,
    RegPathResult,
    _check_common,
    _check_m,
    _np,
    _prepare,
    _softmax_rows,
)
from .gd_torch import _kq_grads, _maxabs


def regularization_path(
    data: AttentionData | Sequence[AttentionData],
    radii: Any,
    *,
    param: str = "W",
    loss: str = "logistic",
    steps: int = 500,
    lr: float = 0.05,
    restarts: int = 3,
    seed: int | Sequence[int] = 0,
    device: Any = "cpu",
    head: att.Head | None = None,
    m: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> RegPathResult:
    """W_R = argmin_{||W||_F <= R} L(W) for each radius (for "KQ": ||K||_F^2 + ||Q||_F^2 <= 2R).

    Projected normalised GD, batched over instances and candidates: at radius R_j the candidates are
    ``restarts`` random starts on the sphere (ball boundary) plus, for j > 0, the previous radius's
    solution rescaled to R_j (warm start); the best final loss wins per instance. Step k of ``steps``
    moves each parameter by lr * scale * (1 - k/steps) along its normalised gradient, scale = R_j for W
    and sqrt(R_j) for K, Q (their norms at the boundary), a linearly decaying schedule so the last
    iterate settles on the constrained minimiser instead of oscillating at the step size.
    """
    steps, lr = _check_common(param, loss, steps, lr)
    if steps < 1:
        raise InvalidInputError(f"steps must be >= 1 for a regularisation path, got {steps}")
    r = (
        np.asarray(radii, dtype=np.float64)
        if not isinstance(radii, (int, float))
        else np.array([float(radii)])
    )
    if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise InvalidInputError(
            f"radii must be a non-empty 1-D sequence of finite numbers > 0, got {radii!r}"
        )
    if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) or restarts < 1:
        raise InvalidInputError(f"restarts must be an integer >= 1, got {restarts!r}")
    if isinstance(seed, bool) or not (
        isinstance(seed, (int, np.integer))
        or (isinstance(seed, (Sequence, np.ndarray)) and all(isinstance(v, (int, np.integer)) for v in seed))
    ):
        raise InvalidInputError(f"seed must be an int or a sequence of ints (one per instance), got {seed!r}")
    batch, h = _prepare(data, head, device, dtype)
    R, n, T, d = batch.shape
    if param == "KQ":
        m = _check_m(m, d)
    with torch.inference_mode():
        if not isinstance(seed, (int, np.integer)) and len(seed) != R:
            raise InvalidInputError(
                f"seed must be an int or a sequence of {R} ints (one per instance), got {seed!r}"
            )
        return _regpath(batch, h, r, param, loss, steps, lr, int(restarts), seed, int(m or d), dtype)


def _regpath(batch, head, radii, param, loss, steps, lr, restarts, seed, m, dtype) -> RegPathResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n, T, d = X.shape
    dev = X.device
    tiny = torch.finfo(dtype).tiny
    if isinstance(seed, (int, np.integer)):  # one generator for the batch
        gen = torch.Generator(device="cpu").manual_seed(int(seed))

        def draw(shape):  # (restarts*R, *shape), candidate c of instance r at c*R + r
            return torch.randn((restarts * R, *shape), generator=gen, dtype=torch.float64)
    else:  # one generator per instance: an instance's path does not depend on its batch (exact replay)
        gens = [torch.Generator(device="cpu").manual_seed(int(v)) for v in seed]

        def draw(shape):
            per = [torch.randn((restarts, *shape), generator=g, dtype=torch.float64) for g in gens]
            return torch.stack(per, dim=1).reshape(restarts * R, *shape)
    Ws: list[Any] = []
    Ks: list[Any] = []
    Qs: list[Any] = []
    losses: list[Any] = []
    norms: list[Any] = []
    prev = None  # previous radius's solution: W (R,d,d) or (K, Q)
    for j, rad in enumerate(radii):
        C = restarts + (prev is not None)
        # (C*R, ...) batch: candidate c of instance r sits at index c*R + r
        Xc, Yc, Zc = X.repeat(C, 1, 1, 1), Y.repeat(C, 1), Z.repeat(C, 1, 1)
        hc = head.repeat(C)
        gamma = hc.fixed_scores(Xc, Yc)
        if param == "W":
            P = draw((d, d)).to(dev, dtype)
            P = P * (rad / torch.linalg.matrix_norm(P, keepdim=True))
            if prev is not None:
                P = torch.cat(
                    [P, prev * (rad / torch.linalg.matrix_norm(prev, keepdim=True).clamp_min(tiny))]
                )
            W = P
            for k in range(steps):
                eta = lr * rad * (1.0 - k / steps)
                G = _grad_dir(Xc, Yc, Zc, W, hc, loss, gamma)  # (C*R, d, d)
                W.addcdiv_(G, torch.linalg.matrix_norm(G, keepdim=True).clamp_min_(tiny), value=-eta)
                W.mul_(torch.clamp(rad / torch.linalg.matrix_norm(W, keepdim=True).clamp_min_(tiny), max=1.0))
            Lc = att.loss(Xc, Yc, Zc, W, hc, loss).view(C, R)  # (C, R)
            best = Lc.argmin(0)  # (R,)
            Wb = W.view(C, R, d, d)[best, torch.arange(R, device=dev)]  # (R, d, d)
            prev = Wb
            Ws.append(Wb)
            nrm = torch.linalg.matrix_norm(Wb)
            Ks.append(None)
            Qs.append(None)
        else:
            K = draw((d, m)).to(dev, dtype)
            Q = draw((d, m)).to(dev, dtype)
            s0 = torch.sqrt(
                2 * rad / (K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True))
            )
            K, Q = K * s0, Q * s0
            if prev is not None:
                Kp, Qp = prev
                sp = math.sqrt(rad / radii[j - 1])
                K, Q = torch.cat([K, Kp * sp]), torch.cat([Q, Qp * sp])
            for k in range(steps):
                eta = lr * math.sqrt(rad) * (1.0 - k / steps)
                gK, gQ = _kq_grads(Xc, Yc, Zc, K, Q, hc, loss, gamma, direction_only=True)
                K.addcdiv_(gK, torch.linalg.matrix_norm(gK, keepdim=True).clamp_min_(tiny), value=-eta)
                Q.addcdiv_(gQ, torch.linalg.matrix_norm(gQ, keepdim=True).clamp_min_(tiny), value=-eta)
                tot = K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True)
                sc = torch.clamp(torch.sqrt(2 * rad / tot.clamp_min_(tiny)), max=1.0)
                K.mul_(sc)
                Q.mul_(sc)
            W = torch.bmm(K, Q.mT)
            Lc = att.loss(Xc, Yc, Zc, W, hc, loss).view(C, R)
            best = Lc.argmin(0)
            idx = torch.arange(R, device=dev)
            Kb, Qb = K.view(C, R, d, m)[best, idx], Q.view(C, R, d, m)[best, idx]
            prev = (Kb, Qb)
            Wb = torch.bmm(Kb, Qb.mT)
            Ws.append(Wb)
            Ks.append(Kb)
            Qs.append(Qb)
            nrm = 0.5 * (Kb.square().sum((1, 2)) + Qb.square().sum((1, 2)))
        losses.append(Lc.gather(0, best.view(1, R)).view(R))
        norms.append(nrm)
    norms_np = np.stack([_np(v) for v in norms])  # (J, R)
    return RegPathResult(
        radii=radii.copy(),
        W=np.stack([_np(w) for w in Ws]),
        loss=np.stack([_np(v) for v in losses]),
        constraint_active=norms_np >= (1.0 - ACTIVE_RTOL) * radii[:, None],
        norms=norms_np,
        K=np.stack([_np(k) for k in Ks]) if param == "KQ" else None,
        Q=np.stack([_np(q) for q in Qs]) if param == "KQ" else None,
        param=param,
    )


def _grad_dir(X, Y, Z, W, head, loss, gamma):
    """A positive per-instance multiple of grad L(W) (R, d, d), rescaled so max |c| = 1 (see _kq_grads)."""
    s = _softmax_rows(torch.matmul(X, torch.bmm(Z, W.mT).unsqueeze(-1)).squeeze(-1))  # (R, n, T)
    _, c = att.token_weights(X, Y, s, head, loss, gamma)
    c = c / _maxabs(c, torch.finfo(c.dtype).tiny)
    return att.grad_from_weights(X, Z, c)
