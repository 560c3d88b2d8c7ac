"""TLZO's regularisation paths of the prompt p (numerics.prompt has the model, its loss, gradient and GD):
p_R = argmin_{‖p‖ ≤ R} L(p), globally or restricted to a cone around a locally optimal direction
(:func:`prompt_reg_path`), and the same path with a nonlinear (ReLU) head (:func:`prompt_head_reg_path`),
compared by the excess loss E = L − L_∞, which keeps full precision where L is flat in float64."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .attention import softmax_logits
from .errors import InfeasibleError, InvalidInputError, SolverError
from .gd import GDConfig, Geometry, Model, run_gd

#: Catalogue losses ℓ(u) and ℓ'(u) (THEORY.md §1), torch, elementwise.
from .prompt import _centred, prompt_grad

# ------------------------------------------------------------------------------------------------
# regularisation path of p (global, or restricted to a cone)
# ------------------------------------------------------------------------------------------------


def prompt_excess(K: torch.Tensor, g: torch.Tensor, p: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """E_ref(p) = L(p) − (1/n) Σ_i ℓ(γ_{i ref_i}) for the logistic loss, accurate however small (batched:
    K (R, n, T, dk), g (R, n, T), p (R, dk), ref (R, n) token indices -> (R,)).

    With a_i = γ_{i ref_i} and δ_i = Σ_t s_it (a_i − γ_it) (= a_i − γ_i^T s_i, exact zero term at ref_i):
    ℓ(a − δ) − ℓ(a) = softplus(δ − a) − softplus(−a) = log1p(expm1(δ) σ(−a)). L itself tends to a constant
    on the path and loses its p-dependence to rounding at ‖p‖ ≈ 30; E keeps full relative precision (its terms
    are the non-selected tokens' softmax tails), so minimisers can be compared at any radius. E ≥ 0 when
    ref selects each example's highest score; for another ref it can be negative.
    """
    s = softmax_logits(torch.einsum("rntk,rk->rnt", K, p))
    a = torch.gather(g, -1, ref[..., None])[..., 0]  # (R, n)
    delta = (s * (a[..., None] - g)).sum(-1)
    return torch.log1p(torch.expm1(delta) * torch.sigmoid(-a)).mean(-1)


@dataclass(frozen=True)
class PromptPath:
    """The path at radii (S,): p (B, S, dk) with ‖p‖ = R; excess (B, S) = E_ref at p (``prompt_excess``);
    start_excess (B, S): the best E_ref among the starting points at that radius (before optimisation);
    stationarity (B, S): ‖projected tangential gradient‖ / |radial gradient| at p (≈ the angle to the
    constrained minimiser on the sphere, 0 at a first-order constrained minimiser)."""

    radii: np.ndarray
    p: np.ndarray
    excess: np.ndarray
    start_excess: np.ndarray
    stationarity: np.ndarray


def _cone_project(u: torch.Tensor, c: torch.Tensor, cos_max: float) -> torch.Tensor:
    """Unit vectors u (M, dk) moved onto the cone {corr(u, c) ≥ cos_max} (c unit, (M, dk)) along the great
    circle."""
    cc = (u * c).sum(-1, keepdim=True)
    w = u - cc * c
    wn = torch.linalg.vector_norm(w, dim=-1, keepdim=True)
    w = torch.where(wn > 0, w / torch.where(wn > 0, wn, 1.0), torch.zeros_like(w))
    sin_max = float(np.sqrt(max(0.0, 1.0 - cos_max**2)))
    on = cos_max * c + sin_max * w
    return torch.where(cc < cos_max, on, u)


def _tangent_step(grad, P, R, cone, cos_max):
    """Descent direction on the sphere (unit, tangent; projected at the cone boundary) and the stationarity
    ratio ‖it‖/|radial gradient| for points P (M, dk) of norm R; ``grad(P)`` is ∇L at P."""
    return _tangent_dir(grad(P), P, R, cone, cos_max)


def _tangent_dir(G, P, R, cone, cos_max):
    """:func:`_tangent_step` from the gradient G = ∇L(P) (M, dk)."""
    u = P / R
    rad = (G * u).sum(-1, keepdim=True)
    D = -(G - rad * u)  # the descent direction in the tangent space
    if cone is not None:
        cc = (u * cone).sum(-1, keepdim=True)
        out = cc * u - cone  # tangent direction pointing away from the cone's axis
        on = torch.linalg.vector_norm(out, dim=-1, keepdim=True)
        out = torch.where(on > 0, out / torch.where(on > 0, on, 1.0), torch.zeros_like(out))
        push = (D * out).sum(-1, keepdim=True)
        at_boundary = cc <= cos_max * (1 + 1e-9)
        D = torch.where(at_boundary & (push > 0), D - push * out, D)
    dn = torch.linalg.vector_norm(D, dim=-1, keepdim=True)
    stat = (dn / rad.abs().clamp_min(torch.finfo(G.dtype).tiny))[:, 0]
    return D, dn, stat


def _check_path_args(B, n, T, dk, radii, ref, steps, lr, restarts, cone, cone_mu):
    r_arr = np.asarray(radii, dtype=float)
    if r_arr.ndim != 1 or r_arr.size == 0 or np.any(~np.isfinite(r_arr)) or np.any(r_arr <= 0):
        raise InvalidInputError(f"radii must be a non-empty 1-D sequence of numbers > 0, got {radii!r}")
    if steps < 1 or lr <= 0 or restarts < 1:
        raise InvalidInputError(f"steps, restarts must be >= 1 and lr > 0, got {steps}, {restarts}, {lr}")
    refs = np.asarray(ref)
    if refs.shape != (B, n) or refs.dtype.kind not in "iu" or np.any(refs < 0) or np.any(refs >= T):
        raise InvalidInputError(f"ref must be ({B}, {n}) token indices, got {refs!r}")
    c, cos_max = None, None
    if cone is not None:
        if cone_mu is None or not 0 < cone_mu < 1:
            raise InvalidInputError(f"cone_mu must lie in (0, 1) with a cone, got {cone_mu!r}")
        c = np.asarray(cone, dtype=float).reshape(B, dk)
        c = c / np.linalg.norm(c, axis=-1, keepdims=True)
        cos_max = 1.0 - float(cone_mu)
    return r_arr, refs, c, cos_max


@dataclass(frozen=True, eq=False)
class OnSphere(Geometry):
    """The prompt paths' geometry on the GD engine (numerics.gd.run_gd): normalised Riemannian GD on the
    sphere ‖p‖ = ``radius``. The parameter is the unit direction u (M, dk) of p = radius·u; step k of
    ``steps`` rotates u by the angle lr·(1 − k/steps) (:meth:`step_size`, a decaying schedule) along the
    tangential descent direction of the gradient at p (projected at the boundary of the cone {corr(u, cone) ≥
    cos_max} when ``cone``, unit axes (M, dk), is given), renormalises it and moves it back onto the cone."""

    radius: float
    cone: Any = None
    cos_max: float | None = None

    name = "sphere"
    scale_free = True

    def step_size(self, lr, k, steps):
        return lr * (1.0 - k / steps)

    def update(self, params, grads, lr, tiny):
        u = params[0]
        D, dn, _ = _tangent_dir(grads[0], self.radius * u, self.radius, self.cone, self.cos_max)
        move = dn[:, 0] > 0
        d_unit = torch.where(move[:, None], D / torch.where(move[:, None], dn, 1.0), torch.zeros_like(D))
        if isinstance(lr, torch.Tensor):  # one angle per candidate, (M, 1, 1) from the engine
            lr = lr.reshape(-1, 1)
            u = torch.cos(lr) * u + torch.sin(lr) * d_unit
        else:
            u = np.cos(lr) * u + np.sin(lr) * d_unit
        u = u / torch.linalg.vector_norm(u, dim=-1, keepdim=True)
        if self.cone is not None:
            u = _cone_project(u, self.cone, self.cos_max)
        params[0] = u


@dataclass(frozen=True)
class _Candidates:
    """The data of a prompt path's run on the engine: the candidates' keys X (M, n, T, dk) (the engine reads
    the run's shape from them; the gradient and the objective are the model's closures)."""

    X: torch.Tensor


@dataclass(frozen=True, eq=False)
class _SphereModel(Model):
    """A prompt path's points p = radius·u as a model of the GD engine: the parameter u (M, dk), ∇L from
    ``grad(p)``; its loss is the path's objective ``excess(p)`` (the candidates' E_ref)."""

    grad: Any
    excess: Any
    radius: float

    name = "prompt-path"

    def prepare(self, data, head, device, dtype):
        return data, None

    def context(self, batch, head):
        return None

    def loss(self, batch, head, W, loss):
        return self.excess(self.radius * W)

    def start(self, init, R, d, m, device, dtype):
        return [init.clone()]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        return [self.grad(self.radius * params[0])]

    def W(self, params):
        return params[0].clone()


def _draw(rng: Any, draw: Any, B: int) -> np.ndarray:
    """``draw(g, k)`` for k instances: from one generator for the whole batch (``rng`` a Generator), or from
    each instance's own generator, one row each (``rng`` a sequence of B Generators: an instance then draws
    the same starts in a batch as alone, so ``attnsvm check --instance K`` replays the batch's numbers)."""
    if isinstance(rng, np.random.Generator):
        return np.asarray(draw(rng, B))
    return np.concatenate([np.asarray(draw(g, 1)) for g in rng], axis=0)


def _rngs(rng: Any, B: int) -> Any:
    """``rng`` checked: one Generator, or a sequence of B (one per instance)."""
    if isinstance(rng, np.random.Generator):
        return rng
    gens = list(rng)
    if len(gens) != B or not all(isinstance(g, np.random.Generator) for g in gens):
        raise InvalidInputError(f"rng must be a numpy Generator or one per instance ({B}), got {len(gens)}")
    return gens


def _sphere_path(make, B, dk, r_arr, rng, restarts, steps, lr, c, cos_max, starts=None) -> PromptPath:
    """The path loop shared by :func:`prompt_reg_path` and :func:`prompt_head_reg_path`: ``make(C)`` returns
    the keys (B·C, n, T, dk) of the B instances each repeated C times and the closures ``grad(P)`` and
    ``excess(P)`` on B·C candidate points P (B·C, dk), candidate c of instance b at row b·C + c. Each radius
    is one run of numerics.gd.run_gd (:class:`OnSphere`; its explicit loop and step hook).

    Two sweeps. Upward (R increasing): ``restarts`` random starts with the angle schedule lr·(1 − k/steps),
    plus the previous radius' answer (warm start) with the angle schedule (lr/R)·(1 − k/steps): at radius R
    a rotation by θ moves every score by ≈ R·θ·‖k‖, so the warm start — already within O(1/R) of a
    minimiser — takes steps that move the scores by ≈ lr, where a step of lr would throw it out of a basin
    of angular width ≈ 1/R (measured: p-nonlinear-head, quick seed 10, #0 left α's basin at R = 128 after
    finding it at R = 32 and 64). Downward (R decreasing): the largest radius' answer is carried back, one
    warm start per radius with the same small steps, so a basin found only at a large radius is tried at
    every smaller one. At each radius the point of least E of the two sweeps is the path's, and
    ``start_excess`` the least E of both sweeps' starting points. ``starts`` (B, dk) or None: a given start
    per instance that takes the place of one random start (candidate 1) at every radius of the upward sweep,
    with the warm start's steps (lr/R: it starts inside a selection's cone; see :func:`selection_start`)."""
    C = restarts + 1
    ct = None if c is None else torch.as_tensor(np.repeat(c, C, axis=0))
    c1 = None if c is None else torch.as_tensor(c)
    keys, grad, excess = make(C)
    keys1, grad1, excess1 = make(1)  # the downward sweep: one candidate per instance
    rows = np.arange(B)
    S = len(r_arr)
    P = np.zeros((B, S, dk))
    E, E0, ST = (np.zeros((B, S)) for _ in range(3))

    def run(keys, grad, excess, u, R, cone, lrs):
        model = _SphereModel(grad, excess, R)
        res = run_gd(_Candidates(keys), GDConfig(steps=steps, lr=lrs, geometry=OnSphere(R, cone, cos_max),
                                                 param=model), init=u)
        return torch.as_tensor(res.W), res.loss

    with torch.no_grad():
        prev = None
        for s, R in enumerate(r_arr):
            U = _draw(rng, lambda g, k: g.standard_normal((k, C, dk)), B)
            U /= np.linalg.norm(U, axis=-1, keepdims=True)
            if c is not None:  # uniform angle inside the cone around c
                w = U - (U * c[:, None]).sum(-1, keepdims=True) * c[:, None]
                w /= np.linalg.norm(w, axis=-1, keepdims=True)
                phi = _draw(rng, lambda g, k: g.uniform(0.0, np.arccos(cos_max), size=(k, C, 1)), B)
                U = np.cos(phi) * c[:, None] + np.sin(phi) * w
            lrs = np.full((B, C), lr)
            if starts is not None:  # a start inside a selection's cone: the warm start's small steps
                U[:, 1] = starts
                lrs[:, 1] = lr / max(1.0, R)
            if prev is not None:
                U[:, 0] = prev
                lrs[:, 0] = lr / max(1.0, R)
            u = torch.as_tensor(U.reshape(B * C, dk))
            e0 = excess(R * u).numpy().reshape(B, C)
            u, e = run(keys, grad, excess, u, R, ct, tuple(lrs.ravel().tolist()))
            e = e.reshape(B, C)
            _, _, st = _tangent_step(grad, R * u, R, ct, cos_max)
            j = np.argmin(e, axis=1)
            prev = u.numpy().reshape(B, C, dk)[rows, j]
            P[:, s], E[:, s], E0[:, s] = R * prev, e[rows, j], e0.min(axis=1)
            ST[:, s] = st.numpy().reshape(B, C)[rows, j]
        for s in range(S - 2, -1, -1):
            R = float(r_arr[s])
            u = torch.as_tensor(prev)
            # the carried point is a starting point too (E0: what "no progress" is measured against)
            E0[:, s] = np.minimum(E0[:, s], excess1(R * u).numpy())
            u, e = run(keys1, grad1, excess1, u, R, c1, lr / max(1.0, R))
            _, _, st = _tangent_step(grad1, R * u, R, c1, cos_max)
            prev = u.numpy()
            better = e < E[:, s]
            P[better, s], E[better, s], ST[better, s] = R * prev[better], e[better], st.numpy()[better]
            prev = P[:, s] / R  # carry the better of the two sweeps down
    return PromptPath(radii=r_arr, p=P, excess=E, start_excess=E0, stationarity=ST)


def prompt_reg_path(
    keys: Any,
    gamma: Any,
    radii: Any,
    *,
    ref: Any,
    rng: np.random.Generator | Sequence[np.random.Generator],
    restarts: int = 3,
    steps: int = 400,
    lr: float = 0.05,
    cone: Any = None,
    cone_mu: float | None = None,
) -> PromptPath:
    """p_R = argmin_{‖p‖ = R} L(p) (logistic loss) for each radius, optionally restricted to the cone
    {corr(p, cone) ≥ 1 − cone_mu}; keys (B, n, T, dk), gamma (B, n, T), ref (B, n) the reference tokens of
    ``prompt_excess`` (the selection the path is compared by), cone (B, dk) or None.

    Per radius: ``restarts`` random unit directions (uniform on the sphere, or uniform in angle inside the
    cone) plus the previous radius' answer (warm start) descend on the sphere of radius R by normalised
    Riemannian GD: each step rotates p/R by the angle lr·(1 − k/steps) along the (cone-projected) tangential
    descent direction ∇L — a decaying schedule, so the last iterate settles within ≈ lr/steps of the
    constrained minimiser. The candidate of least E_ref wins. The norm constraint is taken as active (L
    decreases outward along the path: the path's E_ref decreasing in R shows it; see p-rp-path). ``rng``: one
    Generator for the batch, or one per instance (each instance's random starts from its own: a batch of
    checks then replays instance by instance).
    """
    K = np.asarray(keys, dtype=float)
    g = np.asarray(gamma, dtype=float)
    if K.ndim != 4 or g.shape != K.shape[:3]:
        raise InvalidInputError(
            f"keys must be (B, n, T, dk) and gamma (B, n, T); got {K.shape} and {g.shape}"
        )
    B, n, T, dk = K.shape
    r_arr, refs, c, cos_max = _check_path_args(B, n, T, dk, radii, ref, steps, lr, restarts, cone, cone_mu)

    def make(C):
        Kt, gt = (torch.as_tensor(np.repeat(x, C, axis=0)) for x in (K, g))
        rt = torch.as_tensor(np.repeat(refs, C, axis=0), dtype=torch.int64)
        return Kt, (lambda P: prompt_grad(Kt, gt, P)), (lambda P: prompt_excess(Kt, gt, P, rt))

    return _sphere_path(make, B, dk, r_arr, _rngs(rng, B), restarts, steps, lr, c, cos_max)


# -- nonlinear head h(u) = Σ_j a_j ReLU(v_j^T u) (TLZO's nonlinear-head path) ---------------------------


def head_value(u: Any, V: Any, a: Any) -> np.ndarray:
    """h(u) = Σ_j a_j ReLU(v_j^T u) for u (..., d), V (d, m), a (m,)."""
    return np.maximum(np.asarray(u, float) @ np.asarray(V, float), 0.0) @ np.asarray(a, float)


def prompt_head_grad(K: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, a: torch.Tensor,
                     p: torch.Tensor) -> torch.Tensor:
    """∇_p L for L(p) = (1/n) Σ_i ℓ(Y_i h(X_i^T s_i)), s_i = S(K_i p), logistic loss, h a ReLU head; batched
    K (R, n, T, dk), X (R, n, T, d), Y (R, n), V (R, d, m), a (R, m), p (R, dk) -> (R, dk).

    With u_i = X_i^T s_i and g_it = Y_i ∇h(u_i)^T x_it, ∂(Y_i h)/∂logit_it = s_it Σ_u s_iu (g_it − g_iu) — the
    linear-head formula of :func:`prompt_grad` with γ replaced by g, in the same cancellation-free pairwise
    form.
    """
    s = softmax_logits(torch.einsum("rntk,rk->rnt", K, p))
    u = torch.einsum("rnt,rntd->rnd", s, X)
    z = torch.einsum("rnd,rdm->rnm", u, V)
    gh = torch.einsum("rdm,rnm->rnd", V, a[:, None, :] * (z > 0).to(z.dtype))  # ∇h(u_i)
    g = Y[..., None] * torch.einsum("rntd,rnd->rnt", X, gh)
    marg = Y * (torch.clamp(z, min=0.0) * a[:, None, :]).sum(-1)
    w = (-torch.sigmoid(-marg))[..., None] * s * _centred(s, g)
    return torch.einsum("rnt,rntk->rk", w, K) / K.shape[1]


def prompt_head_excess(K: torch.Tensor, X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, a: torch.Tensor,
                       p: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """E_ref(p) = L(p) − (1/n) Σ_i ℓ(Y_i h(x_{i ref_i})) for the ReLU head, accurate however small (the
    analogue of :func:`prompt_excess`): u_i − x_{i ref_i} = Σ_t s_it (x_it − x_{i ref_i}) exactly (zero term
    at ref), each unit's ReLU difference is taken exactly where no kink is crossed, and ℓ(A + Δ) − ℓ(A) =
    log1p(expm1(−Δ) σ(−A)) with A = Y_i h(x_{i ref_i}), Δ the margin's change."""
    s = softmax_logits(torch.einsum("rntk,rk->rnt", K, p))
    xa = torch.gather(X, 2, ref[..., None, None].expand(-1, -1, 1, X.shape[-1]))[:, :, 0]  # (R, n, d)
    du = torch.einsum("rnt,rntd->rnd", s, X - xa[:, :, None, :])
    z = torch.einsum("rnd,rdm->rnm", xa, V)
    dz = torch.einsum("rnd,rdm->rnm", du, V)
    both_pos, both_neg = (z > 0) & (z + dz > 0), (z <= 0) & (z + dz <= 0)
    rd = torch.where(both_pos, dz, torch.where(both_neg, torch.zeros_like(dz),
                                               torch.clamp(z + dz, min=0.0) - torch.clamp(z, min=0.0)))
    A = Y * (torch.clamp(z, min=0.0) * a[:, None, :]).sum(-1)
    D = Y * (rd * a[:, None, :]).sum(-1)
    return torch.log1p(torch.expm1(-D) * torch.sigmoid(-A)).mean(-1)


def prompt_head_reg_path(keys: Any, tokens: Any, Y: Any, V: Any, a: Any, radii: Any, *, ref: Any,
                         rng: np.random.Generator | Sequence[np.random.Generator], restarts: int = 3,
                         steps: int = 400, lr: float = 0.05,
                         cone: Any = None, cone_mu: float | None = None, starts: Any = None) -> PromptPath:
    """The regularisation path of p for the ReLU head h(u) = Σ_j a_j ReLU(v_j^T u) (logistic loss): as
    :func:`prompt_reg_path`, with ∇L from :func:`prompt_head_grad` and candidates compared by
    :func:`prompt_head_excess`. keys (B, n, T, dk), tokens (B, n, T, d), Y (B, n), V (B, d, m), a (B, m);
    ``starts`` (B, dk) or None: one given start per instance among the random ones (needs restarts ≥ 2;
    e.g. :func:`selection_start`)."""
    K = np.asarray(keys, dtype=float)
    X = np.asarray(tokens, dtype=float)
    Yb, Vb, ab = (np.asarray(x, dtype=float) for x in (Y, V, a))
    if K.ndim != 4 or X.shape[:3] != K.shape[:3] or Yb.shape != K.shape[:2] or Vb.ndim != 3 \
            or Vb.shape[:2] != (K.shape[0], X.shape[-1]) or ab.shape != (K.shape[0], Vb.shape[-1]):
        raise InvalidInputError(
            f"shapes do not match: keys {K.shape}, tokens {X.shape}, Y {Yb.shape}, V {Vb.shape}, a {ab.shape}"
        )
    B, n, T, dk = K.shape
    r_arr, refs, c, cos_max = _check_path_args(B, n, T, dk, radii, ref, steps, lr, restarts, cone, cone_mu)

    def make(C):
        Kt, Xt, Yt, Vt, at = (torch.as_tensor(np.repeat(x, C, axis=0)) for x in (K, X, Yb, Vb, ab))
        rt = torch.as_tensor(np.repeat(refs, C, axis=0), dtype=torch.int64)
        return (Kt, (lambda P: prompt_head_grad(Kt, Xt, Yt, Vt, at, P)),
                (lambda P: prompt_head_excess(Kt, Xt, Yt, Vt, at, P, rt)))

    if starts is not None:
        starts = np.asarray(starts, dtype=float)
        if starts.shape != (B, dk) or restarts < 2 or not np.all(np.isfinite(starts)) \
                or np.any(np.linalg.norm(starts, axis=-1) == 0):
            raise InvalidInputError(f"starts must be (B, dk) = {(B, dk)} non-zero finite rows with restarts "
                                    f">= 2, got {starts.shape} and restarts={restarts}")
        starts = starts / np.linalg.norm(starts, axis=-1, keepdims=True)
    return _sphere_path(make, B, dk, r_arr, _rngs(rng, B), restarts, steps, lr, c, cos_max, starts)


def selection_start(keys: Any, ref: Any) -> np.ndarray:
    """A start inside the selection's cone that is not the ℓ2 p-SVM: the ℓ∞ max-margin direction of ``ref``,
    p = argmax_{‖p‖_∞ ≤ 1} min_{i, t ≠ ref_i} p^T(k_{i ref_i} − k_it) (an LP, HiGHS), for keys (n, T, dk) and
    ref (n,). Where the selection's p-SVM is feasible its margin is > 0 and R·p selects ``ref`` for large R.
    Raises SolverError (with HiGHS's status) when the LP does not solve, InfeasibleError when the best
    margin is ≤ 0 (no direction selects ``ref``)."""
    from scipy.optimize import linprog  # lazy: scipy's optimize is not needed to import the paths

    K = np.asarray(keys, dtype=float)
    r = np.asarray(ref, dtype=np.int64)
    n, T, dk = K.shape
    if r.shape != (n,) or np.any(r < 0) or np.any(r >= T):
        raise InvalidInputError(f"ref must be (n,) = ({n},) token indices in [0, {T}), got {r!r}")
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), r] = False
    D = (K[np.arange(n), r][:, None, :] - K)[mask]  # (n(T−1), dk)
    # variables (p, t): maximise t subject to D p ≥ t, −1 ≤ p ≤ 1, t ≤ 1
    A = np.hstack([-D, np.ones((len(D), 1))])
    res = linprog(np.r_[np.zeros(dk), -1.0], A_ub=A, b_ub=np.zeros(len(D)),
                  bounds=[(-1.0, 1.0)] * dk + [(None, 1.0)], method="highs")
    if res.status != 0:
        raise SolverError(f"selection_start: the l-inf margin LP did not solve ({res.message})",
                          status=str(res.status), solver="HIGHS")
    if -res.fun <= 0:
        raise InfeasibleError("selection_start: no direction selects ref (l-inf margin <= 0)")
    p = res.x[:dk]
    return p / np.linalg.norm(p)
