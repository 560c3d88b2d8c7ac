r"""overparam-landscape — over-parameterisation (d ≥ n) removes every stationary point (TLTO's construction).

Statement (TLTO abstract and §3–4: over-parameterisation "guarantees a benign optimization landscape devoid
of stationary points"; the paper's argument, THEORY.md §4): with a linear head v, Assumption A (ℓ' < 0), and
queries z_1..z_n linearly independent — possible exactly when d ≥ n — the matrix

.. math:: \bar W = v c^\top,\qquad Z c = Y \quad(\text{so } X_i \bar W z_i = Y_i X_i v = \gamma_i,
          \text{ the head's scores}),

satisfies ⟨∇L(W), W̄⟩ = (1/n) Σ_i ℓ'_i Var_{s_i}(γ_i) < 0 for every W as soon as some γ_i is not constant: L
has no stationary point and GD's ‖W(k)‖ → ∞. Nothing about T: the claim needs d ≥ n only. (The former
version of this check tested an invented stronger statement — every score table γ reachable, d ≥ max(n, T) —
which is not the paper's.)

What is certified once, and what can fail. The identity is an identity (THEORY.md §2); sampling W cannot
refute its sign. What can fail: (a) the construction — c = Z^+ Y must solve Z c = Y (relative residual
RESID_TOL), which is the paper's d ≥ n hypothesis at work; (b) the identity as the numerics compute it —
numerics.attention's closed-form gradient at sampled W must equal (1/n) Σ ℓ'_i Var_s(γ_i) to IDENTITY_RTOL;
(c) GD's norm divergence — normalised GD (linear head) must make ‖W(k)‖ grow without levelling off while L
decreases (the trend rule of ``_landscape.judge_divergence``).

Hypotheses implemented: d ≥ n; generic queries: rank Z = n (relative gap GENERIC_RTOL); non-constant scores in
some example; a catalogue loss (logistic / exponential / linear, Assumption A proved by ``loss-assumptions``;
ℓ' < 0 on the score range). Instance family: unit-sphere cross-attention data with a linear head,
n ∈ 2..5, T ∈ 2..6, d on the grid n·{1, 2, 4, 8} (from the threshold to 8n; T > d occurs, where the former
check's d ≥ max(n, T) would have left the instance out).

Given data (``--data``): the given (X, Y, Z, v) with a loss and W samples drawn from the instance seed; the
hypotheses decide (digits: n = 60 > d = 16, so the instances are vacuous, naming it).

Negative control (``overparam-landscape-control``), at the exact boundary of the hypothesis: d = n − 1. There
rank Z ≤ n − 1 and Y is generically outside the range of Z, so no W̄ = v c^T reaches the head's scores:
refuted with a certificate, not a large residual alone — the least-squares residual r of Z c = Y satisfies
Z^T r ≈ 0, so for every c, ‖Z c − Y‖ ≥ (Y^T r − ‖Z^T r‖ ‖c‖)/‖r‖, and we refute when this bound exceeds
RESID_TOL‖Y‖ for every ‖c‖ ≤ NORM_CAP.

Resolution (``attnsvm power --resolution``, quick seed 0): ``descent_everywhere`` evaluates the
identity at W̄ (``W̄ = v cᵀ``, a point moved inside the span of the token differences (x_it − x_iτ) z_iᵀ, where
∇L lives): a 1 % move changes ⟨∇L(W), W̄⟩ by O(ε) against IDENTITY_RTOL, resolution 0.01 (goal 0.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register, undecided
from checks.power.resolution import token_difference_span
from numerics import attention as att
from numerics import tolerances as tol
from numerics.data import AttentionData, random_unit_sphere
from numerics.gd import GDConfig, RandomInit, run_gd
from numerics.tokens import scores

from ._given import given_metrics, need_head
from ._landscape import DIVERGENCE_CRITERIA, LOSSES, dloss_negative_on, judge_divergence

#: Relative residual of the construction ‖Zc − Y‖ / ‖Y‖: least squares on an O(1), well-conditioned
#: system (generic unit data) is accurate to ~1e-15; 1e-10 leaves room for conditioning ~1e5.
RESID_TOL = 1e-10

#: Genericity (rank Z = n): σ_min > GENERIC_RTOL σ_max; flags only (near-)degenerate draws.
GENERIC_RTOL = 1e-8

#: The control's impossibility certificate must exclude every W with ‖W‖_F up to this (a construction
#: needing a larger c is numerically meaningless for unit data whose c has norm O(1)–O(1e2)).
NORM_CAP = 1e8

#: The identity ⟨∇L(W), W̄⟩ = (1/n) Σ ℓ'_i Var_s(γ_i), float gradient vs the variance form, relative to
#: (1/n) Σ |ℓ'_i| Var_s(γ_i): both sides are O(1) sums of d² resp. T products, W̄ solves the equations to
#: RESID_TOL; the numerics' gradient is accurate to tol.GRAD_RTOL, which is the honest bound.
IDENTITY_RTOL = tol.GRAD_RTOL
#: Norms of the W at which the identity is evaluated: the variance must stay far above float rounding.
IDENTITY_NORMS = (1e-2, 1e-1, 1.0, 3.0)

#: Normalised GD for the divergence prediction (the authors' step; recorded every 60 of 1200 steps). 400 steps
#: left 2 of 8 quick instances (n = 5, d = 10 and 20) "growing but decelerating", undecided: a budget, not the
#: landscape (1200 steps decide them).
GD_LR, GD_STEPS, GD_EVERY = 0.1, 1200, 60

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=50),
    "paper": Profile(instances=200, min_confirmed=180),
}


@dataclass(frozen=True, eq=False)
class OverparamLandscapeInstance:
    data: AttentionData
    loss: str
    seed: int  # the GD start


@dataclass(frozen=True, eq=False)
class OverparamLandscapeState:
    """The theorem's normalised GD run (the control prepares nothing: its state is None)."""

    norms: np.ndarray  # (S,) ‖W(k)‖ at the recorded steps
    losses: np.ndarray  # (S,) L(W(k))


def certified_lstsq(A: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Minimum-norm least squares of A x = g: (x, ‖A x − g‖/‖g‖, a certified lower bound on the relative
    residual of every x with ‖x‖ ≤ NORM_CAP): with r the residual, A^T r ≈ 0 and for any x
    ‖A x − g‖ ≥ |r^T (A x − g)| / ‖r‖ ≥ (g^T r − ‖A^T r‖ ‖x‖) / ‖r‖."""
    x, *_ = np.linalg.lstsq(A, g, rcond=None)
    r = g - A @ x
    ng, nr = float(np.linalg.norm(g)), float(np.linalg.norm(r))
    lower = (float(g @ r) - float(np.linalg.norm(A.T @ r)) * NORM_CAP) / nr if nr > 0 else 0.0
    return x, nr / ng, max(lower, 0.0) / ng


def construct(data) -> tuple[np.ndarray, float, float]:
    """TLTO's W̄ = v c^T with c = Z^+ Y; the relative residual of Z c = Y; its certified lower bound."""
    c, rel, lower = certified_lstsq(np.asarray(data.Z, float), np.asarray(data.Y, float))
    return np.outer(data.require_head(), c), rel, lower


def identity_error(data, gamma, Wbar, loss, rng) -> float:
    """max over sampled W of |⟨∇L(W), W̄⟩ − (1/n) Σ ℓ'_i Var_s(γ_i)| / ((1/n) Σ |ℓ'_i| Var_s(γ_i)), with ∇L
    from numerics.attention's closed form for the score table gamma (token_weights + grad_from_weights)."""
    G = rng.standard_normal((4 * len(IDENTITY_NORMS), data.d, data.d))
    G *= np.repeat(IDENTITY_NORMS, 4)[:, None, None] / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    b = att.batch_from_data([data] * len(G))
    Wt = torch.as_tensor(G)
    gam = torch.as_tensor(np.broadcast_to(gamma, (len(G),) + gamma.shape).copy())
    s = torch.softmax(att.logits(b.X, b.Z, Wt), dim=-1)  # (R, n, T)
    margin, c = att.token_weights(b.X, b.Y, s, b.linear_head(), loss, gamma=gam)
    grad = att.grad_from_weights(b.X, b.Z, c).numpy()  # (R, d, d)
    ip = np.einsum("rde,de->r", grad, Wbar)
    sn, gn = s.numpy(), gam.numpy()
    var = (sn * gn**2).sum(-1) - (sn * gn).sum(-1) ** 2  # (R, n)
    dl = att.loss_derivative(margin, loss).numpy()  # (R, n)
    pred, scale = (dl * var).mean(-1), (np.abs(dl) * var).mean(-1)
    return float(np.max(np.abs(ip - pred) / scale))


def _rank_ok(M) -> tuple[bool, float]:
    s = np.linalg.svd(M, compute_uv=False)
    ratio = float(s[-1] / s[0]) if s.size and s[0] > 0 else 0.0
    return M.shape[0] <= M.shape[1] and ratio > GENERIC_RTOL, ratio


class _Base(Theorem):
    #: a softmax temperature τ evaluates the loss at W/τ: ∇L(W) scales by 1/τ at W/τ, so "W̄ is a descent
    #: direction at every W" and the divergence of normalised GD (scale-free steps) hold alike (measured:
    #: quick seed 0, the full power matrix of 2026-11-27, PASS under it)
    invariant_to: ClassVar[dict[str, str]] = {"softmax-temperature": (
        "a temperature τ is W → W/τ: a descent direction at every W stays one, and "
        "normalised GD's divergence is scale-free")}
    profiles = PROFILES
    accepts_data = True

    def not_applicable(self, data):
        return need_head(data)

    def _family(self, rng: np.random.Generator, k: int) -> tuple[int, int, int]:
        raise NotImplementedError

    def instance(self, rng: np.random.Generator, ctx: Context) -> OverparamLandscapeInstance:
        data = ctx.data if ctx.data is not None else random_unit_sphere(*self._family(rng, ctx.instance),
                                                                        rng=rng)
        return OverparamLandscapeInstance(data=data, loss=str(rng.choice(LOSSES)),
                                          seed=int(rng.integers(2**31)))

    def assume_scores_vary(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState | None,
                           ctx: Context) -> Outcome:
        return decide(float(np.ptp(scores(inst.data), axis=1).max()) > 0, "all scores constant")

    def assume_assumption_a(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState | None,
                            ctx: Context) -> Outcome:
        g = scores(inst.data)
        return decide(
            dloss_negative_on(inst.loss, float(g.min()), float(g.max())), "loss violates Assumption A"
        )


@register
class OverparamLandscape(_Base):
    id = "overparam-landscape"
    depends_on = ("gd", "gradient", "softmax")
    title = ("Over-parameterisation d ≥ n removes every stationary point: W̄ = v cᵀ with Zc = Y is a descent "
             "direction at every W (TLTO's construction)")
    reference = "TLTO abstract and §3–4 (benign landscape under over-parameterisation: d ≥ n)"
    statement = (r"d \ge n,\ \operatorname{rank}Z = n \Rightarrow \bar W = vc^\top,\ Zc = Y:\ "
                 r"\langle \nabla L(W), \bar W\rangle = "
                 r"\tfrac1n\sum_i\ell'_i\operatorname{Var}_{s_i}(\gamma_i) < 0"
                 r"\ \forall W,\ \|W(k)\|\to\infty")
    hypotheses_text = (
        "d >= n; generic queries: rank Z = n (sigma ratio > 1e-8); linear head; scores not all constant; "
        "catalogue loss (Assumption A); family n in 2..5, T in 2..6, d in n·{1, 2, 4, 8}"
    )
    plot_metric = "identity_rel_err"
    criteria = (
        Criterion("relative residual ‖Zc − Y‖/‖Y‖ of c = Z⁺Y (W̄ = v cᵀ)", "<=", RESID_TOL,
                  plot_metric="construction_residual"),
        Criterion(
            "max relative error of ⟨∇L(W), W̄⟩ = (1/n) Σ ℓ'_i Var_s(γ_i) at Gaussian W of norms "
            f"{IDENTITY_NORMS}",
            "<=",
            IDENTITY_RTOL,
            plot_metric="identity_rel_err",
        ),
    ) + DIVERGENCE_CRITERIA

    def _family(self, rng: np.random.Generator, k: int) -> tuple[int, int, int]:
        n, T = int(rng.integers(2, 6)), int(rng.integers(2, 7))
        return n, T, n * (1, 2, 4, 8)[k % 4]

    def prepare(self, instances: Sequence[OverparamLandscapeInstance], ctxs: Sequence[Context]
                ) -> list[OverparamLandscapeState]:
        """Normalised GD (linear head) per instance, for the divergence prediction."""
        out = []
        for inst, ctx in zip(instances, ctxs, strict=True):
            res = run_gd(inst.data, GDConfig(steps=GD_STEPS, lr=GD_LR, loss=inst.loss),
                         init=RandomInit(inst.seed), record_every=GD_EVERY, device=ctx.device)
            norms = np.linalg.norm(np.asarray(res.W_traj)[:, 0], axis=(1, 2))
            out.append(OverparamLandscapeState(norms=norms, losses=np.asarray(res.loss_traj)[:, 0]))
        return out

    def assume_overparameterised(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState,
                                 ctx: Context) -> Outcome:
        data = inst.data
        if data.d < data.n:
            return failed(f"d = {data.d} < n = {data.n}", d=data.d, n=data.n, T=data.T)
        okz, rz = _rank_ok(data.Z)
        return decide(okz, f"queries dependent: rank Z < n (σ ratio {rz:.2g})", z_cond_ratio=rz)

    def check_construction(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState,
                           ctx: Context) -> Outcome:
        data = inst.data
        _, rel, _ = construct(data)
        m = dict(given_metrics(ctx), construction_residual=rel, d_over_n=data.d / data.n,
                 T_above_d=int(data.T > data.d))
        return decide(rel <= RESID_TOL, f"c = Z⁺Y does not solve Zc = Y (relative residual {rel:.3g})", **m)

    def check_descent_everywhere(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState,
                                 ctx: Context) -> Outcome:
        data = inst.data
        Wbar, rel, _ = construct(data)
        if rel > RESID_TOL:
            return undecided("no exact W-bar (see construction): the identity has nothing to certify")
        # W̄, the predicted descent direction the identity is evaluated at, through the resolution seam
        # (moved inside the span of the token differences (x_it − x_iτ) z_iᵀ, where ∇L lives)
        Wbar = self.predicted("W̄ = v cᵀ", Wbar, "point", lambda: token_difference_span(data))
        e = identity_error(data, scores(data), Wbar, inst.loss, ctx.rng)
        return decide(
            e <= IDENTITY_RTOL,
            f"<grad L(W), W-bar> differs from (1/n) sum l'_i Var_s(gamma_i) by {e:.2g} "
            "(relative): the gradient is not the one the identity certifies",
            identity_rel_err=e,
        )

    def check_norm_diverges(self, inst: OverparamLandscapeInstance, state: OverparamLandscapeState,
                            ctx: Context) -> Outcome:
        return judge_divergence(state.norms, state.losses, GD_LR, GD_STEPS)


@register
class OverparamLandscapeControl(_Base):
    id = "overparam-landscape-control"
    depends_on = ()
    title = "Control: at d = n − 1 some W̄ = v cᵀ reaches the head's scores, X_i W̄ z_i = γ_i (false)"
    reference = OverparamLandscape.reference
    statement = r"d = n-1 \Rightarrow \exists c: Zc = Y\ (\bar W = vc^\top,\ X_i\bar Wz_i = \gamma_i)"
    hypotheses_text = (
        "d = n - 1 (the boundary of d >= n), n in 3..5, T in 2..6; linear head; scores not all constant; "
        "catalogue loss"
    )
    expected = "FAIL"
    control_of = "overparam-landscape"
    plot_metric = "residual_lower_bound_rel"
    criteria = (
        Criterion("relative residual of c = Z⁺Y (the claim holds when)", "<=", RESID_TOL,
                  plot_metric="construction_residual"),
        Criterion(
            f"refuted: certified lower bound on the relative residual of every c with ‖c‖ ≤ {NORM_CAP:g}",
            ">",
            RESID_TOL,
            plot_metric="residual_lower_bound_rel",
        ),
        Criterion("inconclusive: residual above the tolerance but not certified", "→", "inconclusive"),
    )

    def not_applicable(self, data):
        if data.v is None:
            return need_head(data)
        if data.d != data.n - 1:
            return f"the control's claim is about d = n - 1; the given data have d = {data.d}, n = {data.n}"
        return None

    def _family(self, rng: np.random.Generator, k: int) -> tuple[int, int, int]:
        n = int(rng.integers(3, 6))  # d = n − 1 ≥ 2: at d = 1 unit-sphere queries are ±1 and Y may be reached
        return n, int(rng.integers(2, 7)), n - 1

    def assume_boundary(self, inst: OverparamLandscapeInstance, state: None, ctx: Context) -> Outcome:
        data = inst.data
        return decide(data.d == data.n - 1, "not at d = n - 1", d=data.d, n=data.n, T=data.T)

    def check_construction(self, inst: OverparamLandscapeInstance, state: None, ctx: Context) -> Outcome:
        _, rel, lower = construct(inst.data)
        m = dict(construction_residual=rel, residual_lower_bound_rel=lower)
        if rel <= RESID_TOL:
            return held(**m)
        if lower > RESID_TOL:
            return failed(f"no c with ||c|| <= {NORM_CAP:g} solves Zc = Y (certified residual lower bound)",
                          **m)
        return undecided("residual non-zero but not certified", **m)
