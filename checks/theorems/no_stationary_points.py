r"""no-stationary-points — under B.1 or B.2 the max-margin direction is a descent direction everywhere.

Statement (TLTO, arXiv 2308.16898, §4 "global convergence of gradient descent", reconstructed; THEORY.md §4):
under Assumption A on the loss, feasibility of Att-SVM for the optimal tokens, and

* B.1 — every non-optimal token of every example is a support token of W^mm, or
* B.2 — in every example all non-optimal tokens have the same score γ_it,

.. math:: \langle \nabla L(W), W^{mm} \rangle < 0 \quad \text{for every } W \in \mathbb{R}^{d\times d},

so L has no stationary point and GD's ‖W(k)‖ → ∞. (The paper's exact hypotheses may differ; this module
implements exactly the sufficient hypotheses above — "reconstructed".)

Hypotheses implemented (each an ``assume_*``, all pure: the SVM is solved in ``prepare``): Assumption A — the
instance's loss is one of the catalogue losses logistic/exponential/linear (proved to satisfy A symbolically
by the ``loss-assumptions`` check) and ℓ' < 0 on the instance's score range; a unique optimal token in every
example; Att-SVM(opt) feasible, with a verified KKT certificate; and B.1 or B.2 *verified on the instance* —
B.1 from the SVM's support tokens (every t ≠ opt_i active within ACTIVE_TOL), B.2 from the scores (non-optimal
scores equal within TIE_TOL; both from checks.hypotheses).

Predictions.

* ``descent_everywhere``. By THEORY.md §2, with h_i = X_i W^mm z_i,
  ⟨∇L(W), W^mm⟩ = (1/n) Σ_i ℓ'(γ_i^T s_i) · ½ Σ_{t,τ} s_it s_iτ (γ_it − γ_iτ)(h_it − h_iτ).
  s has full support and ℓ' < 0, so if every pair product is ≥ 0 and one is > 0 the sign is negative at
  EVERY W. This is certified once per instance, exactly (h from the exact rational KKT solution;
  ``_landscape.sign_fixed``; metric ``sign_fixed_by_construction``). Under B.1 or B.2 it always holds — it is
  the paper's proof (proved for all n, T, d in theory.stationarity, metric ``proved_all_sizes``): the
  non-optimal pairs vanish (equal margins, resp. equal scores) and the optimal pairs are
  (γ_opt − γ_t)·(h_opt − h_t) > 0. Hence B.1 "on general data with negative pair products" does not exist:
  sampling W cannot add anything on B.1/B.2 data, and the prediction can fail only through the instance's
  numbers (a wrong W^mm, wrong margins, wrong scores). Where the certificate does not hold
  (given data, the control) the sign is searched for: Gaussian W at norms 1e-3 … 1e4, near ±W^mm, token
  pushes, the adversarial pair-concentrating W of ``_landscape.pair_ws`` and a short ascent, each judged
  by the exact log-space sign. With the certificate, the closed-form gradient of numerics.attention is
  also evaluated at moderate norms (GRAD_NORMS) and must agree in sign wherever it is representable.
* ``norm_diverges``: normalised GD (step GD_LR, GD_STEPS steps, the instance's loss, small random start)
  must make ‖W(k)‖ grow without levelling off and L decrease over the last half of the run — the trend
  rule of ``_landscape.judge_divergence``. An optimiser that does not move is refuted, not inconclusive.

Instance family: B.1 data (orthonormal tokens and queries, ``checks.strategies.b1_data``) or B.2 data (score
in a dedicated coordinate, ``b2_data``), each drawn with probability ½.

Given data (``--data``): every instance checks the given (X, Y, Z, v) with the loss, the sampled W and the GD
start drawn from the instance seed; real data rarely satisfy B.1/B.2, and then the instances are vacuous,
naming the hypothesis. The control runs on the given data too (they need not satisfy B.1/B.2).

Negative control (``no-stationary-points-control``), at the boundary: B.2 data with ONE non-optimal score of
one example moved by CONTROL_EPS (relative to the B.2 gap of 0.5), in the direction that makes a pair
product (γ_t − γ_τ)(h_t − h_τ) negative — neither B.1 nor B.2 holds, but the data are within CONTROL_EPS of
B.2. The claim (descent at every W) is false there: the pair-concentrating W (attention of that example on
{t, τ}, every other example on one token) gives ⟨∇L(W), W^mm⟩ > 0, verified in the exact log-space form.

Resolution (``attnsvm power --resolution``, quick seed 0): W^mm (direction, tilted inside the span of
the token differences, its margin profile h moved with it: ``_landscape.moved_profile``) resolves 0.01 (goal
0.05). The statement does not single out W^mm — every M whose pair products are all ≥ 0 (one > 0) is a descent
direction at every W — but on B.1 data W^mm lies on the boundary of that cone (its non-optimal margins are
exactly equal, pair products 0): a 1 % tilt makes one negative (−4.3e-3 on instance 6) and the
pair-concentrating W gives ⟨∇L(W), W'⟩ > 0 (exact log-space sign), refuted. On B.2 data (non-optimal scores
equal) the non-optimal pairs vanish for every M and a small tilt stays a descent direction: held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register, undecided
from checks.hypotheses import b1_or_b2, b2_spread
from checks.power.resolution import token_difference_span
from checks.strategies import b1_data, b2_data
from numerics import attention as att
from numerics.data import AttentionData
from numerics.gd import GDConfig, RandomInit, run_gd
from numerics.svm import SVMSolution, solve_att_svm
from numerics.tokens import optimal_tokens, scores
from theory.stationarity import no_stationary_point_general

from ._given import given_metrics, need_head
from ._landscape import (
    DIVERGENCE_CRITERIA,
    LOG_PREC,
    LOSSES,
    dloss_negative_on,
    exact_margin_profile,
    judge_divergence,
    moved_profile,
    pair_ws,
    search_positive,
    sign_fixed,
)

#: Gradient-ascent starts per instance (the samples closest to a positive inner product).
ASCENT_STARTS = 6

#: Norms at which the closed-form float gradient is compared in sign with the certificate: small enough that
#: ⟨∇L(W), W^mm⟩ is far above float64 rounding of the gradient (~1e-16 relative) on unit-scale data.
GRAD_NORMS = (1e-2, 1e-1, 1.0, 3.0)
#: A float inner product counts as a sign only beyond this multiple of its rounding scale (‖∇L‖‖W^mm‖·1e-16).
GRAD_SIGN_FLOOR = 1e3

#: Normalised GD for the divergence prediction: the authors' step; 400 steps take ‖W‖ to ≈ 40 (softmax far
#: into saturation on unit data), recorded every 20 steps for the trend rule.
GD_LR, GD_STEPS, GD_EVERY = 0.1, 400, 20

#: The control's distance from B.2: one non-optimal score moved by this (the B.2 gap is 0.5): close to the
#: hypothesis, far above TIE_TOL, and large enough that the violating pair product is an O(1e-2) number.
CONTROL_EPS = 0.05

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"per_norm": 4, "ascent_steps": 30}),
    "full": Profile(instances=60, min_confirmed=50, params={"per_norm": 12, "ascent_steps": 120}),
    "paper": Profile(instances=200, min_confirmed=180, params={"per_norm": 25, "ascent_steps": 200}),
}


@dataclass(frozen=True, eq=False)
class NoStationaryInstance:
    """An instance of no-stationary-points and of its control (which also records the moved score)."""

    data: AttentionData
    kind: str  # "B1", "B2", "near-B2" (the control) or "given"
    loss: str
    seed: int  # the GD start
    moved: tuple[int, int] | None = None  # the control: (example, token) whose score was moved off B.2


@dataclass(frozen=True, eq=False)
class NoStationaryState:
    """The certified Att-SVM(opt), its exact margin profile, and a normalised GD run."""

    sol: SVMSolution
    h: np.ndarray | None  # (n, T) exact margins of W^mm; None when infeasible or the exact KKT proof failed
    norms: np.ndarray  # (S,) ‖W(k)‖ at the recorded GD steps
    losses: np.ndarray  # (S,) L(W(k))


def _float_grad_signs(data: AttentionData, Wmm: np.ndarray, loss: str, rng: np.random.Generator
                      ) -> tuple[int, int]:
    """(samples, samples whose closed-form float inner product ⟨∇L(W), W^mm⟩ is confidently ≥ 0) at
    Gaussian W of norms GRAD_NORMS, computed by numerics.attention.grad_W (the code GD uses)."""
    G = rng.standard_normal((4 * len(GRAD_NORMS), data.d, data.d))
    G *= np.repeat(GRAD_NORMS, 4)[:, None, None] / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    b = att.batch_from_data([data] * len(G))
    g = att.grad_W(b.X, b.Y, b.Z, torch.as_tensor(G), b.linear_head(), loss).numpy()  # (R, d, d)
    ip = np.einsum("rde,de->r", g, Wmm)
    scale = np.linalg.norm(g, axis=(1, 2)) * np.linalg.norm(Wmm) * 1e-16 * GRAD_SIGN_FLOOR
    return len(G), int((ip >= scale).sum())


class _LandscapeBase(Theorem):
    """Shared hypotheses, preparation and predictions; subclasses give the instance family."""

    profiles = PROFILES
    plot_metric = "min_pair_product"
    criteria = (
        Criterion(
            "certificate: every pair product (γ_it − γ_iτ)(h_it − h_iτ), h_i = X_i W^mm z_i from the exact "
            "KKT solution (one > 0 fixes ⟨∇L(W), W^mm⟩ < 0 at every W)",
            ">=",
            0.0,
            plot_metric="min_pair_product",
        ),
        Criterion(
            f"where certified: W (Gaussian, norms {GRAD_NORMS}) whose closed-form float ⟨∇L(W), W^mm⟩ ≥ "
            f"{GRAD_SIGN_FLOOR:g}·1e-16·‖∇L‖‖W^mm‖ (count)",
            "==",
            0,
        ),
        Criterion(
            "where not certified: W found (samples, ascent) with exact log-space ⟨∇L(W), W^mm⟩ > 0 (count; "
            "any refutes)",
            "==",
            0,
        ),
        Criterion("inconclusive: a sampled inner product whose two log-sums are closer than", "<", LOG_PREC),
        Criterion("inconclusive: exact (rational) KKT proof of W^mm failed", "→", "inconclusive"),
    ) + DIVERGENCE_CRITERIA
    accepts_data = True

    def not_applicable(self, data):
        return need_head(data)

    def _loss(self, rng: np.random.Generator) -> str:
        return str(rng.choice(LOSSES))

    def _given(self, rng: np.random.Generator, ctx: Context) -> NoStationaryInstance:
        """The instance on given data: the data themselves, a loss drawn from the instance seed."""
        return NoStationaryInstance(data=ctx.data, kind="given", loss=self._loss(rng),
                                    seed=int(rng.integers(2**31)))

    def prepare(self, instances: Sequence[NoStationaryInstance], ctxs: Sequence[Context]
                ) -> list[NoStationaryState]:
        """Per instance: the certified Att-SVM(opt), its exact margin profile, and a normalised GD run."""
        out = []
        for inst, ctx in zip(instances, ctxs, strict=True):
            data = inst.data
            sol = solve_att_svm(data, norm="fro")
            h = exact_margin_profile(data, sol) if sol.feasible else None
            res = run_gd(data, GDConfig(steps=GD_STEPS, lr=GD_LR, loss=inst.loss),
                         init=RandomInit(inst.seed), record_every=GD_EVERY, device=ctx.device)
            norms = np.linalg.norm(np.asarray(res.W_traj)[:, 0], axis=(1, 2))  # (S,)
            out.append(NoStationaryState(sol=sol, h=h, norms=norms, losses=np.asarray(res.loss_traj)[:, 0]))
        return out

    def assume_assumption_a(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context
                            ) -> Outcome:
        g = scores(inst.data)
        ok = inst.loss in LOSSES and dloss_negative_on(inst.loss, float(g.min()), float(g.max()))
        return decide(ok, f"loss {inst.loss} is not a catalogue loss with ℓ' < 0 on the score range")

    def assume_unique_optimum(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context
                              ) -> Outcome:
        ot = optimal_tokens(inst.data)
        return decide(ot.unique, "an example has tied optimal tokens", min_opt_gap=float(ot.gap.min()))

    def assume_feasible(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context) -> Outcome:
        sol = state.sol
        if not sol.feasible:
            return failed("Att-SVM(opt) infeasible (verified Farkas certificate)")
        return held(wmm_norm=float(sol.objective))

    def check_descent_everywhere(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context
                                 ) -> Outcome:
        data, sol, h, loss = inst.data, state.sol, state.h, inst.loss
        if h is None:
            return undecided("exact (rational) KKT proof of W^mm failed: its margins are not known exactly")
        assert sol.W is not None  # h is computed only for a feasible (optimal) answer
        # W^mm through the resolution seam (tilted inside the span of the token differences); its margin
        # profile moved with it (the exact one when unperturbed)
        Wmm = self.predicted("W^mm", sol.W, "direction", lambda: token_difference_span(data))
        h = moved_profile(data, h, Wmm - sol.W)
        g = scores(data)
        fixed, m = sign_fixed(g, h)
        m.update(given_metrics(ctx))
        if fixed:
            # the argument for every W and every size is proved in theory.stationarity (cached after one call)
            m["proved_all_sizes"] = no_stationary_point_general().holds
            if not m["proved_all_sizes"]:
                return failed("the all-size proof (theory.stationarity) did not go through", **m)
            k, bad = _float_grad_signs(data, Wmm, loss, ctx.rng)
            m.update(float_grad_samples=k, float_grad_nonnegative=bad)
            return decide(
                bad == 0,
                f"the certificate says <grad L(W), W^mm> < 0 at every W, but the closed-form "
                f"gradient gives >= 0 at {bad} of {k} moderate-norm W",
                **m,
            )
        c, sm = search_positive(data, Wmm, loss, ctx.rng, per_norm=int(ctx.params.get("per_norm", 4)),
                                ascent_steps=int(ctx.params.get("ascent_steps", 30)), h=h,
                                extra=pair_ws(data, g, h), starts=ASCENT_STARTS)
        m.update(sm)
        if (c > 0).any():
            return failed("found W with <grad L(W), W^mm> > 0 (exact log-space sign)", **m)
        if (c == 0).any():
            return undecided("sign not fixed by construction and some sampled inner products cancel", **m)
        return held(**m)

    def check_norm_diverges(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context
                            ) -> Outcome:
        return judge_divergence(state.norms, state.losses, GD_LR, GD_STEPS)


@register
class NoStationaryPoints(_LandscapeBase):
    id = "no-stationary-points"
    depends_on = ("svm-fro", "optimal-token", "gd", "gradient", "softmax")
    title = "Under B.1 or B.2, W^mm is a descent direction at every W (no stationary points)"
    reference = "TLTO (arXiv 2308.16898) §4, global convergence under B.1/B.2 — reconstructed"
    statement = (r"\text{A, Att-SVM(opt) feasible, (B.1 or B.2)} \Rightarrow "
                 r"\langle \nabla L(W), W^{mm}\rangle < 0\ \ \forall W,\ \|W(k)\|\to\infty")
    hypotheses_text = (
        "Assumption A (drawn loss logistic/exponential/linear, proved by loss-assumptions; ℓ'<0 on the "
        "score range); unique optimal tokens; Att-SVM(opt) feasible with verified KKT certificate; B.1 "
        "(every non-optimal token a support token of W^mm, from the certified solution) or B.2 "
        "(non-optimal scores of each example equal within TIE_TOL = 1e-9), verified on the instance"
    )

    def instance(self, rng: np.random.Generator, ctx: Context) -> NoStationaryInstance:
        if ctx.data is not None:
            return self._given(rng, ctx)
        kind = "B1" if rng.random() < 0.5 else "B2"
        if kind == "B1":
            n, T = int(rng.integers(1, 4)), int(rng.integers(2, 5))
            data = b1_data(n, T, n * T + int(rng.integers(0, 3)), rng=rng)
        else:
            n, T = int(rng.integers(1, 6)), int(rng.integers(2, 7))
            data = b2_data(n, T, int(rng.integers(2, 9)), rng=rng, self_attention=bool(rng.random() < 0.3))
        return NoStationaryInstance(data=data, kind=kind, loss=self._loss(rng), seed=int(rng.integers(2**31)))

    def assume_b1_or_b2(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context) -> Outcome:
        data, sol = inst.data, state.sol
        if not sol.feasible:
            return failed("Att-SVM(opt) infeasible: B.1 undefined")
        b1, b2 = b1_or_b2(sol, scores(data), optimal_tokens(data).index)
        what = (
            "the given data satisfy"
            if inst.kind == "given"
            else f"instance built for {inst.kind} satisfies"
        )
        return decide(b1 or b2, f"{what} neither B.1 nor B.2", b1=b1, b2=b2)


def near_b2_data(rng: np.random.Generator) -> tuple[AttentionData, int, int]:
    """B.2 data (n ∈ 1..3, T ∈ 4..6, d ∈ max(n, T)..+2) with one non-optimal score of one example moved by
    ±CONTROL_EPS: of the two signs, the first whose certified W^mm gives a negative pair product
    (γ_t − γ_τ)(h_t − h_τ) (so the claim is false there). Returns (data, moved example, moved token)."""
    for _ in range(20):
        n, T = int(rng.integers(1, 4)), int(rng.integers(4, 7))
        base = b2_data(n, T, max(n, T) + int(rng.integers(0, 3)), rng=rng)
        opt = optimal_tokens(base).index
        i = int(rng.integers(n))
        t = int(rng.choice([u for u in range(T) if u != opt[i]]))
        for sgn in rng.permutation([-1.0, 1.0]):
            X = base.X.copy()
            X[i, t, 0] += sgn * CONTROL_EPS * base.Y[i]  # score γ_it = Y_i x_it[0] moves by ±CONTROL_EPS
            data = AttentionData(X, base.Y, base.Z, base.v)
            sol = solve_att_svm(data, norm="fro")
            h = exact_margin_profile(data, sol) if sol.feasible else None
            if h is not None and not sign_fixed(scores(data), h)[0]:
                return data, i, t
    raise RuntimeError("no near-B.2 instance with a negative pair product in 20 draws")


@register
class NoStationaryPointsControl(_LandscapeBase):
    id = "no-stationary-points-control"
    depends_on = ("svm-fro", "optimal-token")
    title = "Control: W^mm is a descent direction everywhere on data within 0.05 of B.2 (false)"
    reference = NoStationaryPoints.reference
    statement = (r"\text{A, Att-SVM(opt) feasible, one score } \varepsilon\text{ from B.2} \Rightarrow "
                 r"\langle \nabla L(W), W^{mm}\rangle < 0\ \ \forall W")
    hypotheses_text = (
        "Assumption A; unique optimal tokens; Att-SVM(opt) feasible; B.2 data with one non-optimal "
        f"score moved by {CONTROL_EPS} (so neither B.1 nor B.2 holds)"
    )
    expected = "FAIL"
    control_of = "no-stationary-points"

    def instance(self, rng: np.random.Generator, ctx: Context) -> NoStationaryInstance:
        if ctx.data is not None:
            return self._given(rng, ctx)
        data, i, t = near_b2_data(rng)
        return NoStationaryInstance(data=data, kind="near-B2", loss=self._loss(rng),
                                    seed=int(rng.integers(2**31)), moved=(i, t))

    def assume_near_b2(self, inst: NoStationaryInstance, state: NoStationaryState, ctx: Context) -> Outcome:
        """Within CONTROL_EPS of B.2: the non-optimal scores of every example spread by at most
        CONTROL_EPS."""
        data = inst.data
        spread = b2_spread(scores(data), optimal_tokens(data).index)
        if inst.kind == "given":
            return held(b2_spread=spread)  # on given data the control tests the claim without B.1/B.2
        return decide(
            spread <= CONTROL_EPS * (1 + 1e-9),
            f"non-optimal scores spread {spread:.3g} > {CONTROL_EPS}",
            b2_spread=spread,
        )
