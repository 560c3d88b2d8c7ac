"""The regularisation path W_R = argmin_{‖W‖ ≤ R} L(W) (and the (K, Q) path under ‖K‖² + ‖Q‖² ≤ 2R),
globally or restricted to a cone around a direction: batched projected GD over radii × restarts, each radius
one run of the GD engine (numerics.gd.run_gd) with the projected geometry :class:`Projected`, so the engine's
step hook reaches the path's steps as it reaches every other GD."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import attention as att
from .data import AttentionData
from .errors import InvalidInputError
from .excess_loss import logistic_excess, reference_tokens
from .gd import GDConfig, Geometry, run_gd
from .gd_common import (
    ACTIVE_RTOL,
    RegPathResult,
    _check_common,
    _check_m,
    _np,
    _prepare,
)


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
    cone: Any = None,
    start: Any = None,
) -> RegPathResult:
    """W_R = argmin_{||W||_F <= R} L(W) for each radius (for "KQ": ||K||_F^2 + ||Q||_F^2 <= 2R).

    ``radii``: (J,) shared by all instances, or (J, R) one column per instance (instances whose radii differ
    then still run as one batch; each instance's path is the one it has alone, up to rounding).

    ``cone=(centre, mu)``: the *local* path, restricted to the convex cone C_mu(centre) = {W : corr(W, centre)
    >= 1 - mu} (centre (d, d) or one per instance (R, d, d); mu a float or one per instance, in (0, 1)). Every
    start is put on the cone's boundary (:func:`_into_cone_start`) and every step projected onto it: for W
    exactly (:func:`project_cone`, then the ball: the projection onto a closed convex cone intersected with a
    ball about 0 is the cone projection rescaled into the ball); for (K, Q) a step whose W = K Q^T leaves the
    cone is replaced by the balanced factors of the cone projection of W (K = U sqrt(S), Q = V sqrt(S):
    (||K||^2 + ||Q||^2)/2 = ||W'||_* <= ||K Q^T||_*), then scaled into the ball; that step is not an exact
    projection in factor space (at the cone boundary it can raise the loss), so each (K, Q) candidate keeps
    its best iterate. Inside the cone the path is the unrestricted one.

    Projected normalised GD, batched over instances and candidates: at radius R_j the candidates are
    ``restarts`` random starts on the sphere (ball boundary) plus, for j > 0, the previous radius's
    solution rescaled to R_j (warm start); the best final loss wins per instance. Step k of ``steps``
    moves each parameter by lr * scale * (1 - k/steps) along its normalised gradient, scale = R_j for W
    and sqrt(R_j) for K, Q (their norms at the boundary), a linearly decaying schedule so the last
    iterate settles on the constrained minimiser instead of oscillating at the step size. Each radius is one
    run of numerics.gd.run_gd with the geometry :class:`Projected` (its explicit loop and step hook).
    """
    steps, lr = _check_common(param, loss, steps, lr)
    if steps < 1:
        raise InvalidInputError(f"steps must be >= 1 for a regularisation path, got {steps}")
    r = (
        np.asarray(radii, dtype=np.float64)
        if not isinstance(radii, (int, float))
        else np.array([float(radii)])
    )
    if r.ndim not in (1, 2) or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise InvalidInputError(
            f"radii must be a non-empty 1-D sequence (or a (J, R) array) of finite numbers > 0, got {radii!r}"
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
    if r.ndim == 2 and r.shape[1] != R:
        raise InvalidInputError(
            f"per-instance radii must have shape (J, {R}), one column per instance, got {r.shape}"
        )
    if param == "KQ":
        m = _check_m(m, d)
    with torch.inference_mode():
        if not isinstance(seed, (int, np.integer)) and len(seed) != R:
            raise InvalidInputError(
                f"seed must be an int or a sequence of {R} ints (one per instance), got {seed!r}"
            )
        cone_t = None if cone is None else _cone_arg(cone, R, d, dev=batch.X.device, dtype=dtype)
        start_t = None
        if start is not None:
            if cone is not None:
                raise InvalidInputError("start and cone cannot be combined (a start may leave the cone)")
            start_t = _start_arg(start, R, d, dev=batch.X.device, dtype=dtype)
        return _regpath(batch, h, r, param, loss, steps, lr, int(restarts), seed, int(m or d), dtype, cone_t,
                        start_t)


def _cone_arg(cone: Any, R: int, d: int, *, dev, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated (unit centres (R, d, d), mu (R,)) of the ``cone`` argument of :func:`regularization_path`."""
    if not (isinstance(cone, (tuple, list)) and len(cone) == 2):
        raise InvalidInputError(f"cone must be a pair (centre, mu), got {type(cone).__name__}")
    A = np.asarray(cone[0], dtype=np.float64)
    if A.shape == (d, d):
        A = np.broadcast_to(A, (R, d, d))
    if A.shape != (R, d, d) or not np.all(np.isfinite(A)):
        raise InvalidInputError(
            f"cone centre must be a finite ({d}, {d}) or ({R}, {d}, {d}) array, got {A.shape}"
        )
    nA = np.linalg.norm(A, axis=(1, 2))
    if np.any(nA == 0):
        raise InvalidInputError("cone centre must be non-zero")
    mu = np.broadcast_to(np.asarray(cone[1], dtype=np.float64), (R,))
    if not np.all((mu > 0) & (mu < 1)):
        raise InvalidInputError(f"cone mu must lie in (0, 1), got {cone[1]!r}")
    return (torch.as_tensor(A / nA[:, None, None], dtype=dtype, device=dev),
            torch.as_tensor(np.array(mu), dtype=dtype, device=dev))


def _start_arg(start: Any, R: int, d: int, *, dev, dtype) -> torch.Tensor:
    """``start`` as an (R, d, d) tensor of finite, nonzero directions."""
    A = np.asarray(start, dtype=np.float64)
    if A.shape == (d, d):
        A = np.broadcast_to(A, (R, d, d))
    if A.shape != (R, d, d) or not np.all(np.isfinite(A)) or np.any(np.abs(A).reshape(R, -1).max(1) == 0):
        raise InvalidInputError(f"start must be a finite nonzero ({d}, {d}) or ({R}, {d}, {d}) array, "
                                f"got shape {A.shape}")
    return torch.as_tensor(np.array(A), dtype=dtype, device=dev)  # a copy: broadcast_to is read-only


def project_cone(W: torch.Tensor, centre: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Frobenius projection of W (B, d, d) onto the convex cone {corr(W, centre) >= 1 - mu} (centre unit (B,
    d, d), mu (B,)): W itself inside; otherwise max(0, <W, e>) e with e = cos(th) centre + sin(th) U/||U||,
    cos(th) = 1 - mu, U the part of W orthogonal to the centre (the nearest boundary ray, in the plane of the
    centre and W)."""
    a = (W * centre).sum((1, 2))
    U = W - a[:, None, None] * centre
    u = torch.linalg.matrix_norm(U)
    c = 1.0 - mu
    sn = torch.sqrt(1.0 - c * c)
    inside = u * c <= a * sn
    Uh = U / u.clamp_min(torch.finfo(W.dtype).tiny)[:, None, None]
    e = c[:, None, None] * centre + sn[:, None, None] * Uh
    P = (a * c + u * sn).clamp_min(0.0)[:, None, None] * e
    return torch.where(inside[:, None, None], W, P)


def _into_cone_start(P: torch.Tensor, centre: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """A random start moved onto the cone's BOUNDARY, same Frobenius norm: ||P|| (cos(th) centre + sin(th)
    U/||U||), U the part of P orthogonal to the centre (a random boundary direction). Never the centre itself:
    a start at the limit direction would let an optimiser that does not move pass for one that converges."""
    a = (P * centre).sum((1, 2))
    U = P - a[:, None, None] * centre
    Uh = U / torch.linalg.matrix_norm(U, keepdim=True).clamp_min(torch.finfo(P.dtype).tiny)
    c = (1.0 - mu)[:, None, None]
    return torch.linalg.matrix_norm(P, keepdim=True) * (c * centre + torch.sqrt(1.0 - c * c) * Uh)


@dataclass(frozen=True, eq=False)
class Projected(Geometry):
    """The regularisation paths' geometry on the GD engine (numerics.gd.run_gd): projected normalised GD
    onto the ball of the parametrisation, ``||W||_F <= radius`` for W, ``||K||_F^2 + ||Q||_F^2 <= 2 radius``
    for (K, Q) (``param``: "W" or "KQ"), optionally intersected with the cone ``cone = (centre, mu)``
    (:func:`regularization_path`).

    Step k of ``steps``: each parameter moves by eta_k = lr * scale * (1 - k/steps) along its normalised
    gradient (scale = radius for W, sqrt(radius) for K and Q: their norms at the boundary; a linearly
    decaying schedule, :meth:`step_size`), then the parameters are projected: onto the cone (W exactly by
    :func:`project_cone`; (K, Q) by :func:`_cone_factors`), then radially into the ball. ``radius`` is a
    float, or an (R, 1, 1) tensor with one radius per instance; ``cone`` (unit centres (R, d, d), mu (R,))
    or None. ``after``: called with the parameters after
    every projected step (the (K, Q) cone path keeps its best iterate through it), or None."""

    radius: Any
    cone: Any = None
    after: Any = None
    param: str = "W"

    name = "projected"
    scale_free = True

    def step_size(self, lr, k, steps):
        rad = self.radius
        if self.param == "W":
            return lr * rad * (1.0 - k / steps)
        return lr * (math.sqrt(rad) if isinstance(rad, float) else rad.sqrt()) * (1.0 - k / steps)

    def update(self, params, grads, lr, tiny):
        for P, G in zip(params, grads, strict=True):  # P -= eta G / ||G|| (addcdiv_'s arithmetic for a float)
            nrm = torch.linalg.matrix_norm(G, keepdim=True).clamp_min_(tiny)
            if isinstance(lr, float):
                P.addcdiv_(G, nrm, value=-lr)
            else:
                P.add_(-lr * G / nrm)
        rad = self.radius
        if self.param == "W":
            W = params[0]
            if self.cone is not None:
                W = params[0] = project_cone(W, *self.cone)
            W.mul_((rad / torch.linalg.matrix_norm(W, keepdim=True).clamp_min_(tiny)).clamp_(max=1.0))
        else:
            K, Q = params
            if self.cone is not None:
                K, Q = params[0], params[1] = _cone_factors(K, Q, *self.cone, K.shape[-1])
            tot = K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True)
            sc = (2 * rad / tot.clamp_min_(tiny)).sqrt_().clamp_(max=1.0)
            K.mul_(sc)
            Q.mul_(sc)
        if self.after is not None:
            self.after(params)


def _regpath(
    batch, head, radii, param, loss, steps, lr, restarts, seed, m, dtype, cone=None, start=None
) -> RegPathResult:
    """The path: per radius one projected GD run (:class:`Projected` on numerics.gd.run_gd, so the engine's
    step hook reaches it) of every candidate of every instance, then the best candidate per instance."""
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
    # On a cone path the candidates are compared by the excess loss E_ρ(W) = L(W) − (1/n) Σ ℓ(γ_iρ_i), ρ the
    # tokens the cone's centre selects (numerics.excess_loss): on a cone that selects ρ, L is flat in float64
    # beyond logit gaps ≈ 32 (its W-dependence is the e^{-gap} softmax tails), so comparing L there picks a
    # candidate by rounding; E keeps the tails. Logistic loss with a linear head only (the local paths'
    # setting); otherwise L. The returned ``loss`` is L either way.
    gamma0 = head.fixed_scores(X, Y)
    ref0 = None
    if cone is not None and loss == "logistic" and gamma0 is not None:
        ref0 = reference_tokens(X, Z, cone[0])

    def select_loss(Xc, Yc, Zc, W, *, hc, C):
        if ref0 is None:
            return att.loss(Xc, Yc, Zc, W, hc, loss)
        return logistic_excess(Xc, Zc, W, gamma0.repeat(C, 1, 1), ref0.repeat(C, 1))

    Ws: list[Any] = []
    Ks: list[Any] = []
    Qs: list[Any] = []
    losses: list[Any] = []
    norms: list[Any] = []
    prev: Any = None  # previous radius's solution: W (R,d,d) or (K, Q)
    per = radii.ndim == 2  # per-instance radii: rad is a (C*R, 1, 1) tensor, else a float
    cfg = GDConfig(steps=steps, lr=lr, loss=loss, param=param, m=m if param == "KQ" else None, dtype=dtype)

    def rad_of(j: int, copies: int):  # radius j for ``copies`` blocks of R candidates
        if not per:
            return float(radii[j])
        return torch.as_tensor(np.tile(radii[j], copies), dtype=dtype, device=dev)[:, None, None]

    for j in range(len(radii)):
        C = restarts + (prev is not None) + (start is not None)
        rad = rad_of(j, C)  # candidate c of instance r: row c*R + r
        # the random starts, the warm start, the given start (rows in this order)
        rad_s, rad_p, rad_x = (rad, rad, rad) if not per else (
            rad[: restarts * R], rad[restarts * R: (restarts + 1) * R], rad[(C - 1) * R:])
        # (C*R, ...) batch: candidate c of instance r sits at index c*R + r
        Xc, Yc, Zc = X.repeat(C, 1, 1, 1), Y.repeat(C, 1), Z.repeat(C, 1, 1)
        hc = head.repeat(C)
        cc = None if cone is None else (cone[0].repeat(C, 1, 1), cone[1].repeat(C))
        if param == "W":
            init: Any = _w_starts(draw((d, d)).to(dev, dtype), prev, rad_s, rad_p, cone, restarts, tiny)
            if start is not None:
                init = torch.cat([init, start * (rad_x / torch.linalg.matrix_norm(start, keepdim=True))])
        else:
            sp = None if prev is None else (
                math.sqrt(rad / radii[j - 1]) if not per else torch.sqrt(rad_p / rad_of(j - 1, 1)))
            init = _kq_starts(draw((d, m)).to(dev, dtype), draw((d, m)).to(dev, dtype), prev, rad_s, sp, cone,
                              restarts, m)
            if start is not None:
                Kx, Qx = _balanced_factors(start, m, rad_x)
                init = (torch.cat([init[0], Kx]), torch.cat([init[1], Qx]))
        sel = functools.partial(select_loss, Xc, Yc, Zc, hc=hc, C=C)
        # the (K, Q) cone step is not an exact projection in factor space: keep the best iterate
        keep = None if param == "W" or cc is None else _BestIterate(init[0].clone(), init[1].clone(), sel)
        res = run_gd(att.AttentionBatch(Xc, Yc, Zc, None), cfg.but(geometry=Projected(rad, cc, keep, param)),
                     init=init, head=hc, device=dev)
        if param == "W":
            W = torch.as_tensor(res.W).to(dev, dtype)
        else:
            K, Q = (keep.K, keep.Q) if keep is not None else \
                (torch.as_tensor(res.K).to(dev, dtype), torch.as_tensor(res.Q).to(dev, dtype))
            W = torch.bmm(K, Q.mT)
        Lc = sel(W).view(C, R)  # (C, R)
        best = Lc.argmin(0)  # (R,)
        Lc = att.loss(Xc, Yc, Zc, W, hc, loss).view(C, R)
        idx = torch.arange(R, device=dev)
        if param == "W":
            Wb = W.view(C, R, d, d)[best, idx]  # (R, d, d)
            prev = Wb
            Ws.append(Wb)
            nrm = torch.linalg.matrix_norm(Wb)
            Ks.append(None)
            Qs.append(None)
        else:
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
        constraint_active=norms_np >= (1.0 - ACTIVE_RTOL) * (radii if radii.ndim == 2 else radii[:, None]),
        norms=norms_np,
        K=np.stack([_np(k) for k in Ks]) if param == "KQ" else None,
        Q=np.stack([_np(q) for q in Qs]) if param == "KQ" else None,
        param=param,
    )


def _w_starts(P, prev, rad_s, rad_p, cone, restarts, tiny):
    """The W candidates at one radius: the random draws P (restarts*R, d, d) (moved onto the cone's boundary
    with a cone) on the sphere of radius rad_s, then the previous radius's solution rescaled (warm start)."""
    if cone is not None:
        P = _into_cone_start(P, cone[0].repeat(restarts, 1, 1), cone[1].repeat(restarts))
    P = P * (rad_s / torch.linalg.matrix_norm(P, keepdim=True))
    if prev is not None:
        # a zero solution (a cone path's projection can be 0) stays 0: rad_p / tiny overflows for rad_p >= 4,
        # and 0 * inf made the warm start NaN (measured: a random cone centre, R = 4; silent NaN paths before)
        nrm = torch.linalg.matrix_norm(prev, keepdim=True)
        P = torch.cat([P, torch.where(nrm > 0, prev * (rad_p / nrm.clamp_min(tiny)), prev)])
    return P


def _kq_starts(K, Q, prev, rad_s, sp, cone, restarts, m):
    """The (K, Q) candidates at one radius: the random draws (balanced factors of a start on the cone's
    boundary with a cone) scaled onto ||K||^2 + ||Q||^2 = 2 rad_s, then the previous radius's solution
    scaled by ``sp`` (warm start)."""
    if cone is not None:  # balanced factors of a start on the cone boundary (see _into_cone_start)
        W0 = _into_cone_start(torch.bmm(K, Q.mT), cone[0].repeat(restarts, 1, 1), cone[1].repeat(restarts))
        U0, S0, Vh0 = torch.linalg.svd(W0)
        K, Q = U0[:, :, :m] * S0[:, None, :m].sqrt(), Vh0.mT[:, :, :m] * S0[:, None, :m].sqrt()
    s0 = torch.sqrt(2 * rad_s / (K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True)))
    K, Q = K * s0, Q * s0
    if prev is not None:
        Kp, Qp = prev
        K, Q = torch.cat([K, Kp * sp]), torch.cat([Q, Qp * sp])
    return K, Q


def _balanced_factors(W, m, rad):
    """Balanced factors (U sqrt(S), V sqrt(S)) of the rank-m truncation of W (R, d, d), scaled to nuclear
    norm ``rad``: (||K||^2 + ||Q||^2)/2 = rad."""
    U, S, Vh = torch.linalg.svd(W)
    rad = rad if isinstance(rad, float) else rad.reshape(-1, 1)  # a float, or one radius per instance
    S = S[:, :m] * (rad / S[:, :m].sum(1, keepdim=True))
    r = S.sqrt()
    return U[:, :, :m] * r[:, None, :], Vh.mT[:, :, :m] * r[:, None, :]


class _BestIterate:
    """The (K, Q) cone path's best iterate per candidate by ``select(K Q^T)``, starting from (K, Q) (a
    :class:`Projected` ``after`` callback)."""

    def __init__(self, K, Q, select):
        self.K, self.Q, self.select = K, Q, select
        self.L = select(torch.bmm(K, Q.mT))

    def __call__(self, params):
        K, Q = params
        Lk = self.select(torch.bmm(K, Q.mT))
        better = Lk < self.L
        self.K[better], self.Q[better], self.L = K[better], Q[better], torch.minimum(Lk, self.L)


def _cone_factors(K, Q, centre, mu, m):
    """(K, Q) with W = K Q^T kept where W is in the cone; elsewhere the balanced factors (U sqrt(S), V
    sqrt(S), first m singular triplets) of the cone projection of W (see :func:`regularization_path`)."""
    W = torch.bmm(K, Q.mT)
    P = project_cone(W, centre, mu)
    out = ~torch.all((P == W).flatten(1), dim=1)
    if not bool(out.any()):
        return K, Q
    Pn = P[out]
    nP = torch.linalg.matrix_norm(Pn, keepdim=True)
    Pn = torch.where(
        nP > 0, Pn, centre[out] * torch.linalg.matrix_norm(W[out], keepdim=True)
    )  # polar: centre
    U, S, Vh = torch.linalg.svd(Pn)
    r = S[:, :m].sqrt()
    K, Q = K.clone(), Q.clone()
    K[out] = U[:, :, :m] * r[:, None, :]
    Q[out] = Vh.mT[:, :, :m] * r[:, None, :]
    return K, Q

