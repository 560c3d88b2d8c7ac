r"""The smoothness constant of the W-loss and its adversarial measurement: shared by gd-global and
smoothness-step.

:func:`smoothness_bound` is THE bound the checks use, and it is the proved one:
``theory.smoothness.lipschitz_bound(data, "logistic", "scores")`` (machine-checked for every n, T, d in
theory/smoothness.py, docs/theory.md "Smoothness (all sizes)"):

    L_W ≤ (1/n) Σ_i (D_i² ‖z_i‖² / 4) (B2_i Δ_i²/4 + B1_i Δ_i),

D_i the token diameter max_{t,τ} ‖x_it − x_iτ‖, Δ_i the score range, B1_i = sup |ℓ'| and B2_i = sup ℓ''
over the margins' range [min_t γ_it, max_t γ_it] (≤ 1 and 1/4 for the logistic loss).

It replaces the former checks-only bound L̄_W = (1/n) Σ_i ‖X_i‖₂² ‖z_i‖² (Δ_i²/16 + Δ_i) (derived from
‖J‖₂ ≤ 1/2, ‖Jγ‖₂ ≤ Δ/2, ‖D‖₂ ≤ Δ). The two differ in two places, both in the proved bound's favour: (1) the
Hessian only sees the *centred* logit direction b = X_i M z_i − b̄ (the softmax is shift-invariant), whose
range is ≤ D_i‖z_i‖‖M‖_F, and Var_s(b) ≤ range²/4 (Bhatia–Davis), where the former bound used the
operator norm ‖X_i‖₂ ≥ max_t ‖x_it‖ ≥ D_i/2 of the uncentred map; (2) ℓ', ℓ'' are bounded on the margins'
range, not globally. So lipschitz_bound ≤ L̄_W always (tests/theory/test_formal.py), 2–5× below it on the
catalogue's families. It is still loose on data with small score ranges (docs/theory.md, smoothness-step:
the measured tightness table), which is why smoothness-step carries a family on which it is
within 2× by construction (checks.strategies.tight_data).

Measurement (float64, torch autograd): :func:`hessian_search` maximises the Hessian's Rayleigh quotient
|U^T ∇²L(W) U| / ‖U‖² jointly over W (Adam ascent, third derivatives by double backward) and U (power
iteration with Hessian-vector products), from several starts; every value it returns is the Rayleigh quotient
of an actual (W, U), hence a lower bound on sup_W ‖∇²L(W)‖₂ = L_W (up to rounding), so ``measured / bound``
is a certified-from-below tightness and ``measured ≤ bound`` is a soundness test of the proof.
"""

from __future__ import annotations

import numpy as np
import torch

from numerics.data import AttentionData
from numerics.tokens import optimal_tokens, scores
from theory.smoothness import lipschitz_bound, lipschitz_bound_logits

#: Near-saturated starts: W = c · W_sel / ‖·‖ scaled so the selected token leads by about c logits, W_sel the
#: direction that raises token α_i of every example (α = opt and α = the worst token).
SATURATION_LOGITS = (4.0, 12.0)


def smoothness_bound(data: AttentionData) -> float:
    """The proved L_W ≥ Lipschitz constant of ∇L(W), logistic loss, linear head (see the module docstring)."""
    return lipschitz_bound(data, "logistic", "scores")


def prompt_smoothness_bound(keys: np.ndarray, gamma: np.ndarray, loss: str = "logistic") -> float:
    """The proved L_p ≥ Lipschitz constant of ∇L(p) for prompt attention (TLZO: logits K_i p, fixed scores
    γ (n, T), keys (n, T, dk)): theory.smoothness.lipschitz_bound_logits with ρ_i the key diameter."""
    K, g = np.asarray(keys, dtype=float), np.asarray(gamma, dtype=float)
    diam = np.linalg.norm(K[:, :, None, :] - K[:, None, :, :], axis=-1).max(axis=(1, 2))
    return lipschitz_bound_logits(g.min(1), g.max(1), diam, loss)


def _tensors(data):
    return torch.tensor(data.X), torch.tensor(data.Z), torch.as_tensor(scores(data))


def torch_loss(X, Z, gamma, W):
    """Independent differentiable L(W) (logistic, linear head) for a batch W (R, d, d): (R,) losses."""
    lg = torch.einsum("ntd,rde,ne->rnt", X, W, Z)
    u = (torch.softmax(lg, dim=2) * gamma).sum(2)
    return torch.nn.functional.softplus(-u).mean(1)


def _hvp(X, Z, gamma, W, U, create: bool):
    """Per-start Hessian-vector products ∇²L(W_r) U_r (the batch loss is a sum of independent terms)."""
    (g,) = torch.autograd.grad(torch_loss(X, Z, gamma, W).sum(), W, create_graph=True)
    (hv,) = torch.autograd.grad((g * U).sum(), W, create_graph=create)
    return hv


def _normalise(U):
    return U / U.flatten(1).norm(dim=1).clamp_min(1e-300)[:, None, None]


def hessian_search(data: AttentionData, starts: np.ndarray, steps: int, power: int = 30, lr: float = 0.05,
                   seed: int = 0) -> dict:
    """Maximise |U^T ∇²L(W) U| over (W, U), from each start W (R, d, d).

    Power iteration on U (``power`` HVPs at the start, 3 per ascent step) and Adam ascent of the squared
    Rayleigh quotient in W. Returns ``value`` (R,): the best |quotient| seen per start (a lower bound on
    ‖∇²L(W)‖₂ at the W where it was seen), ``W`` and ``U`` (R, d, d) where it was seen, ``start_value`` (R,):
    the quotient after the initial power iteration at the unchanged start.
    """
    X, Z, gamma = _tensors(data)
    W = torch.tensor(np.ascontiguousarray(starts), requires_grad=True)
    U = _normalise(torch.randn(W.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    opt = torch.optim.Adam([W], lr=lr)
    R = len(starts)
    best, bestW, bestU, first = np.zeros(R), np.array(starts, dtype=float), np.zeros_like(starts), None
    for k in range(steps + 1):
        for _ in range(power if k == 0 else 3):
            U = _normalise(_hvp(X, Z, gamma, W, U, False).detach())
        hv = _hvp(X, Z, gamma, W, U, k < steps)
        q = (hv * U).sum((1, 2))
        qa = q.detach().abs().numpy()
        if first is None:
            first = qa.copy()
        up = qa > best
        best[up], bestW[up], bestU[up] = qa[up], W.detach().numpy()[up], U.numpy()[up]
        if k < steps:
            opt.zero_grad()
            (-(q**2).sum()).backward()
            opt.step()
    return {"value": best, "W": bestW, "U": bestU, "start_value": first}


def top_curvature(data: AttentionData, W: np.ndarray, iters: int = 60,
                  seed: int = 0) -> tuple[float, np.ndarray]:
    """(|λ|, U): the largest-magnitude Hessian eigenvalue at W by power iteration (a Rayleigh quotient, so a
    lower bound on ‖∇²L(W)‖₂), and its unit eigenvector."""
    X, Z, gamma = _tensors(data)
    Wt = torch.tensor(np.ascontiguousarray(W)[None], requires_grad=True)
    U = _normalise(torch.randn(Wt.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    for _ in range(iters):
        U = _normalise(_hvp(X, Z, gamma, Wt, U, False).detach())
    q = float((_hvp(X, Z, gamma, Wt, U, False) * U).sum())
    return abs(q), U[0].numpy()


def selecting_directions(data: AttentionData) -> list[np.ndarray]:
    """Directions of W that make every example select one token: Σ_i (x_iα_i − x̄_i) z_i^T / ‖z_i‖², for
    α = opt and α = the lowest-scoring token (unit Frobenius norm)."""
    X, Z = data.X, data.Z
    g = scores(data)
    out = []
    for alpha in (optimal_tokens(data).index, g.argmin(1)):
        sel = X[np.arange(data.n), alpha] - X.mean(1)
        D = np.einsum("nd,ne->de", sel, Z / np.sum(Z * Z, axis=1, keepdims=True))
        if np.linalg.norm(D) > 0:
            out.append(D / np.linalg.norm(D))
    return out


def search_starts(data: AttentionData, W0: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Starts of :func:`hessian_search`: W = 0 (uniform attention), the instance's W0, two random N(0, 0.5²)
    and one random N(0, 3²) W, and near-saturated W = c·D along each token-selecting direction D, c such that
    the selected token leads by ~``SATURATION_LOGITS`` logits."""
    d = data.d
    S = [np.zeros((d, d)), W0, *(0.5 * rng.standard_normal((2, d, d))), 3.0 * rng.standard_normal((d, d))]
    for D in selecting_directions(data):
        lead = float(np.max(np.abs(np.einsum("ntd,de,ne->nt", data.X, D, data.Z)))) or 1.0
        S += [c / lead * D for c in SATURATION_LOGITS]
    return np.stack(S)


def loss_np(data: AttentionData, W: np.ndarray) -> float:
    """L(W) (logistic, linear head) in plain numpy: stable softmax, softplus by logaddexp."""
    a = np.einsum("ntd,de,ne->nt", data.X, W, data.Z)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    u = np.sum(e * scores(data), axis=1) / e.sum(axis=1)
    return float(np.mean(np.logaddexp(0.0, -u)))
