"""The tensor code paths of :func:`numerics.gd.run_gd` (CPU or CUDA, any head; module doc of
:mod:`numerics.gd`): the fused programs -- W-GD in logit space (:func:`run_w`), (K, Q)-GD through the
closed-form gradient (:func:`run_kq`), plain GD in logit space for the NTP models' cross-entropies
(:func:`run_ce_logits`, their Model.run_fused), ℓp mirror descent on W (:func:`run_mirror`) -- and the
explicit loop every model and geometry runs on (:func:`run_explicit`).

W-parametrised GD runs in *logit space*: with token weights c_i (numerics.attention.token_weights)
the step G = sum_j X_j^T c_j z_j^T changes the logits by (M c)_i (TokenGram) and has
||G||_F^2 = c^T M c, so each step is one softmax, a few elementwise ops and one batched product;
W = W(0) - sum_j X_j^T A_j z_j^T is rebuilt from the accumulated weights A only when recorded.
(K, Q)-GD uses the closed-form gradient through P = Z Q without forming W or G (five small batched
products and two per-example ones per step). With a linear head every step runs on preallocated
buffers with in-place / ``out=`` kernels and no host synchronisation (per-op overhead, not arithmetic,
dominates at the paper's sizes). A step size per instance is an (R, 1, 1) tensor ``lr``; one step size
a float (the scalar kernels, bit for bit as before)."""

from __future__ import annotations

import numpy as np
import torch

from . import attention as att
from .gd_common import (
    GDResult,
    _drive,
    _norm_floor,
    _np,
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
def run_w(batch, head, W0, cfg, lr, record_every) -> GDResult:
    """The fused W-GD program (plain or normalised, no weight decay)."""
    steps, normalized, loss = cfg.steps, cfg.geometry.scale_free, cfg.loss
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
        drift = _lr_max(lr) * float(gram.entry_bound.max().sqrt())  # max per-step change of any logit
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
        steps_from, steps, rec, cfg.progress, current_W, lambda Wk: att.loss(X, Y, Z, Wk, head, loss)
    )
    W = current_W()
    final_loss = att.loss(X, Y, Z, W, head, loss)
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.matrix_norm(W)), loss=_np(final_loss),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="W", normalized=normalized, lr=_lr_out(lr), steps=steps,
    )


def _lr_max(lr) -> float:
    return lr if isinstance(lr, float) else float(lr.max())


def _lr_out(lr):
    """GDResult.lr: the float, or the per-instance step sizes (R,)."""
    return lr if isinstance(lr, float) else _np(lr).reshape(-1)


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
    per_instance = not isinstance(lr, float)

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
        if per_instance:
            LA.addcmul_(CM, scale.mul_(lr), value=-1.0)
        else:
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
            if isinstance(lr, float):
                LA.addcmul_(CM, torch.maximum(nrm2, floor).rsqrt_(), value=-lr)
            else:
                LA.addcmul_(CM, torch.maximum(nrm2, floor).rsqrt_().mul_(lr), value=-1.0)
        elif isinstance(lr, float):
            LA.sub_(CM, alpha=lr / n)  # grad L = G / n
        else:
            LA.sub_(CM * (lr / n))

    return step


def _maxabs(c: torch.Tensor, tiny: float) -> torch.Tensor:
    """max_{i,t} |c_it| per instance (R, 1, 1), at least ``tiny``."""
    return c.abs().amax((1, 2), keepdim=True).clamp_min_(tiny)  # the inf-norm exactly, ~4x faster here


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
def run_kq(batch, head, K, Q, cfg, lr, record_every) -> GDResult:
    """The fused (K, Q)-GD program (plain or normalised, weight decay allowed)."""
    steps, normalized, loss, wd = cfg.steps, cfg.geometry.scale_free, cfg.loss, cfg.wd
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
    lr2 = lr if isinstance(lr, float) else torch.cat([lr, lr])  # (2R, 1, 1): K's and Q's
    if normalized and isinstance(lr2, float):
        def step():
            grads()
            nrm = torch.linalg.vector_norm(Gr, dim=(1, 2), keepdim=True).clamp_min_(tiny)
            P.addcdiv_(Gr, nrm, value=-lr2)
    elif normalized:
        def step():
            grads()
            P.sub_(Gr.div_(torch.linalg.vector_norm(Gr, dim=(1, 2), keepdim=True).clamp_min_(tiny)).mul_(lr2))
    elif isinstance(lr2, float):
        def step():
            grads()
            P.sub_(Gr, alpha=lr2)
    else:
        def step():
            grads()
            P.sub_(Gr.mul_(lr2))

    def steps_from(k: int, stop: int) -> None:
        for _ in range(k, stop):
            step()

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, cfg.progress, lambda: torch.bmm(K, Q.mT),
                         lambda Wk: att.loss(X, Y, Z, Wk, head, loss))
    W = torch.bmm(K, Q.mT)
    return GDResult(
        W=_np(W), K=_np(K), Q=_np(Q), norms=_np(torch.linalg.matrix_norm(W)),
        loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="KQ", normalized=normalized, lr=_lr_out(lr), steps=steps,
    )


@torch.inference_mode()
def run_explicit(batch, head, model, params, cfg, lr, record_every, transform) -> GDResult:
    """The explicit loop (numerics.gd module doc): any model, any geometry, weight decay, the step hook.

    Each step k: g = model.grads (token weights rescaled to max |c| = 1 when the geometry is scale free and
    wd = 0), plus 2 wd param with weight decay; the step size ``geometry.step_size(lr, k, steps)``; then
    ``transform`` (the registered step hooks, or None)
    may change (g, lr) or skip the step; then ``cfg.geometry.update``. The parameters ``params`` (a list
    of (R, ...) tensors) are moved in place."""
    steps, loss, wd, geometry = cfg.steps, cfg.loss, cfg.wd, cfg.geometry
    tiny = torch.finfo(batch.X.dtype).tiny
    gamma = model.context(batch, head)
    direction_only = geometry.scale_free and wd == 0
    P = list(params)

    def step(k: int):
        gs = model.grads(batch, head, P, loss, gamma, direction_only)
        if wd > 0:
            gs = [g + 2.0 * wd * p for g, p in zip(gs, P, strict=True)]
        step_lr = geometry.step_size(lr, k, steps)
        if transform is not None:
            gs, step_lr = transform(gs, step_lr)
            if gs is None:
                return
        geometry.update(P, gs, step_lr, tiny)

    def steps_from(k: int, stop: int) -> None:
        for j in range(k, stop):
            step(j)

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, cfg.progress, lambda: model.W(P),
                         lambda Wk: model.loss(batch, head, Wk, loss))
    W = model.W(P)
    kq = model.name == "KQ"
    return GDResult(
        W=_np(W), K=_np(P[0]) if kq else None, Q=_np(P[1]) if kq else None,
        norms=_np(torch.linalg.vector_norm(W, dim=tuple(range(1, W.ndim)))),
        loss=_np(model.loss(batch, head, W, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param=model.name, normalized=geometry.scale_free, lr=_lr_out(lr), steps=steps,
    )


#: The mirror program's per-instance feature map Φ (logits = Φ vec W, ∇L = Φᵀc / n) is built on CPU float64
#: up to this many bytes (R n T d² floats); larger batches take the attention functions' products.
FEATURE_MAP_MAX_BYTES = 64 * 2 ** 20


@torch.inference_mode()
def run_mirror(batch, head, model, params, cfg, lr, record_every, token_weights) -> GDResult:
    """The fused ℓp mirror-descent program (numerics.gd.Mirror, plain or normalised) on W, no weight decay,
    no step hook: the explicit loop's steps up to rounding (tested), with two changes.

    * The dual variable u = ∇ψ(W) is held between steps, so a step maps u to W once (Mirror.primal) instead
      of also W back to u (the explicit loop recomputes u = ∇ψ(W) from the W it made: equal up to rounding);
      the step on u is Mirror.dual_step, the explicit loop's.
    * On CPU float64 (up to FEATURE_MAP_MAX_BYTES) the two products of a step are one stacked matrix-vector
      product each through the per-instance feature map Φ_i = [x_it ⊗ z_i]_(i,t) (nT, d²): logits = Φ vec W
      and ∇L = Φᵀ c / n (numpy's stacked matmul: torch's bmm pays a per-matrix overhead that dominates at
      these sizes, four products a step through attention.logits and attention.grad_from_weights); the token
      weights c are ``token_weights``' (numerics.gd._token_weights, the explicit loop's, passed in: this
      module does not import numerics.gd). Elsewhere the step is ``model.grads``.

    ``params``: [W(0)] (moved in place); ``lr`` a float or an (R, 1, 1) tensor."""
    steps, loss, geometry = cfg.steps, cfg.loss, cfg.geometry
    X, Z = batch.X, batch.Z
    R, n, T, d = X.shape
    tiny = torch.finfo(X.dtype).tiny
    gamma = model.context(batch, head)
    direction_only = geometry.scale_free
    P = [params[0].contiguous()]
    W = P[0]
    u = geometry.dual(W)
    if (X.device.type == "cpu" and X.dtype == torch.float64 and R * n * T * d * d * 8 <= FEATURE_MAP_MAX_BYTES
            and R > 0):
        phi = np.einsum("rnta,rnb->rntab", _np(X), _np(Z)).reshape(R, n * T, d * d)  # (R, nT, d²)
        phiT = np.ascontiguousarray(phi.transpose(0, 2, 1))  # (R, d², nT)
        lg_np, G_np = np.empty((R, n * T, 1)), np.empty((R, d * d, 1))
        lg, G = torch.from_numpy(lg_np).view(R, n, T), torch.from_numpy(G_np).view(R, d, d)
        w_np = W.numpy().reshape(R, d * d, 1)  # a view: W moves in place

        def grad():
            np.matmul(phi, w_np, out=lg_np)
            c = token_weights(batch, head, W, loss, gamma, direction_only, logits=lg)
            np.matmul(phiT, c.numpy().reshape(R, n * T, 1), out=G_np)
            return G.div_(n)
    else:
        def grad():
            return model.grads(batch, head, P, loss, gamma, direction_only)[0]

    def steps_from(k: int, stop: int) -> None:
        for _ in range(k, stop):
            geometry.dual_step(u, grad(), lr, tiny)
            geometry.primal(u, W)

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, cfg.progress, lambda: model.W(P),
                         lambda Wk: model.loss(batch, head, Wk, loss))
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.vector_norm(W, dim=(1, 2))),
        loss=_np(model.loss(batch, head, W, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param=model.name, normalized=geometry.scale_free, lr=_lr_out(lr), steps=steps,
    )


@torch.inference_mode()
def run_ce_logits(model, W0, cfg, lr, record_every, *, A0, target, weight, apply, to_W, loss_of,
                  drift) -> GDResult:
    """Plain GD in logit space for a model whose loss is a weighted softmax cross-entropy of logits linear in
    W, and whose gradient moves the logits linearly (the fused program of numerics.ntp_linear.LinearNTPModel
    and numerics.ntp_gd.NTPModel, :meth:`numerics.gd.Model.run_fused`; the explicit loop's iterates up to
    rounding, tested).

    Logits A (R, r, k) (r rows of k classes each; A0 at W(0) = ``W0``), targets ``target`` (R, r, k) (rows
    summing to 1), row weights ``weight`` (R, r, 1) (or broadcastable): ∇L(W) is the linear image of D =
    weight ⊙ (softmax(A) − target) under a map whose effect on the logits is ``apply(D, out)`` (writes into
    ``out``), so a step W ← W − lr ∇L is A ← A − apply(lr D) and W = W0 + ``to_W(C)`` with C = −Σ_k lr D_k,
    the accumulated coefficients (W rebuilt only where recorded; ``loss_of(W)`` the loss there). A step is six
    kernels on preallocated buffers (exp, row sum, divide, one fused multiply-add, ``apply``, one update of
    the stacked state [A, C]; per-op overhead, not arithmetic, dominates at small shapes), no autograd. Every
    ``every`` steps A is recomputed from C, A = A0 + apply(C) (the logits of the W that C makes, so rounding
    in A cannot accumulate over the run: a fixed point of the iteration is one of W's, as on the explicit
    path; without it the drift between A and C, amplified by the map's conditioning, moved a converged
    linear-NTP ‖W_k − W⋆‖ from 2e-13 to 8e-12, quick seed 1 ntp-linear-gd-control #6), and its rows re-centred
    on their maxima (the softmax is shift invariant; W is rebuilt from C). ``drift`` (a float): a bound on how
    far one step moves any logit (apply(D) with |D| ≤ lr weight entrywise), so between re-centrings no logit
    exceeds SHIFT_DRIFT_MAX (exp cannot overflow; a row's largest weight cannot underflow). ``lr``: a float or
    an (R, 1, 1) tensor (folded into the weights)."""
    steps = cfg.steps
    R, r, k = A0.shape
    w = (weight * lr).expand(R, r, 1).contiguous()  # (R, r, 1): lr weight_j
    neg_tw = (target * w).neg_()  # (R, r, k): −lr weight_j target_j
    # state LA = [A, C] and its step CM = [apply(D'), D'] with D' = lr weight ⊙ (softmax(A) − target)
    LA = torch.empty((2, R, r, k), dtype=A0.dtype, device=A0.device)
    A, C = LA[0], LA[1]
    C.zero_()
    CM = torch.empty_like(LA)
    KD, D = CM[0], CM[1]
    E = torch.empty_like(A)  # exp(A)
    S = torch.empty((R, r, 1), dtype=A0.dtype, device=A0.device)  # Σ exp(A_j·), then lr weight_j / that
    every = int(min(SHIFT_EVERY_MAX, max(1.0, SHIFT_DRIFT_MAX / drift))) if drift > 0 else SHIFT_EVERY_MAX

    def steps_from(k0: int, stop: int) -> None:
        for j in range(k0, stop):
            if j % every == 0:
                apply(C, A)
                A.add_(A0)
                A.sub_(A.amax(-1, keepdim=True))
            torch.exp(A, out=E)
            torch.sum(E, -1, keepdim=True, out=S)
            torch.div(w, S, out=S)
            torch.addcmul(neg_tw, E, S, out=D)  # lr weight_j (softmax(A_j) − target_j)
            apply(D, KD)
            LA.sub_(CM)

    def current_W():
        return W0 + to_W(C)

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, cfg.progress, current_W, loss_of)
    W = current_W()
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.vector_norm(W, dim=tuple(range(1, W.ndim)))),
        loss=_np(loss_of(W)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(x) for x in Ws]) if rec else None,
        loss_traj=np.stack([_np(x) for x in Ls]) if rec else None,
        param=model.name, normalized=False, lr=_lr_out(lr), steps=steps,
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
