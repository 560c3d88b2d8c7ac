r"""Next-token prediction in linear models (Thrampoulidis, NeurIPS 2024, arXiv 2402.18551): the setting, the
NTP-compatibility and NTP-separability programs, W⋆ and W^mm, and GD on the cross-entropy.

Setting. m distinct contexts with embeddings h̄_j (rows of H, (m, d)), weights π_j > 0 (Σ π = 1), next-token
supports S_j ⊂ [V] with empirical probabilities p̂_{j,z} > 0 on S_j (rows of P, (m, V), each summing to 1).
Logits W h̄_j, W ∈ ℝ^{V×d}; CE(W) = Σ_j π_j Σ_z p̂_{j,z} (−log softmax(W h̄_j)_z) ≥ 𝓗 = Σ_j π_j H(p̂_j) (Gibbs).

* NTP-compatible: some W has (e_z − e_{z'})^T W h̄_j = log(p̂_{j,z}/p̂_{j,z'}) for z, z' ∈ S_j; W⋆ is the unique
  solution in F = span{(e_z − e_{z'}) h̄_j^T : z, z' ∈ S_j} (the minimum-norm one: :func:`w_star`).
* NTP-separable: (e_z − e_{z'})^T W h̄_j = 0 (z, z' ∈ S_j) and (e_z − e_v)^T W h̄_j ≥ 1 (z ∈ S_j, v ∉ S_j); W^mm
  the minimum-norm such W (:func:`ntp_svm`, certified by the one certifier; the rows are attention-type rows
  ⟨(e_z − e_v) h̄_j^T, W⟩ with a rectangular W).
* The one-hot multiclass SVM (:func:`ntp_svm` with ``equalities=False``, every z ∈ S_j against every other
  token, strictly): the boundary control that drops the equality rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInputError
from .gd import PLAIN, Model
from .gd_common import _init_tensor
from .ntp import project, sphere_path
from .ntp_gd import NTPGDResult, run_model_gd
from .svm.att import _solve_rows
from .svm.core import Certificate, _certify, _Rows
from .tokens import softmax_rows


@dataclass(frozen=True)
class LinearNTP:
    """H (m, d) contexts, P (m, V) empirical next-token probabilities (rows sum to 1), pi (m,) weights."""

    H: np.ndarray
    P: np.ndarray
    pi: np.ndarray

    def __post_init__(self):
        if self.H.ndim != 2 or self.P.ndim != 2 or self.P.shape[0] != self.H.shape[0]:
            raise InvalidInputError(f"H (m, d) and P (m, V) must share m, got {self.H.shape}, {self.P.shape}")
        if np.any(self.P < 0) or not np.allclose(self.P.sum(1), 1.0, atol=1e-12):
            raise InvalidInputError("each row of P must be a probability vector")
        if self.pi.shape != (self.H.shape[0],) or np.any(self.pi <= 0):
            raise InvalidInputError("pi must be positive, one weight per context")

    @property
    def m(self) -> int:
        return int(self.H.shape[0])

    @property
    def d(self) -> int:
        return int(self.H.shape[1])

    @property
    def V(self) -> int:
        return int(self.P.shape[1])

    def supports(self) -> list[np.ndarray]:
        return [np.flatnonzero(p > 0) for p in self.P]

    def entropy(self) -> float:
        """𝓗 = Σ_j π_j Σ_z −p̂ log p̂ (the infimum of CE)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(self.P > 0, -self.P * np.log(self.P), 0.0)
        return float(self.pi @ t.sum(1))


def ce(prob: LinearNTP, W: Any) -> tuple[float, np.ndarray]:
    """(CE(W), ∇CE(W)) in numpy: ∇ = Σ_j π_j (softmax(W h̄_j) − p̂_j) h̄_j^T."""
    W = np.asarray(W, dtype=float)
    A = prob.H @ W.T  # (m, V) logits
    mx = A.max(1, keepdims=True)
    lse = (mx + np.log(np.exp(A - mx).sum(1, keepdims=True)))[:, 0]
    S = np.exp(A - lse[:, None])
    val = float(prob.pi @ (lse - (prob.P * A).sum(1)))
    G = ((S - prob.P) * prob.pi[:, None]).T @ prob.H
    return val, G


def smoothness(prob: LinearNTP) -> float:
    """L ≥ the Lipschitz constant of ∇CE: the softmax Jacobian has norm ≤ ½, so L ≤ ½ Σ_j π_j ‖h̄_j‖²."""
    return 0.5 * float(prob.pi @ (prob.H ** 2).sum(1))


def _pairs(prob: LinearNTP):
    for j, S in enumerate(prob.supports()):
        for z in S[1:]:
            yield j, int(S[0]), int(z)


def f_basis(prob: LinearNTP) -> np.ndarray:
    """Orthonormal basis (k, V, d) of F = span{(e_z − e_{z'}) h̄_j^T : z, z' ∈ S_j}."""
    I = np.eye(prob.V)
    rows = [np.outer(I[z0] - I[z], prob.H[j]).ravel() for j, z0, z in _pairs(prob)]
    if not rows:
        return np.zeros((0, prob.V, prob.d))
    U, s, _ = np.linalg.svd(np.array(rows).T, full_matrices=False)
    k = int(np.sum(s > max(len(rows), prob.V * prob.d) * np.finfo(float).eps * s[0]))
    return U[:, :k].T.reshape(k, prob.V, prob.d)


def w_star(prob: LinearNTP) -> tuple[np.ndarray, float]:
    """(W⋆, max |residual|): the minimum-norm solution of the log-ratio equations (it lies in F; unique
    there). A residual at rounding level means NTP-compatible."""
    I = np.eye(prob.V)
    rows, rhs = [], []
    for j, z0, z in _pairs(prob):
        rows.append(np.outer(I[z0] - I[z], prob.H[j]).ravel())
        rhs.append(float(np.log(prob.P[j, z0] / prob.P[j, z])))
    if not rows:
        return np.zeros((prob.V, prob.d)), 0.0
    A, b = np.array(rows), np.array(rhs)
    w, *_ = np.linalg.lstsq(A, b, rcond=None)
    return w.reshape(prob.V, prob.d), float(np.max(np.abs(A @ w - b)))


@dataclass(frozen=True)
class NTPSVMResult:
    status: str
    W: np.ndarray | None
    objective: float
    certificate: Certificate
    solver: str

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"


def ntp_svm(prob: LinearNTP, *, equalities: bool = True, argmax_labels: bool = False) -> NTPSVMResult:
    """W^mm (NTP-separability's minimum-norm solution), certified (KKT or Farkas); ``equalities=False``: the
    one-hot multiclass SVM (every z ∈ S_j strictly above every other token v ≠ z); ``argmax_labels``: the
    one-hot multiclass SVM of the most probable next token z*_j = argmax_z p̂_{j,z} (every v ≠ z*_j strictly
    below it: feasible where d ≥ m, and no equality rows)."""
    I = np.eye(prob.V)
    D, Z, b, eq = [], [], [], []
    supports = prob.supports()
    if argmax_labels:
        supports = [np.array([int(np.argmax(p))]) for p in prob.P]
        equalities = False
    for j, S in enumerate(supports):
        inS = set(S.tolist())
        if equalities:
            for z in S[1:]:
                D.append(I[S[0]] - I[z]); Z.append(prob.H[j]); b.append(0.0); eq.append(True)  # noqa: E702
        for z in S:
            for v in range(prob.V):
                if v == z or (equalities and v in inS):
                    continue
                D.append(I[z] - I[v]); Z.append(prob.H[j]); b.append(1.0); eq.append(False)  # noqa: E702
    if not D:
        return NTPSVMResult("optimal", np.zeros((prob.V, prob.d)), 0.0,
                            Certificate("kkt", True, message="no constraints"), "trivial")
    rows = _Rows(np.array(D), np.array(Z), np.array(b), np.array(eq, dtype=bool))
    status, W, lam, mu, name, _ = _solve_rows(rows, norm="fro", solver=None)
    cert = _certify(rows, W, lam, mu, status, "fro")
    return NTPSVMResult(status, W, float(np.linalg.norm(W)) if W is not None else np.inf, cert, name)


def hessian_ce(prob: LinearNTP, W: Any) -> np.ndarray:
    """∇²CE(W), (V d, V d) in row-major vec(W): Σ_j π_j (diag s_j − s_j s_j^T) ⊗ h̄_j h̄_j^T."""
    S = softmax_rows(prob.H @ np.asarray(W, dtype=float).T)  # the numpy softmax seam (numerics.tokens)
    out = np.zeros((prob.V * prob.d, prob.V * prob.d))
    for j in range(prob.m):
        out += prob.pi[j] * np.kron(np.diag(S[j]) - np.outer(S[j], S[j]), np.outer(prob.H[j], prob.H[j]))
    return out


def regularization_path(prob: LinearNTP, radii: Any) -> tuple[np.ndarray, np.ndarray]:
    """W_R = argmin_{‖W‖_F ≤ R} CE(W) (convex; on the sphere where CE has no minimiser):
    :func:`numerics.ntp.sphere_path` with the analytic gradient and Hessian."""
    return sphere_path(lambda W: ce(prob, W), lambda W: hessian_ce(prob, W), (prob.V, prob.d), radii,
                       what="linear NTP")


def off_support_mass(prob: LinearNTP, W: Any) -> float:
    """max_j of the softmax mass W puts outside S_j."""
    S = softmax_rows(prob.H @ np.asarray(W, dtype=float).T)  # the numpy softmax seam (numerics.tokens)
    return float(np.max(np.where(prob.P > 0, 0.0, S).sum(1)))


@dataclass(frozen=True)
class LinearNTPBatch:
    """R linear-NTP problems of one shape (m, d, V) stacked (torch, float64): H (R, m, d) contexts,
    P (R, m, V) next-token probabilities, pi (R, m) weights. ``X`` (R, m, 1, d): the contexts as m one-token
    sequences, the shape the GD engine reads its sizes from."""

    H: Any
    P: Any
    pi: Any

    @property
    def X(self):
        return self.H[:, :, None, :]

    @classmethod
    def of(cls, probs: Any, device: Any = "cpu", dtype: Any = None) -> LinearNTPBatch:
        import torch

        if isinstance(probs, LinearNTP):
            probs = [probs]
        if not probs or not all(isinstance(p, LinearNTP) for p in probs):
            raise InvalidInputError("linear NTP GD needs one or more numerics.ntp_linear.LinearNTP problems")
        shapes = {(p.m, p.d, p.V) for p in probs}
        if len(shapes) != 1:
            raise InvalidInputError(f"a linear NTP batch holds problems of one shape (m, d, V), got "
                                    f"{sorted(shapes)}")
        dt = torch.float64 if dtype is None else dtype

        def t(key):
            return torch.as_tensor(np.stack([getattr(p, key) for p in probs]), dtype=dt, device=device)

        return cls(t("H"), t("P"), t("pi"))


def ce_torch(batch: LinearNTPBatch, W: Any) -> Any:
    """CE_r(W_r), (R,), batched in torch (:func:`ce`'s value; W (R, V, d))."""
    import torch

    A = torch.bmm(batch.H, W.mT)  # logits (R, m, V)
    return (batch.pi * (torch.logsumexp(A, dim=-1) - (batch.P * A).sum(-1))).sum(-1)


def ce_grad_torch(batch: LinearNTPBatch, W: Any) -> Any:
    """∇CE_r(W_r) = Σ_j π_j (softmax(W h̄_j) − p̂_j) h̄_j^T, (R, V, d), batched in torch (:func:`ce`'s gradient;
    the softmax through the GD steps' softmax seam numerics.gd_common._softmax_rows)."""
    import torch

    from .gd_common import _softmax_rows

    S = _softmax_rows(torch.bmm(batch.H, W.mT)).sub_(batch.P).mul_(batch.pi[..., None])
    return torch.bmm(S.mT, batch.H)


@dataclass(frozen=True)
class LinearNTPModel(Model):
    """GD on the logit matrix W (V × d) of the linear NTP model's cross-entropy, a model of the one GD engine
    (numerics.gd.run_gd; data: LinearNTP problems of one shape or a :class:`LinearNTPBatch`). The loss is the
    CE whatever ``GDConfig.loss`` names; the start is an explicit W (R, V, d) or (V, d). Plain GD without
    weight decay and without a step hook runs its fused program (:meth:`run_fused`: GD in logit space, the
    explicit loop's iterates up to rounding); everything else, and every run while a hook (one that
    changes the GD steps or the softmax) is registered, runs the engine's explicit loop on :meth:`grads`."""

    name = "linear-ntp"

    def prepare(self, data, head, device, dtype):
        return (data if isinstance(data, LinearNTPBatch) else LinearNTPBatch.of(data, device, dtype)), None

    def context(self, batch, head):
        return None

    def loss(self, batch, head, W, loss):
        return ce_torch(batch, W)

    def start(self, init, R, d, m, device, dtype):
        if hasattr(init, "seed") or init is None:
            raise InvalidInputError("the linear NTP model starts from an explicit W of shape (R, V, d)")
        W0 = np.asarray(init, dtype=float)
        return [_init_tensor(W0, "W", W0.shape[-2:], R, device, dtype)]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        return [ce_grad_torch(batch, params[0])]

    def W(self, params):
        return params[0].clone()

    def fused_applies(self, cfg):
        return cfg.geometry is PLAIN and cfg.wd == 0

    def run_fused(self, batch, head, params, cfg, lr, record_every):
        return _run_logit_gd(self, batch, params[0], cfg, lr, record_every)


def _run_logit_gd(model: LinearNTPModel, batch: LinearNTPBatch, W0: Any, cfg: Any, lr: Any,
                  record_every: Any) -> Any:
    """Plain GD on CE in logit space, the linear NTP model's fused program (numerics.gd_torch.run_ce_logits):
    every gradient lies in the row space of H, ∇CE(W) = Dᵀ H with D = π ⊙ (softmax(A) − P) (m, V) at the
    logits A = H Wᵀ, so a step W ← W − η Dᵀ H moves the logits by A ← A − η K D with K = H Hᵀ (m × m, one
    small batched product), and W = W(0) + Cᵀ H with C = −Σ_k η D_k."""
    import torch

    from .gd_torch import run_ce_logits

    H = batch.H
    with torch.inference_mode():
        K = torch.bmm(H, H.mT)  # (R, m, m)
        w = batch.pi[..., None]  # (R, m, 1)
        # |D_kz| ≤ η π_k: a step moves A_jz by at most Σ_k |K_jk| η π_k (one host synchronisation)
        drift = float(torch.bmm(K.abs(), w * lr).max()) if H.shape[0] else 0.0
        return run_ce_logits(
            model, W0, cfg, lr, record_every, A0=torch.bmm(H, W0.mT), target=batch.P, weight=w,
            apply=lambda D, out: torch.bmm(K, D, out=out), to_W=lambda C: torch.bmm(C.mT, H),
            loss_of=lambda Wk: ce_torch(batch, Wk), drift=drift)


#: The linear NTP model (stateless: one instance serves every run).
LINEAR_NTP_MODEL = LinearNTPModel()


def run_linear_gd(probs: Any, *, steps: int, lr: Any, record_at: Any, init: Any = None,
                  device: Any = "cpu") -> NTPGDResult:
    """Plain GD on CE from ``init`` (R, V, d) (default W = 0) for linear NTP problems of one shape, one step
    size each (or one for all), on the GD engine (:class:`LinearNTPModel`); recorded at ``record_at`` and the
    last iteration (W_traj (S, R, V, d))."""
    batch = LinearNTPBatch.of(probs, device)
    R, V, d = batch.H.shape[0], batch.P.shape[-1], batch.H.shape[-1]
    return run_model_gd(LINEAR_NTP_MODEL, batch, steps=steps, lr=lr, record_at=record_at,
                        init=np.zeros((R, V, d)) if init is None else init, device=device)


#: Family rule (a design margin): every support probability ≥ P_MIN, so the log-ratios W⋆ fits are at most
#: log(1/P_MIN). Without it Dirichlet(1) draws give probabilities of 4e-4 (measured, paper profile seed 0
#: #189, #197): ‖W⋆‖ = 6–8 on a flat CE, whose finite part GD approaches far more slowly than the off-support
#: mass falls.
P_MIN = 0.05


def random_linear_ntp(rng: np.random.Generator, m: int, d: int, V: int, *, support: int = 2,
                      full: bool = False) -> LinearNTP:
    """Gaussian contexts (N(0, I/d)), uniform π, supports of ``support`` random tokens (all V if ``full``)
    with Dirichlet(1) probabilities on them, redrawn on partial supports until each is ≥ P_MIN."""
    H = rng.standard_normal((m, d)) / np.sqrt(d)
    P = np.zeros((m, V))
    for j in range(m):
        S = np.arange(V) if full else rng.choice(V, size=support, replace=False)
        p = rng.dirichlet(np.ones(len(S)))
        while not full and p.min() < P_MIN:  # the family's margin (P_MIN); full supports keep any draw
            p = rng.dirichlet(np.ones(len(S)))
        P[j, S] = p
    return LinearNTP(H, P, np.full(m, 1.0 / m))


__all__ = ["LinearNTP", "ce", "smoothness", "f_basis", "w_star", "NTPSVMResult", "ntp_svm",
           "off_support_mass", "run_linear_gd", "LinearNTPBatch", "LinearNTPModel", "LINEAR_NTP_MODEL",
           "ce_torch", "ce_grad_torch", "random_linear_ntp", "project", "hessian_ce", "regularization_path"]
