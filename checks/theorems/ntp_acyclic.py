r"""ntp-acyclic — acyclic token-priority graphs: no finite part, and the graph-SVM is TLTO's Att-SVM.

Statement (Li, Huang, Ildiz, Rawat, Oymak, AISTATS 2024, arXiv 2403.08081, the acyclic case of the GD
theorem; docs/theory.md "Next-token prediction"): when every G^(k) is acyclic (every SCC a single token),
S_fin = {0}, the graph-SVM has no equality rows and equals TLTO's single-token Att-SVM with the label as the
selected token, and GD's iterate converges in direction to it, W(τ)/‖W(τ)‖ → W^svm/‖W^svm‖, with no finite
correction.

Hypotheses implemented (exactly): labels occur in their sequences; ``acyclic`` — every G^(k) acyclic
(on the family by construction: a random total priority order per last token, the label the highest-priority
token present); graph-SVM feasible (certified). GD as ntp-gd (plain, η = 1/L, 20000 steps from 0).

Predictions:
* ``is_gradient_descent`` (integrity): as ntp-gd;
* ``no_finite_part``: S_fin = {0} (no pair of tokens shares an SCC, the basis is empty);
* ``equals_single_token``: the graph-SVM and TLTO's single-token Att-SVM are both optimal with verified KKT
  certificates and agree, ‖W^svm − W^1tok‖_F ≤ KKT_TOL ‖W^svm‖_F (the same strictly convex program: one
  minimiser; both answers stationary to KKT_TOL = 1e-6);
* ``direction``: as ntp-gd's (competitor: the flipped graphs' SVM). Its resolution is none (measured, quick
  seed 0, `attnsvm power --resolution ntp-acyclic`): the rule is relative (W^svm explains GD's direction
  better than the competitor, and 1 − corr fell), and a tilted W^svm meets it at every ε up to 1: GD's norm
  grows like log τ, so 1 − corr is O(1/log²τ) at 20000 steps and no absolute threshold separates W^svm from
  a tilt of it. ntp-gd and ntp-regpath resolve ε = 0.01 through their finite part W^fin, which S_fin = {0}
  removes here; the exact predictions above carry this check.

Control (``ntp-acyclic-control``, one cycle past the boundary): "no finite part: Π W(τ) → 0" on the cyclic
family of ntp-gd (some G^(k) has an SCC of two or more tokens, ‖W^fin‖ ≥ 0.1), where S_fin ≠ {0} and
Π_{S_fin} W(τ) → W^fin ≠ 0 — judged by ntp-gd's finite-part rule with prediction 0 and W^fin among the
candidates; refuted.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from checks import WITHDRAWN, Context, Criterion, Outcome, decide, register
from checks.power.resolution import tilt_fin
from numerics import tolerances as tol

from ._ntp import NTPGDBase, NTPInstance, NTPState, answer, gd_criteria, judge_direction, judge_finite


class _AcyclicBase(NTPGDBase):
    kind = "acyclic"
    theorem_number = "Li et al. 2024, acyclic case"
    #: acyclic graphs: every SCC one token, so no equality rows to drop and W^fin = 0 (1.05 × 0 = 0)
    invariant_to: ClassVar[dict[str, str]] = {
        "ntp-equalities-dropped": "acyclic graphs have no SCC equality rows",
        "scaled-finite-part": "S_fin = {0}: W^fin = 0 for every scale",
    }


@register
class NTPAcyclic(_AcyclicBase):
    id = "ntp-acyclic"
    title = "NTP, acyclic graphs: S_fin = {0}, graph-SVM = TLTO's Att-SVM, GD's direction converges to it"
    statement = (r"G^{(k)}\ \text{acyclic}\ \Rightarrow\ S_{fin}=\{0\},\ W^{svm}=W^{mm}_{y},\ "
                 r"W(\tau)/\lVert W(\tau)\rVert\to W^{svm}/\lVert W^{svm}\rVert")
    hypotheses_text = ("labels occur in their sequences; every G^(k) acyclic; graph-SVM feasible "
                       "(certified); GD as ntp-gd; data: numerics.ntp.random_ntp (acyclic) or --data")
    criteria = gd_criteria("W^svm", "—")[:2] + (
        Criterion("‖W^svm − W^1tok‖_F / ‖W^svm‖_F", "<=", tol.KKT_TOL),
    )
    assume_fin_unique = WITHDRAWN  # S_fin = {0}: nothing to be unique

    def assume_acyclic(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        cyc = [k for k, g in state.graphs.items() if g.cyclic]
        return decide(not cyc, f"G^(k) has a cycle for k in {cyc}")

    def check_no_finite_part(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        m = len(state.fin.basis)
        return decide(m == 0, f"S_fin has dimension {m} on acyclic graphs", fin_dim=m)

    def check_equals_single_token(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        a, b = state.svm, state.single
        if not (a.feasible and b.feasible):
            return decide(False, f"graph-SVM {a.status}, single-token Att-SVM {b.status}")
        Wa = answer(a)
        rel = float(np.linalg.norm(Wa - answer(b)) / np.linalg.norm(Wa))
        ok = a.certificate.verified and b.certificate.verified and rel <= tol.KKT_TOL
        return decide(ok, f"graph-SVM and single-token Att-SVM differ by {rel:.3g} (relative)", svm_gap=rel)

    def check_direction(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        traj, half = state.path()
        return judge_direction(traj, half, self._svm_target(inst, state), {"flipped-graph SVM": state.flip.W})


@register
class NTPAcyclicControl(NTPGDBase):
    id = "ntp-acyclic-control"
    expected = "FAIL"
    control_of = "ntp-acyclic"
    title = "Control: with one cyclic SCC, GD still has no finite part (Π_Sfin W → 0; false)"
    statement = r"\Pi_{S_{fin}}W(\tau)\to0\ \text{on cyclic data (false)}"
    hypotheses_text = "as ntp-gd (cyclic family, ‖W^fin‖ ≥ 0.1)"
    criteria = gd_criteria("—", "0")[::2]

    def check_finite_part(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        fp = state.fin
        zero = np.zeros_like(fp.W)
        cands = [fp.W, tilt_fin(fp.W, fp.basis, sign=1.0), tilt_fin(fp.W, fp.basis, sign=-1.0)]
        traj, half = state.path()
        return judge_finite(traj, half, fp.basis, zero, cands, self._masses(inst, state))
