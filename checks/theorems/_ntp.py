"""Shared rules of the next-token-prediction theorems (Li et al., AISTATS 2024, arXiv 2403.08081; private:
theorem modules import this, never each other): the instance draw, the batched GD run of a block, the
certified graph-SVMs and finite parts of an instance, and the two decision rules — a *direction* converging
to a predicted direction rather than to a competitor, and a *finite part* converging to a predicted point,
resolved against perturbed candidates (the rule of gen-svm's finite part, numerics/genfin.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, undecided
from checks.power.resolution import TILT, tilt_fin
from numerics.ntp import (
    FAMILY_CONFIGS,
    GraphSVMResult,
    NTPData,
    NTPFinitePart,
    PriorityGraph,
    finite_part,
    graph_svm,
    loss_np,
    out_of_scc_mass,
    priority_graphs,
    project,
    random_ntp,
    smoothness_bound,
)
from numerics.ntp_gd import record_grid, run_ntp_gd
from numerics.tokens import corr

from ._gd import FIDELITY_TOL, _agreement, judge_fidelity

#: GD budget: plain GD at η = 1/L (L the smoothness bound of numerics.ntp.smoothness_bound: the step of the
#: paper's descent lemma), STEPS steps from W(0) = 0. Measured on quick seed 0: the suppressed tokens' mass
#: falls to 1e-4..3e-2 and the finite part to within 2e-4..2e-2 of W^fin.
STEPS = 20000
#: The second half of the run is recorded on a linear grid of this many points (the finite part's tail rule
#: compares the motion and the suppressed mass between its ends); the rest on a log grid (the curves).
HALF_POINTS = 17
#: Tail bound: the finite part's remaining motion is taken as TAIL_SAFETY × its motion over the second half /
#: min(f − 1, 1), f the suppressed mass's fall over it (the finite part's distance to its limit is
#: proportional to that mass, the proof's rate; 2 covers any power law k^-p with p ≥ 0.58, gen-svm).
TAIL_SAFETY = 2.0
EPS = float(np.finfo(float).eps)
#: Ties between directions: corr values are exact to ~1e-15; 1e-9 absorbs rounding in 1 − corr.
TIE = 1e-9


@dataclass(frozen=True, eq=False)
class NTPInstance:
    """One instance of the NTP theorems (ntp-gd, ntp-acyclic, ntp-regpath, ntp-graph-svm and their
    controls): the dataset, and how many family draws it took (0 for given data)."""

    data: NTPData
    family_draws: int


@dataclass(frozen=True, eq=False)
class NTPSolved:
    """The certified objects of an instance (:func:`solve`): the priority graphs G^(k), the graph-SVM
    (Frobenius), that of the flipped graphs, TLTO's single-token Att-SVM, W^fin and the wrong partition's
    W^fin (every position kept)."""

    graphs: dict[int, PriorityGraph]
    svm: GraphSVMResult
    flip: GraphSVMResult
    single: GraphSVMResult
    fin: NTPFinitePart
    fin_wrong: NTPFinitePart


@dataclass(frozen=True, eq=False)
class NTPState(NTPSolved):
    """The state of the GD and path theorems: the certified objects and a trajectory ``traj`` (S, d, d)
    with the indices ``half`` of its second half — GD's iterates at iterations ``its`` (losses ``loss``, step
    ``lr``, step ``fidelity``), or the regularisation path's W_R at ``radii`` (KKT residuals ``path_kkt``; no
    path, None, where the graph-SVM is infeasible)."""

    traj: np.ndarray | None = None
    half: np.ndarray | None = None
    its: np.ndarray | None = None
    loss: np.ndarray | None = None
    lr: float | None = None
    fidelity: float | None = None
    radii: np.ndarray | None = None
    path_kkt: np.ndarray | None = None

    @classmethod
    def of(cls, solved: NTPSolved, **parts: Any) -> NTPState:
        """The state of ``solved``'s objects with the trajectory ``parts``."""
        return cls(**{f.name: getattr(solved, f.name) for f in fields(NTPSolved)}, **parts)

    def path(self) -> tuple[np.ndarray, np.ndarray]:
        """(traj, half): present wherever a prediction reads them (GD always; the path where the graph-SVM
        is feasible, a hypothesis)."""
        if self.traj is None or self.half is None:
            raise ValueError("no trajectory: the graph-SVM is infeasible")
        return self.traj, self.half


def answer(sol: GraphSVMResult) -> np.ndarray:
    """A feasible graph-SVM's W (where a hypothesis or a branch has established feasibility)."""
    if sol.W is None:
        raise ValueError(f"the graph-SVM has no answer ({sol.status})")
    return sol.W


def draw(rng: np.random.Generator, k: int, kind: str) -> NTPInstance:
    """The instance k of the family (numerics.ntp.random_ntp), (n, T, K, d) cycled over FAMILY_CONFIGS."""
    n, T, K, d = FAMILY_CONFIGS[k % len(FAMILY_CONFIGS)]
    data, tries = random_ntp(rng, n, T, K, d, kind=kind)
    return NTPInstance(data=data, family_draws=tries)


def ntp_sizes(inst: NTPInstance) -> dict[str, int]:
    data = inst.data
    return {"n": data.n, "T": data.T, "K": data.K, "d": data.d}


def record_points(steps: int = STEPS) -> np.ndarray:
    return np.union1d(record_grid(steps), np.linspace(steps // 2, steps, HALF_POINTS).astype(int))


def run_block(datas: Sequence[NTPData], device: str, steps: int = STEPS) -> list[dict[str, Any]]:
    """Plain GD (η_b = 1/L_b) on every dataset, batched per shape; per dataset its iterations, trajectory,
    losses and step fidelity (one recorded step against numpy's gradient, at W(0) and at the first record)."""
    out: list[dict[str, Any]] = [{} for _ in datas]
    groups: dict[tuple[int, int, int], list[int]] = {}
    for b, x in enumerate(datas):
        groups.setdefault((x.n, x.T, x.d), []).append(b)
    rec = record_points(steps)
    for idx in groups.values():
        batch = [datas[b] for b in idx]
        lrs = [1.0 / smoothness_bound(x) for x in batch]
        r = run_ntp_gd(batch, steps=steps, lr=lrs, record_at=rec, device=device)
        for j, b in enumerate(idx):
            out[b] = {"its": r.iterations, "traj": r.W_traj[:, j], "loss": r.loss[:, j], "lr": lrs[j]}
    return out


def step_fidelity(data: NTPData, W: np.ndarray, lr: float, device: str) -> float:
    """Agreement of one step W − W⁺ of NTP GD from W with the step lr ∇L(W), ∇L from numpy
    (numerics.ntp.loss_np): direction and length (checks/theorems/_gd.py ``_agreement``; a step-size bug,
    lr-half / lr-double, gives ~0.5)."""
    nxt = run_ntp_gd([data], steps=1, lr=lr, init=np.asarray(W)[None], record_at=[1], device=device)
    step = (W - nxt.W_traj[-1, 0]).ravel()
    g = loss_np(data, W)[1].ravel()
    return _agreement(step, lr * g, float(np.linalg.norm(W)))


def fidelity(data: NTPData, run: dict[str, Any], device: str) -> float:
    """The worse step fidelity at W(0) = 0 and at a unit-norm random W (where the softmax is far from one-hot:
    an implementation error shows there)."""
    W1 = np.random.default_rng(0).standard_normal((data.d, data.d))
    return min(step_fidelity(data, np.zeros((data.d, data.d)), run["lr"], device),
               step_fidelity(data, W1 / np.linalg.norm(W1), run["lr"], device))


def solve(data: NTPData) -> NTPSolved:
    """The certified objects of an instance: graph-SVM (Frobenius), that of the flipped graph, TLTO's
    single-token Att-SVM, W^fin and the wrong partition's W^fin (every position kept)."""
    graphs = priority_graphs(data)
    return NTPSolved(
        graphs=graphs,
        svm=graph_svm(data, graphs=graphs),
        flip=graph_svm(data, graphs=priority_graphs(data, flip=True)),
        single=graph_svm(data, graphs=graphs, equalities=False),
        fin=finite_part(data, graphs),
        fin_wrong=finite_part(data, graphs, positions="all"),
    )


def second_half(its: np.ndarray, steps: int = STEPS) -> np.ndarray:
    return np.flatnonzero(its >= steps // 2)


# -- the direction rule -------------------------------------------------------------------------------
def judge_direction(traj: np.ndarray, half: np.ndarray, predicted: np.ndarray,
                    competitors: dict[str, np.ndarray | None]) -> Outcome:
    """corr(W(k), predicted) → 1, at a finite budget: e(k) = 1 − corr(W(k), predicted) over the second half.
    Confirmed when e fell over it (last ≤ first) and at the end predicted explains the iterate better than
    every competitor direction (a wrong limit); refuted when a competitor explains it better at the end while
    e did not fall (GD heads elsewhere); undecided otherwise (still turning within the budget)."""
    e = np.array([1 - corr(traj[k], predicted) for k in half])
    comp = {name: float(1 - corr(traj[half[-1]], C)) for name, C in competitors.items() if C is not None}
    m = {"dir_err": float(e[-1]), "dir_err_mid": float(e[0]), "dir_err_curve": e.tolist(),
         "W_norm": float(np.linalg.norm(traj[half[-1]]))}
    m.update({f"dir_err_{k}": v for k, v in comp.items()})
    best_other = min(comp.values(), default=np.inf)
    fell = e[-1] <= e[0] + TIE
    if fell and e[-1] < best_other - TIE:
        return held(**m)
    if not fell and best_other < e[-1] - TIE:
        worst = min(comp, key=lambda k: comp[k])
        return failed(f"GD's direction is nearer {worst} (1 − corr {best_other:.3g}) than the predicted "
                      f"direction ({e[-1]:.3g}, which rose from {e[0]:.3g} over the second half)", **m)
    return undecided(f"direction not resolved within the budget: 1 − corr {e[0]:.3g} → {e[-1]:.3g}, nearest "
                     f"competitor {best_other:.3g}", **m)


def embedding_span(E: np.ndarray) -> list[np.ndarray]:
    """The subspace the NTP SVMs' solutions live in, for resolution (Theorem.predicted's ``span``): the model
    reads W only through E W E^T (logits X_i W x̄_i with X_i = E[t_i]), so W^svm and GD's iterates (from 0) lie
    in row(E) ⊗ row(E); an orthonormal basis u_a u_b^T of it."""
    _, s, Vt = np.linalg.svd(np.asarray(E, dtype=float), full_matrices=False)
    U = Vt[s > s.max() * max(E.shape) * np.finfo(float).eps]
    return [np.outer(a, b) for a in U for b in U]


# -- the finite-part rule ---------------------------------------------------------------------------
def judge_finite(traj: np.ndarray, half: np.ndarray, basis: np.ndarray, predicted: np.ndarray,
                 candidates: Sequence[np.ndarray], masses: np.ndarray, steps: int = STEPS,
                 accuracy: float = 0.0, offsets: np.ndarray | None = None) -> Outcome:
    """Π_{S_fin} W(k) → predicted. D(k) = Π W(k) over the second half, less ``offsets`` (the claim's own
    predicted quasi-static offset of each record, numerics.ntp.fin_offset, where the claim has one: then the
    residual is what the offset does not explain); the remaining motion is bounded by τ = TAIL_SAFETY ·
    (motion over the half) / min(f − 1, 1), f = mass(mid)/mass(end) of the suppressed tokens. Refuted when
    ‖D(end) − predicted‖ > τ + floor; confirmed when max residual + 2(τ + floor) stays below every
    candidate's least residual (the limit is then nearer the prediction than any candidate); else undecided.
    floor: rounding of the projection and of GD (√m d² + steps) ε ‖W‖, plus ``accuracy``: how far the
    predicted point itself may be from the exact one (W^fin: |∇L_fin| / curvature, strong convexity).

    Why the offset (quick seed 5, ntp-gd #0, refuted before it): Π W(k) − W^fin is the sum of the responses
    to several groups of suppressed tokens whose masses fall at different rates, and they cancel in part (the
    residual passed through a minimum near k = 2600 and rose again), so over the second half the residual
    fell only 1.34× while the mass fell 1.99×, and the motion-based τ (2.9e-5) fell short of the residual
    (4.2e-5). The linear response δ(k) = −H⁻¹ Π g_supp(W(k)) predicts that residual to 3.8e-8 (its miss is
    1e-3 of it), the sharper test; τ stays the motion of Π W itself (the iterate's remaining motion), so a
    prediction off by more than Π W can still move is refuted, offset or not."""
    raw = project(basis, traj[half])
    D = raw if offsets is None else raw - offsets
    r = np.linalg.norm(D - predicted, axis=(1, 2))
    mot = float(np.max(np.linalg.norm(raw - raw[-1], axis=(1, 2))))  # how far Π W itself still moves
    f = masses[0] / masses[-1] if masses[-1] > 0 else np.inf
    tail = TAIL_SAFETY * mot / min(f - 1.0, 1.0) if f > 1 else np.inf
    floor = (np.sqrt(len(basis)) * traj[0].size + steps) * EPS * float(np.linalg.norm(traj[half[-1]])) \
        + accuracy
    if offsets is not None:  # the raw residual, before the predicted offset (the curve shows it)
        m0 = np.linalg.norm(raw - predicted, axis=(1, 2))
        extra = {"fin_raw_resid_end": float(m0[-1]), "fin_offset_end": float(np.linalg.norm(offsets[-1]))}
    else:
        extra = {}
    m = {**extra, "fin_resid_end": float(r[-1]), "fin_resid_max": float(r.max()), "fin_motion": mot,
         "fin_tail": float(tail), "fin_floor": float(floor), "mass_end": float(masses[-1]),
         "mass_fall": float(f), "fin_norm": float(np.linalg.norm(predicted)), "fin_dim": len(basis),
         "fin_resid_curve": r.tolist()}
    if not np.isfinite(tail):
        return undecided("the suppressed tokens' mass did not fall over the second half: the finite part's "
                         "limit cannot be bounded (budget)", **m)
    if r[-1] > tail + floor:
        return failed(f"Π_Sfin W(k) is not converging to the predicted finite part: residual {r[-1]:.3g} at "
                      f"the end, beyond the {tail:.2g} it can still move (motion {mot:.2g} over the second "
                      f"half, suppressed mass ×{f:.2f})", **m)
    rc = min(float(np.min(np.linalg.norm(D - C, axis=(1, 2)))) for C in candidates)
    m["fin_cand_resid_min"] = rc
    m["fin_margin"] = margin = rc - float(r.max()) - 2 * (tail + floor)
    if margin > 0:
        return held(**m)
    return undecided(f"the run cannot tell the predicted finite part from its candidates: residual ≤ "
                     f"{r.max():.2g}, candidates ≥ {rc:.2g}, tail bound {tail:.2g} (budget)", **m)


def fin_accuracy(fp: NTPFinitePart) -> float:
    """How far a computed finite part may be from the exact minimiser: |∇L_fin| / (least Hessian eigenvalue)
    (strong convexity on S_fin); 0 where S_fin = {0}."""
    if not len(fp.basis):
        return 0.0
    return float(fp.grad_norm / fp.curvature) if fp.curvature > 0 else float("inf")


def masses_over(data: NTPData, traj: np.ndarray, half: np.ndarray,
                graphs: dict[int, PriorityGraph]) -> np.ndarray:
    return np.array([out_of_scc_mass(data, traj[k], graphs) for k in half])


REFERENCE = "Li, Huang, Ildiz, Rawat, Oymak (AISTATS 2024, arXiv 2403.08081), GD on next-token prediction"
PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, batch=8),
    "full": Profile(instances=60, min_confirmed=50, batch=20),
    "paper": Profile(instances=200, min_confirmed=170, batch=50),
}


class NTPGDBase(Theorem):
    """The GD theorems' shared instance draw (``kind``), batched GD run, certified objects and hypotheses."""

    reference = REFERENCE
    profiles = PROFILES
    accepts_data = True
    data_kind = "ntp"
    # W^svm from the graph-SVM's Frobenius core; GD through run_gd's NTP model (its step hook: the GD
    # sabotages reach it), its gradient's softmax through the GD-step softmax seam (gd_common._softmax_rows)
    depends_on: ClassVar[tuple[str, ...]] = ("svm-fro", "softmax", "ntp-gd", "svm-ntp", "ntp-fin")
    integrity: ClassVar[tuple[str, ...]] = ("is_gradient_descent",)
    plot_metric = "dir_err"
    redraw_on = ()
    kind = "cyclic"
    #: The GD steps behind the trajectory, counted in the finite-part rule's rounding floor
    #: (``judge_finite``'s ``steps``; 0 for a regularisation path).
    gd_steps: ClassVar[int] = STEPS

    def sizes(self, inst: NTPInstance) -> dict[str, int]:
        return ntp_sizes(inst)

    def instance(self, rng: np.random.Generator, ctx: Context) -> NTPInstance:
        if ctx.data is not None:
            return NTPInstance(data=ctx.data, family_draws=0)
        return draw(rng, ctx.instance, self.kind)

    def prepare(self, instances: Sequence[NTPInstance], ctxs: Sequence[Context]) -> list[NTPState]:
        datas = [inst.data for inst in instances]
        runs = run_block(datas, ctxs[0].device if ctxs else "cpu")
        states = []
        for data, run, ctx in zip(datas, runs, ctxs, strict=True):
            solved = solve(data)
            fid = fidelity(data, run, ctx.device)
            states.append(NTPState.of(solved, traj=run["traj"], half=second_half(run["its"]), its=run["its"],
                                      loss=run["loss"], lr=run["lr"], fidelity=fid))
        return states

    def assume_graph_svm_feasible(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        return decide(state.svm.feasible, "the graph-SVM is infeasible (certified by a Farkas vector)")

    def assume_fin_unique(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        return decide(state.fin.unique, f"W^fin is not unique: {state.fin.message}")

    def check_is_gradient_descent(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        assert state.fidelity is not None  # a GD state (the path theorems withdraw this check)
        return judge_fidelity(state.fidelity)

    def _svm_target(self, inst: NTPInstance, state: NTPState) -> np.ndarray:
        """W^svm, the predicted direction, through the resolution seam (Theorem.predicted), tilted inside
        row(E) ⊗ row(E) (:func:`embedding_span`)."""
        return self.predicted("W^svm", answer(state.svm), "direction", lambda: embedding_span(inst.data.E))

    def _fin_target(self, state: NTPState) -> np.ndarray:
        """W^fin, the predicted finite part, through the resolution seam, moved inside S_fin."""
        fp = state.fin
        return self.predicted("W^fin", fp.W, "point", lambda: list(fp.basis))

    def _masses(self, inst: NTPInstance, state: NTPState) -> np.ndarray:
        traj, half = state.path()
        return masses_over(inst.data, traj, half, state.graphs)

    def _svmeq(self, state: NTPState) -> dict:
        W, Ws, Wf = state.path()[0][-1], answer(state.svm), state.fin.W
        u = Ws / np.linalg.norm(Ws)
        R = float(np.sum(W * u))
        return {"R": R, "corr_svmeq": float(corr(W, Wf + R * u))}


class WrongPartitionControl(NTPGDBase):
    """The wrong-SCC-partition controls (ntp-gd-finite-control, ntp-regpath-control): "Π_{S_fin} W(k) → the
    minimiser on S_fin of the loss with every position kept", judged by the finite-part rule with that
    prediction and the true W^fin among the candidates; vacuous unless the two differ by more than
    TILT·‖W^fin‖ (no resolvable difference)."""

    def assume_wrong_part_resolvable(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        fw, fp = state.fin_wrong, state.fin
        gap = float(np.linalg.norm(fw.W - fp.W))
        return decide(bool(fw.unique and gap > TILT * np.linalg.norm(fp.W)),
                      f"the wrong partition's finite part is within {gap:.3g} of W^fin (or not unique)")

    def check_finite_part(self, inst: NTPInstance, state: NTPState, ctx: Context) -> Outcome:
        fp, W = state.fin, state.fin_wrong.W
        cands = [fp.W, tilt_fin(W, fp.basis, sign=1.0), tilt_fin(W, fp.basis, sign=-1.0)]
        traj, half = state.path()
        return judge_finite(traj, half, fp.basis, W, cands, self._masses(inst, state),
                            steps=self.gd_steps, accuracy=fin_accuracy(state.fin_wrong))


def gd_criteria(direction: str, finite: str) -> tuple[Criterion, ...]:
    return (
        Criterion("1 − agreement (direction and length) of one GD step with −η∇L from numpy at W = 0 and "
                  "at a unit-norm W", "<", FIDELITY_TOL),
        Criterion(f"direction ({direction}): 1 − corr(W(k), ·) fell over k ∈ [S/2, S] and is below every "
                  "competitor's at S (refuted: a competitor better while it did not fall)", "<",
                  "competitors", plot_metric="dir_err"),
        Criterion(f"finite part ({finite}): ‖Π_Sfin W(S) − ·‖ refuted above the tail bound τ; confirmed when "
                  f"max residual + 2τ < every candidate's (±{TILT:.0%} tilt, 0, −W^fin)", "<=", "τ"),
    )


