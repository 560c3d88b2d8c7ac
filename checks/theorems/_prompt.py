"""Shared helpers of the TLZO prompt-model checks (p-rp-path, p-nonlinear-head; p-svm-gd's
abandoned-optimal-token mechanism)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from checks import Outcome, decide, undecided
from numerics import tolerances as tol
from numerics.errors import SolverError
from numerics.svm import VectorSVMSolution, solve_p_svm

from ._paths import judge_path


@dataclass(frozen=True, eq=False)
class PromptPathPoints:
    """One instance's prompt regularisation path on the radii R_1 < … < R_S (p-rp-path, p-nonlinear-head):
    the path points ``p`` (S, dk), their excess loss E = L − L_∞ (``excess``, S), stationarity ratios
    (``stat``, S), the excess at the target's ball points R·p̂_target (``cand``, S) and the best excess among
    the starting points (``start_excess``, S)."""

    p: np.ndarray
    excess: np.ndarray
    stat: np.ndarray
    cand: np.ndarray
    start_excess: np.ndarray


def ball_points(sols: list[VectorSVMSolution], radii: np.ndarray) -> np.ndarray:
    """The target's ball points R·ŵ of each feasible p-SVM answer at every radius, stacked (B·S, dk)."""
    return np.concatenate([radii[:, None] * feasible_w(s) / np.linalg.norm(feasible_w(s)) for s in sols])


def path_points(path: Any, cand: np.ndarray) -> list[PromptPathPoints]:
    """Per instance (column of a numerics.prompt_path.PromptPath), its path record with ``cand`` (B, S)."""
    return [PromptPathPoints(p=path.p[c], excess=path.excess[c], stat=path.stationarity[c], cand=cand[c],
                             start_excess=path.start_excess[c]) for c in range(len(cand))]


def feasible_w(sol: VectorSVMSolution) -> np.ndarray:
    """The solution w of a feasible p-SVM (the paths are computed only for those, which carry w)."""
    assert sol.w is not None  # a feasible solution carries w
    return sol.w


def least_margin(keys: np.ndarray, alpha: np.ndarray, p: np.ndarray) -> float:
    """min_{i, t ≠ α_i} p^T (k_{iα_i} − k_it) for keys (n, T, dk)."""
    n, T = keys.shape[:2]
    diffs = keys[np.arange(n), alpha][:, None, :] - keys
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), alpha] = False
    return float((diffs @ p)[mask].min())


def require_tight(keys: np.ndarray, alpha: np.ndarray, sol: VectorSVMSolution) -> float:
    """The certified p-SVM solution's least margin is 1 (to the KKT tolerance): a hard-margin SVM's optimum is
    tight. A feasible, non-optimal answer (e.g. 1.05·p^mm, which has the same direction, so no directional
    check can see it) raises SolverError: the instance is an error carrying status 'not-tight'."""
    assert sol.w is not None  # called on a feasible solution, which carries w
    m = least_margin(keys, alpha, sol.w)
    if abs(m - 1.0) > tol.KKT_TOL:
        raise SolverError(f"p-SVM answer is not tight: least margin {m:.9g} ≠ 1", status="not-tight",
                          solver=sol.solver)
    return m


def path_unreliable(path: PromptPathPoints, judged_from: int, cand_rtol: float,
                    stat_bound: float) -> tuple[str, dict[str, Any]]:
    """Why a prompt path's numerics failed on the judged radii ('' when they did not), with metrics: the
    excess E = L − L_∞ must fall radius by radius, no candidate (the target's ball point) may beat the path
    point by more than ``cand_rtol`` relative, and the final stationarity must be at most ``stat_bound``."""
    E, cand, stat = path.excess, path.cand, float(path.stat[-1])
    dec = bool(np.all(np.diff(E[judged_from:]) < 0))
    beaten = bool(np.any((cand < E - cand_rtol * np.abs(E))[judged_from:]))
    metrics = dict(final_stationarity=stat, excess_final=float(E[-1]), excess_list=[float(x) for x in E])
    why = ("E = L − L_∞ does not decrease over the judged radii" if not dec else
           "the target's ball point has a lower loss than the path point" if beaten else
           f"the path point is not a constrained minimiser (stationarity {stat:.3g} > {stat_bound:.3g})"
           if stat > stat_bound else "")
    return why, metrics


def path_reliable(why: str, metrics: dict[str, Any]) -> Outcome:
    """The path_reliable prediction: undecided (never refuted) when the path numerics failed."""
    if why:
        return undecided(f"path numerics failed: {why}", **metrics)
    return decide(not why, "", **metrics)


def selecting_start(keys: np.ndarray, ref: np.ndarray, P: np.ndarray, judged_from: int) -> int:
    """Start of a prompt path's judged trend: ``judged_from``, or later if the path points P (S, dk) select
    ``ref`` only later — every margin p^T(k_{i ref_i} − k_it) > 0, i.e. p in the open cone of the selection's
    p-SVM, from that radius on (the prompt form of _paths.trend_start: before it the direction is set by a
    finite-R trade-off between selections, not by the max-margin problem; p-nonlinear-head, quick seed 35 #4:
    1 − corr 0.16 → 0.20 at R = 8 → 16 on another selection, then 2.6e-3, 5.1e-4, 1.3e-4 on α's)."""
    n = keys.shape[0]
    D = keys[np.arange(n), ref][:, None, :] - keys  # (n, T, dk)
    marg = np.einsum("ntk,sk->snt", D, P)
    marg[:, np.arange(n), ref] = np.inf
    bad = np.flatnonzero(~(marg.reshape(len(P), -1).min(-1) > 0))
    return max(judged_from, 0 if bad.size == 0 else int(bad[-1]) + 1)


def judge_prompt_path(err: np.ndarray, thr: float, sep: float, path: PromptPathPoints, why: str, what: str,
                      judged_from: int, plateau_rtol: float | None = None,
                      start: int | None = None) -> Outcome:
    """The direction prediction of a prompt path: no progress over the starting points refutes; a path the
    numerics did not find (``why``) decides nothing; otherwise :func:`judge_path` on 1 − corr ``err``.

    ``plateau_rtol`` (for a ``ref`` whose excess has infimum 0, certified by the caller's hypotheses): an
    error above ``thr`` with E > 0 that fell by less than ``plateau_rtol`` relative over the last doubling of
    R is undecided, not refuted. The ball minimiser's E must tend to inf E = 0, and a path converging to any
    direction q with positive margins has E(2R)/E(R) ≈ e^{−R q} → 0; a flat positive E means the path is not
    yet in that regime at the largest radius (it sits on another selection's plateau that the target's
    direction only undercuts at larger R): a radius budget, not a counterexample. ``start``: the first index
    of the judged trend (:func:`selecting_start`; default the large-R half)."""
    curve: dict[str, Any] = dict(err_final=float(err[-1]), err_curve=[float(x) for x in err])
    E, E0 = path.excess[judged_from:], path.start_excess[judged_from:]
    unresolved = f"path numerics failed: {why}" if why else ""
    if plateau_rtol is not None and not why and err[-1] >= thr and E[-1] > 0 \
            and E[-1] >= E[-2] * (1.0 - plateau_rtol):
        unresolved = (f"E = L − L_∞ stays at {E[-1]:.3g} > 0 over the last doubling of R (inf E = 0): the "
                      "path has not reached its asymptotic regime at the largest radius (radius budget)")
    # the optimiser never improved on its starting points: no progress refutes; a path the numerics did not
    # find cannot refute (nor confirm) the claim
    return judge_path(err, thr, what, start=start, err_threshold=thr, sep=sep,
                      no_progress="no progress: at every judged radius the path point is no better than the "
                      "best starting point" if np.all(E >= E0) else "",
                      unresolved=unresolved, **curve)


# -- the abandoned-optimal-token mechanism of prompt GD (p-svm-gd's finding) ---------------------------------
#: An example is "trapped" when its optimal token holds less than half of its softmax mass at the last
#: iterate:
#: the optimal token no longer holds the majority, i.e. GD's selection there is another token (a definition,
#: not a fitted value: the trapped examples measured so far hold 1e-57 – 1e-40 on their optimal token).
TRAPPED_MASS = 0.5


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def logistic_prompt_loss(keys: np.ndarray, gamma: np.ndarray, p: np.ndarray) -> float:
    """L(p) = (1/n) Σ_i log(1 + exp(−γ_i^T S(K_i p))), recomputed from the iterate (not the optimiser's
    record, so a sabotaged optimiser cannot report a falling loss it did not achieve)."""
    u = (np.exp(_log_softmax(keys @ p)) * gamma).sum(-1)
    return float(np.logaddexp(0.0, -u).mean())


def abandoned_opt_metrics(keys: np.ndarray, gamma: np.ndarray, alpha: np.ndarray, traj: np.ndarray) -> dict:
    """What the abandoned-optimal-token mechanism needs, from a recorded GD trajectory ``traj`` (S, dk): log10
    of each example's final softmax mass on its optimal token (``opt_log10_mass``; ``opt_mass_min``), the
    trapped examples (mass < TRAPPED_MASS; ``trapped``), the certified p-SVM of the *untrapped* examples
    alone, q_u (``untrapped_svm_norm``), GD's 1 − corr to it at the end and mid-run (``untrapped_gap``,
    ``untrapped_gap_mid``), the trapped examples' deficit under it, min over trapped i of max_{t ≠ α_i} q_u^T
    (k_it − k_iα_i) (``trapped_deficit``; > 0: q_u ranks another token above every trapped example's optimal
    one, so the selection GD converged to is self-consistent), and whether the logistic loss fell from p(0) to
    p(S) (``loss_fell``: GD descended)."""
    n = keys.shape[0]
    rows = np.arange(n)
    lm = _log_softmax(keys @ traj[-1])[rows, alpha] / np.log(10.0)
    trapped = lm < np.log10(TRAPPED_MASS)
    out = {"opt_log10_mass": [float(x) for x in lm], "opt_mass_min": float(10.0 ** lm.min()),
           "trapped": int(trapped.sum()), "untrapped_svm_norm": float("nan"), "untrapped_gap": float("nan"),
           "untrapped_gap_mid": float("nan"), "trapped_deficit": float("nan"),
           "loss_fell": bool(logistic_prompt_loss(keys, gamma, traj[-1])
                             < logistic_prompt_loss(keys, gamma, traj[0]))}
    if not trapped.any() or trapped.all():
        return out
    # certified (KKT-verified), as every p-SVM of the suite
    sol = solve_p_svm(keys[~trapped], alpha[~trapped])
    if not sol.feasible:
        return out
    q = sol.w
    assert q is not None  # a feasible solution carries w
    gap = 1.0 - (traj @ q) / (np.linalg.norm(traj, axis=-1) * np.linalg.norm(q))
    deficits = []
    for i in np.flatnonzero(trapped):
        s = keys[i] @ q
        deficits.append(float(np.max(np.delete(s, alpha[i]) - s[alpha[i]])))
    out.update(untrapped_svm_norm=float(np.linalg.norm(q)), untrapped_gap=float(gap[-1]),
               untrapped_gap_mid=float(gap[len(gap) // 2]), trapped_deficit=min(deficits))
    return out


def abandoned_opt_token(m: dict, corr_tol: float, trend_rtol: float) -> bool:
    """The mechanism, from the metrics of :func:`abandoned_opt_metrics`: GD descended (``loss_fell``), at
    least one example but not all abandoned its optimal token, GD's direction is the certified p-SVM of the
    untrapped examples alone (1 − corr below ``corr_tol`` — the theorem's own convergence criterion — and not
    above its mid-run value beyond ``trend_rtol``), and under that SVM every trapped example's optimal token
    loses (``trapped_deficit`` > 0). A no-op optimiser (no loss fall, its start's direction) or an ascending
    one (loss rises) does not match."""
    try:
        gap, mid = float(m["untrapped_gap"]), float(m["untrapped_gap_mid"])
        deficit = float(m["trapped_deficit"])
        # + 1e-15: an absolute floor for rounding once the gap sits at float64 resolution (as p-svm-gd's
        # trend)
        return bool(m["loss_fell"] and int(m["trapped"]) >= 1 and gap < corr_tol
                    and gap <= mid * (1 + trend_rtol) + 1e-15 and deficit > 0.0)
    except (KeyError, TypeError, ValueError):
        return False



def abandoned_opt_refutation(result, growth_key: str, min_growth: float, corr_tol: float,
                             trend_rtol: float) -> bool:
    """The abandoned-optimal-token finding on one refuted instance (p-svm-gd, p-gd-equivalence): only
    ``direction`` refuted (every other prediction held), the iterate's norm grew by ``min_growth`` (metric
    ``growth_key``: the check's own progress rule) and :func:`abandoned_opt_token` holds."""
    m, preds = result.metrics, result.predictions
    others = all(v == "held" for k, v in preds.items() if k != "direction")
    try:
        progressed = float(m[growth_key]) >= min_growth
    except (KeyError, TypeError, ValueError):
        return False
    return bool(others and preds.get("direction") == "failed" and progressed
                and abandoned_opt_token(m, corr_tol, trend_rtol))
