r"""md-global — ℓp mirror descent on W converges in direction to the ℓp-AttSVM solution of the optimal tokens.

Statement (Julistiono, Tarzanagh, Azizan, arXiv 2410.14581, ℓp-AttGD; the global reading, with the global
conditions of TLTO §3 reconstructed as in gd-global, THEORY.md §4): for p > 1, under Assumption A on the
loss, unique optimal tokens, ℓp-AttSVM(opt) feasible and B.1 (every non-optimal token a support token of
W^mm_p) or B.2 (all non-optimal scores of an example equal), the mirror descent
∇ψ(W(k+1)) = ∇ψ(W(k)) − η ∇L(W(k)), ψ(W) = (1/p) Σ_ab |W_ab|^p, with a fixed small step from a small start
has ‖W(k)‖ → ∞ and W(k)/‖W(k)‖ → W^mm_p/‖W^mm_p‖, where W^mm_p = argmin ‖W‖_p (entrywise) subject to
(x_{i,opt_i} − x_it)ᵀ W z_i ≥ 1 for all i and t ≠ opt_i. p = 2 is gd-global.

Hypotheses implemented (each computed on the instance): Assumption A (sympy proof, theory.losses); unique
optimal tokens; ℓp-AttSVM(opt) feasible for every exponent of the family, each answer certified by weak
duality (numerics.svm.solve_lp_att_svm; no certificate: ERROR); B.1 on the ℓp solution's support tokens, or
B.2; the start ⟨∇L(W(0)), W^mm_p⟩ < 0. Not computable and stated instead: "η sufficiently small" (the paper
gives no bound for p ≠ 2; the step is gd-global's η = 0.4, ≤ 1/L_W on the family for p = 2).

Instance family: gd-global's (B.2 data n=4, T=6, d=8 and B.1 data n=3, T=4, d=12, alternating), W(0) with
i.i.d. N(0, 0.01²) entries, and p cycling over 1.75, 2, 3 (six instances meet every family and exponent).

Predictions: ``norm_grows`` (plain: each of the last two doublings of k adds ≥ 0.5‖W^mm_p‖_F ln 2 — the
radius grows like ln k − (p − 2) ln ln k, _mirror.py; 0.5 is gd-global's margin below the asymptote 1, not
a proved finite-k bound; normalised: ⟨∇ψ(W), W^mm_p⟩/‖W^mm_p‖_p grows by ≥ 0.5η
per step); ``projection_grows`` (⟨∇ψ(W(k)), W^mm_p⟩ strictly increasing: each mirror step adds
−η⟨∇L, W^mm_p⟩ > 0 under B.1/B.2); ``direction`` — confirmed when 1 − corr(W(S), W^mm_p) < ε, below its
value at S/32 and below 1 − corr(W(S), W^mm_r) for every competitor r (another exponent whose certified
solution is ≥ ε from W^mm_p: in the limit the iterate is closest to its own limit) (ε = 0.05 plain,
gd-global's budget for a 1/log²k rate; 1e-2 normalised, THEORY.md §4);
refuted when the iterate is instead confirmed, by the same rule, to approach a competitor W^mm_r (below ε,
falling, closer than to W^mm_p), or by gd-global's attractor rule in the run's geometry
(_global.attractor_metrics with the certified ℓp-AttSVM of the run's p: an example off its optimal token
whose lead grows over the last two doublings, and the iterate nearer the ℓp-AttSVM(α) of a locally optimal α
≠ opt, or the ℓp SVM of the untrapped examples with the trapped optimal tokens behind, than to W^mm_p;
checked first); normalised only, also refuted below ε when 1 − corr shrank by more than 0.8
over the last doubling (the stall rule, _mirror.py: 1 − corr ∝ k^{−min(2, 2/(p−1))} under normalised MD);
otherwise undecided (budget: the statement is a limit). ``is_gradient_descent`` (integrity): the engine's
first mirror step from W(0) and W(0)/‖W(0)‖_F is ∇ψ(W) − ∇ψ(W₊) = η g against an independent numpy step,
direction and length (_gd.mirror_step_fidelity).

Finding (``finding``; recognised by ``_global.certified_trap_mechanism``): gd-global-normalized's trapped
example, under the paper's plain step. Paper profile, seed 0, instance 64 (p = 2, B.2 data: plain GD with η =
0.4, η·L_W = 0.083 ≤ 1, every hypothesis met): example 3's (from 0) equal-score non-optimal tokens get ahead
early (token 4 leads its optimal token 3 by 9.7 logits at k = 4·10⁴) and the iterate converges to the
certified SVM W_rest of the other three examples, under which that optimal token stays 1.96 logits behind.
Measured to k = 1.28·10⁶ (doublings from 4·10⁴): 1 − corr(W(k), W_rest) 0.036, 0.030, 0.026, 0.023, 0.020,
0.018; 1 − corr to W^mm_p 0.45 → 0.48 (rising); the lead 9.7 → 16.5 (+1.36 = 1.96 ln 2 per doubling); ‖W(k)‖_F
adds 0.46, 0.45, 0.44, 0.43, 0.43, 0.43 × ‖W^mm_p‖_F ln 2 per doubling, → ‖W_rest‖_F/‖W^mm_p‖_F = 0.436 (the
trapped direction's rate; at the budget 0.545 and 0.49, below NORM_RATE_MIN, so ``norm_grows`` fails too). The
global claim needs more than B.2 under the paper's plain step as well.

Controls (the cross pairing, at the boundary of the claim "the limit is the ℓp solution of the SAME p"):
``md-global-control`` runs the same mirror descent with p and claims the limit W^mm_q, q ≠ p, for
(p, q) = (1.75, 3), (3, 1.75), (2, 3); the hypothesis 1 − corr(W^mm_p, W^mm_q) ≥ ε (tested; redrawn when
unmet) puts the claimed limit outside the confirmation ball of the true one. 1.75 and 2 are only 0.013–0.02
apart on the family, below what 20000 plain steps resolve (1 − corr ≈ 0.01–0.04 at the end): the normalised
control ``md-global-normalized-control`` (ε = 1e-2) pairs all six (p, q).

``md-global-normalized``: the normalised variant ∇ψ(W(k+1)) = ∇ψ(W(k)) − η ∇L/‖∇L‖_q (q the dual exponent), η
= 0.1, 4000 steps (1024 for p = 1.75, whose logit gap grows like (ηk)^{4/3} and saturates float64 by k ≈ 2500:
_mirror.normalized_steps) — a variant, not the paper's theorem; its linear growth of the dual variable gives 1
− corr ≈ 1e-4 (p ≤ 2) to 1e-3 (p = 3) within the budget, which resolves the close pair 1.75 / 2.

Numerics: numerics.gd.run_gd with geometry numerics.gd.Mirror(p) (the engine's mirror program,
numerics.gd_torch.run_mirror), batched over the instances of one shape and exponent.
"""

from __future__ import annotations

from checks import register

from ._global import certified_trap_mechanism
from ._mirror import CORR_ERR_MAX_N, ETA, ETA_N, PAIRS_N, STEPS, STEPS_N, MirrorGD, MirrorGDControl

REFERENCE = ("Julistiono, Tarzanagh, Azizan, arXiv 2410.14581 (ℓp-AttGD → ℓp-AttSVM); global conditions of "
             "TLTO §3 as reconstructed for gd-global (THEORY.md §4)")
STATEMENT = (r"\nabla\psi(W_{k+1})=\nabla\psi(W_k)-\eta\nabla L(W_k):\ "
             r"\frac{W_k}{\|W_k\|}\to\frac{W^{mm}_p}{\|W^{mm}_p\|},\ W^{mm}_p=\arg\min\|W\|_p")
CONTROL_STATEMENT = (r"\text{MD with } p,\ q\neq p:\ \frac{W_k}{\|W_k\|}\to\frac{W^{mm}_q}{\|W^{mm}_q\|}")
FAMILY = ("B.2 data n=4,T=6,d=8 and B.1 data n=3,T=4,d=12, alternating; W(0) ~ N(0, 0.01²) with "
          "⟨∇L(W(0)), W^mm_p⟩ < 0")


def _hypotheses(run: str) -> str:
    return ("logistic loss (Assumption A); unique optimal tokens; ℓp-AttSVM(opt) feasible and certified for "
            f"p = 1.75, 2, 3; B.1 on W^mm_p's support tokens or B.2; {FAMILY}; {run}")


@register
class MDGlobal(MirrorGD):
    id = "md-global"
    title = "ℓp mirror descent on W (fixed step) converges in direction to the ℓp-AttSVM solution W^mm_p"
    reference = REFERENCE
    statement = STATEMENT
    hypotheses_text = _hypotheses(f"plain mirror descent, p cycling over 1.75, 2, 3, η = {ETA}, "
                                  f"{STEPS} steps")
    finding = (
        "Genuine counterexample from the paper's small start on B.2 data (paper profile, seed 0, instance "
        "64: p = 2, i.e. plain GD with η = 0.4, η·L_W = 0.083 ≤ 1): one example's equal-score non-optimal "
        "tokens get ahead early and the iterate converges to the certified SVM of the other three examples, "
        "under which the trapped example's optimal token stays 1.96 logits behind — gd-global-normalized's "
        "trapped example, under the paper's own plain step. Measured to 1.28·10⁶ steps: 1 − corr to that SVM"
        " 0.036 → 0.018 (k = 4·10⁴ → 1.28·10⁶), to W^mm_p 0.45 → 0.48 (rising); the trapped lead grows 9.7 →"
        " 16.5 logits (1.96 ln 2 per doubling); ‖W(k)‖_F adds 0.43·‖W^mm_p‖_F ln 2 per doubling = "
        "‖W_rest‖_F/‖W^mm_p‖_F (0.436), the rate of the trapped direction. Recognised by mechanism "
        "(``_global.certified_trap_mechanism`` on the ℓp attractor rule), any seed and exponent."
    )
    finding_seen = {("paper", 0): (64,)}
    finding_mechanism = certified_trap_mechanism


@register
class MDGlobalControl(MirrorGDControl):
    id = "md-global-control"
    title = "Control: ℓp mirror descent against the ℓq-AttSVM solution, q ≠ p (false)"
    reference = REFERENCE
    statement = CONTROL_STATEMENT
    hypotheses_text = _hypotheses(f"plain mirror descent η = {ETA}, {STEPS} steps, (p, q) = (1.75, 3), "
                                  "(3, 1.75), (2, 3); 1 − corr(W^mm_p, W^mm_q) ≥ 0.05 (tested)")
    expected = "FAIL"
    control_of = "md-global"


class _Normalized:
    normalized = True
    steps, lr = STEPS_N, ETA_N
    corr_err_max = CORR_ERR_MAX_N


@register
class MDGlobalNormalized(_Normalized, MirrorGD):
    id = "md-global-normalized"
    title = "Normalised ℓp mirror descent on W converges in direction to W^mm_p (variant)"
    reference = REFERENCE + "; normalised variant"
    statement = (r"\nabla\psi(W_{k+1})=\nabla\psi(W_k)-\eta\frac{\nabla L(W_k)}{\|\nabla L(W_k)\|_q}:\ "
                 r"\frac{W_k}{\|W_k\|}\to\frac{W^{mm}_p}{\|W^{mm}_p\|}")
    hypotheses_text = _hypotheses(f"normalised mirror descent, p cycling over 1.75, 2, 3, η = {ETA_N}, "
                                  f"{STEPS_N} steps (1024 at p = 1.75)")


@register
class MDGlobalNormalizedControl(_Normalized, MirrorGDControl):
    id = "md-global-normalized-control"
    title = "Control: normalised ℓp mirror descent against the ℓq-AttSVM solution, q ≠ p (false)"
    reference = REFERENCE + "; normalised variant"
    statement = CONTROL_STATEMENT
    hypotheses_text = _hypotheses(f"normalised mirror descent η = {ETA_N}, {STEPS_N} steps (1024 at "
                                  "p = 1.75), all six (p, q) with q ≠ p; 1 − corr(W^mm_p, W^mm_q) ≥ 1e-2 "
                                  "(tested)")
    pairs = PAIRS_N
    expected = "FAIL"
    control_of = "md-global-normalized"
