"""Shared GD helpers of the GD theorems (private: theorem modules import this, never each other).

``step_fidelity`` certifies that the optimiser a check ran is the gradient descent its theorem is about:
one step of ``numerics.gd.run_gd`` from a given W is compared with the step along an independently
computed gradient (plain numpy, its own softmax; none of numerics.attention / numerics.tokens). A
directional claim can hold for a wrong optimiser too — normalised steps along a gradient computed with
an unnormalised softmax still drift to the same max-margin direction in a cone — so without this
prediction such a bug passes; with it, any change of the step (no-op, ascent, random direction, a
broken softmax or gradient) is refuted. Checks evaluate it at their start W(0) and at W(0)/‖W(0)‖: deep
in a cone the softmax is saturated and a missing normaliser changes the step by e^-gap only, so the
unit-norm point (softmax far from one-hot) is where an implementation error shows.
"""

from __future__ import annotations

import numpy as np
import torch

from checks import decide
from numerics.attention import ReLUHead
from numerics.data import AttentionData
from numerics.gd import GDConfig, Mirror, run_gd
from numerics.svm.lp import lp_norm

#: corr(step taken, −∇L) must exceed 1 − FIDELITY_TOL. Both sides are float64 closed forms of the same
#: quantity with O(nTd) roundings each (~1e-15 relative); 1e-9 leaves six orders of margin for
#: reduction order on any CPU while a wrong softmax, gradient or step (measured: corr ≤ 0.999) fails.
FIDELITY_TOL = 1e-9
EPS = float(np.finfo(float).eps)


def independent_grad_W(data: AttentionData, W: np.ndarray, V: np.ndarray | None = None) -> np.ndarray:
    """∇L(W) = (1/n) Σ_i ℓ′(Y_i f_i) X_iᵀ (diag s_i − s_i s_iᵀ) Y_i X_i g_i z_iᵀ for the logistic loss, in
    plain numpy (docs/theory.md §2), independent of numerics.attention.

    Linear head (``V`` None): f_i = vᵀX_iᵀs_i, g_i = v, so Y_i X_i g_i = γ_i and Y_i f_i = γ_iᵀ s_i. ReLU head
    h(u) = 1ᵀReLU(Vᵀu) (``V`` (d, h)): u_i = X_iᵀ s_i, f_i = h(u_i), g_i = ∇h(u_i) = V 1[Vᵀu_i > 0].
    """
    X, Z, Y = data.X, data.Z, data.Y
    logits = np.einsum("itd,de,ie->it", X, W, Z)  # (n, T)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)  # (n, T)
    if V is None:
        gamma = Y[:, None] * (X @ data.require_head())  # (n, T)
        yf = (s * gamma).sum(axis=1)  # (n,)
    else:
        u = np.einsum("itd,it->id", X, s)  # (n, d)
        pre = u @ V  # (n, h)
        g = (pre > 0).astype(float) @ V.T  # (n, d): ∇h(u_i)
        gamma = Y[:, None] * np.einsum("itd,id->it", X, g)  # (n, T)
        yf = Y * np.maximum(pre, 0).sum(axis=1)  # (n,)
    lprime = -1.0 / (1.0 + np.exp(yf))  # logistic ℓ′(Y_i f_i)
    # (diag s − s sᵀ) γ with γ_t − Σ_τ s_τ γ_τ summed as Σ_τ s_τ (γ_t − γ_τ): deep in saturation the
    # subtraction γ_t − u would cancel to rounding noise (s_τ ~ e^-50), the pairwise form stays exact.
    c = s * np.einsum("iu,itu->it", s, gamma[:, :, None] - gamma[:, None, :])  # (n, T)
    return np.einsum("i,itd,it,ie->de", lprime, X, c, Z) / data.n


def judge_fidelity(f: float, step: str = "step", along: str = "−∇L"):
    """The ``is_gradient_descent`` prediction of a GD theorem: held when the optimiser's step agrees with the
    independently computed step to f > 1 − FIDELITY_TOL (``step_fidelity`` and kin: its direction and, where
    the caller gives the step size, its length)."""
    return decide(f > 1 - FIDELITY_TOL,
                  f"the optimiser's {step} is not along {along} (corr {f:.12f}): "
                  "not the GD the theorem is about",
                  step_fidelity=f)


def _corr(step: np.ndarray, grad: np.ndarray) -> float:
    """corr(step, grad); 1 when both are exactly 0 (a stationary point: GD rightly does not move, e.g. a ReLU
    head with no active unit), 0 when only one is."""
    ns, ng = np.linalg.norm(step), np.linalg.norm(grad)
    if ns == 0 or ng == 0:
        return 1.0 if ns == ng else 0.0
    return float(step @ grad / (ns * ng))


def _agreement(step: np.ndarray, want: np.ndarray, scale: float) -> float:
    """corr(step, want) · min(r, 1/r), r = ‖step‖/‖want‖ moved towards 1 by its rounding allowance: 1 for the
    step itself, direction AND length.

    A step-size bug (the power analysis's lr-half / lr-double: a step along −∇L of half or twice the length)
    has corr exactly 1 and was invisible to the direction alone; here it gives ~0.5. Rounding: the step is
    read as W − W⁺ from parameters of norm ``scale``, which carries an error ≤ ~EPS·scale (W⁺ = fl(W − s)), so
    r is known to δ = 4·EPS·scale/‖want‖ only (a step near saturation, where ‖∇L‖ ≪ ‖W‖, can make δ ~ 1e-8:
    smoothness-step's near-saturated starts); |r − 1| within δ counts as 1, beyond it only the excess
    counts, and likewise the direction: corr ≥ cos(asin δ) counts as 1.
    A wanted step below the rounding itself (‖want‖ ≤ 4·EPS·scale: plain GD with η ≤ 1/L_W deep in
    a cone, where η‖∇L‖ ∝ e^(−M), gd-local) cannot be read from W − W⁺ at all: it agrees when W − W⁺ is
    within rounding too (so :func:`init_fidelity`'s unit-norm point, where the step is resolved, decides)."""
    ns, nw = np.linalg.norm(step), np.linalg.norm(want)
    res = 4.0 * EPS * float(scale)
    if 0 < nw <= res:  # the step is below the rounding of W: W − W⁺ cannot show it (plain GD deep in a
        return 1.0 if ns <= 2.0 * res else 0.0  # cone, gd-local); only a step of a different size shows
    if ns == 0 or nw == 0:
        return 1.0 if ns == nw else 0.0
    r = float(ns / nw)
    allow = res / float(nw)
    r = 1.0 if abs(r - 1.0) <= allow else (r - allow if r > 1.0 else r + allow)
    # the same rounding error vector (norm ≤ res) turns the read step by up to asin(res/‖want‖): a corr within
    # that counts as 1, beyond it only the excess counts (gd-local on the digits: steps of 5e-15·‖W‖, 5.5× the
    # allowance, read at corr 0.99996 — a false alarm before; the unit-norm start of init_fidelity, where the
    # step is resolved to ~1e-16, still catches every direction or length bug)
    c, c_allow = _corr(step, want), float(np.sqrt(max(0.0, 1.0 - min(allow, 1.0) ** 2)))
    c = 1.0 if c >= c_allow else c / c_allow
    return c * min(r, 1.0 / r)


def step_fidelity(data: AttentionData, W: np.ndarray, lr: float, *, normalized: bool = True,
                  device: str = "cpu", V: np.ndarray | None = None) -> float:
    """Agreement (:func:`_agreement`: direction and length) of W − W⁺, for one step W⁺ of run_gd from W, with
    the step of the theorem's GD from an independent gradient: lr ∇L(W) (plain) or lr ∇L(W)/‖∇L(W)‖_F
    (normalised); 1 for a correct step.

    ``V`` (d, h): the step of GD with the ReLU head h(u) = 1ᵀReLU(Vᵀu) instead of the linear head."""
    head = None if V is None else ReLUHead(torch.as_tensor(np.asarray(V)[None]))
    nxt = run_gd([data], GDConfig(steps=1, lr=lr, geometry="normalized" if normalized else "plain"),
                 init=np.asarray(W)[None], device=device, head=head).W[0]
    g = independent_grad_W(data, np.asarray(W), V).ravel()
    ng = float(np.linalg.norm(g))
    want = lr * (g / ng if normalized and ng > 0 else g)
    return _agreement((np.asarray(W) - nxt).ravel(), want, float(np.linalg.norm(W)))


def mirror_step_fidelity(data: AttentionData, W: np.ndarray, lr: float, p: float, *, normalized: bool = False,
                         device: str = "cpu") -> float:
    """Agreement (:func:`_agreement`: direction and length) of the mirror step the engine took from W with the
    ℓp mirror step of the theorem, judged where the update is linear: in the dual variable u = ∇ψ(W) =
    sign(W)|W|^{p−1} (entrywise, ψ(W) = (1/p) Σ |W_ab|^p). One step W⁺ of run_gd with geometry
    numerics.gd.Mirror(p) must satisfy ∇ψ(W) − ∇ψ(W⁺) = lr g with g = ∇L(W) (plain) or ∇L(W)/‖∇L(W)‖_q
    (normalised, q = p/(p − 1) the dual exponent); 1 for a correct step.

    Independent of the engine: ∇L(W) is :func:`independent_grad_W` (plain numpy, its own softmax: a broken
    softmax, gradient or step size inside the engine changes one side only; numerics.objective.grad_W would go
    through the same softmax seam as the engine), ∇ψ is computed here in numpy. Rounding: each side of the
    dual step is read through powers |·|^{p−1} and |·|^{1/(p−1)} (a few ulps each; the engine's W⁺ =
    |u⁺|^{1/(p−1)} rounded to EPS relative becomes (p − 1)·EPS relative in ∇ψ(W⁺)), so the length allowance of
    _agreement is taken on the scale (p + 1)(‖u‖ + ‖u⁺‖): 4(p + 1)·EPS relative to the dual variables, ≥ the
    ~(2p + 4)·EPS the chain of pow / subtract roundings can reach. p = 2 is step_fidelity's plain / normalised
    step."""
    W = np.asarray(W, dtype=float)
    nxt = run_gd([data], GDConfig(steps=1, lr=lr, geometry=Mirror(p, normalized=normalized)),
                 init=W[None], device=device).W[0]
    u, u_next = (np.sign(M) * np.abs(M) ** (p - 1.0) for M in (W, np.asarray(nxt, dtype=float)))
    g = independent_grad_W(data, W).ravel()
    # the dual norm scaled by max |g| (lp_norm): near saturation |g|^q underflows for q = p/(p − 1) large
    ng = lp_norm(g, p / (p - 1.0)) if normalized else 1.0
    want = lr * (g / ng if ng > 0 else g)
    scale = (p + 1.0) * float(np.linalg.norm(u) + np.linalg.norm(u_next))
    return _agreement((u - u_next).ravel(), want, scale)


def resolvable_step(step_norm: float, scale: float) -> bool:
    """Whether a step of norm ``step_norm`` from parameters of norm ``scale`` changes them in float64 beyond
    rounding (> 4·EPS·scale, the allowance of :func:`_agreement`). Plain GD deep in a cone (η‖∇L‖ ∝ e^(−M))
    takes steps below it: its iterate cannot move, and a run that does not move is then no evidence against
    the optimiser; where the first step is resolvable, a run whose iterate never moves is a no-op."""
    return bool(step_norm > 4.0 * EPS * scale)


def unmoved(traj: np.ndarray) -> bool:
    """The last recorded iterate equals the first to rounding (‖θ(S) − θ(0)‖ ≤ 4·EPS·‖θ(0)‖)."""
    return not resolvable_step(float(np.linalg.norm(traj[-1] - traj[0])), float(np.linalg.norm(traj[0])))


def init_fidelity(data: AttentionData, W0: np.ndarray, lr: float, **kw) -> float:
    """The worse :func:`step_fidelity` of the step from W(0) and from W(0)/‖W(0)‖_F (a small start and a
    unit-norm one, where saturation and scale bugs differ); ``kw`` as for step_fidelity, or with ``p`` (the
    ℓp exponent) as for :func:`mirror_step_fidelity`."""
    if kw.get("p") is not None:
        p = kw.pop("p")
        return min(mirror_step_fidelity(data, W, lr, p, **kw) for W in (W0, W0 / np.linalg.norm(W0)))
    kw.pop("p", None)
    return min(step_fidelity(data, W, lr, **kw) for W in (W0, W0 / np.linalg.norm(W0)))


def independent_grad_p(keys: np.ndarray, gamma: np.ndarray, p: np.ndarray) -> np.ndarray:
    """∇L(p) = (1/n) Σ_i ℓ′(γ_iᵀ s_i) K_iᵀ (diag s_i − s_i s_iᵀ) γ_i, s_i = softmax(K_i p), logistic loss, in
    plain numpy (prompt attention, TLZO), independent of numerics.prompt."""
    K, g = np.asarray(keys, dtype=float), np.asarray(gamma, dtype=float)
    a = np.einsum("itk,k->it", K, p)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    s = e / e.sum(axis=1, keepdims=True)
    lprime = -1.0 / (1.0 + np.exp((s * g).sum(axis=1)))
    c = s * np.einsum("iu,itu->it", s, g[:, :, None] - g[:, None, :])  # pairwise form, as independent_grad_W
    return np.einsum("i,it,itk->k", lprime, c, K) / K.shape[0]


def prompt_init_fidelity(keys: np.ndarray, gamma: np.ndarray, p0: np.ndarray, lr: float, *,
                         normalized: bool, device: str = "cpu") -> float:
    """:func:`init_fidelity` for GD on the prompt p (numerics.prompt.run_prompt_gd): the worse agreement
    (direction and length) of one step from p(0) and from p(0)/‖p(0)‖ with the independent step."""
    from numerics.prompt import run_prompt_gd

    out = []
    for p in (np.asarray(p0, dtype=float), np.asarray(p0, dtype=float) / np.linalg.norm(p0)):
        nxt = run_prompt_gd(keys, gamma, steps=1, lr=lr, normalized=normalized, init=p[None],
                            device=device).p[0]
        g = independent_grad_p(keys, gamma, p)
        ng = float(np.linalg.norm(g))
        want = lr * (g / ng if normalized and ng > 0 else g)
        out.append(_agreement(p - nxt, want, float(np.linalg.norm(p))))
    return min(out)


def step_fidelity_kq(
    data: AttentionData,
    K: np.ndarray,
    Q: np.ndarray,
    lr: float,
    *,
    weight_decay: float = 0.0,
    device: str = "cpu",
    normalized: bool = True,
) -> float:
    """Agreement of one (K, Q) step of run_gd from (K, Q) with the independent one:
    ∇_K = ∇L(KQᵀ) Q + 2 wd K and ∇_Q = ∇L(KQᵀ)ᵀ K + 2 wd Q, each factor normalised by its own norm
    (``normalized``, the default) or not (plain GD on (K, Q): kq-divergence).

    The two steps are compared as one vector (ΔK, ΔQ), direction and length (:func:`_agreement`): a correct
    step is exactly lr·(∇_K/‖∇_K‖, ∇_Q/‖∇_Q‖) (normalised) or lr·(∇_K, ∇_Q) (plain)."""
    K, Q = np.asarray(K), np.asarray(Q)
    res = run_gd([data], GDConfig(steps=1, lr=lr, param="KQ", wd=weight_decay,
                                  geometry="normalized" if normalized else "plain"),
                 init=(K[None], Q[None]), device=device)
    assert res.K is not None and res.Q is not None  # a param="KQ" run returns its factors (GDResult)
    G = independent_grad_W(data, K @ Q.T)
    gK, gQ = G @ Q + 2 * weight_decay * K, G.T @ K + 2 * weight_decay * Q
    if normalized:
        gK, gQ = gK / np.linalg.norm(gK), gQ / np.linalg.norm(gQ)
    want = np.concatenate([gK.ravel(), gQ.ravel()])
    got = np.concatenate([(K - res.K[0]).ravel(), (Q - res.Q[0]).ravel()])
    return _agreement(got, lr * want, float(np.hypot(np.linalg.norm(K), np.linalg.norm(Q))))


def run_relu_gd_padded(datas, Vs, W0s, *, steps: int, lr: float, normalized: bool, record_every: int,
                       device="cpu") -> list[np.ndarray]:
    """GD with a ReLU head for instances of different d in as few batched runs as possible: instances of equal
    (n, T) run together, zero-padded to the group's largest d; returns each instance's trajectory (K, d, d).

    The padding is exact: padded token, query and W(0) coordinates are 0 and the padded ReLU units have zero
    weights, so the padded logits, h, ∇h and gradient entries are exactly 0 (W stays 0 there and the gradient
    norm of normalised GD is unchanged); the instance's own block evolves as in an unpadded run up to the
    order of float64 summation (tested against the per-d runs). At the catalogue's sizes a GD step costs
    about the same for 4 or 16 instances (op dispatch bound), so fewer batches is fewer seconds."""
    groups: dict[tuple[int, int], list[int]] = {}
    for j, dt in enumerate(datas):
        groups.setdefault((dt.n, dt.T), []).append(j)
    out: list[np.ndarray] = [np.empty(0)] * len(datas)
    for (n, T), idx in groups.items():
        D = max(datas[j].d for j in idx)
        pad = []
        Vp = np.zeros((len(idx), D, D))
        Wp = np.zeros((len(idx), D, D))
        for c, j in enumerate(idx):
            dt, d = datas[j], datas[j].d
            X = np.zeros((n, T, D))
            X[:, :, :d] = dt.X
            Z = np.zeros((n, D))
            Z[:, :d] = dt.Z
            pad.append(AttentionData(X, dt.Y, Z))
            Vp[c, :d, : Vs[j].shape[1]] = Vs[j]
            Wp[c, :d, :d] = W0s[j]
        traj = run_gd(pad, GDConfig(steps=steps, lr=lr, geometry="normalized" if normalized else "plain"),
                      head=ReLUHead(torch.as_tensor(Vp)),
                      init=Wp, record_every=record_every, device=device).W_traj
        assert traj is not None  # recorded: record_every is given (GDResult.W_traj)
        for c, j in enumerate(idx):
            d = datas[j].d
            out[j] = np.ascontiguousarray(traj[:, c, :d, :d])
    return out
