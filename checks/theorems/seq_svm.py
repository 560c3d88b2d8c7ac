r"""seq-svm and causal-svm — GD on the sequence (causal) loss converges in direction to the sequence
(causal) Att-SVM (TLTO §6, sequence-to-sequence and causal attention; **reconstructed**).

Setting: every position k of sequence i is a query z_ik = x_ik with its own label Y_ik and key scores
γ_ikt = Y_ik v^T x_it; the causal version masks keys t > k. Loss L(W) = (1/nT) Σ_{i,k} ℓ(γ_ik^T s_ik(W))
(numerics.sequence). Sequence (causal) SVM (numerics.svm.solve_seq_svm)::

    W^mm_seq = argmin ‖W‖_F  s.t.  (x_{iα_ik} − x_it)^T W x_ik ≥ 1  for all t ≠ α_ik  (t ≤ k if causal),

α_ik the best allowed key of query (i, k). Claim (THEORY.md §4, reconstructed): normalised GD from
W(0) = 0 has W(k)/‖W(k)‖ → W^mm_seq/‖W^mm_seq‖; causal: keys t > k never enter (certified once, see below).

Hypotheses implemented (exactly): logistic loss; normalised GD, step 0.1, 2000 steps, W(0) = 0;
``feasible`` (certified sequence SVM); ``equal_nonoptimal_scores`` — for every query the best allowed key
is unique and all other allowed keys score the same (B.2 per query; our sufficient reconstruction,
by analogy with TLTO's global theorem — the paper's own hypotheses for the sequence version may differ).

Instance family: ``checks.strategies.b2_data`` (n = 2, T = 4, d = 6, score in a dedicated coordinate),
labels Y_ik = Y_i for all positions (then γ_ikt = c_it: one high-score token per sequence, all others equal,
for every query). Causal: the high-score token is moved to position 1 (index 0), the only placement where
every query k ≥ 1 sees it (otherwise earlier queries would have all-tied keys).

Prediction: 1 − corr(W(k), W^mm_seq) non-increasing over the second half and below CORR_TOL at the end.
Lack of progress refutes: from W(0) = 0 a normalised step aligned with the limit adds ≈ η to ‖W‖, so a run
whose ‖W‖ grew by less than NORM_GROWTH_MIN·η per step, or whose 1 − corr at the end is not below its value
at the first record (k = 100), is refuted (a no-op optimiser stays at W = 0). Only a run that progresses is
inconclusive when unconverged with ‖W‖ < BUDGET_RATIO ‖W^mm‖, or still falling but above CORR_TOL and below
SLOW_TOL, or stalled by underflow.

Causal masking is certified once, exactly, not re-checked per instance: the causal SVM has no constraint on
a key t > k by construction (numerics.svm.solve_seq_svm builds none) and the causal softmax puts exactly
zero mass there (a −inf logit), so a per-instance check of it could not fail (tests/theorems/test_gd_checks.py
certifies both). The causal check rests on the direction, which can fail (its control, its finding, and
GD with the mask switched off, which converges to the non-causal SVM where the two differ).

Finding (see the final report): the non-causal claim is genuinely false on a small share of these
instances — a query can lock onto *itself* (key t = k, a non-optimal token) early in training, after
which its pull towards the optimal token is exponentially small and GD converges to the SVM of that
other selection, which has no active constraint at the trapped query (so it is "locally optimal").
Smaller steps (0.01) and plain GD show the same trap. We leave the check refuting such instances.

Finding (causal, paper profile): the causal claim fails the same way on 3 of 200 paper-profile instances
(108, 174, 182) — the last query of a sequence locks onto an earlier non-optimal key and GD converges to the
SVM of the remaining queries; see ``CausalSVM.finding``.

Controls: ``seq-svm-control`` — sequence GD compared with the single-query Att-SVM built from position 1
only (queries z_i = x_i1), refuted where the two SVM directions differ; ``causal-svm-control`` — causal
GD compared with the *non-causal* sequence SVM, refuted where the two differ.
"""

from __future__ import annotations

import numpy as np
import torch

from checks import Criterion, Profile, Theorem, decide, register
from checks.strategies import b2_data
from numerics import tolerances as tol
from numerics.data import AttentionData
from numerics.gd import AUTHORS
from numerics.sequence import run_seq_gd, seq_probs
from numerics.svm import seq_scores, solve_att_svm, solve_seq_svm
from numerics.tokens import corr

from ._trends import SHRINK_MAX, judge_convergence, last_ratio, stalled_below

#: Normalised GD as the authors ran it (THEORY.md §5; numerics.gd.AUTHORS): ‖W‖ ≈ 200 after 2000 steps
#: of 0.1.
STEPS = AUTHORS.steps
LR = AUTHORS.lr
#: Final 1 − corr allowed: measured ≤ 1.5e-3 on converging instances at this budget; the controls'
#: wrong targets sit at 1 − corr ≥ 0.05.
CORR_TOL = 5e-3
#: Second-half trend slack (rounding only).
TREND_RTOL = 1e-6
#: Unconverged runs with ‖W‖ < BUDGET_RATIO ‖W^mm‖ are inconclusive (margins of the normalised iterate
#: scale as ‖W‖/‖W^mm‖; below ~10 softmax is not yet saturated).
BUDGET_RATIO = 10.0
#: An unconverged run whose error still falls and is below SLOW_TOL is inconclusive (too slow for the
#: budget), not refuted; a rising error, or one above SLOW_TOL, refutes. The controls' wrong targets sit
#: at 1 − corr ≥ 0.05 from the true limit, so 0.02 cannot hide a wrong limit.
SLOW_TOL = 2e-2
#: A control's wrong target must differ from the true one by this much to be refutable.
DIFFER = 2 * CORR_TOL
#: Progress: ‖W(end)‖ ≥ NORM_GROWTH_MIN·LR·STEPS from W(0) = 0 (aligned normalised steps add ≈ LR each).
NORM_GROWTH_MIN = 0.5
N, T, D = 2, 4, 6


def _seq_instance(rng, causal: bool) -> dict:
    data = b2_data(N, T, D, rng=rng)
    X = np.array(data.X)
    if causal:  # high-score token to position 0, so every query k >= 1 sees it
        g = data.Y[:, None] * (X @ data.v)
        opt = g.argmax(1)
        for i in range(N):
            X[i, [0, opt[i]]] = X[i, [opt[i], 0]]
    Ylab = np.repeat(data.Y[:, None], T, axis=1)  # (n, T) per-position labels
    return {"X": X, "Y": data.Y, "Yseq": Ylab, "v": np.array(data.v), "gamma": seq_scores(X, Ylab, data.v),
            "causal": causal}


class _SeqBase(Theorem):
    causal = False
    profiles = {
        "quick": Profile(instances=8, min_confirmed=5, batch=8),
        "full": Profile(instances=60, min_confirmed=50, batch=30),
        "paper": Profile(instances=200, min_confirmed=150, batch=50),
    }
    plot_metric = "final_gap"
    criteria = (
        Criterion(
            f"1 − corr(W(S), target SVM), S = {STEPS} (PASS of the instance)",
            "<",
            CORR_TOL,
            plot_metric="gap_curve",
        ),
        Criterion("… and not above its mid-run value, relative slack", "<=", TREND_RTOL),
        Criterion("refuted (no progress) when ‖W(S)‖ − ‖W(0)‖ in units of η·S", "<", NORM_GROWTH_MIN),
        Criterion(
            "… or when 1 − corr(W(S)) is not below its value at the first record",
            ">=",
            "1 − corr at k = 1st record",
        ),
        Criterion("inconclusive (budget): ‖W(S)‖ / ‖target‖", "<", BUDGET_RATIO),
        Criterion("inconclusive (slow): not above mid-run and 1 − corr(W(S))", "<", SLOW_TOL),
        Criterion(
            "inconclusive: the gradient underflowed to 0 before convergence; otherwise refuted",
            "→",
            "inconclusive",
        ),
    )

    def not_applicable(self, data):
        return ("needs sequence data: every position k is a query with its own label Y_ik; the data format "
                "has one query z_i and one label Y_i per example")

    def instance(self, rng, ctx):
        return _seq_instance(rng, self.causal)

    def prepare(self, instances, ctxs):
        res = run_seq_gd(np.stack([i["X"] for i in instances]), np.stack([i["gamma"] for i in instances]),
                         causal=self.causal, steps=STEPS, lr=LR, device=ctxs[0].device)
        states = []
        for j, inst in enumerate(instances):
            sol = solve_seq_svm(inst["X"], inst["gamma"], causal=inst["causal"])
            states.append({"sol": sol, "traj": res.W_traj[:, j], "its": res.iterations,
                           "stalled": bool(res.stalled[j])})
        return states

    # -- hypotheses ------------------------------------------------------------------------------
    def assume_feasible(self, inst, state, ctx):
        return decide(state["sol"].feasible, "sequence SVM infeasible")

    def assume_equal_nonoptimal_scores(self, inst, state, ctx):
        g = inst["gamma"]  # (n, K, T)
        allowed = np.tril(np.ones((T, T), bool)) if inst["causal"] else np.ones((T, T), bool)
        worst_gap, worst_spread = np.inf, 0.0
        for i in range(N):
            for k in range(T):
                keys = np.flatnonzero(allowed[k])
                if len(keys) < 2:
                    continue
                s = np.sort(g[i, k, keys])[::-1]
                worst_gap = min(worst_gap, s[0] - s[1])
                worst_spread = max(worst_spread, s[1] - s[-1])
        return decide(worst_gap > tol.TIE_TOL and worst_spread <= tol.TIE_TOL,
                      "some query's best key is tied or its other keys' scores differ (B.2 unmet)",
                      opt_gap=float(worst_gap))

    # -- predictions -----------------------------------------------------------------------------
    def _target(self, inst, state):
        """The sequence / causal SVM direction GD is predicted to follow (the resolution seam)."""
        return self.predicted("W^mm (sequence SVM)", state["sol"].W, "direction")

    def check_direction(self, inst, state, ctx):
        target = self._target(inst, state)
        gap = 1.0 - corr(state["traj"], target)
        half = len(gap) // 2
        final = float(gap[-1])
        W = state["traj"][-1]


        s = seq_probs(torch.as_tensor(inst["X"][None]), torch.as_tensor(W[None]), inst["causal"])[0].numpy()
        picks = s.argmax(-1)  # (n, K)
        a = state["sol"].alpha
        rows = [(i, k) for i in range(N) for k in range(T) if not (inst["causal"] and k == 0)]
        sel_opt = float(np.mean([picks[i, k] == a[i, k] for i, k in rows]))
        metrics = dict(final_gap=final, mid_gap=float(gap[half]), final_norm=float(np.linalg.norm(W)),
                       selects_optimal=sel_opt, gap_curve=[float(x) for x in gap],
                       gap_iterations=np.asarray(state["its"]).tolist())
        # the stall rule (checks.theorems._trends): over the last doubling of k (S/2 → S) normalised GD's
        # 1 − corr shrinks ×0.25–0.37 (quick seed 0); a ratio above SHRINK_MAX, above the float64 floor of
        # 1 − corr, is a limit other than the target's direction, also below CORR_TOL (resolution, issue 23)
        its = np.asarray(state["its"])
        mid = np.flatnonzero(its == its[-1] // 2)
        stall = bool(mid.size) and stalled_below(np.array([gap[mid[0]], final]), W.size)
        if mid.size:
            metrics["last_ratio"] = last_ratio(np.array([gap[mid[0]], final]))
        ok = final < CORR_TOL and final <= gap[half] * (1 + TREND_RTOL) + 1e-15 and not stall
        if not ok:
            metrics.update(_trap_metrics(inst, W, picks, a, rows))
        growth = float(np.linalg.norm(W) - np.linalg.norm(state["traj"][0]))
        progressed = growth >= NORM_GROWTH_MIN * LR * STEPS and final < gap[1]
        why = "" if progressed else (
            f"‖W‖ grew by {growth:.3g} < {NORM_GROWTH_MIN}·η·steps"
            if growth < NORM_GROWTH_MIN * LR * STEPS
            else f"1−corr did not fall ({gap[1]:.3g} at k = {state['its'][1]} → {final:.3g})"
        )
        return judge_convergence(
            converged=ok,
            no_progress=f"no progress: {why}" if why and not ok else "",
            waits=((np.linalg.norm(W) < BUDGET_RATIO * np.linalg.norm(target),
                    "budget too small: ‖W‖ below BUDGET_RATIO·‖W^mm‖"),
                   (final < SLOW_TOL and final <= gap[half] and not stall,
                    f"converging but slower than the budget: 1−corr {gap[half]:.3g} → {final:.3g}"),
                   (bool(state["stalled"]), "gradient underflowed to 0 before convergence")),
            stalled=(f"1−corr(W, target) = {final:.3g} stalled: ×{metrics['last_ratio']:.2f} "
                     f"(> {SHRINK_MAX}) from k = {its[-1] // 2} to {its[-1]}" if stall else
                     f"1−corr(W, target) = {final:.3g} (mid-run {gap[half]:.3g}) not below {CORR_TOL} and "
                     "falling") + f"; queries selecting the SVM's key: {sel_opt:.2f}",
            **metrics,
        )


def _trap_metrics(inst, W, picks, alpha, rows) -> dict:
    """What the trapped-query mechanism needs, recorded on every unconverged instance: the queries whose final
    pick is not the SVM's key (``trapped``; ``trapped_own_key``: of them, those that pick their own position
    t = k), and the certified sequence SVM of the *other* queries alone (the trapped ones unconstrained):
    1 − corr of W(S) with it (``rest_svm_gap``), and the largest logit deficit of a trapped query's best key
    under that SVM, max_t (x_it − x_iα)ᵀ W^rest x_ik (``trapped_deficit``; > 0: that SVM makes the trapped
    query prefer another key, so it leaves GD's selection as it is)."""
    trapped = [(i, k) for i, k in rows if picks[i, k] != alpha[i, k]]
    out = {"trapped": len(trapped), "trapped_own_key": sum(int(picks[i, k] == k) for i, k in trapped),
           "rest_svm_gap": float("nan"), "trapped_deficit": float("nan")}
    if not trapped or len(trapped) == len(rows):
        return out
    free = np.zeros(alpha.shape, dtype=bool)
    for i, k in trapped:
        free[i, k] = True
    sol = solve_seq_svm(inst["X"], inst["gamma"], causal=inst["causal"], unconstrained=free)
    if sol.feasible:
        X, Wr = inst["X"], sol.W
        out["rest_svm_gap"] = float(1.0 - corr(W, Wr))
        out["trapped_deficit"] = float(min(
            np.max((X[i, : k + 1 if inst["causal"] else None] - X[i, alpha[i, k]]) @ Wr @ X[i, k])
            for i, k in trapped))
    return out


#: The trapped-query mechanism (both findings): some query's final pick is not its best key, GD's direction is
#: the certified SVM of the other queries alone (1 − corr below CORR_TOL, the theorem's own convergence
#: criterion), and under that SVM every trapped query prefers another key to its best one by a positive logit
#: margin (so the selection is self-consistent: GD never returns the trapped query to its best key). Any other
#: refutation fails the run.
def trapped_query_mechanism(r) -> bool:
    m = r.metrics
    try:
        return bool(int(m.get("trapped", 0)) >= 1 and float(m["rest_svm_gap"]) < CORR_TOL
                    and float(m["trapped_deficit"]) > 0.0)
    except (KeyError, TypeError, ValueError):
        return False


@register
class SeqSVM(_SeqBase):
    id = "seq-svm"
    depends_on = ("seq-gd", "svm-fro")
    title = "GD on the sequence loss converges in direction to the sequence Att-SVM (reconstructed)"
    reference = "TLTO (arXiv 2308.16898) §6, sequence-to-sequence attention (reconstructed)"
    statement = (
        r"\frac{W(k)}{\|W(k)\|}\to\frac{W^{mm}_{seq}}{\|W^{mm}_{seq}\|},\ W^{mm}_{seq}=\arg\min\|W\|_F\ "
        r"\text{s.t.}\ (x_{i\alpha_{ik}}-x_{it})^\top W x_{ik}\ge 1\ \forall i,k,t\ne\alpha_{ik}"
    )
    hypotheses_text = (
        "logistic loss; normalised GD (0.1, 2000 steps, W(0)=0); sequence SVM feasible; per query a unique "
        "best key and equal scores for the others (B.2 per query, our sufficient reconstruction)"
    )
    finding = (
        "Genuine counterexamples under these hypotheses, recognised by mechanism on any seed (quick seed "
        "0: 1 of 8 refuted; full seed 0: 5 of 60; paper seed 0: 10 of 200; quick seeds 0-49: 25 of 400 "
        "instances, on 22 seeds). A query locks onto a non-optimal key (its own position in most cases) "
        "early in training; its pull towards the best key then becomes exponentially small and GD "
        "converges to the certified sequence SVM of the other queries alone, under which the trapped "
        "query keeps preferring that key (a locally optimal selection). Seen with step 0.1 and 0.01 and "
        "with plain GD. The global GD claim for sequences needs more than per-query B.2; causal data trap"
        " more rarely (3 of 200 in the paper profile, see causal-svm)."
    )
    finding_seen = {("quick", 0): (0,), ("full", 0): (0, 13, 30, 46, 50),
                    ("paper", 0): (0, 13, 30, 46, 50, 75, 76, 91, 139, 164)}
    finding_mechanism = trapped_query_mechanism


class _OtherTarget:
    """Controls that compare GD with another SVM (``_alt``): solved once per instance, kept in the state
    by the hypothesis that the two SVM directions differ, then used as the prediction's target."""

    alt_name = ""

    def _alt(self, inst):
        raise NotImplementedError

    def assume_targets_differ(self, inst, state, ctx):
        state["alt"] = W_alt = self._alt(inst)
        if W_alt is None:
            return decide(False, f"{self.alt_name} infeasible")
        c = float(corr(W_alt, state["sol"].W))
        return decide(1 - c >= DIFFER, f"{self.alt_name} and the theorem's SVM directions coincide",
                      targets_gap=1 - c)

    def _target(self, inst, state):
        return state["alt"]


@register
class SeqSVMControl(_OtherTarget, SeqSVM):
    id = "seq-svm-control"
    depends_on = ("seq-gd", "svm-fro")
    title = "Control: sequence GD converges to the single-query Att-SVM of position 1 (false)"
    statement = r"W(k)/\|W(k)\|\to W^{mm}_{z=x_{i1}}/\|W^{mm}_{z=x_{i1}}\|\ \text{(false)}"
    expected = "FAIL"
    control_of = "seq-svm"

    alt_name = "position-1 Att-SVM"

    def _alt(self, inst):
        sol = solve_att_svm(AttentionData(inst["X"], inst["Y"], None, inst["v"]))
        return sol.W if sol.feasible else None


@register
class CausalSVM(_SeqBase):
    id = "causal-svm"
    depends_on = ("seq-gd", "svm-fro", "causal-mask")
    causal = True
    title = ("GD on the causal loss converges in direction to the causal Att-SVM; masked keys never enter "
             "(reconstructed)")
    reference = "TLTO (arXiv 2308.16898) §6, causal attention (reconstructed)"
    statement = (r"\frac{W(k)}{\|W(k)\|}\to\frac{W^{mm}_{causal}}{\|W^{mm}_{causal}\|},\ \text{constraints "
                 r"only for keys } t\le k")
    hypotheses_text = (
        "logistic loss; normalised GD (0.1, 2000 steps, W(0)=0); causal SVM feasible; per query a unique "
        "best visible key and equal scores for the other visible keys (B.2 per query)"
    )
    finding = (
        "Genuine counterexamples under these hypotheses (paper profile, seed 0: instances 108, 174, 182 of "
        "200; "
        "none in quick or full). In each, one query — the last position (i = 0, k = 3) — locks early onto an "
        "earlier non-optimal visible key (t = 2 in 108, t = 1 in 174 and 182) while the other five queries "
        "select "
        "their optimal key (selects_optimal = 5/6). Its logit deficit on the optimal key then grows "
        "linearly with "
        "‖W‖ (−107, −193, −84 at ‖W‖ ≈ 200; normalised −0.54, −0.97, −0.42), so its pull is ∝ e^(−deficit), "
        "and "
        "GD converges to the min-norm SVM of the other five queries alone (1 − corr 2.1e-4, 6e-5, 5.7e-4 "
        "after "
        "2000 steps and still falling), in which the trapped query's optimal-key margin is negative (−1.45, "
        "−1.60, "
        "−1.68): 1 − corr with the causal SVM stays at 0.67, 0.79, 0.42. Not a budget artefact: 8000 steps "
        "(‖W‖ ≈ 600–800) give 0.674, 0.796, 0.421, and step 0.01 (‖W‖ ≈ 39) traps the same query. Same "
        "mechanism "
        "as seq-svm's finding (a query locked onto a non-optimal key); per-query B.2 is not sufficient for "
        "the "
        "global causal claim either."
    )
    finding_seen = {("paper", 0): (108, 174, 182)}
    finding_mechanism = trapped_query_mechanism

@register
class CausalSVMControl(_OtherTarget, CausalSVM):
    id = "causal-svm-control"
    depends_on = ("seq-gd", "svm-fro", "causal-mask")
    title = "Control: causal GD converges to the non-causal sequence SVM (false)"
    statement = r"W_{causal}(k)/\|W_{causal}(k)\|\to W^{mm}_{seq}/\|W^{mm}_{seq}\|\ \text{(false)}"
    expected = "FAIL"
    control_of = "causal-svm"

    alt_name = "non-causal sequence SVM"

    def _alt(self, inst):
        sol = solve_seq_svm(inst["X"], inst["gamma"], causal=False)
        return sol.W if sol.feasible else None
