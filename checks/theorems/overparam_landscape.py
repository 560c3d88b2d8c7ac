r"""overparam-landscape — over-parameterised attention has no stationary points (sufficient version).

Statement (TLTO, arXiv 2308.16898, benign landscape under over-parameterisation — *reconstructed
sufficient version*, THEORY.md §4): if d ≥ max(n, T) and the data are generic, then for EVERY score table
γ (n × T) there is W̄ with

.. math:: X_i \bar W z_i = \gamma_i \quad (i = 1..n), \qquad\text{and}\qquad
          \langle \nabla L(W), \bar W \rangle < 0 \ \ \forall W,

so L has no stationary point and GD's ‖W(k)‖ → ∞.

Why, and what is certified once. By THEORY.md §2, ⟨∇L(W), W̄⟩ = (1/n) Σ_i ℓ'_i Cov_{s_i}(γ_i, X_i W̄ z_i)
= (1/n) Σ_i ℓ'_i Var_{s_i}(γ_i): an identity, negative at every W as soon as some γ_i is not constant
(ℓ' < 0, the softmax has full support). Sampling W cannot make it fail; what can fail is (a) the EXISTENCE
of W̄ — the linear map W ↦ (X_i W z_i)_i (nT equations, d² unknowns) must be onto R^{nT}: decided
exactly by its rank (relative singular-value gap RANK_RTOL), for every γ at once; (b) the identity as
the numerics compute it — numerics.attention's closed-form gradient at sampled W must equal
(1/n) Σ ℓ'_i Var_s(γ_i) to IDENTITY_RTOL (W̄ from least squares, residual ≤ RESID_TOL); (c) GD's norm
divergence — normalised GD (linear head) must make ‖W(k)‖ grow without levelling off while L decreases
(the trend rule of ``_landscape.judge_divergence``).

Hypotheses implemented: d ≥ max(n, T); generic data verified on the instance: rank Z = n and every X_i (T × d)
has rank T (relative gap GENERIC_RTOL); non-constant scores in some example (both score tables); a catalogue
loss (logistic / exponential / linear, Assumption A proved by ``loss-assumptions``; ℓ' < 0 on the score
range). Instance family: unit-sphere cross-attention data with a linear head, n ∈ 1..4, T ∈ 2..5,
d = max(n, T) + {0, 1, 2}; each instance checks two score tables: the linear head's γ_it = Y_i v^T x_it and
a generic table (i.i.d. N(0, 1), not of that form).

Measured findings (recorded in the report as metrics ``map_rank``/``equations``): for generic data the rank
of the map is min(nT, n·min(d, T), d²) (measured over the quick/full families), so the exact condition
is d ≥ T and d² ≥ nT — the d ≥ n half of the paper's threshold is not needed (e.g. (n, T, d) = (4, 2, 3)
or (5, 3, 4) are onto). And with a *linear head* γ_i = Y_i X_i v lies in col(X_i), so W̄ = v c^T with
Z c = Y works for any d ≥ n even when d < T: the linear head cannot show the T-boundary.

Given data (``--data``): the given (X, Y, Z, v) with a loss, a generic score table and W samples drawn from
the
instance seed; the hypotheses decide (digits: n = 60 > d = 16, so the instances are vacuous, naming it).

Negative control (``overparam-landscape-control``), at the exact boundary of the construction: d = T − 1 ≥ n
(the d ≥ n half of the threshold holds) with a GENERIC score table. There the map has rank n(T − 1) < nT
and a generic γ is not in its range: refuted with a certificate, not a large residual alone — the
least-squares residual r satisfies A^T r ≈ 0, so for every W, ‖A vec W − γ‖ ≥ (γ^T r − ‖A^T r‖ ‖W‖_F)/‖r‖,
and we refute when this bound exceeds RESID_TOL‖γ‖ for every ‖W‖_F ≤ NORM_CAP. (With the linear head's
scores the same instances are solvable: a weaker check using them would wrongly pass the control.)
"""

from __future__ import annotations

import numpy as np
import torch

from checks import Criterion, Profile, Theorem, decide, failed, held, register, undecided
from numerics import attention as att
from numerics import tolerances as tol
from numerics.data import random_unit_sphere
from numerics.gd import GDConfig, RandomInit, run_gd
from numerics.tokens import scores

from ._given import given_metrics, need_head
from ._landscape import DIVERGENCE_CRITERIA, LOSSES, dloss_negative_on, judge_divergence

#: Relative residual of the construction ‖A vec W̄ − γ‖ / ‖γ‖: least squares on an O(1), well-conditioned
#: system (generic unit data) is accurate to ~1e-15; 1e-10 leaves room for conditioning ~1e5.
RESID_TOL = 1e-10

#: Genericity (rank Z = n, rank X_i = T): σ_min > GENERIC_RTOL σ_max; flags only (near-)degenerate draws.
GENERIC_RTOL = 1e-8

#: Rank of the map W ↦ (X_i W z_i)_i: singular values above this share of the largest count. Generic unit
#: data have a gap of many orders between the last counted (≳ 1e-3 relative) and the first structural zero
#: (≲ 1e-15 relative); 1e-9 sits in that gap, as RANK_RTOL does for SVM solutions.
MAP_RANK_RTOL = 1e-9

#: The control's impossibility certificate must exclude every W with ‖W‖_F up to this (a construction
#: needing a larger W is numerically meaningless for unit data whose W̄ has norm O(1)–O(1e2)).
NORM_CAP = 1e8

#: The identity ⟨∇L(W), W̄⟩ = (1/n) Σ ℓ'_i Var_s(γ_i), float gradient vs the variance form, relative to
#: (1/n) Σ |ℓ'_i| Var_s(γ_i): both sides are O(1) sums of d² resp. T products, W̄ solves the equations to
#: RESID_TOL; the numerics' gradient is accurate to tol.GRAD_RTOL, which is the honest bound.
IDENTITY_RTOL = tol.GRAD_RTOL
#: Norms of the W at which the identity is evaluated: the variance must stay far above float rounding.
IDENTITY_NORMS = (1e-2, 1e-1, 1.0, 3.0)

#: Normalised GD for the divergence prediction (the authors' step; recorded every 20 of 400 steps).
GD_LR, GD_STEPS, GD_EVERY = 0.1, 400, 20

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=50),
    "paper": Profile(instances=200, min_confirmed=180),
}


def design(data) -> np.ndarray:
    """A (nT, d²) with rows vec_C(x_it z_i^T), so that A vec_C(W) = (x_it^T W z_i)."""
    return (data.X[:, :, :, None] * data.Z[:, None, None, :]).reshape(data.n * data.T, data.d * data.d)


def map_rank(data) -> int:
    """Rank of W ↦ (X_i W z_i)_i (relative singular-value gap MAP_RANK_RTOL)."""
    s = np.linalg.svd(design(data), compute_uv=False)
    return int((s > MAP_RANK_RTOL * s[0]).sum()) if s.size and s[0] > 0 else 0


def construct(data, gamma: np.ndarray) -> tuple[np.ndarray, float, dict]:
    """W̄ by minimum-norm least squares for the score table gamma (n, T); its relative residual; and the
    impossibility certificate numbers."""
    A, g = design(data), np.asarray(gamma, float).reshape(-1)
    w, *_ = np.linalg.lstsq(A, g, rcond=None)
    r = g - A @ w
    rel = float(np.linalg.norm(r) / np.linalg.norm(g))
    nr = float(np.linalg.norm(r))
    # any W: ‖A w − g‖ ≥ |r^T (A w − g)| / ‖r‖ ≥ (g^T r − ‖A^T r‖ ‖w‖) / ‖r‖
    lower = (float(g @ r) - float(np.linalg.norm(A.T @ r)) * NORM_CAP) / nr if nr > 0 else 0.0
    return (
        w.reshape(data.d, data.d),
        rel,
        {"residual_lower_bound_rel": max(lower, 0.0) / float(np.linalg.norm(g))},
    )


def identity_error(data, gamma, Wbar, loss, rng) -> float:
    """max over sampled W of |⟨∇L(W), W̄⟩ − (1/n) Σ ℓ'_i Var_s(γ_i)| / ((1/n) Σ |ℓ'_i| Var_s(γ_i)), with ∇L
    from
    numerics.attention's closed form for the score table gamma (token_weights + grad_from_weights)."""
    G = rng.standard_normal((4 * len(IDENTITY_NORMS), data.d, data.d))
    G *= np.repeat(IDENTITY_NORMS, 4)[:, None, None] / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    b = att.batch_from_data([data] * len(G))
    Wt = torch.as_tensor(G)
    gam = torch.as_tensor(np.broadcast_to(gamma, (len(G),) + gamma.shape).copy())
    s = torch.softmax(att.logits(b.X, b.Z, Wt), dim=-1)  # (R, n, T)
    margin, c = att.token_weights(b.X, b.Y, s, att.LinearHead(b.v), loss, gamma=gam)
    grad = att.grad_from_weights(b.X, b.Z, c).numpy()  # (R, d, d)
    ip = np.einsum("rde,de->r", grad, Wbar)
    sn, gn = s.numpy(), gam.numpy()
    var = (sn * gn**2).sum(-1) - (sn * gn).sum(-1) ** 2  # (R, n)
    dl = att.loss_derivative(margin, loss).numpy()  # (R, n)
    pred, scale = (dl * var).mean(-1), (np.abs(dl) * var).mean(-1)
    return float(np.max(np.abs(ip - pred) / scale))


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
        data = ctx.data if ctx.data is not None else random_unit_sphere(*self._family(rng), rng=rng)
        return {
            "data": data,
            "loss": str(rng.choice(LOSSES)),
            "generic_gamma": rng.standard_normal((data.n, data.T)),
            "seed": int(rng.integers(2**31)),
        }

    def _tables(self, inst) -> dict[str, np.ndarray]:
        return {"linear": scores(inst["data"]), "generic": inst["generic_gamma"]}

    def assume_generic(self, inst, state, ctx):
        data = inst["data"]
        okz, rz = _rank_ok(data.Z)
        spread = min(float(np.ptp(g, axis=1).max()) for g in self._tables(inst).values())
        return decide(okz and spread > 0, "queries dependent or all scores constant", z_cond_ratio=rz)

    def assume_assumption_a(self, inst, state, ctx):
        g = np.concatenate([t.ravel() for t in self._tables(inst).values()])
        return decide(
            dloss_negative_on(inst["loss"], float(g.min()), float(g.max())), "loss violates Assumption A"
        )


@register
class OverparamLandscape(_Base):
    id = "overparam-landscape"
    depends_on = ("gd", "gradient", "softmax")
    title = ("If d >= max(n, T), every score table has a W-bar with X_i W-bar z_i = gamma_i, a descent "
             "direction everywhere")
    reference = ("TLTO (arXiv 2308.16898), benign landscape under over-parameterisation — reconstructed "
                 "sufficient version")
    statement = (r"d \ge \max(n,T) \Rightarrow \forall\gamma\ \exists \bar W: X_i \bar W z_i = \gamma_i,\ "
                 r"\langle \nabla L(W), \bar W\rangle < 0\ \forall W,\ \|W(k)\|\to\infty")
    hypotheses_text = (
        "d >= max(n, T); generic: rank Z = n, rank X_i = T (sigma ratio > 1e-8); scores not all "
        "constant (linear-head and generic tables); catalogue loss (Assumption A)"
    )
    plot_metric = "identity_rel_err"
    criteria = (
        Criterion("rank of W ↦ (X_i W z_i)_i (singular values > MAP_RANK_RTOL·σ_max) vs nT", "==", "nT"),
        Criterion(
            "relative residual ‖A vec W̄ − γ‖/‖γ‖ of the least-squares W̄ (linear-head and generic tables)",
            "<=",
            RESID_TOL,
            plot_metric="construction_residual",
        ),
        Criterion(
            "max relative error of ⟨∇L(W), W̄⟩ = (1/n) Σ ℓ'_i Var_s(γ_i) at Gaussian W of norms "
            f"{IDENTITY_NORMS}",
            "<=",
            IDENTITY_RTOL,
            plot_metric="identity_rel_err",
        ),
    ) + DIVERGENCE_CRITERIA

    def _family(self, rng):
        n, T = int(rng.integers(1, 5)), int(rng.integers(2, 6))
        return n, T, max(n, T) + int(rng.integers(0, 3))

    def prepare(self, instances, ctxs):
        """Normalised GD (linear head) per instance, for the divergence prediction."""
        out = []
        for inst, ctx in zip(instances, ctxs, strict=True):
            res = run_gd(inst["data"], GDConfig(steps=GD_STEPS, lr=GD_LR, loss=inst["loss"]),
                         init=RandomInit(inst["seed"]), record_every=GD_EVERY, device=ctx.device)
            out.append({"norms": np.linalg.norm(np.asarray(res.W_traj)[:, 0], axis=(1, 2)),
                        "losses": np.asarray(res.loss_traj)[:, 0]})
        return out

    def assume_overparameterised(self, inst, state, ctx):
        data = inst["data"]
        okx = all(_rank_ok(data.X[i])[0] for i in range(data.n))
        bound = max(data.n, data.T)
        if data.d < bound:
            return failed(f"d = {data.d} < max(n, T) = {bound}", d=data.d, n=data.n, T=data.T)
        return decide(okx, "some X_i has rank < T")

    def check_construction(self, inst, state, ctx):
        data = inst["data"]
        r = map_rank(data)
        rels = {k: construct(data, g)[1] for k, g in self._tables(inst).items()}
        m = dict(
            given_metrics(ctx),
            map_rank=r,
            equations=data.n * data.T,
            construction_residual=max(rels.values()),
        )
        if r < data.n * data.T:
            return failed(
                f"W -> (X_i W z_i)_i has rank {r} < nT = {data.n * data.T}: not every score table is "
                "reachable",
                **m,
            )
        return decide(
            max(rels.values()) <= RESID_TOL, "least-squares W-bar does not solve X_i W z_i = gamma_i", **m
        )

    def check_descent_everywhere(self, inst, state, ctx):
        data, errs = inst["data"], []
        for g in self._tables(inst).values():
            Wbar, rel, _ = construct(data, g)
            if rel > RESID_TOL:
                return undecided("no exact W-bar (see construction): the identity has nothing to certify")
            errs.append(identity_error(data, g, Wbar, inst["loss"], ctx.rng))
        e = max(errs)
        return decide(
            e <= IDENTITY_RTOL,
            f"<grad L(W), W-bar> differs from (1/n) sum l'_i Var_s(gamma_i) by {e:.2g} "
            "(relative): the gradient is not the one the identity certifies",
            identity_rel_err=e,
        )

    def check_norm_diverges(self, inst, state, ctx):
        return judge_divergence(state["norms"], state["losses"], GD_LR, GD_STEPS)


@register
class OverparamLandscapeControl(_Base):
    id = "overparam-landscape-control"
    depends_on = ()
    title = "Control: every score table has a W-bar with X_i W-bar z_i = gamma_i at d = T - 1 >= n (false)"
    reference = OverparamLandscape.reference
    statement = r"d = T-1 \ge n \Rightarrow \forall\gamma\ \exists \bar W: X_i \bar W z_i = \gamma_i"
    hypotheses_text = (
        "d = T - 1 >= n (the boundary: the d >= n half of the threshold holds); generic queries; "
        "scores not all constant; catalogue loss. Judged on the generic score table"
    )
    expected = "FAIL"
    control_of = "overparam-landscape"
    plot_metric = "residual_lower_bound_rel"
    criteria = (
        Criterion(
            "relative residual of the least-squares W̄ for the generic table (the claim holds when)",
            "<=",
            RESID_TOL,
            plot_metric="construction_residual",
        ),
        Criterion(
            f"refuted: certified lower bound on the relative residual of every W with ‖W‖_F ≤ {NORM_CAP:g}",
            ">",
            RESID_TOL,
            plot_metric="residual_lower_bound_rel",
        ),
        Criterion("inconclusive: residual above the tolerance but not certified", "→", "inconclusive"),
    )

    def not_applicable(self, data):
        if data.v is None:
            return need_head(data)
        if not (data.d == data.T - 1 and data.d >= data.n):
            return (
                f"the control's claim is about d = T - 1 >= n; the given data have d = {data.d}, T = "
                f"{data.T}, "
                f"n = {data.n}"
            )
        return None

    def _family(self, rng):
        n = int(rng.integers(1, 4))
        T = n + 1 + int(rng.integers(1, 4))
        return n, T, T - 1

    def _tables(self, inst):
        return {"generic": inst["generic_gamma"]}

    def assume_boundary(self, inst, state, ctx):
        data = inst["data"]
        return decide(
            data.d == data.T - 1 and data.d >= data.n, "not at d = T - 1 >= n", d=data.d, n=data.n, T=data.T
        )

    def check_construction(self, inst, state, ctx):
        data = inst["data"]
        _, rel, cert = construct(data, inst["generic_gamma"])
        m = dict(construction_residual=rel, map_rank=map_rank(data), equations=data.n * data.T, **cert)
        if rel <= RESID_TOL:
            return held(**m)
        if cert["residual_lower_bound_rel"] > RESID_TOL:
            return failed(f"no W with ||W||_F <= {NORM_CAP:g} solves X_i W z_i = gamma_i "
                          "(certified residual lower bound)", **m)
        return undecided("residual non-zero but not certified", **m)
