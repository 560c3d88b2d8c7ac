r"""The Gen-SVM finite part as an optimisation problem, and an instance family that selects several tokens.

TLTO's general SVM equivalence (THEORY.md §3) splits GD's iterate into a part that diverges along W^dir and a
finite part on S_fin = span{(x_it − x_iτ) z_i^T : t, τ ∈ O_i} that fixes the attention among the selected
tokens O_i. The paper reads W^fin off an iterate's own log-ratios; here it is *predicted* without GD: once
the masked tokens' probabilities vanish, the loss seen by the selected tokens is

    L_O(W) = (1/n) Σ_i ℓ(y_i h(Σ_{t ∈ O_i} softmax_{O_i}(X_i W z_i)_t x_it)),

which depends on W only through its projection P_fin W onto S_fin (the log-ratios inside each O_i), so the
finite part GD settles on is W^fin⋆ = argmin_{W ∈ S_fin} L_O(W) (:func:`finite_part`; the characterisation
Li et al. 2024 prove for next-token prediction). The solve is numpy + scipy, independent of the torch
numerics that GD runs on (numerics.attention), so a defect in those is not copied into the prediction.

With a ReLU head and random data a multi-token optimum needs a kink or a dead head (gen-svm's docstring
and the ``multi-token`` reproduction measure this); :func:`coupled_selection` builds instances whose
optimum selects two tokens for every example *by construction*: all examples share the query z and the
token pair (a, b); n₊ examples with y = +1 prefer a (larger h), n₋ < n₊ with y = −1 prefer b, and the
shared log-ratio θ = (b − a)^T W z settles at the interior minimiser θ⋆ of Σ_i ℓ(y_i h(u(θ))),
u(θ) = (1 − σ(θ)) a + σ(θ) b (σ the logistic function). Each example has T − 2 further tokens that are worse
for it than every point of the (a, b) edge, so GD masks them. Tokens are orthogonal directions (a random
rotation of scaled basis vectors), so the masked tokens' logits move independently of each other and of θ.

Example
-------
>>> import numpy as np
>>> inst = coupled_selection(np.random.default_rng(0), 6, 2, 1)
>>> inst.data.n, inst.data.T, [o.tolist() for o in inst.selected]
(3, 3, [[0, 1], [0, 1], [0, 1]])
>>> fp = finite_part(inst.data, inst.V, inst.selected)
>>> bool(fp.unique and abs(fp.log_ratios[0][0] - inst.theta) < 1e-6)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from .data import AttentionData
from .errors import InvalidInputError
from .losses import LOSS_DERIV_NP, LOSS_NP
from .tokens import softmax_rows

#: The finite-part solve stops at |∇L_O| ≤ 1e-12 (BFGS on a problem of ≤ a few dimensions with O(1)
#: curvature): the minimiser is then exact to ~1e-10, far below the 1e-2 scale at which GD's approach to it
#: is judged.
FIN_GTOL = 1e-12
#: Two starts that end farther apart than this (in ‖W‖_F) mean L_O has no unique minimiser on S_fin.
FIN_UNIQUE_TOL = 1e-6
#: |β| beyond this: the minimiser runs off to infinity (a vertex of the selected face is optimal, so the
#: selected set is not a finite optimum). Log-ratios of 40 are probabilities of e^{-40}, far below τ_L.
FIN_UNBOUNDED = 40.0
#: (d, n₊, n₋) of :func:`coupled_selection` used by the catalogue (gen-svm, gen-svm-finite), cycled by
#: instance; n₋ < n₊ and d ≥ 2 + n. (3, 2) splits are rare under the design rules (h⋆ = ln 1.5 is small).
CATALOGUE_CONFIGS = ((6, 2, 1), (8, 3, 1), (10, 2, 1), (12, 3, 1))
#: The design margins of :func:`coupled_selection` (see its docstring).
KINK_MARGIN = 0.02  # relative: |v_j^T u⋆| ≥ KINK_MARGIN |u⋆| / √d
MASK_MARGIN = 0.3
THETA_MAX = 8.0
#: (4) L_O's curvature at its minimiser on S_fin: GD's finite part sits off it by ~(masked probability ×
#: O(1)) / curvature, so a flat optimum (measured: 1e-5 on one quick draw, whose iterate drifted away from
#: it for 20000 steps) cannot be reached within a budget; 5e-4 keeps ~95 % of draws.
DESIGN_CURVATURE = 5e-4
#: θ grid on which rule (3) of :func:`coupled_selection` is imposed (spacing 5e-3 along the (a, b) edge).
_GRID = np.linspace(-10.0, 10.0, 4001)
#: σ(θ) at the ends of that grid: rule (1) is decided on the same range of the edge.
_S_LO, _S_HI = 1.0 / (1.0 + np.exp(10.0)), 1.0 / (1.0 + np.exp(-10.0))


def relu_head(V: np.ndarray, u: np.ndarray) -> np.ndarray:
    """h(u) = 1^T ReLU(V^T u) for u (..., d)."""
    return np.maximum(u @ V, 0.0).sum(-1)


def relu_head_grad(V: np.ndarray, u: np.ndarray) -> np.ndarray:
    """∇h(u) = V 1[V^T u > 0] for u (..., d)."""
    return (u @ V > 0).astype(float) @ V.T


@dataclass(frozen=True)
class FinitePart:
    """W^fin⋆ = argmin_{W ∈ S_fin} L_O(W) and what the solve found."""

    W: np.ndarray  # (d, d), in S_fin
    basis: np.ndarray  # (k, d, d) orthonormal basis of S_fin (k = 0: no example selects two tokens)
    log_ratios: tuple[np.ndarray, ...]  # per example: log(s_it / s_it0) for t ∈ O_i[1:] at W
    loss_value: float
    grad_norm: float
    unique: bool  # two starts agree, the gradient vanishes and the minimiser is finite
    message: str
    curvature: float = (
        0.0  # smallest eigenvalue of L_O's Hessian on S_fin at the minimiser (central differences)
    )

    def project(self, W: Any) -> np.ndarray:
        """P_fin W: the orthogonal projection of W onto S_fin."""
        W = np.asarray(W, dtype=float)
        if not len(self.basis):
            return np.zeros_like(W)
        return np.einsum("k,kde->de", np.einsum("kde,de->k", self.basis, W), self.basis)


def fin_basis(data: AttentionData, selected) -> np.ndarray:
    """Orthonormal basis (k, d, d) of S_fin = span{(x_it − x_it0) z_i^T : t ∈ O_i}."""
    d = data.d
    rows = [np.outer(data.X[i, t] - data.X[i, O[0]], data.Z[i]).ravel()
            for i, O in enumerate(selected) for t in O[1:]]
    if not rows:
        return np.zeros((0, d, d))
    U, s, _ = np.linalg.svd(np.array(rows).T, full_matrices=False)
    k = int(np.sum(s > 1e-10 * s[0]))
    return U[:, :k].T.reshape(k, d, d)


def _restricted(data, V, selected, basis, loss):
    """L_O and its gradient in the coordinates β of W = Σ_k β_k B_k (examples with the same |O_i| evaluated
    together)."""
    groups: dict[int, list[int]] = {}
    for i, O in enumerate(selected):
        if len(O) >= 2:
            groups.setdefault(len(O), []).append(i)
    parts = []
    for idx in groups.values():
        ii = np.array(idx)
        Os = np.array([np.asarray(selected[i]) for i in idx])  # (g, k)
        parts.append((data.X[ii[:, None], Os], data.Z[ii], data.Y[ii]))  # Xo (g, k, d), z (g, d), y (g,)
    n, ell, dell = data.n, LOSS_NP[loss], LOSS_DERIV_NP[loss]

    def f(beta):
        W = np.einsum("k,kde->de", beta, basis)
        val, G = 0.0, np.zeros_like(W)
        for Xo, z, y in parts:
            lg = np.einsum("gkd,gd->gk", Xo, z @ W.T)  # x_it^T W z_i
            s = softmax_rows(lg)
            u = np.einsum("gk,gkd->gd", s, Xo)
            pre = u @ V
            m = y * np.maximum(pre, 0.0).sum(1)  # y_i h(u_i)
            val += float(ell(m).sum())
            gh = (pre > 0).astype(float) @ V.T  # ∇h(u_i)
            gam = y[:, None] * np.einsum("gkd,gd->gk", Xo, gh)  # γ_t = y x_t^T ∇h(u)
            c = dell(m)[:, None] * s * (gam - (s * gam).sum(1, keepdims=True))  # ℓ'·(diag s − s s^T) γ
            G += np.einsum("gkd,gk,ge->de", Xo, c, z)
        return val / n, np.einsum("kde,de->k", basis, G) / n

    return f


def finite_part(data: AttentionData, V: Any, selected, *, loss: str = "logistic",
                seed: int = 0) -> FinitePart:
    """W^fin⋆ = argmin_{W ∈ S_fin} L_O(W) for a ReLU head h(u) = 1^T ReLU(V^T u) (see the module docstring).

    BFGS from β = 0 and from a random start; ``unique`` when both reach |∇| ≤ 1e-8 at the same point within
    :data:`FIN_UNIQUE_TOL` and inside |β| ≤ :data:`FIN_UNBOUNDED`."""
    if loss not in ("logistic", "exponential"):
        raise InvalidInputError(f"finite_part supports the logistic and exponential losses, got {loss!r}")
    V = np.asarray(V, dtype=float)
    basis = fin_basis(data, selected)
    k = len(basis)
    if k == 0:
        return FinitePart(np.zeros((data.d, data.d)), basis, tuple(np.zeros(0) for _ in selected), 0.0, 0.0,
                          True, "no example selects two tokens: S_fin = {0}")
    f = _restricted(data, V, selected, basis, loss)
    starts = [np.zeros(k), np.random.default_rng(seed).standard_normal(k)]
    sols = [minimize(f, b0, jac=True, method="BFGS", options={"gtol": FIN_GTOL, "maxiter": 2000})
            for b0 in starts]
    best = min(sols, key=lambda r: r.fun)
    W = np.einsum("k,kde->de", best.x, basis)
    gnorm = float(np.linalg.norm(f(best.x)[1]))
    spread = max(float(np.linalg.norm(r.x - best.x)) for r in sols)
    bounded = float(np.max(np.abs(best.x))) <= FIN_UNBOUNDED
    unique = bounded and spread <= FIN_UNIQUE_TOL and gnorm <= 1e-8
    msg = ("" if unique else
           "minimiser runs off to infinity (a vertex of the selected face is optimal)" if not bounded else
           f"starts disagree by {spread:.2g} or |grad| = {gnorm:.2g}: no unique finite minimiser")
    lr = tuple(np.array([float((data.X[i, t] - data.X[i, O[0]]) @ W @ data.Z[i]) for t in O[1:]])
               for i, O in enumerate(selected))
    curv = _min_curvature(f, best.x)
    return FinitePart(W, basis, lr, float(best.fun), gnorm, unique, msg, curv)


def _min_curvature(f, beta: np.ndarray) -> float:
    """Smallest eigenvalue of the Hessian of f (value, gradient) at β, by central differences of the analytic
    gradient."""
    h = 1e-5  # central differences of the analytic gradient: error O(h²) ~ 1e-10, far below curvatures judged
    H = np.array([(f(beta + h * e)[1] - f(beta - h * e)[1]) / (2 * h) for e in np.eye(len(beta))])
    return float(np.linalg.eigvalsh(0.5 * (H + H.T)).min())


def curvature_at(data: AttentionData, V: Any, selected, W: Any, *, loss: str = "logistic") -> float:
    """Smallest eigenvalue of L_O's Hessian on S_fin at P_fin W (0.0 when S_fin = {0}): how strongly L_O, the
    loss the finite part descends once the masked tokens vanish, pulls at the point W projects to. Near
    W^fin⋆ it equals ``FinitePart.curvature``; in L_O's flat tail (a selected token's probability saturating
    towards 0) it is ~0 or negative."""
    basis = fin_basis(data, selected)
    if not len(basis):
        return 0.0
    f = _restricted(data, np.asarray(V, dtype=float), selected, basis, loss)
    return _min_curvature(f, np.einsum("kde,de->k", basis, np.asarray(W, dtype=float)))


def restricted_gradient(data: AttentionData, V: Any, selected, W: Any, *,
                        loss: str = "logistic") -> np.ndarray:
    """∇L_O at P_fin W as a (d, d) matrix in S_fin (zeros when S_fin = {0}). Subtracted from P_fin ∇L(W) (the
    full loss, masked tokens included) it leaves the masked tokens' pull on the finite part, which vanishes
    with their probabilities."""
    basis = fin_basis(data, selected)
    W = np.asarray(W, dtype=float)
    if not len(basis):
        return np.zeros_like(W)
    f = _restricted(data, np.asarray(V, dtype=float), selected, basis, loss)
    g = f(np.einsum("kde,de->k", basis, W))[1]
    return np.einsum("k,kde->de", g, basis)


@dataclass(frozen=True)
class CoupledInstance:
    """One draw of :func:`coupled_selection`."""

    data: AttentionData
    V: np.ndarray  # (d, d) ReLU head
    theta: float  # θ⋆ = log(s_b / s_a) at the designed optimum (logistic loss)
    selected: tuple[np.ndarray, ...]  # O_i = (0, 1) for every i: tokens a, b
    masked: tuple[np.ndarray, ...]  # Ō_i = (2, ..., T − 1)
    attempts: int


def edge_optimum(alpha: np.ndarray, beta: np.ndarray, n_pos: int, n_neg: int) -> float | None:
    """θ⋆ = argmin F on θ ∈ [−10, 10], decided exactly; None unless F is unimodal there (rule (1) of
    :func:`coupled_selection`).

    Along the edge u(θ) = (1 − s) a + s b, s = σ(θ), every example sees the same head value
    h(s) = Σ_j ReLU(α_j + s (β_j − α_j)) with α = V^T a, β = V^T b: piecewise linear and convex in s, with
    kinks where a pre-activation changes sign. So F = Σ_i ℓ(y_i h) = G(h(s)) with G(h) = n₊ ℓ(h) + n₋ ℓ(−h),
    strictly convex with its minimum at h⋆ = ln(n₊/n₋) for the logistic loss. On each piece between kinks
    F = G(affine) is convex, and it is monotone on each side of the point where h = h⋆. Evaluating F at the
    ends of the range, at every kink and at every crossing h = h⋆ therefore gives a finite sequence that is
    unimodal exactly when F is, with the same minimiser: no grid, no line search (a grid of spacing 5e-3
    misses two minima closer than that, and each line search cost ~20 evaluations of h).

    >>> a, b = np.array([1.0, -1.0]), np.array([-1.0, 2.0])  # h(s) = max(1 − 2s, 0) + max(3s − 1, 0)
    >>> edge_optimum(a, b, 2, 1) is None  # min h = 1/3 < ln 2 at the kink s = 1/3: two crossings, two minima
    True
    >>> th = edge_optimum(np.array([1.0]), np.array([-1.0]), 2, 1)  # h = max(1 − 2s, 0) = ln 2 once
    >>> round(th, 12) == round(float(np.log((1 - np.log(2)) / (1 + np.log(2)))), 12)
    True
    """
    th = float(_edge_optima(np.atleast_2d(alpha), np.atleast_2d(beta), n_pos, n_neg)[0])
    return None if np.isnan(th) else th


def _edge_optima(alpha: np.ndarray, beta: np.ndarray, n_pos: int, n_neg: int) -> np.ndarray:
    """:func:`edge_optimum` for a block of draws (B, d) at once (nan for None). Draws have different numbers
    of kinks in range and of crossings; the missing ones are filled with copies of the left end of the range,
    which add zero steps to F's sequence and change neither its minimiser nor the unimodality test."""
    B = len(alpha)
    delta = beta - alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        kinks = -alpha / delta
    kinks = np.where((delta != 0) & (kinks > _S_LO) & (kinks < _S_HI), kinks, _S_LO)
    pts = np.sort(np.concatenate((np.full((B, 1), _S_LO), np.full((B, 1), _S_HI), kinks), axis=1), axis=1)
    h_star = float(np.log(n_pos / n_neg))
    r = np.maximum(alpha[:, None, :] + pts[:, :, None] * delta[:, None, :], 0.0).sum(2) - h_star
    lo, hi, rl, rh = pts[:, :-1], pts[:, 1:], r[:, :-1], r[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(rl * rh < 0, lo + (hi - lo) * rl / (rl - rh), _S_LO)
    s = np.sort(np.concatenate((pts, cross), axis=1), axis=1)
    h = np.maximum(alpha[:, None, :] + s[:, :, None] * delta[:, None, :], 0.0).sum(2)
    F = n_pos * LOSS_NP["logistic"](h) + n_neg * LOSS_NP["logistic"](-h)
    k = np.argmin(F, axis=1)
    dF = np.diff(F, axis=1)
    flat = 1e-12 * np.max(np.abs(F), axis=1, keepdims=True)
    before = np.arange(dF.shape[1])[None, :] < k[:, None]
    unimodal = ~np.any((before & (dF > flat)) | (~before & (dF < -flat)), axis=1)
    sk = s[np.arange(B), k]
    theta = np.log(sk) - np.log1p(-sk)
    return np.where(unimodal & (np.abs(theta) <= THETA_MAX), theta, np.nan)


def _place_masked(E: np.ndarray, gh: np.ndarray, hU: np.ndarray, Y: np.ndarray, T: int) -> np.ndarray | None:
    """Tokens X (n, T, d): a = E[0], b = E[1], then one direction E[k] per masked token, signed and scaled so
    that y_i ∇h(u)·(c − u) ≤ −MASK_MARGIN at every grid point u of the (a, b) edge (∇h(u)·u = h(u): ReLU is
    1-homogeneous), rule (3) of :func:`coupled_selection`; None when some token cannot be placed."""
    n, d = len(Y), E.shape[1]
    X = np.zeros((n, T, d))
    X[:, 0], X[:, 1] = E[0], E[1]
    nxt = 2
    for i, y in enumerate(Y):
        for t in range(2, T):
            e = E[nxt]
            nxt += 1
            g = gh @ e
            if y < 0:  # need r ∇h·e ≥ h(u) + margin along the edge: e with ∇h·e > 0, r large enough
                if g.min() <= 0:
                    e, g = -e, -g
                r = float(np.max((hU + MASK_MARGIN) / g)) if g.min() > 0 else np.inf
            else:  # need r ∇h·e ≤ h(u) − margin along the edge: e with ∇h·e < 0 where possible
                if g.min() > 0:
                    e, g = -e, -g
                pos = g > 0
                r = 1.0 if not pos.any() else min(1.0, float(np.min((hU[pos] - MASK_MARGIN) / g[pos])))
            if not (0.2 <= r <= 4.0 and bool(np.all(y * (r * g - hU) <= -MASK_MARGIN))):
                return None
            X[i, t] = r * e
    return X


def coupled_selection(rng: np.random.Generator, d: int, n_pos: int, n_neg: int, *, T: int = 3,
                      max_attempts: int = 2000) -> CoupledInstance:
    """A dataset whose logistic-loss optimum selects two tokens in every example, by construction.

    Tokens: a = e_1, b = e_2 and example i's masked tokens r·e_k (k ≥ 3, one direction each), all rotated by
    one random orthogonal matrix; one shared unit query z; y = +1 for the first ``n_pos`` examples, −1 for
    the last ``n_neg`` (n_neg < n_pos); V (d × d) with N(0, 1/d) entries. A draw is kept when
    (1) F(θ) = Σ_i ℓ(y_i h(u(θ))) is unimodal on [−10, 10] with its minimiser θ⋆ inside |θ⋆| ≤ THETA_MAX
        (decided exactly by :func:`edge_optimum`, which also gives θ⋆ in closed form);
    (2) every ReLU pre-activation at u⋆ = u(θ⋆) is at least KINK_MARGIN |u⋆|/√d away from 0 (they are
        ~N(0, |u⋆|²/d): 2 % of their spread, so the optimum is off every kink and L_O is smooth near it);
    (3) every masked token c of example i is worse than every point u of the (a, b) edge by MASK_MARGIN:
        y_i ∇h(u)·(c − u) ≤ −MASK_MARGIN (its scale r ∈ [0.2, 4] and sign are chosen for this), so adding
        attention to c raises example i's loss wherever θ is;
    (4) L_O has a unique finite minimiser on S_fin (:func:`finite_part`) with curvature ≥ DESIGN_CURVATURE.
    Needs d ≥ 2 + n (T − 2). Raises InvalidInputError if no draw qualifies within ``max_attempts``.
    """
    n = n_pos + n_neg
    if not 0 < n_neg < n_pos:
        raise InvalidInputError(f"coupled_selection needs 0 < n_neg < n_pos, got {n_pos}, {n_neg}")
    if T < 3 or d < 2 + n * (T - 2):
        raise InvalidInputError(f"coupled_selection needs T ≥ 3 and d ≥ 2 + n(T − 2) = {2 + n * (T - 2)}, "
                                f"got T = {T}, d = {d}")
    Y = np.array([1.0] * n_pos + [-1.0] * n_neg)
    sig = 1.0 / (1.0 + np.exp(-_GRID))
    per = 2 * d * d + d  # normals per attempt: the rotation's d × d, V's d × d, z's d (in this order)
    for attempt, raw, settle in _attempts(rng, per, max_attempts, lambda raw: _pretest(raw, d, n_pos, n_neg)):
        E = np.linalg.qr(raw[: d * d].reshape(d, d))[0].T  # orthonormal rows
        a, b = E[0], E[1]
        V = raw[d * d: 2 * d * d].reshape(d, d) / np.sqrt(d)
        z = raw[2 * d * d:].copy()
        z /= np.linalg.norm(z)
        theta = edge_optimum(a @ V, b @ V, n_pos, n_neg)  # rule (1) (the pre-test dropped most failures)
        if theta is None:
            continue
        ustar = (1 - 1 / (1 + np.exp(-theta))) * a + b / (1 + np.exp(-theta))
        if np.min(np.abs(ustar @ V)) < KINK_MARGIN * np.linalg.norm(ustar) / np.sqrt(d):
            continue
        U = (1 - sig)[:, None] * a + sig[:, None] * b
        X = _place_masked(E, relu_head_grad(V, U), relu_head(V, U), Y, T)
        if X is None:
            continue
        data = AttentionData(X, Y, np.tile(z, (n, 1)))
        sel = tuple(np.array([0, 1]) for _ in range(n))
        fp = finite_part(data, V, sel)
        if not fp.unique or fp.curvature < DESIGN_CURVATURE:
            continue
        msk = tuple(np.arange(2, T) for _ in range(n))
        settle()
        return CoupledInstance(data, V, theta, sel, msk, attempt)
    raise InvalidInputError(f"coupled_selection found no qualifying draw in {max_attempts} attempts "
                            f"(d = {d}, n_pos = {n_pos}, n_neg = {n_neg}, T = {T})")


#: Draws examined per block by :func:`_attempts` (rule (1) is decided for a whole block at once).
_BLOCK = 64


def _pretest(raw: np.ndarray, d: int, n_pos: int, n_neg: int) -> np.ndarray:
    """Which draws of a block (B, 2d² + d) of raw attempts can pass rules (1) and (2): a cheap filter ahead of
    the one-draw code, which decides every draw it lets through. Rule (1) as :func:`edge_optimum` decides it
    (on (α, β) from a batched QR and matmul), rule (2) with a 1e-9 relative slack, so that no draw the
    one-draw rules keep is dropped (tested)."""
    B = len(raw)
    E = np.swapaxes(np.linalg.qr(raw[:, : d * d].reshape(B, d, d))[0], -1, -2)
    V = raw[:, d * d: 2 * d * d].reshape(B, d, d) / np.sqrt(d)
    a, b = E[:, :1], E[:, 1:2]  # (B, 1, d)
    theta = _edge_optima(np.matmul(a, V)[:, 0], np.matmul(b, V)[:, 0], n_pos, n_neg)
    ok = ~np.isnan(theta)
    sig = 1 / (1 + np.exp(-np.where(ok, theta, 0.0)))[:, None, None]
    ustar = (1 - sig) * a + sig * b
    pre = np.abs(np.matmul(ustar, V)[:, 0]).min(1)
    return ok & (pre >= (1 - 1e-9) * KINK_MARGIN * np.linalg.norm(ustar[:, 0], axis=1) / np.sqrt(d))


def _attempts(rng: np.random.Generator, per: int, max_attempts: int, keep):
    """Yield (attempt number, its ``per`` standard normals, settle) for the draws that ``keep`` (a vectorised
    pre-test on a (B, per) block) lets through, in order, exactly as if each attempt had drawn its normals
    one after another: a block is drawn ahead (numpy's Generator fills an array with the same normals as
    successive draws, tested), and ``settle()`` re-positions the generator after the attempt yielded, so a
    caller that accepts attempt k and calls it leaves ``rng`` where k sequential draws would have left it."""
    done = 0
    while done < max_attempts:
        B = min(_BLOCK, max_attempts - done)
        state = rng.bit_generator.state
        raw = rng.standard_normal(B * per).reshape(B, per)
        for j in np.nonzero(keep(raw))[0]:

            def settle(j=j, state=state):
                rng.bit_generator.state = state
                rng.standard_normal((j + 1) * per)

            yield done + j + 1, raw[j], settle
        done += B


#: (d, splits) of :func:`coupled_selection_multi` used by gen-svm (d ≥ 2 + n(T − 2) at T = 3): two query
#: groups with the same split. Different splits (e.g. (2, 1) and (3, 1), balancing at h⋆ = ln 2 and ln 3) need
#: both h⋆ crossed on one edge away from its kinks: 1 draw in 3000 qualified (measured); with one split, 10
#: draws took 23–1433 attempts (0.07 s per instance; gen-svm reports them as metric ``family_draws``).
MULTI_CONFIGS = ((8, ((2, 1), (2, 1))), (10, ((3, 1), (3, 1))))


def coupled_selection_multi(rng: np.random.Generator, d: int, splits, *, T: int = 3,
                            max_attempts: int = 50000) -> CoupledInstance:
    """:func:`coupled_selection` with one query per group: S_fin of dimension len(splits) (issue 23).

    Group g has its own unit query z_g and labels (n₊_g, n₋_g) (n₋_g < n₊_g); every example shares the token
    pair (a, b) and the head V, and has its own masked tokens. The log-ratio of group g is
    θ_g = (b − a)^T W z_g, so S_fin = span{(b − a) z_g^T} has dimension len(splits) (the z_g are linearly
    independent almost surely), and L_O is a sum over groups of the one-query F_g(θ_g): W^fin⋆ has
    θ_g = θ⋆_g, each group's own balance on the edge. A draw is kept when rules (1)–(2) of
    :func:`coupled_selection` hold for every group (:func:`edge_optimum` for its split, the ReLU
    pre-activations at u(θ⋆_g) off every kink), rule (3) for every example, and rule (4) (unique finite
    minimiser of L_O on S_fin with smallest curvature ≥ DESIGN_CURVATURE, and dim S_fin = len(splits)).
    ``theta`` is θ⋆ of the first group; ``attempts`` counts the draws examined (reported by gen-svm).
    About 1 draw in 300 qualifies, with a long tail (2000 attempts missed on 2 of 120 quick instances, seeds
    0–9), hence max_attempts = 50000 (≈ 0.2 ms each)."""
    n = sum(p + m for p, m in splits)
    if not splits or any(not 0 < m < p for p, m in splits):
        raise InvalidInputError(f"coupled_selection_multi needs 0 < n_neg < n_pos in every split, "
                                f"got {splits}")
    if T < 3 or d < 2 + n * (T - 2):
        raise InvalidInputError(f"coupled_selection_multi needs T ≥ 3 and d ≥ 2 + n(T − 2) = "
                                f"{2 + n * (T - 2)}, got T = {T}, d = {d}")
    Y = np.concatenate([[1.0] * p + [-1.0] * m for p, m in splits])
    sig = 1.0 / (1.0 + np.exp(-_GRID))
    for attempt in range(1, max_attempts + 1):
        E = np.linalg.qr(rng.standard_normal((d, d)))[0].T
        V = rng.standard_normal((d, d)) / np.sqrt(d)
        zs = rng.standard_normal((len(splits), d))
        zs /= np.linalg.norm(zs, axis=1, keepdims=True)
        a, b = E[0], E[1]
        found = [edge_optimum(a @ V, b @ V, p, m) for p, m in splits]  # rule (1), per group
        if any(t is None for t in found):
            continue
        thetas = [float(t) for t in found if t is not None]
        us = [(1 - 1 / (1 + np.exp(-t))) * a + b / (1 + np.exp(-t)) for t in thetas]
        if any(np.min(np.abs(u @ V)) < KINK_MARGIN * np.linalg.norm(u) / np.sqrt(d) for u in us):  # rule (2)
            continue
        U = (1 - sig)[:, None] * a + sig[:, None] * b
        X = _place_masked(E, relu_head_grad(V, U), relu_head(V, U), Y, T)  # rule (3)
        if X is None:
            continue
        Z = np.concatenate([np.tile(z, (p + m, 1)) for z, (p, m) in zip(zs, splits, strict=True)])
        data = AttentionData(X, Y, Z)
        sel = tuple(np.array([0, 1]) for _ in range(n))
        fp = finite_part(data, V, sel)  # rule (4)
        if len(fp.basis) != len(splits) or not fp.unique or fp.curvature < DESIGN_CURVATURE:
            continue
        msk = tuple(np.arange(2, T) for _ in range(n))
        return CoupledInstance(data, V, float(thetas[0]), sel, msk, attempt)
    raise InvalidInputError(f"coupled_selection_multi found no qualifying draw in {max_attempts} attempts "
                            f"(d = {d}, splits = {splits}, T = {T})")
