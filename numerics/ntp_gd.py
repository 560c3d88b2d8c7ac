r"""The next-token-prediction model on the one GD engine (numerics.gd.run_gd), batched over datasets.

:class:`NTPModel` fills the engine's model slot (numerics.gd.Model): a batch (:class:`NTPBatch`) stacks R NTP
datasets of one shape (n, T, d) in float64, and the model gives the loss L_r(W_r) and its closed-form gradient
for every r at once. With scores a_iτ = x_iτ^T W x̄_i, s_i = softmax(a_i) and r_i = softmax of a_i over the
positions holding the label,

    −log ŷ_{i,y_i} = LSE(a_i) − LSE(a_i restricted to label positions),
    ∇_W = (1/n) Σ_i X_i^T (s_i − r_i) x̄_i^T

(tests/numerics/test_ntp.py checks it against autograd); r_i is uniform on the label's positions (they hold
one token, so one score). Plain GD runs the model's fused program (:meth:`NTPModel.run_fused`: GD in logit
space, numerics.gd_torch.run_ce_logits; the explicit loop's iterates up to rounding, tested); while a step
hook is registered (numerics.gd.step_hook: whatever changes GD steps or the softmax registers one) every
step runs the engine's explicit loop on :func:`ntp_grad`, whose softmax is the GD steps' seam
(numerics.gd_common._softmax_rows), so what replaces that seam or registers a hook reaches NTP GD as it
reaches every other run.

:func:`run_ntp_gd` is the entry every NTP check, path and reproduction drives: plain GD from W(0) (zeros by
default) with one step size per dataset, recorded at given iterations (a log grid by default:
:func:`record_grid`).

Measured on one H100 (2026-11-26, float64, 100 instances of numerics.ntp.random_ntp at (n, T, K, d) =
(8, 4, 5, 8), 2000 steps, the loop before it moved onto the engine): closed form against autograd on CUDA
2.5e-16 (max relative); CUDA against CPU final W 7.7e-16; batched 1.48 s on CUDA, 1.74 s on that machine's
CPU, against a naive per-instance autograd loop of 0.86 s (CPU) and 2.76 s (CUDA) per instance: 50x (CPU)
and 187x (CUDA) for 100 instances. ``attnsvm bench --only ntp`` measures it on the engine (README,
"Benchmarks").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .errors import InvalidInputError
from .gd import PLAIN, W_MODEL, GDConfig, Model, run_gd
from .gd_common import _softmax_rows
from .ntp import NTPData


@dataclass(frozen=True)
class NTPBatch:
    """R NTP datasets of one shape stacked: X (R, n, T, d) the token embeddings, q (R, n, d) the queries
    (the last tokens), label (R, n, T) whether a position holds the sequence's label, and ``share`` (R, n, T)
    = label / (the number of label positions): the softmax over the label's positions, which is uniform since
    they all hold the same token (the same score)."""

    X: torch.Tensor
    q: torch.Tensor
    label: torch.Tensor
    share: torch.Tensor

    @classmethod
    def of(cls, datas: Sequence[NTPData], device: Any = "cpu", dtype: Any = torch.float64) -> NTPBatch:
        if isinstance(datas, NTPData):
            datas = [datas]
        if not datas or not all(isinstance(x, NTPData) for x in datas):
            raise InvalidInputError("NTP GD needs one or more numerics.ntp.NTPData datasets")
        shapes = {(x.n, x.T, x.d) for x in datas}
        if len(shapes) != 1:
            raise InvalidInputError(
                f"an NTP batch holds datasets of one shape (n, T, d), got {sorted(shapes)}")
        dev = torch.device(device)
        X = torch.as_tensor(np.stack([x.X for x in datas]), dtype=dtype, device=dev)
        q = torch.as_tensor(np.stack([x.query for x in datas]), dtype=dtype, device=dev)
        lab = np.stack([x.tokens == x.labels[:, None] for x in datas])
        share = torch.as_tensor(lab / lab.sum(-1, keepdims=True), dtype=dtype, device=dev)
        return cls(X, q, torch.as_tensor(lab, device=dev), share)


def ntp_scores(batch: NTPBatch, W: torch.Tensor) -> torch.Tensor:
    """a_iτ = x_iτ^T W x̄_i, (R, n, T): u_i = W x̄_i (one batched product), then x_iτ^T u_i."""
    u = torch.bmm(batch.q, W.mT)  # rows (W x̄_i)^T, (R, n, d)
    return torch.matmul(batch.X, u[..., None])[..., 0]


def ntp_loss(batch: NTPBatch, W: torch.Tensor) -> torch.Tensor:
    """L_r(W_r), (R,): mean −log of the attention mass on the label's positions."""
    a = ntp_scores(batch, W)
    lab = torch.logsumexp(a.masked_fill(~batch.label, -torch.inf), dim=-1)
    return (torch.logsumexp(a, dim=-1) - lab).mean(dim=-1)


def ntp_grad(batch: NTPBatch, W: torch.Tensor) -> torch.Tensor:
    """∇L_r(W_r), (R, d, d), in closed form (module docstring): c_i = s_i − r_i with r_i = ``batch.share``
    (exactly the softmax over the label's positions), g_i = X_i^T c_i, ∇L = (1/n) Σ_i g_i x̄_i^T. The softmax
    is the GD steps' seam (numerics.gd_common._softmax_rows; the power analysis reaches it)."""
    c = _softmax_rows(ntp_scores(batch, W)).sub_(batch.share)
    g = (c[..., None] * batch.X).sum(2)  # rows X_i^T c_i, (R, n, d)
    return torch.bmm(g.mT, batch.q).div_(batch.X.shape[1])


@dataclass(frozen=True)
class NTPModel(Model):
    """GD on W for the next-token-prediction loss, a model of the one GD engine (numerics.gd.run_gd; data:
    a sequence of NTPData of one shape, or an :class:`NTPBatch`). The loss is the NTP cross-entropy
    whatever ``GDConfig.loss`` names; the start is W_MODEL's (an explicit (R, d, d) / (d, d) array or a
    RandomInit). Plain GD without weight decay and without a step hook runs :meth:`run_fused`; everything
    else the engine's explicit loop on :meth:`grads`."""

    name = "ntp"

    def prepare(self, data, head, device, dtype):
        return (data if isinstance(data, NTPBatch) else NTPBatch.of(data, device, dtype)), None

    def context(self, batch, head):
        return None

    def loss(self, batch, head, W, loss):
        return ntp_loss(batch, W)

    def start(self, init, R, d, m, device, dtype):
        return W_MODEL.start(init, R, d, m, device, dtype)

    def grads(self, batch, head, params, loss, gamma, direction_only):
        return [ntp_grad(batch, params[0])]

    def W(self, params):
        return params[0].clone()

    def fused_applies(self, cfg):
        return cfg.geometry is PLAIN and cfg.wd == 0

    def run_fused(self, batch, head, params, cfg, lr, record_every):
        """Plain GD in logit space (numerics.gd_torch.run_ce_logits): the scores a_iτ = x_iτ^T W x̄_i are the
        attention logits with queries x̄_i, and a step W ← W − η (1/n) Σ_j X_j^T c_j x̄_j^T moves them by
        −(η/n) M c with M the token Gram matrix of (X, x̄) (numerics.attention.TokenGram; one small batched
        product, dense at small shapes); W = W(0) + Σ_j X_j^T C_j x̄_j^T from the accumulated C."""
        from . import attention as att
        from .gd_torch import run_ce_logits

        W0 = params[0]
        X, q = batch.X, batch.q
        R, n, T, _ = X.shape
        with torch.inference_mode():
            gram = att.TokenGram(X, q)
            if gram.dense:
                M = gram.M

                def apply(c, out):
                    torch.bmm(c.view(R, 1, n * T), M, out=out.view(R, 1, n * T))  # c^T M = (M c)^T
            else:
                def apply(c, out):
                    out.copy_(gram.apply(c))
            # |D_jσ| ≤ η/n entrywise and every |M| entry ≤ entry_bound: a step moves a score by at most
            # n T entry_bound η / n (one host synchronisation)
            drift = float((gram.entry_bound * lr).max()) * T if R else 0.0
            return run_ce_logits(
                self, W0, cfg, lr, record_every, A0=att.logits(X, q, W0), target=batch.share,
                weight=torch.full((R, n, 1), 1.0 / n, dtype=X.dtype, device=X.device), apply=apply,
                to_W=gram.weights_to_W, loss_of=lambda Wk: ntp_loss(batch, Wk), drift=drift)


#: The NTP model (stateless: one instance serves every run).
NTP_MODEL = NTPModel()


@dataclass(frozen=True)
class NTPGDResult:
    """A recorded GD run: iterations (S,), W_traj (S, R, ...), loss (S, R)."""

    iterations: np.ndarray
    W_traj: np.ndarray
    loss: np.ndarray
    lr: float


def record_grid(steps: int, points: int = 40) -> np.ndarray:
    """0 and ~``points`` log-spaced iterations up to ``steps`` (the direction converges like 1/log k)."""
    g = np.unique(np.round(np.geomspace(1, steps, points)).astype(int))
    return np.concatenate([[0], g])


def run_model_gd(model: Model, data: Any, *, steps: int, lr: float | Sequence[float], record_at: Any,
                 init: Any, device: Any = "cpu") -> NTPGDResult:
    """Plain GD W ← W − η_r ∇L_r(W) of ``model`` on the GD engine from ``init``, one step size per instance
    (or one for all), recorded at the iterations ``record_at`` (and the last)."""
    lrs = np.asarray(lr, dtype=float)
    cfg = GDConfig(steps=steps, lr=float(lrs) if lrs.ndim == 0 else tuple(lrs.tolist()), geometry="plain",
                   param=model)
    res = run_gd(data, cfg, init=init, device=device, record_every=[int(k) for k in record_at])
    assert res.iterations is not None and res.W_traj is not None and res.loss_traj is not None  # recorded
    return NTPGDResult(res.iterations, res.W_traj, res.loss_traj, float(np.max(lrs)))


def run_ntp_gd(datas: Sequence[NTPData], *, steps: int, lr: float | Sequence[float],
               record_at: Sequence[int] | np.ndarray | None = None, init: Any = None,
               device: Any = "cpu") -> NTPGDResult:
    """Plain GD W ← W − η_b ∇L_b(W) on a batch of NTP datasets of one shape from W(0) (``init`` (B, d, d),
    or zeros), on the GD engine (:class:`NTPModel`), recorded at ``record_at`` (default :func:`record_grid`)
    and the last iteration."""
    batch = NTPBatch.of(datas, device)
    R, _, _, d = batch.X.shape
    W0 = np.zeros((R, d, d)) if init is None else init
    rec = record_grid(steps) if record_at is None else record_at
    return run_model_gd(NTP_MODEL, batch, steps=steps, lr=lr, record_at=rec, init=W0, device=device)
