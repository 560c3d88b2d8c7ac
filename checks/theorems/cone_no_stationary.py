r"""cone-no-stationary — no stationary point in the cone of a locally optimal W^mm_α: ⟨∇L(W), W^mm_α⟩ < 0
there.

Statement (TLTO §3, local convergence theorem, its landscape part; THEORY.md §3): if α is locally optimal
(every support token t ∈ T_i(α) of W^mm_α scores strictly below α_i) and Att-SVM(α) is feasible, then for a
small enough cone width μ > 0 and R large enough,

.. math:: \langle \nabla L(W), W^{mm}_\alpha \rangle < 0\quad \text{for every } W \in C_{\mu,R}(W^{mm}_\alpha)
          = \{W : \mathrm{corr}(W, W^{mm}_\alpha) \ge 1-\mu,\ \|W\|_F \ge R\},

so L has no stationary point in the cone. The paper's μ and R depend on the data; the rule below is
*reconstructed* (a sufficient rule derived here, stated exactly).

Hypotheses implemented (each an ``assume_*``): logistic loss (Assumption A, sympy proof); α ≠ opt; Att-SVM(α)
feasible (certified) with an exact rational KKT proof of its margins (``_landscape.exact_margin_profile``); α
locally optimal (numerics.svm.is_locally_optimal); the width and radius rule (``cone_rule``):

* μ. Writing W = c Ŵ + W_⊥ (Ŵ = W^mm_α/‖W^mm_α‖), the logit gap of α_i over t is
  (R/‖W^mm_α‖)[(1 − μ') m_it + p_it], m_it the margin of W^mm_α, with |p_it| ≤ ε := √(2μ − μ²)·‖F_it‖·‖W^mm_α‖
  (F_it = (x_iα_i − x_it) z_i^T). We take μ ≤ MU_MAX as large as keeps ε ≤ κ = min(δ⁺, 1)/4, δ⁺ the smallest
  slack m_it − 1 of the non-support tokens that score at least γ_iα_i (1 when there are none): then every
  support token stays ≥ (1 − μ)δ⁺ − 2ε ≥ δ⁺/2 logits-per-unit-R closer than any such non-support token, and
  α_i stays ahead.
* R = M‖W^mm_α‖ with M = max(M_MIN, (SHARE_EXP + log ρ)/g), g = min(δ⁺, 1)/2 the guaranteed separation and
  ρ = nT²·(largest |negative pair product|)/(smallest positive (α_i, support) product)·e^{Δγ} (Δγ the score
  range:
  |ℓ'| ratios between examples): the negative covariance terms are then ≤ e^{−SHARE_EXP} of the positive ones.
  Instances needing M > M_MAX are vacuous.

Instance family: checks.strategies.local_alpha_data (unit-sphere data n=3, T=4, d=6, α = opt except one
example on its second-best token, locally optimal).

Prediction ``descent_in_cone``: ⟨∇L(W), W^mm_α⟩ < 0, judged by the exact log-space sign of the covariance form
(``_landscape.signed_inner``: positive and negative parts as log-sums, so saturated softmax is no obstacle),
at W in the cone: (a) ON THE BOUNDARY, corr = 1 − μ exactly and ‖W‖ ∈ {R, 3R, 10R}, along random directions
and the adversarial directions ±(F_it)_⊥ that move one margin most; (b) inside, corr uniform in [1 − μ, 1];
(c) adversarially: projected Adam ascent of log(negative part) − log(positive part) over the boundary sphere
at ‖W‖ = R from the best starts. Any W with a positive sign refutes; a cancellation below LOG_PREC is
undecided. Prediction ``closed_form_agrees``: on the ray corr = 1 − μ at norms from ‖W^mm_α‖ to R the
production closed form (numerics.attention.grad_W) gives the same inner product as the exact form to GRAD_RTOL
(where it is above float64's floor) — the sign claim is about the gradient GD uses.

Negative control (``cone-no-stationary-control``), at the boundary of local optimality: one example's optimal
token is moved along v to score CONTROL_OFFSET = 1e-3 ABOVE α_i and stays a support token of W^mm_α
(checks.strategies.tied_alpha_data with offset): not locally optimal, 1e-3 from the tie. Its (α_i, t) pair
product (γ_α − γ_t)·1 is negative, and the W in the cone that shortens t's margin (direction −(F_it)_⊥, among
the adversarial candidates) makes that term dominate: ⟨∇L(W), W^mm_α⟩ > 0, found and signed exactly.

Why not the exact tie the issue proposed (measured, quick seed 0): at a tie in float64 (tied_alpha_data,
offset 0) the pair product (γ_α − γ_t)·1 is not 0 but a rounding residue of ±1e-16; where it is −1e-16 the
search does find W with ⟨∇L(W), W^mm_α⟩ > 0 at ‖W‖ = 10R (log gaps 6–13), where it is +1e-16 or exactly 0 it
does not — the verdict would be decided by rounding. At a true tie the product is exactly 0 and the leading
terms keep their sign; the tie breaks the GD part of the local theorem (gd-local-control: the α_i-vs-t gap
stops growing), not this sign. So the control sits a decided 1e-3 past the tie.

Why μ depends on the data (measured): with gd-local's fixed width μ = 0.01 and the same R, some W on the cone
boundary has ⟨∇L(W), W^mm_α⟩ > 0 on 14 of 30 draws (local_alpha_data n=3, T=4, d=6, seed 1); with the rule
above, on none. The paper's μ depends on the data too; a fixed cone is not enough for this part of the
theorem.

Numerics: numerics.svm (certified Att-SVM(α)), numerics.attention.grad_W; the sign is computed independently.
Resolution (issue 23; checks/power/resolution.json): none. The prediction is a sign, ⟨∇L(W), W^mm_α⟩ < 0 at
every W of the cone, and on quick seed 0 it still holds with W^mm_α tilted by any ε up to 1 (90°) inside the
span of the token differences: the statement does not single out W^mm_α, so no check of it can resolve the
direction (a limit of the statement; the cone itself stays the true one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register, undecided
from checks import hypotheses as hyp
from checks.strategies import local_alpha_data, tied_alpha_data
from numerics import attention as att
from numerics import tolerances as tol
from numerics.data import AttentionData
from numerics.svm import SVMSolution, is_locally_optimal, solve_att_svm
from numerics.tokens import margins, optimal_tokens, scores

from ._cone import boundary_start
from ._landscape import LOG_PREC, classify, exact_margin_profile, pair_products, signed_inner

#: Largest cone width (gd-local's μ); the rule may choose a narrower one.
MU_MAX = 0.01
#: R rule: negative covariance terms at most e^{-SHARE_EXP} of the positive ones; M at least M_MIN
#: (gd-local's);
#: beyond M_MAX the instance is vacuous (its μ is so narrow, or its products so unequal, that R is huge).
SHARE_EXP, M_MIN, M_MAX = 10.0, 20.0, 1e4
#: Slack below which a margin counts as active (numerics.tolerances.ACTIVE_TOL).
ACTIVE = tol.ACTIVE_TOL
#: Norm multiples of R at which boundary points are drawn.
RADII = (1.0, 3.0, 10.0)
#: Production vs exact inner product: float64 closed forms, relative (numerics.tolerances.GRAD_RTOL), judged
#: only
#: where |⟨∇L, W^mm_α⟩| exceeds FLOAT_FLOOR × ‖W^mm_α‖ (below it the float gradient has underflowed).
GRAD_RTOL = tol.GRAD_RTOL
FLOAT_FLOOR = 1e-250
#: Judged only where |⟨∇L, W^mm_α⟩| ≥ JUDGE_RATIO·‖∇L‖‖W^mm_α‖: the float closed form errs by ~1e-14 of that
#: Cauchy–Schwarz scale, so GRAD_RTOL relative accuracy is meaningful there (as in kq-divergence).
JUDGE_RATIO = 1e-6
#: Points on the ray corr = 1 − μ, norms geometric from ‖W^mm_α‖ (values O(1), always representable) to R.
CLOSED_FORM_POINTS = 6
#: Adversarial ascent over the boundary sphere: Adam step on the direction, number of starts.
ASCENT_LR, ASCENT_STARTS = 0.05, 6
#: The control's distance past the tie (scores are O(1)): far above TIE_TOL, small against the score gaps.
CONTROL_OFFSET = 1e-3

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"random": 6, "ascent_steps": 30}),
    "full": Profile(instances=60, min_confirmed=50, params={"random": 10, "ascent_steps": 50}),
    "paper": Profile(instances=200, min_confirmed=170, params={"random": 12, "ascent_steps": 60}),
}


@dataclass(frozen=True, eq=False)
class ConeNoStationaryInstance:
    """One instance of cone-no-stationary (and its control): the data, the selection α (n,) and the seed of
    the sampled cone points."""

    data: AttentionData
    alpha: np.ndarray
    seed: int


@dataclass(frozen=True, eq=False)
class ConeNoStationaryState:
    """Att-SVM(α) ``sol``; where it is feasible with an exact KKT proof, its exact margin profile ``h``
    (n, T), and then the reconstructed cone ``rule`` (:func:`cone_rule`: mu, M, R, delta_plus)."""

    sol: SVMSolution
    h: np.ndarray | None = None
    rule: dict[str, float] | None = None


def _features(data, alpha):
    """F_it = (x_iα_i − x_it) z_i^T, shape (n, T, d, d) (zero at t = α_i)."""
    n = data.n
    D = data.X[np.arange(n), alpha][:, None, :] - data.X
    return D[:, :, :, None] * data.Z[:, None, None, :]


def cone_rule(data, alpha, W, h) -> dict:
    """The reconstructed (μ, R) of the module docstring, with the quantities it is made of."""
    n = data.n
    g = scores(data)
    marg = margins(data, W, alpha)
    ga = g[np.arange(n), alpha][:, None]
    nonsup = np.isfinite(marg) & (marg - 1 > ACTIVE)
    higher = nonsup & (g >= ga)
    dplus = float((marg[higher] - 1).min()) if higher.any() else 1.0
    kappa = min(dplus, 1.0) / 4
    nW = float(np.linalg.norm(W))
    Fn = np.linalg.norm(_features(data, alpha), axis=(2, 3)).max()
    s = min(kappa / (Fn * nW), 1.0)
    mu = min(MU_MAX, 1 - np.sqrt(1 - s * s))
    p = pair_products(g, h)
    iu, ju = np.triu_indices(data.T, 1)
    pos = []
    for i in range(n):
        sup = np.isfinite(marg[i]) & (marg[i] - 1 <= ACTIVE)
        for q in range(len(iu)):
            if {iu[q], ju[q]} & {int(alpha[i])} and (sup[iu[q]] or sup[ju[q]]) and p[i, q] > 0:
                pos.append(p[i, q])
    neg = -p[p < 0]
    if not pos:
        rho = np.inf
    else:
        rho = n * data.T ** 2 * (neg.max() if neg.size else 1e-300) / min(pos) * np.exp(g.max() - g.min())
    gsep = min(dplus, 1.0) / 2
    M = max(M_MIN, (SHARE_EXP + np.log(max(rho, 1.0))) / gsep) if np.isfinite(rho) else np.inf
    return {"mu": float(mu), "M": float(M), "R": float(M * nW), "delta_plus": dplus}


def _torch_gap(data, h, Wh, r, mu, V):
    """log(negative part) − log(positive part) of ⟨∇L(W), W^mm_α⟩ (logistic) at W = r((1−μ)Ŵ + √(2μ−μ²)U),
    U the unit part of V orthogonal to Ŵ; differentiable in V (R, d, d)."""
    X, Z = torch.tensor(data.X), torch.tensor(data.Z)
    g = torch.as_tensor(scores(data))
    Wt = torch.as_tensor(Wh)
    U = V - (V * Wt).sum((1, 2), keepdim=True) * Wt
    U = U / U.flatten(1).norm(dim=1)[:, None, None]
    W = r * ((1 - mu) * Wt + np.sqrt(2 * mu - mu * mu) * U)
    logs = torch.log_softmax(torch.einsum("ntd,rde,ne->rnt", X, W, Z), dim=2)
    u = (logs.exp() * g).sum(2)
    lc = -torch.nn.functional.softplus(u)  # log|ℓ'| (logistic)
    iu, ju = np.triu_indices(data.T, 1)
    prod = torch.as_tensor(pair_products(scores(data), h))  # (n, P)
    lmag = torch.log(prod.abs().clamp_min(1e-300))
    terms = (lc[:, :, None] + logs[:, :, iu] + logs[:, :, ju] + lmag[None]).flatten(1)
    sgn = torch.sign(prod).flatten()[None].expand_as(terms)
    big = torch.full_like(terms, -1e30)
    P = torch.logsumexp(torch.where(sgn > 0, terms, big), 1)
    N = torch.logsumexp(torch.where(sgn < 0, terms, big), 1)
    return N - P


def adversarial_boundary(data, h, W, R, mu, V0, steps):
    """Projected Adam ascent of the negative-minus-positive log gap over the boundary sphere at norm R."""
    Wh = W / np.linalg.norm(W)
    V = torch.tensor(V0, requires_grad=True)
    opt = torch.optim.Adam([V], lr=ASCENT_LR)
    for _ in range(steps):
        f = _torch_gap(data, h, Wh, R, mu, V)
        opt.zero_grad()
        (-f.sum()).backward()
        opt.step()
    return np.array([boundary_start(W, R, v, mu) for v in V.detach().numpy()])


@register
class ConeNoStationary(Theorem):
    id = "cone-no-stationary"
    depends_on = ("svm-fro", "optimal-token", "gradient")
    #: a draw whose reconstructed cone rule needs a radius beyond M_MAX is a property of the draw, not of the
    #: claim (quick seeds 0-29: 6 such instances, 2 of 8 on one seed, at the 25 % vacuous bound): drawn again
    redraw_on = ("R_large",)
    title = "No stationary point in the cone of a locally optimal W^mm_α: ⟨∇L(W), W^mm_α⟩ < 0 on C_{μ,R}"
    reference = "TLTO §3 (local convergence theorem, landscape part; μ, R rule reconstructed)"
    statement = (r"\alpha\ \text{locally optimal},\ W\in C_{\mu,R}(W^{mm}_\alpha)\Rightarrow "
                 r"\langle\nabla L(W), W^{mm}_\alpha\rangle<0")
    hypotheses_text = (
        "logistic loss; α ≠ opt; Att-SVM(α) feasible with exact KKT margins; α locally optimal; μ ≤ "
        f"{MU_MAX} and R = M‖W^mm_α‖ from the reconstructed cone rule, M ≤ {M_MAX:g}; local_alpha_data "
        "n=3, T=4, d=6"
    )
    profiles = PROFILES
    plot_metric = "max_log_gap"
    criteria = (
        Criterion("exact sign of ⟨∇L(W), W^mm_α⟩ at boundary / interior / adversarial cone points", "<", 0),
        Criterion("log(negative part) − log(positive part), max over points", "<", f"-{LOG_PREC:g}",
                  plot_metric="max_log_gap"),
        Criterion("production closed form vs exact inner product, relative", "<=", GRAD_RTOL),
    )
    n, T, d = 3, 4, 6

    def not_applicable(self, data):
        return (
            "needs a constructed locally optimal selection α ≠ opt and the cone (μ, R) of the "
            "reconstructed rule on its own instance family; running it on given data is not implemented"
        )

    def _draw(self, rng):
        return local_alpha_data(self.n, self.T, self.d, rng=rng, locally_optimal=True)

    def instance(self, rng: np.random.Generator, ctx: Context) -> ConeNoStationaryInstance:
        data, alpha = self._draw(rng)
        return ConeNoStationaryInstance(data=data, alpha=alpha, seed=int(rng.integers(2**31)))

    def prepare(self, instances: Sequence[ConeNoStationaryInstance],
                ctxs: Sequence[Context]) -> list[ConeNoStationaryState]:
        out = []
        for inst in instances:
            data, a = inst.data, inst.alpha
            sol = solve_att_svm(data, a)
            h = exact_margin_profile(data, sol) if sol.feasible else None
            rule = cone_rule(data, a, sol.W, h) if h is not None else None
            out.append(ConeNoStationaryState(sol=sol, h=h, rule=rule))
        return out

    def assume_loss_A(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState, ctx: Context) -> bool:
        return hyp.loss_satisfies_assumption_a("logistic")

    def assume_alpha_not_opt(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                             ctx: Context) -> bool:
        return bool(np.any(inst.alpha != optimal_tokens(inst.data).index))

    def assume_feasible_exact(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                              ctx: Context) -> Outcome:
        return decide(st.sol.feasible and st.h is not None,
                      "Att-SVM(α) infeasible, or its margins have no exact rational KKT proof")

    def assume_alpha_locally_optimal(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                                     ctx: Context) -> bool:
        return bool(st.sol.feasible) and is_locally_optimal(inst.data, inst.alpha, st.sol)

    def assume_R_large(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                       ctx: Context) -> Outcome:
        r = st.rule
        if r is None:
            return failed("no cone rule: Att-SVM(α) infeasible or its margins not proved exactly")
        return decide(r["M"] <= M_MAX, f"the cone rule needs M = {r['M']:.3g} > {M_MAX:g}", cone_mu=r["mu"],
                      cone_M=float(min(r["M"], 1e12)), delta_plus=r["delta_plus"])

    def _points(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
        data, a, W = inst.data, inst.alpha, st.sol.W
        r, rng = st.rule, np.random.default_rng(inst.seed)
        assert W is not None and r is not None  # the hypotheses held: feasible, with a cone rule
        R, mu, d = r["R"], r["mu"], data.d
        Wh = W / np.linalg.norm(W)
        F = _features(data, a)
        dirs = [s * F[i, t] for i in range(data.n) for t in range(data.T) if t != a[i] for s in (1.0, -1.0)]
        dirs += list(rng.standard_normal((int(ctx.params.get("random", 6)), d, d)))
        bnd = np.array([boundary_start(W, k * R, v, mu) for k in RADII for v in dirs])
        cs = rng.uniform(1 - mu, 1, size=len(dirs))
        inner = []
        for c, v in zip(cs, dirs, strict=True):
            U = v - np.sum(v * Wh) * Wh
            inner.append(R * (c * Wh + np.sqrt(1 - c * c) * U / np.linalg.norm(U)))
        P, N, _ = signed_inner(data, bnd[: len(dirs)], W, "logistic", h=st.h)
        gap = np.where(np.isfinite(N), N - P, -np.inf)
        starts = np.argsort(-gap)[:ASCENT_STARTS]
        U0 = np.array([dirs[j] for j in starts])
        adv = adversarial_boundary(data, st.h, W, R, mu, U0, int(ctx.params.get("ascent_steps", 30)))
        return bnd, np.array(inner), adv, R, mu

    def check_descent_in_cone(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                              ctx: Context) -> Outcome:
        # W^mm_α, the direction of descent the claim names, through the resolution seam (the cone sampled
        # around the true one is the claim's domain, not its prediction)
        data, W = inst.data, self.predicted("W^mm_α", st.sol.W, "direction")
        bnd, inner, adv, R, mu = self._points(inst, st, ctx)
        Ws = np.concatenate([bnd, inner, adv])
        P, N, _ = signed_inner(data, Ws, W, "logistic", h=st.h)
        c = classify(np.asarray(P), np.asarray(N))  # batched W: signed_inner's P, N are arrays
        gap = np.where(np.isfinite(N) & np.isfinite(P), N - P, np.where(np.isfinite(N), np.inf, -np.inf))
        W0 = st.sol.W  # the cone's own axis
        assert W0 is not None
        cw = np.sum(Ws * W0, axis=(1, 2)) / (np.linalg.norm(Ws, axis=(1, 2)) * np.linalg.norm(W0))
        nrm = np.linalg.norm(Ws, axis=(1, 2))
        m = {"points": int(len(Ws)), "positive": int((c > 0).sum()), "undecided_points": int((c == 0).sum()),
             "max_log_gap": float(gap.max()), "max_log_gap_adversarial": float(gap[-len(adv):].max()),
             "min_corr_in_cone": float(cw.min()), "min_norm_over_R": float(nrm.min() / R), "cone_mu": mu}
        if cw.min() < 1 - mu - 1e-12 or nrm.min() < R * (1 - 1e-12):
            return failed("a sampled point lies outside the cone (a bug of the sampler)", **m)
        if (c > 0).any():
            j = int(np.argmax(c > 0))
            return failed(
                f"⟨∇L(W), W^mm_α⟩ > 0 at a W in the cone (corr {cw[j]:.6f}, ‖W‖ = {nrm[j] / R:.3g} R; exact "
                "log-space sign)",
                **m,
            )
        if (c == 0).any():
            return undecided("some inner products cancel below the log-space precision", **m)
        return held(**m)

    def check_closed_form_agrees(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                                 ctx: Context) -> Outcome:
        """On the ray corr = 1 − μ at norms from ‖W^mm_α‖ up to R (geometric): the closed form GD uses and the
        exact form agree wherever the value is representable (deep in the cone it may underflow float64)."""
        data, W = inst.data, st.sol.W
        r, rng = st.rule, np.random.default_rng(inst.seed + 1)
        assert W is not None and r is not None  # the hypotheses held: feasible, with a cone rule
        radii = np.geomspace(np.linalg.norm(W), r["R"], CLOSED_FORM_POINTS)
        Ws = np.array([boundary_start(W, k, v, r["mu"]) for k, v in
                       zip(radii, rng.standard_normal((len(radii), data.d, data.d)), strict=True)])
        P, N, _ = signed_inner(data, Ws, W, "logistic", h=st.h)
        exact = -(np.exp(P) - np.exp(N)) / data.n
        b = att.batch_from_data([data] * len(Ws))
        G = att.grad_W(b.X, b.Y, b.Z, torch.as_tensor(Ws), b.linear_head()).numpy()
        prod = np.einsum("rde,de->r", G, W)
        scale = np.linalg.norm(G, axis=(1, 2)) * np.linalg.norm(
            W
        )  # Cauchy–Schwarz bound of the inner product
        ok = (np.abs(exact) > FLOAT_FLOOR * np.linalg.norm(W)) & (np.abs(exact) >= JUDGE_RATIO * scale)
        if not ok.any():
            return undecided(
                "the inner product is below the float64 resolution of the closed form at every point"
            )
        err = float(np.max(np.abs(prod[ok] - exact[ok]) / np.abs(exact[ok])))
        return decide(
            err <= GRAD_RTOL,
            f"the production gradient's ⟨∇L, W^mm_α⟩ differs from the exact value by {err:.3g} (relative)",
            closed_form_rel_err=err,
            closed_form_points=int(ok.sum()),
        )


@register
class ConeNoStationaryControl(ConeNoStationary):
    id = "cone-no-stationary-control"
    depends_on = ("svm-fro", "optimal-token", "gradient")
    title = "Control: no stationary point in the cone when a support token scores 1e-3 above α_i (false)"
    statement = (
        r"\gamma_{it}=\gamma_{i\alpha_i}+10^{-3},\ t\in\mathcal T_i(\alpha),\ W\in C_{\mu,R}(W^{mm}_\alpha)"
        r"\Rightarrow\langle\nabla L(W), W^{mm}_\alpha\rangle<0"
    )
    hypotheses_text = (
        "logistic loss; α ≠ opt; Att-SVM(α) feasible, exact margins; α NOT locally optimal, at the boundary: "
        f"a support token scores {CONTROL_OFFSET} above α_i; the same cone rule and search"
    )
    expected = "FAIL"
    control_of = "cone-no-stationary"
    offset = CONTROL_OFFSET

    def _draw(self, rng):
        return tied_alpha_data(self.n, self.T, self.d, rng=rng, offset=self.offset)

    def assume_alpha_not_opt(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                             ctx: Context) -> bool:
        g, a = scores(inst.data), inst.alpha
        return bool(np.any(g[np.arange(len(a)), a] < g.max(1)))

    def assume_alpha_locally_optimal(self, inst: ConeNoStationaryInstance, st: ConeNoStationaryState,
                                     ctx: Context) -> bool:  # the control's hypothesis is the negation
        return bool(st.sol.feasible) and not is_locally_optimal(inst.data, inst.alpha, st.sol)
