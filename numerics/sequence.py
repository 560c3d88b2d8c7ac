r"""Sequence and causal attention losses, their closed-form gradients and batched GD on W.

Every position k of a sequence is a query (z_ik = x_ik) with its own label Y_ik; key t's score for
query k is γ_ikt = Y_ik v^T x_it (``numerics.svm.seq_scores``). The causal version masks keys t > k.
With s_ik = S(X_i W x_ik) (masked) and u_ik = γ_ik^T s_ik (= Y_ik f_ik for the linear head)::

    L(W) = (1/(nT)) Σ_{i,k} ℓ(u_ik),
    ∇L(W) = (1/(nT)) Σ_{i,k} ℓ'(u_ik) Σ_t s_ikt c_ikt x_it x_ik^T,   c_ikt = Σ_u s_iku (γ_ikt − γ_iku).

c is the centred score γ_ikt − γ̄_ik in pairwise form, exact when one key holds almost all the mass
(see numerics.prompt). Masked keys get probability exactly 0 (logit −inf), so they never enter the
loss or the gradient.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((2, 3, 4)); G = rng.standard_normal((2, 3, 3))
>>> res = run_seq_gd(X, G, causal=True, steps=20, lr=0.1)
>>> res.W.shape
(4, 4)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .attention import softmax_logits
from .errors import InvalidInputError
from .gd import GDConfig, Model, run_gd
from .prompt import _centred, _loss_fns

__all__ = ["SeqBatch", "SeqGDResult", "SequenceModel", "causal_mask", "seq_probs", "seq_loss", "seq_grad",
           "run_seq_gd"]


def causal_mask(T: int, device: Any = "cpu") -> torch.Tensor:
    """allowed[k, t] = t ≤ k, shape (T, T) bool."""
    return torch.tril(torch.ones((T, T), dtype=torch.bool, device=device))


def seq_probs(X: torch.Tensor, W: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """s[r, i, k, t] = S(X_i W x_ik)_t (keys t > k masked if causal); X (R, n, T, d), W (R, d, d)."""
    lg = torch.einsum("rntd,rde,rnke->rnkt", X, W, X)  # (R, n, T_query, T_key)
    if causal:
        lg = lg.masked_fill(~causal_mask(X.shape[2], X.device), float("-inf"))
    return softmax_logits(lg)


def seq_loss(X: torch.Tensor, G: torch.Tensor, W: torch.Tensor, causal: bool = False,
             loss: str = "logistic") -> torch.Tensor:
    """L(W) per run, shape (R,); X (R, n, T, d), G (R, n, T, T) scores γ_ikt, W (R, d, d)."""
    ell, _ = _loss_fns(loss)
    s = seq_probs(X, W, causal)
    return ell((s * G).sum(-1)).mean(dim=(-2, -1))


def seq_grad(X: torch.Tensor, G: torch.Tensor, W: torch.Tensor, causal: bool = False,
             loss: str = "logistic") -> torch.Tensor:
    """Closed-form ∇L(W) (module docstring), shape (R, d, d)."""
    _, dell = _loss_fns(loss)
    s = seq_probs(X, W, causal)  # (R, n, K, T)
    u = (s * G).sum(-1)  # (R, n, K)
    w = dell(u)[..., None] * s * _centred(s, G)  # (R, n, K, T)
    n, T = X.shape[1], X.shape[2]
    return torch.einsum("rnkt,rntd,rnke->rde", w, X, X) / (n * T)


@dataclass(frozen=True)
class SeqGDResult:
    """Final W (R, d, d) (or (d, d) for one run), W_traj (S, R, d, d) at iterations (S,), loss (S, R),
    norms (S, R); ``stalled`` (R,) marks runs whose gradient underflowed to exactly 0."""

    W: np.ndarray
    W_traj: np.ndarray
    iterations: np.ndarray
    loss: np.ndarray
    norms: np.ndarray
    stalled: np.ndarray


@dataclass(frozen=True)
class SeqBatch:
    """The data of a sequence GD run: X (R, n, T, d) and the scores G (R, n, T, T), float64 tensors."""

    X: torch.Tensor
    G: torch.Tensor


@dataclass(frozen=True, eq=False)
class SequenceModel(Model):
    """GD on W for the sequence / causal loss (module docstring) as a model of the one GD engine
    (numerics.gd.run_gd; data: a :class:`SeqBatch`). ``stalled`` (R,) is set in :meth:`start` and marks
    the runs whose gradient was exactly 0 at some step (normalised GD then does not move them)."""

    causal: bool = False
    stalled: list = field(default_factory=list)

    name = "sequence"

    def prepare(self, data, head, device, dtype):
        return data, None

    def context(self, batch, head):
        return None

    def loss(self, batch, head, W, loss):
        return seq_loss(batch.X, batch.G, W, self.causal, loss)

    def start(self, init, R, d, m, device, dtype):
        self.stalled[:] = [torch.zeros(R, dtype=torch.bool, device=device)]
        W0 = torch.as_tensor(np.asarray(init, dtype=float), dtype=dtype, device=device)
        return [W0.reshape(R, d, d).clone()]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        g = seq_grad(batch.X, batch.G, params[0], self.causal, loss)
        self.stalled[0] |= torch.linalg.matrix_norm(g) == 0
        return [g]

    def W(self, params):
        return params[0].clone()


def run_seq_gd(X: Any, gamma: Any, *, causal: bool = False, steps: int, lr: Any, normalized: bool = True,
               loss: str = "logistic", init: Any = None, record_every: int | None = None,
               device: str = "cpu") -> SeqGDResult:
    """Batched (normalised) GD on the sequence / causal loss: W ← W − η ∇L/‖∇L‖_F, on the GD engine
    (numerics.gd.run_gd with a :class:`SequenceModel`: its explicit loop and step hook).

    X (R, n, T, d) or (n, T, d); gamma (R, n, T, T) or (n, T, T); init (R, d, d) (default zeros); lr one
    step or one per run (R numbers, e.g. plain GD's 1/L_W of each instance).
    Records every ``record_every`` steps (default steps // 20) and the last iterate.
    """
    Xa = np.asarray(X, dtype=float)
    Ga = np.asarray(gamma, dtype=float)
    single = Xa.ndim == 3
    if single:
        Xa, Ga = Xa[None], Ga[None]
    if Xa.ndim != 4 or Ga.shape != Xa.shape[:3] + (Xa.shape[2],):
        raise InvalidInputError(
            f"X must be (R, n, T, d) and gamma (R, n, T, T); got {Xa.shape} and {Ga.shape}"
        )
    R, n, T, d = Xa.shape
    lrs = np.atleast_1d(np.asarray(lr, dtype=float))
    if steps < 1 or np.any(lrs <= 0) or lrs.ndim != 1 or lrs.size not in (1, R):
        raise InvalidInputError(
            f"steps must be >= 1 and lr > 0 (one, or one per run), got steps={steps}, lr={lr}")
    step = float(lrs[0]) if lrs.size == 1 else tuple(float(x) for x in lrs)
    W0 = np.zeros((R, d, d)) if init is None else np.asarray(init, dtype=float).reshape(R, d, d)
    every = max(1, steps // 20) if record_every is None else int(record_every)
    batch = SeqBatch(torch.as_tensor(Xa, dtype=torch.float64, device=device),
                     torch.as_tensor(Ga, dtype=torch.float64, device=device))
    model = SequenceModel(causal)
    cfg = GDConfig(steps=steps, lr=step, geometry="normalized" if normalized else "plain", loss=loss,
                   param=model)
    res = run_gd(batch, cfg, init=W0, device=device, record_every=every)
    assert res.W_traj is not None and res.iterations is not None and res.loss_traj is not None  # recorded
    P = res.W_traj
    stalled = model.stalled[0].cpu().numpy() if normalized else np.zeros(R, dtype=bool)
    return SeqGDResult(
        W=P[-1][0] if single else P[-1],
        W_traj=P,
        iterations=res.iterations,
        loss=res.loss_traj,
        norms=np.linalg.norm(P, axis=(-2, -1)),
        stalled=stalled,
    )
