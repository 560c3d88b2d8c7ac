r"""kq-gd-nuclear — GD on (K, Q) converges in direction to the nuclear-norm Att-SVM⋆ solution.

Statement (TLTO §3–4 experiments and its open problem on the (K, Q) parametrisation; a gradient-flow
proof in special cases by Sheen et al. 2024; *reconstructed*, THEORY.md §4): with m ≥ n, normalised GD
on L(K Q^T) selects tokens α (the final argmax of the softmax, as the paper does) and
K(k) Q(k)^T / ‖K(k) Q(k)^T‖ → W^mm_⋆,α / ‖W^mm_⋆,α‖_F, the nuclear-norm solution, not the Frobenius one.

Hypotheses implemented: m = d ≥ n; the selection is decided (every example puts softmax mass
> 0.99 on one token at the end — otherwise the instance is undecided, not vacuous); Att-SVM(α) and
Att-SVM⋆(α) feasible (certified). Instance family: random unit-sphere data (n=4, T=5, d=8,
cross-attention; d ≥ max(n, T−1) makes every α feasible for generic data).

GD: the authors' protocol (umich-sota/TF-as-SVM local_converge.ipynb, THEORY.md §6; the one
``attnsvm reproduce local-convergence`` calls "authors"): K(0), Q(0) from nn.Linear's default init
(entries uniform on ±1/√d), normalised GD per factor, step 0.1, 2000 steps, on
L(K Q^T) + ε(‖K‖_F² + ‖Q‖_F²) with ε = float64 machine epsilon. Without the ε term ‖KQ^T‖ grows
until the softmax underflows exactly in float64 and GD freezes short of the limit direction (the former
protocol here, step 0.005 for 6000 steps from N(0, 0.3²), left 5 of 12 quick instances "still rising"
at corr ≈ 0.78–0.94); the ε term stops the growth at ‖KQ^T‖ ≈ 60–130, where the logit gaps are ≈ 35 and
nothing underflows, and the direction settles (a point of the regularisation path at λ = ε, whose
direction is within ~1e-2 of the limit's). Measured (seed 0, 200 draws of this family, 13 s):
corr(K Q^T, W^mm_⋆,α) ≥ 0.9876 on every draw, flat from step ~400 on; all 200 select with mass 1.0.

Predictions: (00) is_gradient_descent: one (K, Q) step of run_gd, from K(0), Q(0) and from their rescaling to
‖K(0)Q(0)^T‖ = 1 (softmax far from one-hot), equals the step along an independently computed gradient
(checks/theorems/_gd.py; corr > 1 − 1e-9). The limit direction is a property of the max-margin geometry and is
reached by wrong optimisers too: with the softmax normaliser missing every quick instance still converged to
the nuclear solution (power matrix, softmax-no-normaliser), so without this prediction such a bug passed; (0)
progress: ‖K Q^T‖_F at the end ≥ 4× its start (measured ≥ 59×; a no-op optimiser keeps it) — without progress
the instance is refuted, and only a progressing run can be inconclusive (unclear selection, correlation still
rising); (1) corr(K Q^T, W^mm_⋆,α) ≥ CORR_MIN = 0.97 at the end (below it and still rising over the second
half, by at least a tenth of the remaining distance → undecided; a plateau or a fall → refuted); (2) when the
two SVM solutions differ (s = corr(W^mm_α, W^mm_⋆,α) < 0.98) and the run has converged by (1), the iterate is
nearer the nuclear solution: corr_nuc − corr_fro ≥ ½(1 − s), half the separation the claim gives in the limit
(corr_nuc → 1, corr_fro → s; under the Frobenius alternative the difference tends to s − 1 < 0, so the
threshold is the midpoint between the two predictions, per instance — a fixed 0.02 was above what a converged
run reaches when s ≈ 0.976: measured 0.0186 there). Separation below that and not rising (same rule) →
refuted, converged or not; rising → undecided; above it but corr_nuc < 0.97 → undecided. Metrics include
``alpha_is_opt`` (how often GD selected the optimal tokens; its mean is the share).

Given data (``--data``): GD on the given data from K(0), Q(0) drawn from each instance's seed; the
hypotheses are checked on the data — m = d ≥ n first, and when it fails (digits: d = 16 < n = 60) GD is
not run and the instances are vacuous, naming it. The control is not applicable to such data (its
hypotheses include m ≥ n).

Control (``kq-gd-nuclear-control``): "(K, Q) GD → Frobenius solution", held to the theorem's own
standard with the roles of the two solutions swapped: corr(K Q^T, W^mm_α) ≥ 0.97 and
corr_fro − corr_nuc ≥ ½(1 − s), on instances where the two solutions differ (its hypothesis). Where
s ∈ [0.97, 0.98) a converged run has corr_fro ≈ s ≥ 0.97, so the first prediction alone would confirm the
false claim there; the mirrored separation (the midpoint) refutes it.
Resolution (issue 23; checks/power/resolution.json): 0.2 on quick seed 0, against a goal of 0.05: a limit of
the authors' protocol. Its weight decay settles the direction (corr flat over the second half) at corr
0.985–0.999, so neither the final value (CORR_MIN = 0.97, fixed from 200 draws) nor any trend tells W^mm_⋆
from W^mm_⋆ tilted by 5 % (1 − cos θ = 1.25e-3, inside the run's own residual of up to 1.5e-2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, Profile, Theorem, decide, held, register, undecided
from checks.power.resolution import token_difference_span
from checks.theorems._trends import RISE_FRAC, corr_curve, judge_convergence, rising
from numerics.data import AttentionData, random_unit_sphere
from numerics.gd import AUTHORS_KQ, AUTHORS_WD, run_gd, uniform_init
from numerics.svm import SVMSolution, solve_att_svm
from numerics.tokens import optimal_tokens, softmax_probs

from ._gd import FIDELITY_TOL, judge_fidelity, step_fidelity_kq
from ._given import given_metrics, need_head
from ._norms import CORR_MIN, DIFFER_MAX, SELECT_MIN, SEP_FRAC, judge_separation, svm_corr

#: Progress: ‖K Q^T‖_F must grow at least this factor over the run (measured ≥ 50×; a no-op: 1×).
NORM_GROWTH_MIN = 4.0
#: The authors' GD protocol (numerics.gd.AUTHORS_KQ: step 0.1, 2000 steps, weight decay = float64 eps,
#: nn.Linear init).
RECORD = 100

PROFILES = {
    "quick": Profile(instances=12, min_confirmed=10, batch=12),
    "full": Profile(instances=84, min_confirmed=70, batch=42, max_inconclusive=0.2),
    "paper": Profile(instances=200, min_confirmed=170, batch=50, max_inconclusive=0.2),
}


@dataclass(frozen=True, eq=False)
class KQGDNuclearInstance:
    """One instance of kq-gd-nuclear (and its control): the data and the start K(0), Q(0) (d, d)."""

    data: AttentionData
    K0: np.ndarray
    Q0: np.ndarray


@dataclass(frozen=True, eq=False)
class KQGDNuclearState:
    """GD's recorded K Q^T ``traj`` (S, d, d), the selection α (n,) of its last softmax and that softmax's
    smallest max ``mass``, the optimiser's fidelity, Att-SVM(α) ``fro`` and, where it is feasible,
    Att-SVM⋆(α) ``nuc``. ``skipped``: GD was not run (given data with m = d < n: vacuous), and the other
    fields are None."""

    skipped: bool = False
    traj: np.ndarray | None = None
    alpha: np.ndarray | None = None
    mass: float | None = None
    fidelity: float | None = None
    fro: SVMSolution | None = None
    nuc: SVMSolution | None = None


@register
class KQGDNuclear(Theorem):
    id = "kq-gd-nuclear"
    depends_on = ("kq-gd", "svm-nuc", "softmax")
    title = "GD on (K, Q) converges in direction to the nuclear-norm Att-SVM⋆ solution"
    reference = "TLTO §4 experiments / open problem (reconstructed; Sheen et al. 2024 for gradient flow)"
    statement = r"\frac{K(k)Q(k)^\top}{\|K(k)Q(k)^\top\|_F}\to\frac{W^{mm}_{\star,\alpha}}{\|W^{mm}_{\star,\alpha}\|_F}"  # noqa: E501
    hypotheses_text = (
        "m = d ≥ n; α = final argmax of the softmax (mass > 0.99); Att-SVM(α), Att-SVM⋆(α) feasible; "
        "the authors' GD: normalised per factor, step 0.1, 2000 steps, weight decay "
        "eps(‖K‖² + ‖Q‖²), nn.Linear uniform init"
    )
    profiles = PROFILES
    plot_metric = "corr_nuc"
    criteria = (
        Criterion(
            "1 − corr(one (K, Q) step of the optimiser, −(∇_K L, ∇_Q L) computed independently) at "
            "(K(0), Q(0)) and rescaled to ‖K Q^T‖_F = 1",
            "<",
            FIDELITY_TOL,
        ),
        Criterion("growth ‖K(S)Q(S)^T‖_F / ‖K(0)Q(0)^T‖_F", ">=", NORM_GROWTH_MIN, plot_metric="norm_growth"),
        Criterion("inconclusive (budget): min_i max_t s_it at the last iterate", "<=", SELECT_MIN),
        Criterion("corr(K(S)Q(S)^T, W^mm_⋆,α) at the last iterate", ">=", CORR_MIN, plot_metric="corr_nuc"),
        Criterion(
            "inconclusive (budget) below that only while the second half never falls and rises by ≥ this "
            "fraction of the remaining distance (else refuted)",
            ">=",
            RISE_FRAC,
        ),
        Criterion(
            "(corr_nuc − corr_fro) / (1 − s) at the last iterate, s = corr(W^mm_⋆,α, W^mm_α) < "
            f"{DIFFER_MAX}; "
            "inconclusive below it while rising",
            ">=",
            SEP_FRAC,
        ),
    )
    n, T, d = 4, 5, 8
    accepts_data = True

    def not_applicable(self, data):
        return need_head(data)

    def instance(self, rng: np.random.Generator, ctx: Context) -> KQGDNuclearInstance:
        if ctx.data is not None:
            d = ctx.data.d
            K0 = uniform_init(rng, (d, d), d)
            return KQGDNuclearInstance(data=ctx.data, K0=K0, Q0=uniform_init(rng, (d, d), d))
        data = random_unit_sphere(self.n, self.T, self.d, rng=rng)
        d = self.d
        K0 = uniform_init(rng, (d, d), d)
        return KQGDNuclearInstance(data=data, K0=K0, Q0=uniform_init(rng, (d, d), d))

    def prepare(self, instances: Sequence[KQGDNuclearInstance],
                ctxs: Sequence[Context]) -> list[KQGDNuclearState]:
        given = ctxs[0].data
        if given is not None and given.d < given.n:
            # m = d < n: vacuous (assume_m_ge_n), GD not run
            return [KQGDNuclearState(skipped=True) for _ in instances]
        datas = [i.data for i in instances]
        K0 = np.stack([i.K0 for i in instances])
        Q0 = np.stack([i.Q0 for i in instances])
        traj = run_gd(datas, AUTHORS_KQ, init=(K0, Q0), record_every=RECORD, device=ctxs[0].device).W_traj
        assert traj is not None  # recorded (record_every)
        lr = AUTHORS_KQ.lr
        assert isinstance(lr, float)  # the protocol's one step
        out = []
        for j, data in enumerate(datas):
            s = softmax_probs(data, traj[-1, j])
            alpha = s.argmax(1)
            K0j, Q0j = instances[j].K0, instances[j].Q0
            unit = np.sqrt(np.linalg.norm(K0j @ Q0j.T))  # K, Q scaled alike so that ‖K Q^T‖ = 1
            fidelity = min(
                step_fidelity_kq(data, K, Q, lr, weight_decay=AUTHORS_WD, device=ctxs[j].device)
                for K, Q in ((K0j, Q0j), (K0j / unit, Q0j / unit))
            )
            fro = solve_att_svm(data, alpha)
            nuc = solve_att_svm(data, alpha, norm="nuc") if fro.feasible else None
            out.append(KQGDNuclearState(traj=traj[:, j], alpha=alpha, mass=float(s.max(1).min()),
                                        fidelity=fidelity, fro=fro, nuc=nuc))
        return out

    def assume_m_ge_n(self, inst: KQGDNuclearInstance, st: KQGDNuclearState, ctx: Context) -> Outcome:
        data = inst.data  # m = d
        return decide(data.d >= data.n, f"m = d = {data.d} < n = {data.n}")

    def assume_feasible(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                        ctx: Context) -> Outcome | bool:
        if st.skipped:
            return undecided("not judged: GD was not run (m < n)")
        assert st.fro is not None
        return st.fro.feasible and st.nuc is not None and st.nuc.feasible

    #: the solution the claim names ("nuc": W^mm_⋆; the control: "fro"), handed through the resolution seam
    claim_key = "nuc"

    def _curves(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                ctx: Context | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
        def span():
            return token_difference_span(inst.data)

        assert st.fro is not None and st.nuc is not None and st.traj is not None, "not run, or infeasible"
        Wn, Wf = st.nuc.W, st.fro.W
        assert Wn is not None and Wf is not None  # feasible (the hypotheses held)
        s = svm_corr(Wf, Wn)  # of the solutions themselves (the claimed one is then handed through the seam)
        if self.claim_key == "nuc":
            Wn = self.predicted("W^mm_⋆", Wn, "direction", span)
        else:
            Wf = self.predicted("W^mm", Wf, "direction", span)
        cn = corr_curve(st.traj, Wn)
        cf = corr_curve(st.traj, Wf)
        # descriptive only (how often GD selected opt); no decision uses optimal_tokens, so "optimal-token" is
        # not among depends_on
        alpha_is_opt = float(np.all(st.alpha == optimal_tokens(inst.data).index))
        return (
            cn,
            cf,
            dict(
                given_metrics(ctx),
                corr_nuc=float(cn[-1]),
                corr_fro=float(cf[-1]),
                svm_corr=s,
                alpha_is_opt=alpha_is_opt,
                selected_mass=st.mass,
                corr_nuc_curve=cn.tolist(),
                corr_nuc_iterations=np.minimum(RECORD * np.arange(len(cn)), AUTHORS_KQ.steps).tolist(),
            ),
        )

    def check_is_gradient_descent(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                                  ctx: Context) -> Outcome:
        assert st.fidelity is not None, "GD was not run"
        return judge_fidelity(st.fidelity, step="(K, Q) step", along="−(∇_K L, ∇_Q L)")

    def check_progress(self, inst: KQGDNuclearInstance, st: KQGDNuclearState, ctx: Context) -> Outcome:
        assert st.traj is not None, "GD was not run"
        n = np.linalg.norm(st.traj, axis=(1, 2))
        g = float(n[-1] / max(n[0], 1e-300))
        return decide(g >= NORM_GROWTH_MIN, f"no progress: ‖K Q^T‖ grew {g:.3g}× (< {NORM_GROWTH_MIN:g}×)",
                      norm_growth=g)

    def check_selected(self, inst: KQGDNuclearInstance, st: KQGDNuclearState, ctx: Context) -> Outcome:
        assert st.mass is not None, "GD was not run"
        if st.mass <= SELECT_MIN:
            return undecided(
                f"no clear token selection yet (min max-softmax {st.mass:.3f} ≤ {SELECT_MIN})"
            )
        return held()

    def _converges(self, c: np.ndarray, metrics: dict, name: str) -> Outcome:
        return judge_convergence(
            converged=bool(c[-1] >= CORR_MIN),
            falling=f"corr with the {name} solution still rising but {c[-1]:.4f} < {CORR_MIN}"
            if rising(c, CORR_MIN) else "",
            stalled=f"corr with the {name} solution {c[-1]:.4f} < {CORR_MIN} and not rising",
            **metrics,
        )

    def check_nuclear_direction(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                                ctx: Context) -> Outcome:
        cn, cf, m = self._curves(inst, st, ctx)
        return self._converges(cn, m, "nuclear")

    def _separated(self, c_claim: np.ndarray, c_other: np.ndarray, m: dict, claim: str,
                   other: str) -> Outcome:
        """corr with the claimed solution exceeds corr with the other by ≥ SEP_FRAC·(1 − s), judged at
        convergence (checks/theorems/_norms.py)."""
        if m["svm_corr"] >= DIFFER_MAX:
            return held(separation=float(c_claim[-1] - c_other[-1]))
        its = np.minimum(RECORD * np.arange(len(c_claim)), AUTHORS_KQ.steps).tolist()
        return judge_separation(c_claim, c_other, m["svm_corr"], iterations=its, claim=claim, other=other,
                                claim_converged=bool(c_claim[-1] >= CORR_MIN))

    def check_beats_frobenius(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                              ctx: Context) -> Outcome:
        cn, cf, m = self._curves(inst, st, ctx)
        return self._separated(cn, cf, m, "nuclear", "Frobenius")


@register
class KQGDNuclearControl(KQGDNuclear):
    id = "kq-gd-nuclear-control"
    depends_on = ("kq-gd", "svm-nuc", "softmax")
    title = "Control: (K, Q) GD converges to the Frobenius solution (false)"
    statement = r"\frac{K(k)Q(k)^\top}{\|K(k)Q(k)^\top\|_F}\to\frac{W^{mm}_\alpha}{\|W^{mm}_\alpha\|_F}"
    hypotheses_text = KQGDNuclear.hypotheses_text + "; the two SVM solutions differ (corr < 0.98)"
    expected = "FAIL"
    control_of = "kq-gd-nuclear"
    plot_metric = "corr_fro"
    criteria = KQGDNuclear.criteria[:3] + (
        Criterion(
            "corr(K(S)Q(S)^T, W^mm_α) (Frobenius) at the last iterate", ">=", CORR_MIN, plot_metric="corr_fro"
        ),
        KQGDNuclear.criteria[4],
        Criterion(
            "(corr_fro − corr_nuc) / (1 − s) at the last iterate, s = corr(W^mm_⋆,α, W^mm_α) < "
            f"{DIFFER_MAX}; "
            "inconclusive below it while rising",
            ">=",
            SEP_FRAC,
        ),
    )

    def not_applicable(self, data):
        if data.d < data.n:
            return (
                f"the control needs the theorem's hypothesis m = d >= n to say anything; the given data have "
                f"d = {data.d} < n = {data.n}"
            )
        return need_head(data)

    def assume_solutions_differ(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                                ctx: Context) -> bool:
        _, _, m = self._curves(inst, st, ctx)
        return m["svm_corr"] < DIFFER_MAX

    claim_key = "fro"

    def check_nuclear_direction(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                                ctx: Context) -> Outcome:
        cn, cf, m = self._curves(inst, st, ctx)
        return self._converges(cf, m, "Frobenius")

    #: the theorem's separation prediction is replaced by its mirror image (None removes the inherited one)
    check_beats_frobenius = WITHDRAWN

    def check_beats_nuclear(self, inst: KQGDNuclearInstance, st: KQGDNuclearState,
                            ctx: Context) -> Outcome:
        cn, cf, m = self._curves(inst, st, ctx)
        return self._separated(cf, cn, m, "Frobenius", "nuclear")
