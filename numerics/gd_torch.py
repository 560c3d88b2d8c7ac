"""The batched tensor programs of :func:`numerics.gd.run_gd` (CPU or CUDA, any head): W-GD in logit
space, explicit-W GD with weight decay, (K, Q)-GD through the closed-form gradient (module doc of
:mod:`numerics.gd`)."""

from __future__ import annotations

import numpy as np
import torch

from . import attention as att
from .errors import InvalidInputError
from .gd_common import (
    GDResult,
    _drive,
    _norm_floor,
    _np,
    _progress,
    _record_points,
    _softmax_rows,
)

#: Logit-space W-GD re-centres each row of logits on its maximum only every few steps: a normalised
#: step moves a logit by at most lr * |x_it| |z_i| (|X_i G z_i| <= ||G||_F |x_it| |z_i|), so between
#: re-centrings no row maximum drifts by more than this (exp stays within e^{+-SHIFT_DRIFT_MAX}: no
#: overflow, and the largest weight of a row never underflows), and one amax/sub pair is saved per step.
SHIFT_DRIFT_MAX = 64.0
#: ... but at least every this many steps.
SHIFT_EVERY_MAX = 16


@torch.inference_mode()
def _run_w(batch, head, W0, steps, lr, normalized, loss, record_every, progress) -> GDResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n, T, d = X.shape
    gram = att.TokenGram(X, Z)
    gamma = head.fixed_scores(X, Y)  # (R, n, T) or None (general head)
    tiny = torch.finfo(X.dtype).tiny
    floor = _norm_floor(gram.entry_bound, n * T)  # (R, 1, 1)
    # State: LA[0] = logits X_i W z_i up to a per-row shift, LA[1] = -A, the accumulated token weights
    # with W = W0 + sum_j X_j^T LA[1]_j z_j^T. Both move along CM = [M c, c] in one fused update.
    LA = torch.empty((2, R, n, T), dtype=X.dtype, device=X.device)
    lg, accn = LA[0], LA[1]
    lg.copy_(att.logits(X, Z, W0))
    accn.zero_()
    CM = torch.empty_like(LA)
    every = 1
    if normalized and steps > 0 and R > 0:  # one host sync before the loop, none inside it
        drift = lr * float(gram.entry_bound.max().sqrt())  # max per-step change of any logit
        every = int(min(SHIFT_EVERY_MAX, max(1.0, SHIFT_DRIFT_MAX / drift))) if drift > 0 else SHIFT_EVERY_MAX
    if gamma is not None and normalized and gram.dense:
        step = _w_step_linear(gram, gamma, lg, CM, LA, floor, lr, loss, tiny)
        recentre = step.recentre
    else:
        step = _w_step_general(X, Y, head, gram, gamma, lg, CM, LA, floor, lr, n, normalized, loss, tiny)

        def recentre():
            lg.sub_(lg.amax(-1, keepdim=True))

    def current_W() -> torch.Tensor:
        return W0 + gram.weights_to_W(accn)

    def steps_from(k: int, stop: int) -> None:
        for j in range(k, stop):
            if j % every == 0:
                recentre()
            step()

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(
        steps_from, steps, rec, progress, current_W, lambda Wk: att.loss(X, Y, Z, Wk, head, loss)
    )
    W = current_W()
    final_loss = att.loss(X, Y, Z, W, head, loss)
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.matrix_norm(W)), loss=_np(final_loss),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="W", normalized=normalized, lr=lr, steps=steps,
    )


def _w_step_linear(gram, gamma, lg, CM, LA, floor, lr, loss, tiny):
    """One normalised logit-space step for a linear head (W-independent gamma), fused on preallocated
    buffers (about 17 kernels; the (R, 1, nT) x (R, nT, nT) product dominates).

    c = l'(m) (diag(s) - s s^T) gamma with s = e / S, e = exp(lg), S = sum_t e_t, m = s^T gamma, computed
    as c = (e g - e m') w with g = -gamma, m' = s^T g = -m and w = -l'(m) / S (for the logistic loss
    -l'(m) = sigmoid(-m) = sigmoid(m'), accurate where sigmoid(m) - 1 would cancel).
    """
    R, n, T = lg.shape
    Mc, c = CM[0], CM[1]
    c_row, Mc_row = c.view(R, 1, n * T), Mc.view(R, 1, n * T)
    g0 = gamma.neg()  # (R, n, T)
    # Scores are centred on a reference token r per row, g = g0 - g0[r], g_r0 = g0[r]: then
    # g_t - m' = g_t - sum_u s_u g_u is accurate for the most-attended token when r is that token (the
    # naive form cancels once the softmax saturates). r is refreshed by ``recentre`` (every re-centring
    # of the logits); in between the top token can only change while the softmax is not saturated,
    # where the cancellation is harmless.
    g = torch.empty_like(g0)
    g_r0 = torch.empty((R, n, 1), dtype=lg.dtype, device=lg.device)
    E = torch.empty_like(CM)  # [e, e g]
    e, eg = E[0], E[1]
    SP = torch.empty((2, R, n, 1), dtype=lg.dtype, device=lg.device)  # [S, sum_t e_t g_t]
    S, mneg = SP[0], SP[1]
    c2 = c.view(R, n * T)
    absc = torch.empty_like(c2)
    Mc_col = Mc_row.mT  # (R, nT, 1)
    nrm2 = torch.empty((R, 1, 1), dtype=lg.dtype, device=lg.device)
    M = gram.M

    def recentre():
        lg.sub_(lg.amax(-1, keepdim=True))
        torch.gather(g0, -1, lg.argmax(-1, keepdim=True), out=g_r0)
        torch.sub(g0, g_r0, out=g)

    def step():
        torch.exp(lg, out=e)
        torch.mul(e, g, out=eg)
        torch.sum(E, -1, keepdim=True, out=SP)
        mneg.div_(S)  # m' - g_r0 (R, n, 1), with m' = -m
        if loss == "logistic":
            w = torch.sigmoid(mneg + g_r0).div_(S)
        else:
            w = att.loss_derivative((mneg + g_r0).neg_(), loss).div_(S).neg_()
        torch.addcmul(eg, e, mneg, value=-1.0, out=c).mul_(w)
        # only the direction of G matters: rescale c to max |c| = 1 so that ||G||^2 = c^T M c
        # cannot underflow when the softmax saturates
        c2.div_(torch.abs(c2, out=absc).amax(-1, keepdim=True).clamp_min_(tiny))
        torch.bmm(c_row, M, out=Mc_row)  # (M c)^T = c^T M: X_i G z_i
        torch.bmm(c_row, Mc_col, out=nrm2)  # ||G||_F^2 = c^T M c (of the rescaled c)
        scale = torch.maximum(nrm2, floor, out=nrm2).rsqrt_()  # (R, 1, 1): 1 / ||G||
        LA.addcmul_(CM, scale, value=-lr)  # lg -= lr M c / ||G||, -A -= lr c / ||G||

    step.recentre = recentre
    return step


def _w_step_general(X, Y, head, gram, gamma, lg, CM, LA, floor, lr, n, normalized, loss, tiny):
    """One logit-space step, any head, normalised or not (allocating; the general path)."""
    Mc_buf, c_buf = CM[0], CM[1]

    def step():
        s = _softmax_rows(lg)  # (R, n, T)
        c = att.token_weights(X, Y, s, head, loss, gamma)[1]  # (R, n, T)
        if normalized:  # only the direction of G matters: rescale c to max |c| = 1 so that
            c = c / _maxabs(c, tiny)  # ||G||^2 = c^T M c cannot underflow when the softmax saturates
        Mc = gram.apply(c)  # (R, n, T): X_i G z_i
        c_buf.copy_(c)
        Mc_buf.copy_(Mc)
        if normalized:
            nrm2 = (c * Mc).sum((1, 2), keepdim=True)  # (R, 1, 1): ||G||_F^2 (of the rescaled c)
            LA.addcmul_(CM, torch.maximum(nrm2, floor).rsqrt_(), value=-lr)
        else:
            LA.sub_(CM, alpha=lr / n)  # grad L = G / n

    return step


def _maxabs(c: torch.Tensor, tiny: float) -> torch.Tensor:
    """max_{i,t} |c_it| per instance (R, 1, 1), at least ``tiny``."""
    return torch.linalg.vector_norm(c, float("inf"), dim=(1, 2), keepdim=True).clamp_min_(tiny)


def _kq_grads(X, Y, Z, K, Q, head, loss, gamma, direction_only=False):
    """Closed-form (grad_K, grad_Q) (R, d, m) at W = K Q^T, explicit form (no autograd).

    ``direction_only``: both gradients rescaled by one positive factor per instance (max |c| = 1),
    which normalised steps ignore and which keeps tiny gradients of a saturated softmax representable.
    """
    W = torch.bmm(K, Q.mT)  # (R, d, d)
    s = _softmax_rows(torch.matmul(X, torch.bmm(Z, W.mT).unsqueeze(-1)).squeeze(-1))  # (R, n, T)
    _, c = att.token_weights(X, Y, s, head, loss, gamma)  # (R, n, T)
    if direction_only:
        c = c / _maxabs(c, torch.finfo(c.dtype).tiny)
    G = att.grad_from_weights(X, Z, c)  # (R, d, d), includes 1/n
    return torch.bmm(G, Q), torch.bmm(G.mT, K)


@torch.inference_mode()
def _run_kq(batch, head, K, Q, steps, lr, normalized, loss, record_every, progress, wd=0.0) -> GDResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n = X.shape[:2]
    gamma = head.fixed_scores(X, Y)
    tiny = torch.finfo(X.dtype).tiny
    # K and Q live stacked in P (2R, d, m), their gradients in Gr, so one norm and one update serve both
    P = torch.cat([K, Q]).contiguous()
    K, Q = P[:R], P[R:]
    Gr = torch.empty_like(P)
    # With weight decay the data gradient must keep its true scale (no max |c| = 1 rescale): the step
    # direction is that of data gradient + decay gradient, and a per-instance rescale of one term only
    # would change it. The decay term 2 wd (K, Q) keeps the gradient norm representable instead.
    direction_only = normalized and wd == 0
    if gamma is not None:
        data_grads = _kq_grads_linear(X, Z, gamma, K, Q, Gr, loss, direction_only, tiny)
    else:
        def data_grads():
            gK, gQ = _kq_grads(X, Y, Z, K, Q, head, loss, gamma, direction_only=direction_only)
            Gr[:R].copy_(gK)
            Gr[R:].copy_(gQ)
    if wd > 0:
        def grads():
            data_grads()
            Gr.add_(P, alpha=2.0 * wd)  # grad of wd (||K||^2 + ||Q||^2): 2 wd K, 2 wd Q
    else:
        grads = data_grads  # the hot path: no extra kernel
    if normalized:
        def step():
            grads()
            P.addcdiv_(Gr, torch.linalg.vector_norm(Gr, dim=(1, 2), keepdim=True).clamp_min_(tiny), value=-lr)
    else:
        def step():
            grads()
            P.sub_(Gr, alpha=lr)

    def steps_from(k: int, stop: int) -> None:
        for _ in range(k, stop):
            step()

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, progress, lambda: torch.bmm(K, Q.mT),
                         lambda Wk: att.loss(X, Y, Z, Wk, head, loss))
    W = torch.bmm(K, Q.mT)
    return GDResult(
        W=_np(W), K=_np(K), Q=_np(Q), norms=_np(torch.linalg.matrix_norm(W)),
        loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="KQ", normalized=normalized, lr=lr, steps=steps,
    )


@torch.inference_mode()
def _run_w_explicit(batch, head, W0, steps, lr, normalized, loss, record_every, progress, wd) -> GDResult:
    """GD on L(W) + wd ||W||_F^2 with W held explicitly (the weight-decay path for "W").

    The fused logit-space step (:func:`_run_w`) writes W = W(0) + sum_j X_j^T A_j z_j^T and moves only
    the token weights A; the decay gradient 2 wd W has a W(0) component outside that span (and would
    also need ||W||_F per step for the normalisation), so this path forms W and its gradient each step:
    grad = (1/n) sum_i X_i^T c_i z_i^T + 2 wd W, with accurate (reference-token) token weights c.
    """
    if not wd > 0:
        raise InvalidInputError("_run_w_explicit is the weight-decay path; use _run_w for weight_decay = 0")
    X, Y, Z = batch.X, batch.Y, batch.Z
    tiny = torch.finfo(X.dtype).tiny
    gamma = head.fixed_scores(X, Y)
    W = W0.clone()

    def step():
        s = _softmax_rows(att.logits(X, Z, W))
        c = att.token_weights(X, Y, s, head, loss, gamma)[1]
        G = att.grad_from_weights(X, Z, c).add_(W, alpha=2.0 * wd)
        if normalized:
            W.addcdiv_(G, torch.linalg.matrix_norm(G, keepdim=True).clamp_min_(tiny), value=-lr)
        else:
            W.sub_(G, alpha=lr)

    rec = _record_points(steps, record_every)
    its, Ws, Ls = [], [], []
    bar = _progress(steps, progress)
    for k in range(steps + 1):
        if k in rec:
            its.append(k)
            Ws.append(W.clone())
            Ls.append(att.loss(X, Y, Z, W, head, loss))
        if k == steps:
            break
        step()
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return GDResult(
        W=_np(W),
        K=None,
        Q=None,
        norms=_np(torch.linalg.matrix_norm(W)),
        loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="W",
        normalized=normalized,
        lr=lr,
        steps=steps,
    )


def _kq_grads_linear(X, Z, gamma, K, Q, Gr, loss, direction_only, tiny):
    """Closure writing (grad_K, grad_Q) at W = K Q^T into Gr = [grad_K; grad_Q] (2R, d, m), linear head,
    on preallocated buffers; ``direction_only`` as in :func:`_kq_grads` (max |c| = 1).

    Per step, without forming W or G (fewer and smaller batched products): P = Z Q (R, n, m),
    u_i = K (Q^T z_i) = rows of P K^T, logits X_i u_i (per-example matrix-vector products), token
    weights c (as in :func:`_w_step_linear`), g_i = X_i^T c_i / n, and with G = sum_i g_i z_i^T:
    grad_K = G Q = g^T P, grad_Q = G^T K = Z^T (g K).
    """
    R, n, T, d = X.shape
    dt, dev = X.dtype, X.device
    X600 = X.reshape(R * n, T, d)  # one (T, d) block per example (a copy if X is not contiguous: b1_data)
    g_ = gamma.neg()  # (R, n, T): see _w_step_linear
    m = K.shape[-1]
    ZQ = torch.empty((R, n, m), dtype=dt, device=dev)  # rows Q^T z_i
    U = torch.empty((R, n, d), dtype=dt, device=dev)  # rows W z_i = K Q^T z_i
    lg = torch.empty((R, n, T), dtype=dt, device=dev)
    E = torch.empty((2, R, n, T), dtype=dt, device=dev)  # [e, e g]
    e, eg = E[0], E[1]
    SP = torch.empty((2, R, n, 1), dtype=dt, device=dev)
    S, mneg = SP[0], SP[1]
    c = torch.empty((R, n, T), dtype=dt, device=dev)
    c2 = c.view(R, n * T)
    absc = torch.empty_like(c2)
    gc = torch.empty((R, n, T), dtype=dt, device=dev)  # centred scores
    g_r0 = torch.empty((R, n, 1), dtype=dt, device=dev)
    g = torch.empty((R, n, d), dtype=dt, device=dev)  # rows X_i^T c_i
    gKm = torch.empty((R, n, m), dtype=dt, device=dev)  # rows K^T g_i
    gK, gQ = Gr[:R], Gr[R:]
    U_col, lg_col = U.view(R * n, d, 1), lg.view(R * n, T, 1)
    c_row, g_row = c.view(R * n, 1, T), g.view(R * n, 1, d)
    Xn600 = (X / n).reshape(R * n, T, d)  # 1/n of the loss folded into g_i = X_i^T c_i / n
    ZT = Z.mT  # (R, d, n)

    def grads():
        torch.bmm(Z, Q, out=ZQ)
        torch.bmm(ZQ, K.mT, out=U)
        torch.bmm(X600, U_col, out=lg_col)  # x_it^T W z_i
        lg.sub_(lg.amax(-1, keepdim=True))
        # scores centred on the most-attended token (see _w_step_linear): no cancellation at saturation
        torch.gather(g_, -1, lg.argmax(-1, keepdim=True), out=g_r0)
        torch.sub(g_, g_r0, out=gc)
        torch.exp(lg, out=e)
        torch.mul(e, gc, out=eg)
        torch.sum(E, -1, keepdim=True, out=SP)
        mneg.div_(S)  # -m - g_r0 (R, n, 1)
        if loss == "logistic":
            w = torch.sigmoid(mneg + g_r0).div_(S)
        else:
            w = att.loss_derivative((mneg + g_r0).neg_(), loss).div_(S).neg_()
        torch.addcmul(eg, e, mneg, value=-1.0, out=c).mul_(w)
        if direction_only:
            c2.div_(torch.abs(c2, out=absc).amax(-1, keepdim=True).clamp_min_(tiny))
        torch.bmm(c_row, Xn600, out=g_row)  # X_i^T c_i / n
        torch.bmm(g.mT, ZQ, out=gK)  # G Q
        torch.bmm(g, K, out=gKm)
        torch.bmm(ZT, gKm, out=gQ)  # G^T K

    return grads


# -- regularisation path --------------------------------------------------------------------------
