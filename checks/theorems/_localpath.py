r"""Shared machinery of the *local* (cone-restricted) regularisation-path theorems rp-w-local and rp-kq-local.

Not a theorem module (the leading underscore keeps ``catalogue.load_builtin`` from importing it as one).

The local path (TLTO §3, local regularisation path; reconstructed, see docs/theory.md "rp-w-local"): for a
locally optimal selection α ≠ opt with Att-SVM(α) feasible, and a cone C_μ(W^mm_α) = {W : corr(W, W^mm_α) ≥ 1
− μ} narrow enough to exclude the other selections' directions,

    W̄_R = argmin { L(W) : ‖W‖ ≤ R, W ∈ C_μ(W^mm_α) }   satisfies   W̄_R / R → W^mm_α / ‖W^mm_α‖   (R → ∞),

with ‖·‖_F and W^mm_α for W, and ‖·‖_⋆ (the (K, Q) constraint ‖K‖_F² + ‖Q‖_F² ≤ 2R in disguise) and the
nuclear solution W^mm_⋆,α for (K, Q). The paper's cone also bounds ‖W‖ ≥ R_0 from below; the constrained
minimiser lies on the sphere ‖W‖ = R (prediction ``constraint_active``), so for R ≥ R_0 that bound is inactive
and the convex cone above is the same problem. The path is numerics.regpath.regularization_path(cone=(W^mm_α,
μ)).

Why these constants (measured, seed 0, n = 3, T = 4, d = 6):

* The radii are per instance, R = M·‖W^mm_α‖ with M ∈ MULTIPLES = 2, 4, ..., 32: the path's regime is set by
  the logit gaps R·margin/‖W^mm_α‖, not by R itself. Beyond M ≈ 32 the loss no longer resolves in float64
  (the non-selected tokens' shares e^{−M} fall below its last digit; measured drop 3e-15..1e-14 relative from
  M = 32 to 64), so only radii at which the loss still drops by > RES_RTOL are judged (as rp-w-frobenius).
* δ⁺ = min{margin_it(W^mm_α) − 1 : t non-support, γ_it ≥ γ_iα_i}: the higher-scoring non-support tokens are
the
  only ones whose attention lowers the loss, so they pull the finite-R path out of the cone's centre; their
  share relative to the support tokens is e^{−δ⁺ M}. The theorem's R depends on δ⁺ (as gd-local's); on the
  resolvable grid (M ≤ 32) the asymptotic regime is reached only when δ⁺ M is large there, so the family and
  the hypothesis ``higher_tokens_suppressed`` require δ⁺ ≥ DELTA_MIN = 0.5 (e^{−16} at M = 32). Measured with
  μ = 0.01: every one of 12 instances with δ⁺ ≥ 0.5 leaves the cone boundary and ends at 1 − corr ≤ 3.7e-3 at
  M = 32, while 10 of 12 instances with δ⁺ < 0.35 stay on the boundary through M = 32 (their regime lies
  where the loss is flat in float64: not decidable in float64, so not in the family).
* μ = MU = 0.01: the cone must contain no direction of another selection (TLTO: μ small enough); with μ = 0.1
on
  the same data the path rode the boundary towards W^mm on 7 of 8 instances. 0.01 is gd-local's μ.
* The directional threshold is min(CORR_ERR_MAX, μ / SEPARATION_K) = 2.5e-3: the competing answers are the
cone
  boundary (1 − corr = μ, where a path pulled outwards, or a non-locally-optimal α, sits) and W^mm (outside
  the cone: hypothesis ``cone_excludes_global``, 1 − corr(W^mm_α, W^mm) ≥ SEPARATION_K·μ). With K = 4 a path
  within μ/4 of W^mm_α is provably more than μ/4 from every boundary point (_paths.SEPARATION_K's angle
  argument).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from checks import Context, Outcome, Theorem, decide, failed, held, undecided
from checks import hypotheses as hyp
from numerics import tolerances as tol
from numerics.data import AttentionData
from numerics.regpath import regularization_path
from numerics.svm import SVMSolution, is_locally_optimal, solve_att_svm
from numerics.tokens import corr, margins, optimal_tokens, scores

from ..power.resolution import token_difference_span
from ._trends import SHRINK_MAX, judge_convergence, last_ratio

#: Cone half-width μ (see the module docstring).
MU = 0.01
#: Higher-scoring non-support tokens' slack δ⁺ needed for the regime to be reachable in float64 (docstring).
DELTA_MIN = 0.5
#: R = M · ‖W^mm_α‖ (docstring: beyond M = 32 the loss is flat in float64).
MULTIPLES = 2.0 ** np.arange(1, 8)
#: Directional threshold cap and separation factor (docstring); threshold = min(1e-2, μ/4) = 2.5e-3.
CORR_ERR_MAX, SEPARATION_K = 1e-2, 4.0
#: Noise of a numerically minimised path (as rp-w-frobenius): a stall may rise by 25 % relative or 2e-4
#: absolute on its last step (a tenth of rp-w-frobenius's 2e-3: here the errors live below μ = 1e-2); a larger
#: last rise is undecided, never refuted (``judge``).
TREND_REL, TREND_ABS = 0.25, 2e-4
#: Resolved radius: the path's loss drops by more than this relative amount from the previous one (float64).
RES_RTOL = 1e-10
#: Radii needed to judge (the final value and a last ratio need two; three give a trend).
MIN_RESOLVED = 3
#: A candidate of the cone ∩ ball with a loss lower than the path's by more than this relative amount shows
#: the path missed the constrained minimiser (far above float64 loss rounding, far below any real gap).
CAND_RTOL = 1e-9
#: "Inside the cone" up to rounding (corr of 6×6 float64 matrices is exact to ~1e-15).
CONE_RTOL = 1e-12
#: The asymptotic regime holds at M when δ⁺·M ≥ REGIME_MIN (the higher-scoring tokens' share e^{−δ⁺M} ≤ 1e-7).
#: A stall (last ratio > SHRINK_MAX) is judged on the last two resolved radii, so both must be in the regime;
#: before that it is undecided, not refuted (full profile, seed 0: rp-w-local 16, δ⁺ = 0.505, the loss
#: resolved only to M = 16; rp-kq-local 22, δ⁺ = 0.69, on the boundary to M = 16 and leaving it at 32).
REGIME_MIN = 16.0
#: The family draws up to this many (data, α) before giving up (then the instance is vacuous).
FAMILY_TRIES = 40


@dataclass(frozen=True, eq=False)
class LocalPathInstance:
    """One instance of rp-w-local / rp-kq-local (and their controls): the data, the selection α (n,), the
    seed of the path's restarts and the number of (data, α) the family drew (``LocalPathBase.instance``;
    None on ``family_ok``'s provisional instance, which has no seed drawn yet either: -1)."""

    data: AttentionData
    alpha: np.ndarray
    seed: int
    draws: int | None = None


@dataclass(frozen=True, eq=False)
class LocalPathRun:
    """The cone-restricted path of one instance, on its radii R = M·‖W^mm_α‖ (J,): the optimiser's own points
    ``path_W`` with their ``loss``, ``norms`` and ``active`` constraint flags, δ⁺ (``delta_plus``), and the
    comparison with the candidates of the cone ∩ ball (``candidates``, whose keys are the remaining fields:
    ``W`` the polished points, their excess loss and bound, the centre's, ``beaten``, ``polished``, ...)."""

    path_W: np.ndarray
    radii: np.ndarray
    delta_plus: float
    loss: np.ndarray
    norms: np.ndarray
    active: np.ndarray
    W: np.ndarray
    excess: np.ndarray
    excess_err: np.ndarray
    centre_excess: np.ndarray
    centre_err: np.ndarray
    beaten: np.ndarray
    polished: np.ndarray
    prev_excess: np.ndarray
    prev_err: np.ndarray
    raw_excess: np.ndarray
    raw_err: np.ndarray
    sphere_excess: np.ndarray
    sphere_err: np.ndarray


@dataclass(frozen=True, eq=False)
class LocalPathState:
    """The SVM solutions of α (``sol``, the cone's centre W^mm_α) and of the optimal tokens (``glob``), in the
    theorem's norm, and the path (None unless both are feasible: hypothesis ``feasible``)."""

    sol: SVMSolution
    glob: SVMSolution
    path: LocalPathRun | None = None

    def run(self) -> LocalPathRun:
        """The path, which exists wherever a prediction is judged (every hypothesis held)."""
        assert self.path is not None, "no path: Att-SVM(α) or Att-SVM(opt) infeasible (hypothesis feasible)"
        return self.path


def _W(sol: SVMSolution) -> np.ndarray:
    """A feasible solution's W (the family and hypothesis ``feasible``: Att-SVM(α) and Att-SVM(opt))."""
    assert sol.W is not None, "Att-SVM infeasible: no W (hypothesis feasible)"
    return sol.W


def _holds(out) -> bool:
    """A hypothesis's answer (bool or Outcome) as a bool: held or not."""
    return bool(out) if isinstance(out, (bool, np.bool_)) else out.status == "held"


def delta_plus(data, alpha, W_alpha) -> float:
    """δ⁺ = min{margin_it(W^mm_α) − 1 : t ≠ α_i non-support (slack > 1e-6), γ_it ≥ γ_iα_i} (inf if none)."""
    g = scores(data)
    marg = margins(data, W_alpha, alpha)
    higher = g >= g[np.arange(data.n), alpha][:, None]
    higher[np.arange(data.n), alpha] = False
    slack = marg[higher] - 1.0
    slack = slack[slack > 1e-6]  # active (tied) higher tokens: the control's business, not local optimality
    return float(slack.min()) if slack.size else float("inf")


def global_alpha(data, alpha) -> np.ndarray:
    """The optimal tokens, a tie with α_i broken away from α_i (the control's tied token is then the global
    one; with unique optimal tokens this is opt)."""
    g = scores(data).copy()
    g[np.arange(data.n), alpha] -= tol.TIE_TOL / 2  # moves only ties (scores within TIE_TOL count as tied)
    return np.argmax(g, axis=1)


def norm_of(W: np.ndarray, norm: str) -> float:
    return float(np.linalg.norm(W)) if norm == "fro" else float(np.linalg.svd(W, compute_uv=False).sum())


def path_excess(data, centre: np.ndarray, Ws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E, err) for a stack of W: the excess logistic loss E_ρ(W) = L(W) − (1/n) Σ ℓ(γ_iρ_i) against the
    tokens ρ the cone's centre selects (numerics.excess_loss: relative-accurate where L is flat in float64),
    and its forward rounding bound. Two points are compared only where the difference exceeds the bounds."""
    import torch

    from numerics.attention import batch_from_data
    from numerics.excess_loss import logistic_excess, reference_tokens

    Ws = np.asarray(Ws, dtype=np.float64)
    b = batch_from_data([data] * len(Ws))
    gamma = b.linear_head().fixed_scores(b.X, b.Y)
    ref = reference_tokens(b.X[:1], b.Z[:1], torch.as_tensor(centre[None], dtype=torch.float64))
    E, err = logistic_excess(b.X, b.Z, torch.as_tensor(Ws), gamma, ref.expand(len(Ws), -1), with_error=True)
    return E.numpy(), err.numpy()


def candidates(data, Ws: np.ndarray, radii: np.ndarray, centre: np.ndarray, norm: str) -> dict:
    """Per radius R_j, points of the cone ∩ ball of radius R_j: R_j · centre/‖centre‖ and every path point
    (its own included) rescaled to radius R_j (a cone is closed under positive scaling, so all lie in the
    feasible set), compared with the path's point by the excess loss and its rounding bound (``path_excess``).

    Polish: where a rescaled (or, from a smaller radius, unscaled) path point has a lower excess than the
    path's point by more than the two bounds, it replaces the path's point (a feasible point with a certified
    lower loss is the better approximation of the constrained minimiser; the (K, Q) path's factors balance
    only to ~1e-6, ‖KQ^T‖_⋆/R < 1, which the excess loss resolves at M ≥ 64: quick seeds 3 and 6, 9 of 12
    rp-kq-local instances were otherwise "beaten" by their own or the previous radius's rescaled point).
    The centre is never substituted (a path replaced by the
    predicted limit would confirm without evidence): a centre beating the (polished) point by more than the
    bounds is a certified missed minimiser (``beaten``). Returns the (polished) points, their (E, err), the
    centre candidate's (E, err), ``beaten``, ``polished`` (radii replaced), the optimiser's own points'
    (E, err) (``raw_excess``, ``raw_err``) and the best candidate on the sphere ‖W‖ = R_j (``sphere_excess``,
    ``_err``)."""
    J = len(radii)
    nrm = np.array(
        [norm_of(centre, norm)] + [norm_of(W, norm) if np.all(np.isfinite(W)) else 0.0 for W in Ws]
    )
    ok = np.isfinite(nrm) & (nrm > 0)
    dirs = [D / n if k else np.zeros_like(D) for D, n, k in zip([centre, *Ws], nrm, ok, strict=True)]
    # (J, 2J+1, d, d): the centre and the path points rescaled to R_j, then the path points as they are (a
    # smaller radius's point lies in the larger ball: the minimum over the larger ball is at most its loss;
    # quick seed 17, rp-kq-local 0: the excess rose from M = 16 to 32 along the ray of the M = 16 point)
    cands = np.array([[r * D for D in dirs] + list(Ws) for r in radii])
    E, err = (v.reshape(J, 2 * J + 1) for v in path_excess(data, centre, cands.reshape(-1, *centre.shape)))
    Ep, errp = path_excess(data, centre, Ws)
    E[:, :J + 1][:, ~ok] = np.inf  # a zero or non-finite path point proposes no candidate
    inball = nrm[1:][None, :] <= np.asarray(radii)[:, None] * (1 + 1e-12)  # float64 norm rounding
    E[:, J + 1:][~(inball & ok[1:][None, :])] = np.inf
    # the best point ON the sphere ‖W‖ = R_j known at each radius (the centre and every path point rescaled to
    # R_j), for ``check_constraint_active``: the optimiser's own point inside the ball is a decided interior
    # minimiser only if it beats this one by more than the two rounding bounds
    ks = np.argmin(E[:, :J + 1], axis=1)
    sphere, sphere_err = E[np.arange(J), ks], err[np.arange(J), ks]
    raw_excess, raw_err = Ep.copy(), errp.copy()  # the optimiser's own points, before the polish
    Ws, Ep, errp = np.array(Ws, copy=True), Ep.copy(), errp.copy()
    polished = np.zeros(J, dtype=bool)
    for j in range(J):
        k = 1 + int(np.argmin(E[j, 1:]))
        if Ep[j] - E[j, k] > errp[j] + err[j, k]:
            Ws[j], Ep[j], errp[j], polished[j] = cands[j, k], E[j, k], err[j, k], True
    beaten = E[:, 0] - Ep < -(errp + err[:, 0])
    prev = np.array([E[j, j] if j else np.inf for j in range(J)])  # R_j · W_{j−1}/‖W_{j−1}‖
    prev_err = np.array([err[j, j] if j else np.inf for j in range(J)])
    return {"W": Ws, "excess": Ep, "excess_err": errp, "centre_excess": E[:, 0], "centre_err": err[:, 0],
            "beaten": beaten, "polished": polished, "prev_excess": prev, "prev_err": prev_err,
            "raw_excess": raw_excess, "raw_err": raw_err, "sphere_excess": sphere, "sphere_err": sphere_err}


def independent_excess(data, centre: np.ndarray, Ws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """L(W) − (1/n) Σ ℓ(γ_iρ_i) evaluated plainly in numpy (no numerics.attention / numerics.excess_loss code:
    an independent closed form, as _gd.independent_grad_W for the steps), with its forward rounding bound in
    the standard model (u = 2^-53): logits |δl| ≤ λ = 2d·u·|x|^T|W||z|; s relative 2 max λ + (T + 3)u;
    u_i = Σ s γ absolute (2 max λ + (2T + 4)u)·Σ_t s_it|γ_it|; ℓ(u) = log(1 + e^{-u}) (np.logaddexp) with
    |ℓ'| = σ(−u) ≤ 1, + 4u·ℓ; the means + n·u; the difference of L and L_∞ + u·(L + L_∞). Plain L − L_∞ loses
    the tails once they fall below ~1e-16 (the bound then exceeds E), so the comparison with E bites at the
    small radii, where the two must agree to ~1e-16."""
    X, Z = np.asarray(data.X), np.asarray(data.Z)
    g = np.asarray(data.Y)[:, None] * (X @ np.asarray(data.v))  # γ (n, T)
    ref = np.argmax(np.einsum("itk,kl,il->it", X, centre, Z), axis=1)
    n, T, d = X.shape
    u64 = 2.0 ** -53
    Linf_i = np.logaddexp(0.0, -g[np.arange(n), ref])
    Linf = Linf_i.mean()
    E, err = [], []
    for W in np.asarray(Ws):
        lg = np.einsum("itk,kl,il->it", X, W, Z)
        lam = 2 * d * u64 * np.einsum("itk,kl,il->it", np.abs(X), np.abs(W), np.abs(Z))
        e = np.exp(lg - lg.max(axis=1, keepdims=True))
        s = e / e.sum(axis=1, keepdims=True)
        u = (s * g).sum(axis=1)
        ell = np.logaddexp(0.0, -u)
        du = (2 * lam.max(axis=1) + (2 * T + 4) * u64) * (s * np.abs(g)).sum(axis=1)
        sig = 1.0 / (1.0 + np.exp(np.clip(u, -700, 700)))
        L = ell.mean()
        E.append(L - Linf)
        err.append((sig * du + 4 * u64 * ell).mean() + n * u64 * L + (4 * u64 * Linf_i).mean()
                   + n * u64 * Linf + u64 * (L + Linf))
    return np.array(E), np.array(err)


def judge(err: np.ndarray, threshold: float, reliable: np.ndarray | None = None, stall_below: bool = False,
          **metrics) -> Outcome:
    """err(R) → 0 on a finite grid, the limit only (issue 29; as rp-w-frobenius's judge_path with
    trend_fails=False): below the threshold at the largest judged R → held; above it but still shrinking (last
    ratio ≤ SHRINK_MAX) → undecided; above it at both of the last two radii with a last ratio in (SHRINK_MAX,
    1 + TREND_REL] (+ TREND_ABS) → failed (stalled); a threshold crossed upwards or a larger rise on the last
    step → undecided. A rise earlier on the path is no prediction of the theorem: quick seed 17,
    rp-kq-local 2, 1 − corr 1.7e-4 at M = 64 and 3.2e-3 at M = 128, where the M = 128 point's excess loss
    3.73e-57 is below that of the M = 64 point rescaled (4.32e-57) and of the centre (4.97e-57) far beyond the
    rounding bounds (~1e-68): the finite-R minimiser genuinely moves away and back. ``stall_below``: a stall
    (last ratio > SHRINK_MAX) is refuted below the threshold too, where the error exceeds the path's noise
    TREND_ABS (below it a stall is not decided). ``reliable``: unused (kept for callers)."""
    ratio = last_ratio(err)
    stalled_low = bool(stall_below and err[-1] < threshold and ratio > SHRINK_MAX and err[-1] > TREND_ABS)
    rel = "<" if err[-1] < threshold else "≥"
    return judge_convergence(
        converged=bool(err[-1] < threshold) and not stalled_low,
        falling=f"1 − corr = {err[-1]:.3g} ≥ {threshold:.3g} at the largest resolved R but still shrinking "
        f"(ratio {ratio:.2f}): grid too short" if ratio <= SHRINK_MAX else "",
        waits=(((err[-1] >= threshold and err[-2] < threshold)
                or err[-1] > err[-2] * (1 + TREND_REL) + TREND_ABS,
                f"1 − corr = {err[-1]:.3g} {rel} {threshold:.3g} at the largest R, but it rose there from "
                f"{err[-2]:.3g}: not converged at the largest radius (a rise is no refutation of a limit)"),),
        stalled=f"1 − corr = {err[-1]:.3g} {rel} {threshold:.3g} and stalled (last ratio {ratio:.2f} > "
        f"{SHRINK_MAX}): the path sits on the cone boundary or another direction",
        **dict(metrics, last_ratio=ratio),
    )


class LocalPathBase(Theorem):
    """The local path theorem, parametrised by ``param`` ("W" / "KQ") and ``norm`` ("fro" / "nuc"); the
    control sets ``locally_optimal = False`` (tied support token: checks.strategies.tied_alpha_data)."""

    param, norm = "W", "fro"
    mu = MU
    path_steps, restarts = 300, 2
    locally_optimal = True
    n, T, d = 3, 4, 6
    plot_metric = "corr_err"

    def not_applicable(self, data: Any) -> str | None:
        return (
            "needs a locally optimal selection alpha != opt with a slack delta+ >= 0.5 and a cone that "
            "certifiably selects alpha, built on its own instance family; running it on given data is not "
            "implemented"
        )

    def instance(self, rng: np.random.Generator, ctx: Context) -> LocalPathInstance:
        """The family meets the hypotheses by construction (issue 29: rp-kq-local was vacuous on 4-5 of 6
        instances at seeds 4, 7, 9, its family filtering on the Frobenius solution while its hypotheses are
        decided on the nuclear one): up to FAMILY_TRIES (data, α) are drawn from the instance's own rng until
        ``family_ok`` — the theorem's own hypotheses, on its own norm's solutions — holds; the number of draws
        is recorded (metric ``draws``). The assume_* methods still decide every hypothesis on the instance;
        after FAMILY_TRIES failed draws the last one is kept and comes out vacuous."""
        from checks.strategies import local_alpha_data, tied_alpha_data

        for k in range(1, FAMILY_TRIES + 1):  # noqa: B007 (k: the draws, recorded below)
            if self.locally_optimal:
                data, alpha = local_alpha_data(self.n, self.T, self.d, rng=rng, locally_optimal=True)
            else:
                data, alpha = tied_alpha_data(self.n, self.T, self.d, rng=rng)
            if self.family_ok(data, alpha):
                break
        return LocalPathInstance(data=data, alpha=alpha, seed=int(rng.integers(2**31)), draws=k)

    def family_ok(self, data: AttentionData, alpha: np.ndarray) -> bool:
        """The instance hypotheses that depend on the draw, decided as the assume_* methods decide them (same
        functions, the theorem's own norm): feasibility, (non-)local optimality, δ⁺, the cone certificates."""
        sol = solve_att_svm(data, alpha, norm=self.norm)
        if not sol.feasible:
            return False
        glob = solve_att_svm(data, global_alpha(data, alpha), norm=self.norm)
        st = LocalPathState(sol=sol, glob=glob)
        inst = LocalPathInstance(data=data, alpha=alpha, seed=-1)  # no seed drawn yet (not needed here)
        checks = (self.assume_feasible, self.assume_alpha_locally_optimal,
                  self.assume_higher_tokens_suppressed, self.assume_cone_selects_alpha,
                  self.assume_cone_excludes_global)
        return all(_holds(f(inst, st, None)) for f in checks)  # type: ignore[arg-type]  # no context

    def prepare(
        self, instances: Sequence[LocalPathInstance], ctxs: Sequence[Context]
    ) -> list[LocalPathState]:
        """The SVM solutions per instance, then the paths of all instances with both solutions feasible as
        one batched regularisation path (per-instance radii, cones and seeds: each instance's path is the
        one it has alone, up to rounding; the profile's ``path_steps`` / ``restarts`` params or the
        theorem's defaults)."""
        sols: list[tuple[SVMSolution, SVMSolution]] = []
        todo: list[int] = []
        for inst in instances:
            data, alpha = inst.data, inst.alpha
            sol = solve_att_svm(data, alpha, norm=self.norm)
            glob = solve_att_svm(data, global_alpha(data, alpha), norm=self.norm)
            sols.append((sol, glob))
            if sol.feasible and glob.feasible:
                todo.append(len(sols) - 1)
        if not todo:
            return [LocalPathState(sol=sol, glob=glob) for sol, glob in sols]
        ctx = ctxs[todo[0]]  # one profile, one device per block
        datas = [instances[k].data for k in todo]
        radii = np.stack([MULTIPLES * norm_of(_W(sols[k][0]), self.norm) for k in todo], axis=1)  # (J, B)
        rp = regularization_path(datas, radii, param=self.param,
                                 steps=int(ctx.params.get("path_steps", self.path_steps)),
                                 restarts=int(ctx.params.get("restarts", self.restarts)),
                                 seed=[instances[k].seed for k in todo],
                                 cone=(np.stack([_W(sols[k][0]) for k in todo]), self.mu),
                                 device=ctx.device)
        paths: dict[int, LocalPathRun] = {}
        for b, k in enumerate(todo):
            data, alpha, Wa = instances[k].data, instances[k].alpha, _W(sols[k][0])
            Ws = rp.W[:, b]
            paths[k] = LocalPathRun(
                path_W=Ws,
                radii=radii[:, b],
                delta_plus=delta_plus(data, alpha, Wa),
                loss=rp.loss[:, b],
                norms=rp.norms[:, b],
                active=rp.constraint_active[:, b],
                **candidates(data, Ws, radii[:, b], Wa, self.norm),
            )
        return [LocalPathState(sol=sol, glob=glob, path=paths.get(k)) for k, (sol, glob) in enumerate(sols)]

    # -- hypotheses ------------------------------------------------------------------------------
    def assume_loss_A(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome | bool:
        return hyp.loss_satisfies_assumption_a("logistic")

    def assume_alpha_not_opt(
        self, inst: LocalPathInstance, st: LocalPathState, ctx: Context
    ) -> Outcome | bool:
        g = scores(inst.data)
        a = inst.alpha
        # α_i not the unique best token of some example (with a tie both tokens are optimal)
        return bool(np.any(g[np.arange(len(a)), a] < g.max(1)) or not optimal_tokens(inst.data).unique)

    def assume_feasible(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome:
        # ``draws``: how many (data, α) the family drew for this instance (see ``instance``)
        return decide(st.sol.feasible and st.glob.feasible, "Att-SVM(α) or Att-SVM(opt) infeasible",
                      **({"draws": int(inst.draws)} if inst.draws is not None else {}))

    def assume_alpha_locally_optimal(
        self, inst: LocalPathInstance, st: LocalPathState, ctx: Context
    ) -> Outcome | bool:
        return is_locally_optimal(inst.data, inst.alpha, st.sol)

    def assume_higher_tokens_suppressed(
        self, inst: LocalPathInstance, st: LocalPathState, ctx: Context
    ) -> Outcome:
        dp = delta_plus(inst.data, inst.alpha, st.sol.W)
        return decide(dp >= DELTA_MIN, f"δ⁺ = {dp:.3g} < {DELTA_MIN}: the path's regime lies beyond float64 "
                      "resolution of the loss", delta_plus=min(dp, 1e9))

    def assume_cone_selects_alpha(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome:
        """"μ small enough", certified exactly: every W of the cone selects α (so the cone holds no other
        selection's max-margin direction). A unit W in C_μ(Ŵ) is cos φ Ŵ + sin φ U with φ ≤ θ, cos θ = 1 − μ,
        U ⊥ Ŵ unit, so ⟨a_it, W⟩ ≥ cos θ ⟨a_it, Ŵ⟩ − sin θ ‖a_it‖_F for a_it = (x_iα_i − x_it) z_i^T; all > 0
        ⟹ α_i has the largest logit in every direction of the cone. (Paper profile, seed 0, rp-kq-local 89 and
        115 at μ = 0.015: the certificate is negative and the path settles at 1 − corr ≈ 0.0124 inside the
        cone.)"""
        data, a = inst.data, inst.alpha
        Wh = _W(st.sol) / np.linalg.norm(_W(st.sol))
        c = 1.0 - self.mu
        s = float(np.sqrt(1.0 - c * c))
        rows = [
            np.outer(data.X[i, a[i]] - data.X[i, t], data.Z[i])
            for i in range(data.n)
            for t in range(data.T)
            if t != a[i]
        ]
        cert = min(c * float(np.sum(A * Wh)) - s * float(np.linalg.norm(A)) for A in rows)
        return decide(
            cert > 0,
            f"some direction of the cone does not select α (certificate {cert:.3g} ≤ 0): μ = "
            f"{self.mu} is not small enough for this instance",
            cone_certificate=cert,
        )

    def assume_cone_loss_above_limit(
        self, inst: LocalPathInstance, st: LocalPathState, ctx: Context
    ) -> Outcome | bool:
        """The reconstruction drops the paper's lower bound ‖W‖ ≥ R_0 of the cone (module docstring), which is
        the same problem only if the loss on the cone stays above its limit L_∞ = (1/n) Σ ℓ(γ_iα_i): the cone
        selects α uniformly (``cone_selects_alpha``), so L → L_∞ uniformly as ‖W‖ → ∞ there, and a point W_0
        of the cone with L(W_0) < L_∞ keeps every W̄_R (R ≥ ‖W_0‖) in a bounded set — W̄_R/R → 0, and the
        paper's R_0 is what excludes it. Certified false when some path point has excess E < 0 beyond its
        rounding bound (numerics.excess_loss): the higher-scoring non-support tokens' attention lowers the
        loss below L_∞ at a finite W (quick seed 11, rp-kq-local 1 and 5: E = −1.9e-8 and −4.3e-7 from M = 8
        on, the same interior point at every larger radius). Not certifiable true: held unless refuted by the
        path."""
        if st.path is None:
            return True
        E, e = np.asarray(st.path.excess), np.asarray(st.path.excess_err)
        k = int(np.argmin(E + e))
        return decide(bool(E[k] + e[k] >= 0),
                      f"a path point of the cone has loss below L_∞ (excess {E[k]:.3g} at "
                      f"M = {MULTIPLES[k]:g}, bound {e[k]:.2g}): the paper's ‖W‖ ≥ R_0 is binding, the "
                      "reconstruction without it does not apply", min_excess=float(E[k]))

    def assume_cone_excludes_global(
        self, inst: LocalPathInstance, st: LocalPathState, ctx: Context
    ) -> Outcome:
        sep = float(1 - corr(_W(st.sol), _W(st.glob)))
        return decide(
            sep >= SEPARATION_K * self.mu,
            f"1 − corr(W^mm_α, W^mm) = {sep:.3g} < {SEPARATION_K:g}μ: the global "
            "direction is (nearly) inside the cone",
            separation=sep,
        )

    # -- predictions -----------------------------------------------------------------------------
    def resolved(self, st: LocalPathRun) -> int:
        """Leading radii at which the path's excess loss drops from the previous radius by more than the two
        rounding bounds (a larger ball has a smaller minimum, so beyond the first undecided drop the path's
        points can no longer be ordered by their loss: nothing there is judged)."""
        E, err = st.excess, st.excess_err
        drops = (E[:-1] - E[1:]) > (err[:-1] + err[1:])
        bad = np.flatnonzero(~drops)
        return len(E) if bad.size == 0 else int(bad[0]) + 1

    def reliable(self, st: LocalPathRun, J: int) -> np.ndarray:
        """Per resolved radius: the path point is not provably a missed minimiser — its excess loss is below
        the previous radius's (a larger ball has a smaller minimum) and no candidate of the cone ∩ ball
        (``candidates``) beats it by more than the rounding bounds. The decision (final value, last ratio)
        needs the two largest resolved radii reliable; the trend is judged between reliable radii only (the
        factored path can miss the minimiser by ~1e-4 relative at small M, where it sits on the cone boundary:
        full profile, seed 0, rp-kq-local 28 and 47 at M = 2, 4)."""
        ok = ~st.beaten[:J]
        ok[1:] &= np.diff(st.excess[:J]) < 0
        return ok

    def centre_decided(self, st: LocalPathRun, j: int) -> bool:
        """At radius j the path's point has a lower excess loss than the centre candidate R_j·W^mm_α/‖W^mm_α‖
        by more than the two rounding bounds: "the path is not at the centre" is then a property of the loss,
        not of rounding (numerics.excess_loss)."""
        return bool(st.centre_excess[j] - st.excess[j] > st.centre_err[j] + st.excess_err[j])

    def threshold(self) -> float:
        return min(CORR_ERR_MAX, self.mu / SEPARATION_K)

    def check_direction(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome:
        p = st.run()
        J = self.resolved(p)
        if J >= MIN_RESOLVED:
            # Judged up to the largest radius where the path is reliable at it and the radius before (the
            # decision reads the last two): beyond, the path provably missed the constrained minimiser (the
            # (K, Q) path's 500 steps leave the centre candidate decidedly better at M = 64 or 128 on ~1 in 6
            # quick instances, quick seed 3 #2/#4/#5), a budget limit on those radii, not a property of the
            # path. The same rule for the theorem and its control; fewer than MIN_RESOLVED radii: undecided.
            ok = self.reliable(p, J)
            pair = np.flatnonzero(ok[1:] & ok[:-1])
            if pair.size and pair[-1] + 2 >= MIN_RESOLVED:
                J = int(pair[-1]) + 2
        # the predicted limit direction, through the resolution seam (Theorem.predicted)
        Wa = _W(st.sol)
        centre = self.predicted("W^mm_α", Wa, "direction",
                                lambda: token_difference_span(inst.data))
        if centre is not Wa:
            # a perturbed centre: the loss gate below compares the path's point with ITS ball point
            E_c, err_c = path_excess(inst.data, Wa,
                                     np.array([R * centre / norm_of(centre, self.norm) for R in p.radii]))
            p = replace(p, centre_excess=E_c, centre_err=err_c)
        Ws = p.W[:J]
        err = 1 - np.asarray(corr(Ws, centre[None]))
        m = dict(corr_err=float(err[-1]), corr_err_curve=err.tolist(), resolved_M=float(MULTIPLES[J - 1]),
                 corr_err_radii=[float(x) for x in p.radii[:J]],  # the figure's x-axis: R
                 corr_err_global=float(1 - corr(Ws[-1], _W(st.glob))), corr_threshold=self.threshold())
        if J < MIN_RESOLVED:
            return undecided(
                f"the path's excess loss does not decide its drop beyond M = {MULTIPLES[J - 1]:g}", **m
            )
        # the cone is the path's constraint set, around the true W^mm_α (not the predicted object)
        cone_err = 1 - np.asarray(corr(Ws, Wa[None]))
        if not np.all(cone_err <= self.mu + CONE_RTOL):
            return undecided(
                f"the path left the cone (1 − corr up to {cone_err.max():.3g} > μ): not the local path", **m
            )
        m["excess_curve"] = [float(x) for x in p.excess]  # every radius, judged or not
        m["excess_err_curve"] = [float(x) for x in p.excess_err]
        m["centre_excess_curve"] = [float(x) for x in p.centre_excess]
        m["prev_excess_curve"] = [float(x) for x in p.prev_excess]  # the previous radius's point rescaled
        ok = self.reliable(p, J)
        m["reliable_radii"] = int(ok.sum())
        m["polished_radii"] = int(p.polished[:J].sum())
        if not (ok[-1] and ok[-2]):
            return undecided(
                "the path missed the constrained minimiser at the largest resolved radii (excess loss not "
                "decreasing in R, or R·W^mm_α/‖W^mm_α‖ has a lower one by more than the rounding bounds)",
                **m,
            )
        # a stall below the threshold refutes on the W path (1 − corr ×0.21–0.29 per doubling of M, quick seed
        # 0); not on the (K, Q) path, whose factored optimiser leaves rises and plateaus within its noise at
        # the last radii (quick seed 0 #1: 2.3e-4 → 4.3e-4; polished plateaus of ratio 1)
        out = judge(err, self.threshold(), reliable=ok, stall_below=self.param == "W", **m)
        pol = [j for j in (J - 2, J - 1) if p.polished[j]]
        if out.status == "failed" and pol:
            # a polished point carries another radius's direction (``candidates``): a stall on it says the
            # optimiser did not improve on that direction, not where the minimiser is (quick seeds 5 #3 and
            # 10 #0 of rp-kq-local: M = 128 replaced by the rescaled M = 64 point, last ratio exactly 1)
            return undecided(
                f"{out.reason}; but the path's point at M = {', '.join(f'{MULTIPLES[j]:g}' for j in pol)} is "
                "another radius's point rescaled (the optimiser's own was beaten): a stall there is not the "
                "minimiser's", **out.metrics,
            )
        undec = [j for j in (J - 2, J - 1) if not self.centre_decided(p, j)]
        if out.status == "failed" and undec:
            return undecided(
                f"{out.reason}; but at M = {', '.join(f'{MULTIPLES[j]:g}' for j in undec)} the path's point "
                "does not beat the centre R·W^mm_α/‖W^mm_α‖ by more than the rounding bound of the excess "
                "loss (numerics.excess_loss): the loss does not decide that the minimiser is off-centre",
                **out.metrics,
            )
        reach = p.delta_plus * MULTIPLES[J - 2]
        if out.status == "failed" and "stalled" in out.reason and reach < REGIME_MIN:
            return undecided(
                f"stalled between M = {MULTIPLES[J - 2]:g} and {MULTIPLES[J - 1]:g}, but δ⁺·M = {reach:.3g} "
                "< "
                f"{REGIME_MIN:g} at the first of them: a stall is judged on two radii in the asymptotic "
                "regime (full profile, seed 0, rp-kq-local 22: on the boundary to M = 16, leaving it at 32, "
                "also with 5000 steps × 8 restarts)",
                **out.metrics,
            )
        return out

    def check_loss_fidelity(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome:
        """The excess loss every decision above rests on (numerics.excess_loss, via the library's softmax)
        agrees with the independent plain evaluation (``independent_excess``) at every point of the
        optimiser's path, within the sum of the two rounding bounds (no fitted tolerance). A broken softmax,
        loss or excess form fails it at the small radii, where the softmax is far from one-hot
        (checks.power.sabotage "softmax-no-normaliser": at M = 2 the two differ by O(e^{-2}))."""
        data, centre, Ws = inst.data, _W(st.sol), st.run().path_W
        E, e = path_excess(data, centre, Ws)
        Ei, ei = independent_excess(data, centre, Ws)
        gap = np.abs(E - Ei) - (e + ei)
        k = int(np.argmax(gap))
        return decide(bool(np.all(gap <= 0)),
                      "the excess loss disagrees with its independent evaluation beyond both rounding "
                      f"bounds at M = {MULTIPLES[k]:g} (|ΔE| = {float(abs(E[k] - Ei[k])):.3g})",
                      excess_fidelity_gap=float(np.max(np.abs(E - Ei) / np.maximum(e + ei, 1e-300))))

    def check_constraint_active(self, inst: LocalPathInstance, st: LocalPathState, ctx: Context) -> Outcome:
        """‖W̄_R‖ = R at every resolved radius. The optimiser's point inside the ball (by more than
        numerics.gd_common.ACTIVE_RTOL) refutes it only where the loss decides that it is an interior
        minimiser: its excess is below that of every known point on the sphere ‖W‖ = R (the centre, every path
        point rescaled to R, its own radial rescale included; ``candidates``) by more than the two rounding
        bounds. Beaten by one of them by more than the bounds, it is a certified missed minimiser (an
        optimisation failure: the (K, Q) cone step shrinks ‖K‖² + ‖Q‖² and the decaying step does not restore
        it — quick seed 48, rp-kq-local 5: (‖K‖² + ‖Q‖²)/2 = 0.99836 R at M = 64, excess 5.587e-29, its own
        rescale to the sphere 4.996e-29, bounds 2.7e-41 and 2.4e-41); within the bounds the loss does not
        decide. Both: undecided, never refuted. (Below L_∞ an interior point is ``cone_loss_above_limit``'s
        vacuous case; seed 48 #5 has excess > 0 at every radius, 1.3e-56 at M = 128.) The regime rule as
        check_direction."""
        p = st.run()
        J = self.resolved(p)
        active = np.asarray(p.active[:J], dtype=bool)
        m: dict[str, Any] = {"norm_ratio_min": float(np.min(p.norms[:J] / p.radii[:J]))}
        if active.all():
            return held(**m)
        inner = np.flatnonzero(~active)
        E, e = p.raw_excess[inner], p.raw_err[inner]
        S, s = p.sphere_excess[inner], p.sphere_err[inner]
        decided_in = (S - E) > (e + s)  # the interior point beats every sphere candidate, certified
        beaten = (E - S) > (e + s)  # a sphere point beats the interior point, certified
        m.update(interior_radii=[float(MULTIPLES[j]) for j in inner],
                 # (E − S)/(bounds): > 1 beaten on the sphere, < −1 a decided interior point
                 interior_vs_sphere=[float((E[k] - S[k]) / max(e[k] + s[k], 1e-300))
                                     for k in range(len(inner))])
        if not decided_in.any():
            k = int(np.argmax(beaten)) if beaten.any() else 0
            j = int(inner[k])
            how = (f"a point on the sphere (the radial rescale of a path point or the centre) has lower "
                   f"excess ({S[k]:.4g} against {E[k]:.4g}, bounds {e[k]:.2g} + {s[k]:.2g}): the optimiser "
                   "missed the constrained minimiser" if beaten[k] else
                   f"its excess {E[k]:.4g} and the best sphere point's {S[k]:.4g} are within the rounding "
                   f"bounds ({e[k]:.2g} + {s[k]:.2g}): the loss does not decide where the minimiser is")
            return undecided(f"the optimiser's point at M = {MULTIPLES[j]:g} is inside the ball "
                             f"(norm/R = {p.norms[j] / p.radii[j]:.6g}), but {how}", **m)
        j = int(inner[np.flatnonzero(decided_in)[-1]])
        if p.delta_plus * MULTIPLES[J - 1] < REGIME_MIN:  # as check_direction (full, seed 0, 16)
            return undecided(
                "the norm constraint is inactive at a resolved radius before the asymptotic regime "
                f"(δ⁺·M < {REGIME_MIN:g})",
                **m,
            )
        return failed(f"the norm constraint is inactive at M = {MULTIPLES[j]:g}: the path's point inside the "
                      "ball has lower excess loss than every known point of the sphere by more than the "
                      "rounding bounds", **m)
