r"""overparam-landscape — over-parameterised attention has no stationary points (sufficient version).

Statement (TLTO, arXiv 2308.16898, benign landscape under over-parameterisation — *reconstructed
sufficient version*, THEORY.md §4): if d ≥ max(n, T) and the data are generic, there is W̄ with

.. math:: X_i \bar W z_i = \gamma_i \quad (i = 1..n), \qquad\text{and}\qquad
          \langle \nabla L(W), \bar W \rangle < 0 \ \ \forall W,

so L has no stationary point. Why: by THEORY.md §2, ⟨∇L(W), W̄⟩ = (1/n) Σ_i ℓ'_i Cov_{s_i}(γ_i, X_i W̄ z_i)
= (1/n) Σ_i ℓ'_i Var_{s_i}(γ_i) < 0 (ℓ' < 0, softmax has full support, γ_i not constant).

Hypotheses implemented: d ≥ max(n, T); generic data verified on the instance: rank Z = n and every X_i
(T × d) has rank T (relative gap GENERIC_RTOL); non-constant scores in some example; a catalogue loss
(logistic / exponential / linear, Assumption A proved by ``loss-assumptions``). Instance family:
unit-sphere cross-attention data, n ∈ 1..4, T ∈ 2..5, d = max(n, T) + {0, 1, 2}.

Measured: W̄ = the minimum-norm least-squares solution of the nT linear equations x_it^T W z_i = γ_it
(vectorised over d² unknowns); its relative residual must be ≤ RESID_TOL. Then ⟨∇L(W), W̄⟩ is signed
exactly (log-space pairwise covariance, see ``no_stationary_points.signed_inner``) over Gaussian W at norms
1e-3 … 1e4, W near ±W̄ and W concentrating attention on chosen tokens, plus a short gradient ascent of the
inner product; every sample must be negative (cancellation below float precision: undecided).

Given data (``--data``): every instance checks the given (X, Y, Z, v) with a loss and W samples drawn from
its seed; the hypotheses decide (digits: n = 60 > d = 16, so the instances are vacuous, naming it). The
control applies to given data only where it can be refuted: d < T and the construction provably impossible
(the certificate below) — on fixed data the control's check is deterministic.

Negative control (``overparam-landscape-control``): "the construction works when d < T": instances with
d < T (generic otherwise). Finding (see the report): with a *linear head* γ_i = Y_i X_i v always lies in
the column space of X_i, so W̄ = v c^T with Z c = Y solves every equation as soon as rank Z = n — T plays
no role, and a d < T instance with d ≥ n is *confirmed*. The control's family therefore mostly has
d < n as well (then the queries are dependent and the equations are inconsistent). A refutation is a
certificate, not a large residual alone: the least-squares residual r satisfies A^T r ≈ 0, so for every W,
‖A vec W − γ‖ ≥ (γ^T r − ‖A^T r‖ ‖W‖_F)/‖r‖; we refute when this bound exceeds RESID_TOL‖γ‖ for every
‖W‖_F ≤ NORM_CAP.
"""

from __future__ import annotations

import numpy as np

from checks import Profile, Theorem, decide, failed, held, register, undecided
from numerics.data import random_unit_sphere
from numerics.tokens import scores

from ._given import given_metrics, need_head
from ._landscape import LOSSES, ascend, classify, dloss_negative_on, sample_ws, signed_inner

#: Relative residual of the construction ‖A vec W̄ − γ‖ / ‖γ‖: least squares on an O(1), well-conditioned
#: system (generic unit data) is accurate to ~1e-15; 1e-10 leaves room for conditioning ~1e5.
RESID_TOL = 1e-10

#: Genericity (rank Z = n, rank X_i = T): σ_min > GENERIC_RTOL σ_max; flags only (near-)degenerate draws.
GENERIC_RTOL = 1e-8

#: The control's impossibility certificate must exclude every W with ‖W‖_F up to this (a construction
#: needing a larger W is numerically meaningless for unit data whose W̄ has norm O(1)–O(1e2)).
NORM_CAP = 1e8

#: Gradient-ascent starts per instance.
ASCENT_STARTS = 6

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"per_norm": 6, "ascent_steps": 40}),
    "full": Profile(instances=60, min_confirmed=50, params={"per_norm": 12, "ascent_steps": 120}),
    "paper": Profile(instances=200, min_confirmed=180, params={"per_norm": 25, "ascent_steps": 200}),
}


def design(data) -> tuple[np.ndarray, np.ndarray]:
    """A (nT, d²) with rows vec_C(x_it z_i^T), so that A vec_C(W) = (x_it^T W z_i); and γ (nT,)."""
    A = (data.X[:, :, :, None] * data.Z[:, None, None, :]).reshape(data.n * data.T, data.d * data.d)
    return A, scores(data).reshape(-1)


def construct(data) -> tuple[np.ndarray, float, dict]:
    """W̄ by minimum-norm least squares; its relative residual; and the impossibility certificate numbers."""
    A, g = design(data)
    w, *_ = np.linalg.lstsq(A, g, rcond=None)
    r = g - A @ w
    rel = float(np.linalg.norm(r) / np.linalg.norm(g))
    nr = float(np.linalg.norm(r))
    # any W: ‖A w − g‖ ≥ |r^T (A w − g)| / ‖r‖ ≥ (g^T r − ‖A^T r‖ ‖w‖) / ‖r‖
    lower = (float(g @ r) - float(np.linalg.norm(A.T @ r)) * NORM_CAP) / nr if nr > 0 else 0.0
    return w.reshape(data.d, data.d), rel, {"residual_lower_bound_rel": max(lower, 0.0) / float(np.linalg.norm(g))}


def _rank_ok(M) -> tuple[bool, float]:
    s = np.linalg.svd(M, compute_uv=False)
    ratio = float(s[-1] / s[0]) if s.size and s[0] > 0 else 0.0
    return M.shape[0] <= M.shape[1] and ratio > GENERIC_RTOL, ratio


class _Base(Theorem):
    profiles = PROFILES
    accepts_data = True

    def not_applicable(self, data):
        return need_head(data)

    def _family(self, rng) -> tuple[int, int, int]:
        raise NotImplementedError

    def instance(self, rng, ctx):
        if ctx.data is not None:
            return {"data": ctx.data, "loss": str(rng.choice(LOSSES))}
        n, T, d = self._family(rng)
        return {"data": random_unit_sphere(n, T, d, rng=rng), "loss": str(rng.choice(LOSSES))}

    def assume_generic(self, inst, state, ctx):
        data = inst["data"]
        okz, rz = _rank_ok(data.Z)
        g = scores(data)
        spread = float((g.max(axis=1) - g.min(axis=1)).max())
        return decide(okz and spread > 0, "queries dependent or all scores constant", z_cond_ratio=rz)

    def assume_assumption_a(self, inst, state, ctx):
        g = scores(inst["data"])
        return decide(dloss_negative_on(inst["loss"], float(g.min()), float(g.max())), "loss violates Assumption A")


@register
class OverparamLandscape(_Base):
    id = "overparam-landscape"
    title = "If d >= max(n, T), some W-bar with X_i W-bar z_i = gamma_i is a descent direction everywhere"
    reference = "TLTO (arXiv 2308.16898), benign landscape under over-parameterisation — reconstructed sufficient version"
    statement = (r"d \ge \max(n,T) \Rightarrow \exists \bar W: X_i \bar W z_i = \gamma_i,\ "
                 r"\langle \nabla L(W), \bar W\rangle < 0\ \forall W")
    hypotheses_text = ("d >= max(n, T); generic: rank Z = n, rank X_i = T (sigma ratio > 1e-8); scores not all "
                       "constant; catalogue loss (Assumption A)")
    plot_metric = "min_log_gap"

    def _family(self, rng):
        n, T = int(rng.integers(1, 5)), int(rng.integers(2, 6))
        return n, T, max(n, T) + int(rng.integers(0, 3))

    def assume_overparameterised(self, inst, state, ctx):
        data = inst["data"]
        okx = all(_rank_ok(data.X[i])[0] for i in range(data.n))
        bound = max(data.n, data.T)
        if data.d < bound:
            return failed(f"d = {data.d} < max(n, T) = {bound}", d=data.d, n=data.n, T=data.T)
        return decide(okx, "some X_i has rank < T")

    def check_construction(self, inst, state, ctx):
        Wbar, rel, _ = construct(inst["data"])
        inst["Wbar"] = Wbar
        return decide(rel <= RESID_TOL, "least-squares W-bar does not solve X_i W z_i = gamma_i",
                      construction_residual=rel, wbar_norm=float(np.linalg.norm(Wbar)))

    def check_descent_everywhere(self, inst, state, ctx):
        data, loss, Wbar = inst["data"], inst["loss"], inst["Wbar"]
        per, steps = int(ctx.params.get("per_norm", 6)), int(ctx.params.get("ascent_steps", 40))
        Ws = sample_ws(data, Wbar, ctx.rng, per)
        P, N, naive = signed_inner(data, Ws, Wbar, loss)
        gap0 = np.where(np.isfinite(P) | np.isfinite(N), P - N, 0.0)
        cand = np.flatnonzero(np.linalg.norm(Ws, axis=(1, 2)) <= 1e2)
        W2 = ascend(data, Wbar, loss, Ws[cand[np.argsort(gap0[cand])[:ASCENT_STARTS]]], steps)
        P2, N2, naive2 = signed_inner(data, W2, Wbar, loss)
        c = np.concatenate([classify(P, N), classify(P2, N2)])
        allP, allN = np.concatenate([P, P2]), np.concatenate([N, N2])
        gap = np.where(np.isfinite(allP) | np.isfinite(allN), allP - allN, 0.0)
        metrics = dict(given_metrics(ctx), samples=int(c.size), positive=int((c > 0).sum()), undecided=int((c == 0).sum()),
                       naive_zero=int((np.concatenate([naive, naive2]) == 0).sum()), min_log_gap=float(gap.min()))
        if (c > 0).any():
            return failed("found W with <grad L(W), W-bar> > 0 (exact log-space sign)", **metrics)
        if (c == 0).any():
            return undecided("some sampled inner products cancel below float precision", **metrics)
        return held(**metrics)


@register
class OverparamLandscapeControl(_Base):
    id = "overparam-landscape-control"
    title = "Control: the construction X_i W-bar z_i = gamma_i works when d < T (false when also d < n)"
    reference = OverparamLandscape.reference
    statement = r"d < T \Rightarrow \exists \bar W: X_i \bar W z_i = \gamma_i"
    hypotheses_text = ("d < T (replacing d >= max(n, T)); scores not all constant; catalogue loss. "
                       "Family: mostly d < n too (with a linear head, d >= n alone makes the construction work)")
    expected = "FAIL"
    control_of = "overparam-landscape"
    plot_metric = "residual_lower_bound_rel"

    def not_applicable(self, data):
        if data.v is None:
            return need_head(data)
        if data.d >= data.T:
            return f"the control's claim is about d < T; the given data have d = {data.d}, T = {data.T}"
        # the check is deterministic on fixed data: the control is refutable only with an impossibility certificate
        _, rel, cert = construct(data)
        if cert["residual_lower_bound_rel"] <= RESID_TOL:
            return (f"the construction X_i W z_i = gamma_i is not provably impossible on the given data (d = {data.d} "
                    f"< T = {data.T}, relative residual {rel:.2g}): the control could not be refuted")
        return None

    def _family(self, rng):
        T = int(rng.integers(3, 7))
        d = int(rng.integers(1, T))  # d < T
        n = d + int(rng.integers(1, 4)) if rng.random() < 0.75 else int(rng.integers(1, d + 1))
        return n, T, d

    def assume_generic(self, inst, state, ctx):  # queries cannot be independent when d < n
        g = scores(inst["data"])
        return decide(float((g.max(axis=1) - g.min(axis=1)).max()) > 0, "all scores constant")

    def assume_under_parameterised(self, inst, state, ctx):
        data = inst["data"]
        return decide(data.d < data.T, "d >= T", d=data.d, n=data.n, T=data.T, d_ge_n=int(data.d >= data.n))

    def check_construction(self, inst, state, ctx):
        Wbar, rel, cert = construct(inst["data"])
        m = dict(construction_residual=rel, **cert)
        if rel <= RESID_TOL:
            return held(**m)
        if cert["residual_lower_bound_rel"] > RESID_TOL:
            return failed(f"no W with ||W||_F <= {NORM_CAP:g} solves X_i W z_i = gamma_i "
                          "(certified residual lower bound)", **m)
        return undecided("residual non-zero but not certified", **m)
