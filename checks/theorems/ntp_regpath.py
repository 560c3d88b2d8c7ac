r"""ntp-regpath — the regularisation path of next-token prediction has GD's limit.

Statement (Li, Huang, Ildiz, Rawat, Oymak, AISTATS 2024, arXiv 2403.08081, the regularisation-path theorem;
docs/theory.md "Next-token prediction"): W_R = argmin_{‖W‖_F ≤ R} L(W) satisfies

    W_R / R → W^svm / ‖W^svm‖   and   Π_{S_fin} W_R → W^fin   as R → ∞.

The loss is convex in W (every label position of a sequence holds the same token, so the log of the label's
mass is a_y + log(count) − LSE: L = mean LSE(a_i) − a_iy + const), so W_R is the global minimiser on the ball;
numerics.ntp.regularization_path solves it by SLSQP with the analytic gradient (numpy), warm-started.

Hypotheses implemented (exactly): as ntp-gd (labels in their sequences, graph-SVM feasible, W^fin unique);
radii R = ‖W^svm‖·(1, 2, 4, 6, 8, 10, 12) (the suppressed mass falls like e^{−R/‖W^svm‖}); each W_R
certified optimal on the ball (tangential gradient ≤ 1e-6 of ‖∇L‖, ∇L pointing out of the ball: convexity;
an uncertified solve is an ERROR with the solver status).

Predictions (the rules of ntp-gd on the path, k ↦ R_j, second half = the last three radii):
* ``direction``: 1 − corr(W_R, W^svm) fell over the second half and is below every competitor's at R_max
  (the flipped graphs' SVM, TLTO's single-token Att-SVM where feasible);
* ``finite_part``: Π_{S_fin} W_R → W^fin, refuted above the tail bound (2 × the motion over the second half /
  min(f − 1, 1), f the suppressed mass's fall: ntp-gd's rule; the finite part's distance does not fall exactly
  in proportion to that mass — measured on quick seed 1 #6: ×19 against the mass's ×57 from 8 to 12‖W^svm‖,
  as the sphere's multiplier μ ∝ mass/R also displaces it — so no faster approach than a power law is
  assumed), confirmed when resolved against W^fin tilted by ±10 %, 0 and −W^fin.

Control (``ntp-regpath-control``, the wrong SCC partition): "Π_{S_fin} W_R → the minimiser on S_fin of the
loss with every position kept" — refuted (hypothesis: it differs from W^fin by more than 10 % of ‖W^fin‖).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, Profile, decide, register
from checks.power.resolution import TILT, tilt_fin
from numerics.ntp import PATH_KKT, regularization_path

from ._ntp import (
    PROFILES,
    NTPGDBase,
    NTPInstance,
    NTPState,
    WrongPartitionControl,
    answer,
    fin_accuracy,
    judge_direction,
    judge_finite,
    solve,
)

#: Radii ‖W^svm‖·RADII: the suppressed mass falls like e^{-R/‖W^svm‖} (measured on quick seed 0: 0.1–0.5 at
#: the first radius, 2e-6–4e-5 at the last), and the path stays resolvable at float64 up to the last radius
#: (beyond ~40‖W^svm‖ the loss differences fall below float64's resolution). The second half is the last
#: HALF radii.
RADII = np.array([1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0])
HALF = 3


class _PathBase(NTPGDBase):
    theorem_number = "Li et al. 2024, regularisation path"
    integrity = ()
    # no GD: the path is numerics.ntp's own sphere Newton solver, whose loss computes its softmax by its own
    # log-sum-exp (numerics.ntp._lse), outside the softmax seam: softmax sabotages do not reach it (the
    # power matrix of 2026-11-27: PASS under softmax-no-normaliser and -temperature), a gap named in the
    # README
    depends_on = ("svm-fro", "svm-ntp", "ntp-fin")
    gd_steps = 0  # a path: no GD rounding in the finite-part floor
    check_is_gradient_descent = WITHDRAWN
    profiles = {**PROFILES, "quick": Profile(instances=8, min_confirmed=6, batch=8)}

    def prepare(self, instances: Sequence[NTPInstance], ctxs: Sequence[Context]) -> list[NTPState]:
        states = []
        for inst in instances:
            data = inst.data
            solved = solve(data)
            if solved.svm.feasible:
                radii = float(np.linalg.norm(answer(solved.svm))) * RADII
                traj, kkt = regularization_path(data, radii)
                states.append(NTPState.of(solved, radii=radii, traj=traj, path_kkt=kkt,
                                          half=np.arange(len(RADII) - HALF, len(RADII))))
            else:
                states.append(NTPState.of(solved))
        return states


def _path_criteria(finite: str) -> tuple[Criterion, ...]:
    return (
        Criterion("W_R: tangential gradient on the sphere / ‖∇L‖ (KKT, numerics.ntp.PATH_KKT)", "<=",
                  PATH_KKT),
        Criterion(f"finite part ({finite}): ‖Π_Sfin W_Rmax − ·‖ refuted above the tail bound τ; confirmed "
                  "when "
                  f"max residual + 2τ < every candidate's (±{TILT:.0%} tilt, 0, −W^fin)", "<=", "τ"),
    )


@register
class NTPRegPath(_PathBase):
    id = "ntp-regpath"
    title = "NTP: the regularisation path's direction is the graph-SVM and its finite part converges to W^fin"
    statement = (r"W_R=\arg\min_{\lVert W\rVert_F\le R}L(W):\ W_R/R\to W^{svm}/\lVert W^{svm}\rVert,\ "
                 r"\Pi_{S_{fin}}W_R\to W^{fin}")
    hypotheses_text = ("labels occur in their sequences; graph-SVM feasible (certified); W^fin unique; radii "
                       "‖W^svm‖·(1, 2, 4, …, 12); data: numerics.ntp.random_ntp (cyclic) or --data")
    criteria = _path_criteria("W^fin") + (
        Criterion("1 − corr(W_R, W^svm) fell over the second half of the radii and is below every "
                  "competitor's at R_max", "<", "competitors", plot_metric="dir_err"),
    )

    def check_direction(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        comps: dict[str, np.ndarray | None] = {"flipped-graph SVM": state.flip.W,
                                               "single-token SVM": state.single.W}
        traj, half = state.path()
        return judge_direction(traj, half, self._svm_target(inst, state), comps)

    def check_finite_part(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        fp = state.fin
        if not len(fp.basis):
            return decide(float(np.abs(fp.W).max(initial=0.0)) == 0.0, "W^fin ≠ 0 with S_fin = {0}",
                          fin_dim=0)
        W = fp.W
        cands = [tilt_fin(W, fp.basis, sign=1.0), tilt_fin(W, fp.basis, sign=-1.0), np.zeros_like(W), -W]
        traj, half = state.path()
        return judge_finite(traj, half, fp.basis, self._fin_target(state), cands, self._masses(inst, state),
                            steps=0, accuracy=fin_accuracy(fp))


@register
class NTPRegPathControl(_PathBase, WrongPartitionControl):
    id = "ntp-regpath-control"
    expected = "FAIL"
    control_of = "ntp-regpath"
    title = ("Control: the path's finite part is the minimiser with every position kept (wrong partition; "
             "false)")
    statement = r"\Pi_{S_{fin}}W_R\to\arg\min_{W\in S_{fin}}L(W)\ \text{(every position kept; false)}"
    hypotheses_text = ("as ntp-regpath; the wrong partition's finite part unique and farther than "
                       f"{TILT:.0%}·‖W^fin‖")
    criteria = _path_criteria("the wrong partition's minimiser")
