r"""TLZO's prompt-attention model: batched GD on the prompt p and the joint (v, p) regularisation path.

Model (TLZO, arXiv 2306.13596, §2)::

    f(X) = v^T X^T S(X W^T p),   keys k_t = W x_t,   Y f = γ^T s,   γ_t = Y v^T x_t,   s = S(K p)

with W fixed and p ∈ R^{dk} trainable. Everything here works with keys K (n, T, dk) and token scores
γ (n, T) directly (``prompt_keys`` / ``prompt_scores`` build them from X, W, Y, v), so the GD on p is
the whole model.

Gradient (the covariance form of THEORY.md §2, with p in place of W and keys in place of X W z)::

    ∇_p L = (1/n) Σ_i ℓ'(γ_i^T s_i) Σ_t s_it c_it k_it,   c_it = γ_it − γ̄_i = Σ_u s_iu (γ_it − γ_iu).

c is computed in the pairwise form Σ_u s_u (γ_t − γ_u): when one token holds almost all the mass,
γ_t − γ̄ is a product of tiny probabilities and the naive difference would cancel to zero long
before the probabilities underflow (this is what makes directional convergence measurable at
‖p‖ in the hundreds).

Joint (v, p) path (TLZO's joint regularisation path)::

    (v_r, p_R) = argmin_{‖v‖ ≤ r, ‖p‖ ≤ R} L(v, p),  L = (1/n) Σ ℓ(Y_i v^T X_i^T S(K_i p)).

Examples
--------
>>> import numpy as np
>>> K = np.array([[[-0.1, 1.0], [1.0, 0.0], [0.0, 0.0]]])
>>> g = np.array([[1.0, 0.9, 0.5]])
>>> res = run_prompt_gd(K, g, steps=2000, lr=0.5, init=np.array([[5.0, 0.2]]))
>>> p_mm = np.array([-0.1, 1.0]) / 1.01  # the global p-SVM direction (TLZO's fixture)
>>> bool(res.p[0] @ p_mm / (np.linalg.norm(res.p[0]) * np.linalg.norm(p_mm)) > 0.999)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .attention import LOSS_FNS, softmax_logits
from .errors import InvalidInputError, SolverError
from .gd import GDConfig, Model, run_gd

__all__ = [
    "LOSSES",
    "PromptBatch",
    "PromptGDResult",
    "PromptModel",
    "VPPath",
    "prompt_keys",
    "prompt_scores",
    "prompt_loss",
    "prompt_grad",
    "run_prompt_gd",
    "joint_vp_loss",
    "joint_vp_path",
]

#: Catalogue losses ℓ(u) and ℓ'(u) (THEORY.md §1), torch, elementwise.
LOSSES = LOSS_FNS  # the one loss table of the numerics, numerics.attention.LOSS_FNS


def _loss_fns(loss: str):
    if loss not in LOSSES:
        raise InvalidInputError(f"unknown loss {loss!r}; known losses are {sorted(LOSSES)}")
    return LOSSES[loss]


def prompt_keys(X: Any, W: Any) -> np.ndarray:
    """Keys k_it = W x_it, i.e. K = X W^T, shape (..., n, T, dk) for X (..., n, T, d), W (dk, d)."""
    return np.asarray(X, dtype=float) @ np.asarray(W, dtype=float).T


def prompt_scores(X: Any, Y: Any, v: Any) -> np.ndarray:
    """Token scores γ_it = Y_i v^T x_it, shape (..., n, T)."""
    X = np.asarray(X, dtype=float)
    return np.asarray(Y, dtype=float)[..., None] * (X @ np.asarray(v, dtype=float))


def _centred(s: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """c_t = Σ_u s_u (γ_t − γ_u) (= γ_t − γ̄ without cancellation), shape (..., T)."""
    return torch.einsum("...u,...tu->...t", s, g[..., :, None] - g[..., None, :])


def prompt_loss(K: torch.Tensor, g: torch.Tensor, p: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """L(p) = (1/n) Σ_i ℓ(γ_i^T S(K_i p)); K (R, n, T, dk), g (R, n, T), p (R, dk) -> (R,)."""
    ell, _ = _loss_fns(loss)
    s = softmax_logits(torch.einsum("rntk,rk->rnt", K, p))
    return ell((s * g).sum(-1)).mean(-1)


def prompt_grad(K: torch.Tensor, g: torch.Tensor, p: torch.Tensor, loss: str = "logistic") -> torch.Tensor:
    """Closed-form ∇_p L (module docstring), batched: K (R, n, T, dk), g (R, n, T), p (R, dk) -> (R, dk)."""
    _, dell = _loss_fns(loss)
    s = softmax_logits(torch.einsum("rntk,rk->rnt", K, p))  # (R, n, T)
    u = (s * g).sum(-1)  # (R, n)
    c = _centred(s, g)  # (R, n, T)
    w = dell(u)[..., None] * s * c  # (R, n, T)
    return torch.einsum("rnt,rntk->rk", w, K) / K.shape[1]


@dataclass(frozen=True)
class PromptGDResult:
    """GD on p for R instances: final p (R, dk), recorded p_traj (S, R, dk) at ``iterations`` (S,),
    loss (S, R), norms (S, R); ``stalled`` (R,) marks runs whose gradient underflowed to exactly 0."""

    p: np.ndarray
    p_traj: np.ndarray
    iterations: np.ndarray
    loss: np.ndarray
    norms: np.ndarray
    stalled: np.ndarray


def _batched(K: Any, g: Any) -> tuple[np.ndarray, np.ndarray, bool]:
    K = np.asarray(K, dtype=float)
    g = np.asarray(g, dtype=float)
    single = K.ndim == 3
    if single:
        K, g = K[None], g[None]
    if K.ndim != 4 or g.shape != K.shape[:3]:
        raise InvalidInputError(
            f"keys must be (R, n, T, dk) and scores (R, n, T); got {K.shape} and {g.shape}"
        )
    return K, g, single


@dataclass(frozen=True)
class PromptBatch:
    """The data of a prompt GD run: keys K (R, n, T, dk) and scores g (R, n, T), float64 tensors (``X`` is
    K: the engine reads the batch shape from it)."""

    X: torch.Tensor
    g: torch.Tensor


@dataclass(frozen=True, eq=False)
class PromptModel(Model):
    """GD on the prompt p (R, dk) (module docstring) as a model of the one GD engine (numerics.gd.run_gd;
    data: a :class:`PromptBatch`); its "W" is p itself. ``stalled`` (R,) is set in :meth:`start` and marks
    the runs whose gradient was exactly 0 at some step (normalised GD then does not move them)."""

    stalled: list = field(default_factory=list)

    name = "prompt"

    def prepare(self, data, head, device, dtype):
        return data, None

    def context(self, batch, head):
        return None

    def loss(self, batch, head, W, loss):
        return prompt_loss(batch.X, batch.g, W, loss)

    def start(self, init, R, d, m, device, dtype):
        self.stalled[:] = [torch.zeros(R, dtype=torch.bool, device=device)]
        return [torch.as_tensor(np.asarray(init, dtype=float), dtype=dtype, device=device).clone()]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        G = prompt_grad(batch.X, batch.g, params[0], loss)
        self.stalled[0] |= torch.linalg.vector_norm(G, dim=-1) == 0
        return [G]

    def W(self, params):
        return params[0].clone()


def run_prompt_gd(keys: Any, gamma: Any, *, steps: int, lr: Any, normalized: bool = True,
                  loss: str = "logistic", init: Any = None, record_every: int | None = None,
                  device: str = "cpu") -> PromptGDResult:
    """Batched (normalised) GD on the prompt: p ← p − η ∇L/‖∇L‖ (or p − η ∇L), R runs at once, on the GD
    engine (numerics.gd.run_gd with a :class:`PromptModel`: its explicit loop and step hook).

    keys (R, n, T, dk) or (n, T, dk); gamma (R, n, T) or (n, T); init (R, dk) (default zeros); lr one step
    size or one per instance (as numerics.gd.GDConfig.lr).
    Records every ``record_every`` steps (default steps // 20) plus the last iterate.
    """
    K, g, _ = _batched(keys, gamma)
    R, n, T, dk = K.shape
    if steps < 1 or np.any(np.asarray(lr, dtype=float) <= 0):
        raise InvalidInputError(f"steps must be >= 1 and lr > 0, got steps={steps}, lr={lr}")
    p0 = np.zeros((R, dk)) if init is None else np.asarray(init, dtype=float).reshape(R, dk)
    every = max(1, steps // 20) if record_every is None else int(record_every)
    batch = PromptBatch(torch.as_tensor(K, dtype=torch.float64, device=device),
                        torch.as_tensor(g, dtype=torch.float64, device=device))
    model = PromptModel()
    lr = float(lr) if np.ndim(lr) == 0 else [float(x) for x in np.ravel(lr)]
    cfg = GDConfig(steps=steps, lr=lr, geometry="normalized" if normalized else "plain", loss=loss,
                   param=model)
    res = run_gd(batch, cfg, init=p0, device=device, record_every=every)
    assert res.W_traj is not None and res.iterations is not None and res.loss_traj is not None  # recorded
    P = res.W_traj
    stalled = model.stalled[0].cpu().numpy() if normalized else np.zeros(R, dtype=bool)
    return PromptGDResult(p=P[-1], p_traj=P, iterations=res.iterations, loss=res.loss_traj,
                          norms=np.linalg.norm(P, axis=-1), stalled=stalled)


# ------------------------------------------------------------------------------------------------
# joint (v, p) regularisation path
# ------------------------------------------------------------------------------------------------


def _log_ell(u: torch.Tensor, loss: str) -> torch.Tensor:
    """log ℓ(u), stable for large |u| (the path's losses are exponentially small; at r = R² the margins reach
    ±10³). Both branches of the ``where`` are evaluated and differentiated, so each is clamped to the range
    where it is selected: an unclamped e^{−u} overflows to inf at u < −709 and its zero-weighted gradient
    0·inf = NaN would poison the whole descent."""
    if loss == "logistic":
        big = u > 30.0  # log softplus(−u) = −u + log1p(−e^{−u}/2 + …): within 1e-26 of −u − e^{−u}/2 here
        small_u = torch.clamp(u, max=30.0)
        big_u = torch.clamp(u, min=30.0)
        tail = -u - 0.5 * torch.exp(-big_u)
        return torch.where(big, tail, torch.log(torch.nn.functional.softplus(-small_u)))
    if loss == "exponential":
        return -u
    raise InvalidInputError(f"joint (v, p) path supports logistic or exponential loss, got {loss!r}")


def _margins_vp(X, Y, K, v, p):
    s = softmax_logits(K @ p)  # (n, T)
    return Y * torch.einsum("nt,ntd,d->n", s, X, v)  # (n,) Y_i v^T X_i^T s_i


def joint_vp_loss(X: Any, Y: Any, v: Any, p: Any, *, keys: Any = None, loss: str = "logistic") -> float:
    """L(v, p) = (1/n) Σ ℓ(Y_i v^T X_i^T S(K_i p)); keys default to the tokens (W = I)."""
    Xt = torch.as_tensor(np.asarray(X, dtype=float))
    Kt = Xt if keys is None else torch.as_tensor(np.asarray(keys, dtype=float))
    ell, _ = _loss_fns(loss)
    u = _margins_vp(
        Xt,
        torch.as_tensor(np.asarray(Y, dtype=float)),
        Kt,
        torch.as_tensor(np.asarray(v, dtype=float)),
        torch.as_tensor(np.asarray(p, dtype=float)),
    )
    return float(ell(u).mean())


@dataclass(frozen=True)
class VPPath:
    """The joint path at radii (S,): v (S, d) with ‖v‖ = r, p (S, dk) with ‖p‖ = R, log L (S,),
    and the spread of log L over restarts (S,) (0: every restart found the same minimum)."""

    radii: np.ndarray
    v: np.ndarray
    p: np.ndarray
    log_loss: np.ndarray
    restart_spread: np.ndarray


def joint_vp_path(X: Any, Y: Any, radii: Any, *, keys: Any = None, loss: str = "logistic", starts: int = 8,
                  rng: np.random.Generator | Sequence[np.random.Generator], iters: int = 120,
                  v_radii: Any = None) -> VPPath | list[VPPath]:
    """Joint regularisation path (v_r, p_R) = argmin_{‖v‖ ≤ r, ‖p‖ ≤ R} L(v, p), r = R = radii unless
    ``v_radii`` is given. X (n, T, d) / Y (n,) for one dataset, or (B, n, T, d) / (B, n) for a batch
    of equal-shape datasets (returns a list of B paths).

    Both norm constraints are active at the minimum (L decreases along v ↦ c v, p ↦ c p once the
    margins are positive), so we minimise log L over the spheres: v = r a/‖a‖, p = R b/‖b‖.
    Per radius: ``starts`` random starts plus the previous radius' answer (warm start) run as one
    batch of independent Adam descents (``iters`` steps), then the best start is polished with L-BFGS.
    Minimising log L (not L) keeps the problem well scaled at large radii; note that float64 resolves the
    p-dependence of log L only while r·exp(−R·margin) ≫ 1e-15 |log L|, i.e. R ≲ 20 for unit-scale data.
    ``restart_spread``: max − min of log L over starts before polish.

    Each dataset of a batch is solved on its own (its own descent, line search and convergence test) from
    its own generator: ``rng`` is one generator per dataset, or one generator, which a batch spawns into B
    (``rng.spawn(B)``). A dataset's path is therefore the one it has alone with the same generator, whatever
    its batch-mates (one L-BFGS line search on the sum of the objectives would couple them). Raises
    SolverError when a dataset's minimum is not finite (NaN or ±inf log L or direction), naming it.
    """
    X = np.asarray(X, dtype=float)
    single = X.ndim == 3
    Xb = X[None] if single else X
    Yb = np.asarray(Y, dtype=float)
    Yb = Yb[None] if single else Yb
    B = Xb.shape[0]
    if Yb.shape != (B, Xb.shape[1]):
        raise InvalidInputError(f"Y must have shape {(B, Xb.shape[1])[1:] if single else (B, Xb.shape[1])}, "
                                f"got {np.shape(Y)}")
    Kb = (
        Xb
        if keys is None
        else (np.asarray(keys, dtype=float)[None] if single else np.asarray(keys, dtype=float))
    )
    radii = np.asarray(radii, dtype=float)
    vr = radii if v_radii is None else np.asarray(v_radii, dtype=float)
    if isinstance(rng, np.random.Generator):
        gens = [rng] if B == 1 else list(rng.spawn(B))
    else:
        gens = list(rng)
        if len(gens) != B:
            raise InvalidInputError(f"rng: one generator per dataset expected, got {len(gens)} for {B} "
                                    "datasets")
    paths = []
    for k in range(B):
        V, P, LL, SP = _vp_path_one(Xb[k], Yb[k], Kb[k], radii, vr, loss, starts, gens[k], iters)
        bad = ~(np.isfinite(LL) & np.isfinite(V).all(-1) & np.isfinite(P).all(-1))
        if bad.any():
            where = "" if single else f"dataset {k} of the batch: "
            raise SolverError(f"joint (v, p) path: {where}non-finite minimum (log L = {LL[bad][0]}) at R = "
                              f"{radii[bad][0]:g}, r = {vr[bad][0]:g}", status="non-finite", solver="L-BFGS")
        paths.append(VPPath(radii=radii, v=V, p=P, log_loss=LL, restart_spread=SP))
    return paths[0] if single else paths


def _vp_path_one(X: np.ndarray, Y: np.ndarray, K: np.ndarray, radii: np.ndarray, vr: np.ndarray, loss: str,
                 starts: int, rng: np.random.Generator, iters: int) -> tuple[np.ndarray, ...]:
    """One dataset's joint path (see :func:`joint_vp_path`): v (S, d), p (S, dk), log L (S,), spread (S,)."""
    n, _, d = X.shape
    dk = K.shape[-1]
    Xt, Kt, Yt = torch.as_tensor(X), torch.as_tensor(K), torch.as_tensor(Y)

    def objective(a, b, r_v, r_p):  # a (S, d), b (S, dk) -> (S,): log L at each start
        v = r_v * a / torch.linalg.vector_norm(a, dim=-1, keepdim=True)
        p = r_p * b / torch.linalg.vector_norm(b, dim=-1, keepdim=True)
        s = softmax_logits(torch.einsum("ntk,sk->snt", Kt, p))  # (S, n, T)
        u = Yt[None, :] * torch.einsum("snt,ntd,sd->sn", s, Xt, v)  # (S, n)
        return torch.logsumexp(_log_ell(u, loss), -1) - np.log(n)

    prev: tuple[np.ndarray, np.ndarray] | None = None
    V, P, LL, SP = [], [], [], []
    for r_v, r_p in zip(vr, radii, strict=True):
        A0 = rng.standard_normal((starts, d))
        B0 = rng.standard_normal((starts, dk))
        if prev is not None:
            A0 = np.concatenate([prev[0][None], A0], axis=0)
            B0 = np.concatenate([prev[1][None], B0], axis=0)
        a = torch.tensor(A0, requires_grad=True)
        b = torch.tensor(B0, requires_grad=True)
        opt = torch.optim.Adam([a, b], lr=0.05)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=(1e-3) ** (1.0 / iters))
        for _ in range(iters):
            opt.zero_grad()
            objective(a, b, r_v, r_p).sum().backward()  # independent starts: Adam is coordinate-wise
            opt.step()
            sched.step()
        with torch.no_grad():
            vals = objective(a, b, r_v, r_p).numpy()  # (S,)
        finite = np.isfinite(vals)
        j = int(np.argmin(np.where(finite, vals, np.inf)))
        a1 = a.detach()[j:j + 1].clone().requires_grad_(True)  # (1, d)
        b1 = b.detach()[j:j + 1].clone().requires_grad_(True)
        lb = torch.optim.LBFGS([a1, b1], lr=1.0, max_iter=100, tolerance_grad=1e-14, tolerance_change=1e-16,
                               history_size=20, line_search_fn="strong_wolfe")

        def closure(a1=a1, b1=b1, r_v=r_v, r_p=r_p, lb=lb):
            lb.zero_grad()
            val = objective(a1, b1, r_v, r_p).sum()
            val.backward()
            return val

        lb.step(closure)
        with torch.no_grad():
            best = float(objective(a1, b1, r_v, r_p)[0])
        an, bn = a1.detach().numpy()[0], b1.detach().numpy()[0]
        an = an / np.linalg.norm(an)
        bn = bn / np.linalg.norm(bn)
        prev = (an, bn)
        V.append(r_v * an)
        P.append(r_p * bn)
        LL.append(best)
        SP.append(float(vals[finite].max() - vals[finite].min()) if finite.any() else np.nan)
    return np.stack(V), np.stack(P), np.asarray(LL), np.asarray(SP)
