r"""seq-svm-normalized and causal-svm-normalized — NORMALISED GD on the sequence (causal) loss, the authors'
protocol, converges in direction to the sequence (causal) Att-SVM (TLTO §6; **reconstructed**; a labelled
variant of ``seq-svm`` / ``causal-svm``, whose statement is plain GD with η ≤ 1/L_W).

Setting, SVM, hypotheses (feasibility, per-query B.2) and instance family: those of checks/theorems/seq_svm.py
(checks/theorems/_seq.py). The GD: normalised GD W ← W − η ∇L/‖∇L‖_F as the authors ran it, the preset
numerics.gd.AUTHORS passed as it is (η = 0.1, 2000 steps), from W(0) = 0; no Lipschitz step condition.

Prediction: 1 − corr(W(k), W^mm_seq) non-increasing over the second half and below CORR_TOL = 5e-3 at the
end (measured ≤ 1.5e-3 on converging instances at this budget; the controls' wrong targets sit at
1 − corr ≥ 0.05). Lack of progress refutes: from W(0) = 0 a normalised step aligned with the limit adds ≈ η to
‖W‖, so a run whose ‖W‖ grew by less than 0.5·η per step, or whose 1 − corr at the end is not below its value
at the first record (k = 100), is refuted (a no-op optimiser stays at W = 0). The stall rule of
checks/theorems/_trends (normalised GD's 1 − corr shrinks ×0.25–0.37 per doubling of k) refutes a 1 − corr
that levels off, also below CORR_TOL. Only a run that progresses is inconclusive when unconverged with
‖W‖ < 10 ‖W^mm‖, or still falling but above CORR_TOL and below 2e-2, or stalled by underflow. Step fidelity
(``is_gradient_descent``, integrity): the engine's first steps from W = 0 and from a unit-norm W against an
independent numpy gradient (_seq.independent_grad_seq), direction and length.

Resolution (issue 23; checks/power/resolution.json): 0.1 on quick (seq-svm-normalized seed 5: seeds 0–4
are the finding; causal-svm-normalized seed 0), goal 0.05 not met: the variant's own 1 − corr at S = 2000
reaches CORR_TOL on some instances, up to 4× a 5 % tilt's 1 − cos θ = 1.25e-3, so the tilt moves the
S/2 → S ratio too little for SHRINK_MAX and stays within the threshold (the former causal-svm id, on other
draws, resolved 0.05).

Finding (non-causal): on a small share of these instances a query locks onto *itself* (key t = k, a
non-optimal token) early in training, after which its pull towards the optimal token is exponentially small
and GD converges to the SVM of that other selection, which has no active constraint at the trapped query (so
it is "locally optimal"). Step 0.01 shows the same trap. Finding (causal, paper profile): the causal claim
fails the same way on 3 of 200 paper-profile instances (108, 174, 182). Both recognised by
``_seq.trapped_query_mechanism`` on any seed.

Controls: ``seq-svm-normalized-control`` — sequence GD compared with the single-query Att-SVM of position 1;
``causal-svm-normalized-control`` — causal GD compared with the non-causal sequence SVM; each refuted where
the two SVM directions differ (``assume_targets_differ``).
"""

from __future__ import annotations

from checks import register

from ._seq import NonCausalTarget, Position1Target, SeqBase, criteria, trapped_query_mechanism

_GD = "normalised GD (numerics.gd.AUTHORS: 0.1, 2000 steps, W(0)=0)"


@register
class SeqSVMNormalized(SeqBase):
    id = "seq-svm-normalized"
    normalized = True
    depends_on = ("seq-gd", "svm-fro")
    criteria = criteria(True)
    title = ("Normalised GD (authors' protocol) on the sequence loss converges in direction to the sequence "
             "Att-SVM (reconstructed)")
    reference = "TLTO (arXiv 2308.16898) §6, sequence-to-sequence attention, normalised-GD reading (variant)"
    statement = (
        r"W(k+1)=W(k)-\eta\frac{\nabla L}{\|\nabla L\|_F}:\ "
        r"\frac{W(k)}{\|W(k)\|}\to\frac{W^{mm}_{seq}}{\|W^{mm}_{seq}\|}"
    )
    hypotheses_text = (
        f"logistic loss; {_GD}; sequence SVM feasible; per query a unique best key and equal scores for the "
        "others (B.2 per query, our sufficient reconstruction)"
    )
    finding = (
        "Genuine counterexamples under these hypotheses, recognised by mechanism on any seed (quick seed "
        "0, 1, 2: instances 0, 6, 5 of 8; full seed 0: 0, 11, 19, 24 of 60; under the former id seq-svm, "
        "whose draws are now the plain check's: full seed 0 5 of 60, paper seed 0 10 of 200, quick seeds "
        "0-49 25 of 400 instances on 22 seeds). A query locks onto a non-optimal key (its own position in"
        " most cases) early in training; its pull towards the best key then becomes exponentially small "
        "and GD converges to the certified sequence SVM of the other queries alone, under which the "
        "trapped query keeps preferring that key (a locally optimal selection). Seen with step 0.1 and "
        "0.01. The global GD claim for sequences needs more than per-query B.2 under normalised GD; "
        "causal data trap more rarely (3 of 200 in the paper profile, see causal-svm-normalized)."
    )
    finding_seen = {("quick", 0): (0,), ("quick", 1): (6,), ("quick", 2): (5,), ("full", 0): (0, 11, 19, 24)}
    finding_mechanism = trapped_query_mechanism


@register
class SeqSVMNormalizedControl(Position1Target, SeqSVMNormalized):
    id = "seq-svm-normalized-control"
    title = "Control: normalised sequence GD converges to the single-query Att-SVM of position 1 (false)"
    statement = r"W(k)/\|W(k)\|\to W^{mm}_{z=x_{i1}}/\|W^{mm}_{z=x_{i1}}\|\ \text{(false)}"
    expected = "FAIL"
    control_of = "seq-svm-normalized"


@register
class CausalSVMNormalized(SeqBase):
    id = "causal-svm-normalized"
    normalized = True
    causal = True
    depends_on = ("seq-gd", "svm-fro", "causal-mask")
    criteria = criteria(True)
    title = ("Normalised GD (authors' protocol) on the causal loss converges in direction to the causal "
             "Att-SVM (reconstructed)")
    reference = "TLTO (arXiv 2308.16898) §6, causal attention, normalised-GD reading (variant)"
    statement = (r"W(k+1)=W(k)-\eta\frac{\nabla L}{\|\nabla L\|_F}:\ "
                 r"\frac{W(k)}{\|W(k)\|}\to\frac{W^{mm}_{causal}}{\|W^{mm}_{causal}\|}")
    hypotheses_text = (
        f"logistic loss; {_GD}; causal SVM feasible; per query a unique best visible key and equal scores "
        "for the other visible keys (B.2 per query)"
    )
    finding = (
        "Genuine counterexamples under these hypotheses: quick seed 2, instance 2 of 8 (none on quick "
        "seeds 0, 1 or full seed 0); under the former id causal-svm, whose draws are now the plain "
        "check's: paper profile, seed 0, instances 108, 174, 182 of 200. In each, one query locks early "
        "onto an earlier non-optimal visible key while the other queries select their optimal key. In the"
        " paper-profile cases (the last position, i = 0, k = 3, onto t = 2 in 108, t = 1 in 174 and 182; "
        "selects_optimal = 5/6) its logit deficit on the optimal key then grows linearly with ‖W‖ (−107, "
        "−193, −84 at ‖W‖ ≈ 200; normalised −0.54, −0.97, −0.42), so its pull is ∝ e^(−deficit), and GD "
        "converges to the min-norm SVM of the other five queries alone (1 − corr 2.1e-4, 6e-5, 5.7e-4 "
        "after 2000 steps and still falling), in which the trapped query's optimal-key margin is negative"
        " (−1.45, −1.60, −1.68): 1 − corr with the causal SVM stays at 0.67, 0.79, 0.42. Not a budget "
        "artefact: 8000 steps (‖W‖ ≈ 600–800) give 0.674, 0.796, 0.421, and step 0.01 (‖W‖ ≈ 39) traps "
        "the same query. Same mechanism as seq-svm-normalized's finding; per-query B.2 is not sufficient "
        "for the global causal claim under normalised GD either."
    )
    finding_seen = {("quick", 2): (2,)}
    finding_mechanism = trapped_query_mechanism


@register
class CausalSVMNormalizedControl(NonCausalTarget, CausalSVMNormalized):
    id = "causal-svm-normalized-control"
    title = "Control: normalised causal GD converges to the non-causal sequence SVM (false)"
    statement = r"W_{causal}(k)/\|W_{causal}(k)\|\to W^{mm}_{seq}/\|W^{mm}_{seq}\|\ \text{(false)}"
    expected = "FAIL"
    control_of = "causal-svm-normalized"
