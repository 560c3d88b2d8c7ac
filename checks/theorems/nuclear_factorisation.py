r"""nuclear-factorisation — ‖W‖_⋆ = min{½(‖K‖_F² + ‖Q‖_F²) : KQ^T = W}, and the rank-constrained Att-SVM⋆ with
m < n.

Statement (TLTO §3, the (K, Q) ↔ nuclear-norm link behind Att-SVM⋆; THEORY.md §3):

.. math:: \|W\|_\star = \min_{K, Q \in \mathbb R^{d\times m},\ KQ^\top = W} \tfrac12(\|K\|_F^2 + \|Q\|_F^2)
          \quad (m \ge \operatorname{rank} W),

attained at K = U√Σ, Q = V√Σ (W = UΣV^T, thin SVD). Consequently the (K, Q) problem with m columns is the
rank-constrained Att-SVM⋆: min ‖W‖_⋆ s.t. rank W ≤ m and the Att-SVM(α) margins ≥ 1. For m < n the rank
constraint
can bind and the problem is non-convex; its convex relaxation (drop the rank constraint: the certified SDP of
numerics.svm) answers it exactly when the relaxation's certified solution has rank ≤ m, and otherwise says
nothing.

What is proved, and what is sampled. The lower bound is ‖W‖_⋆ = ⟨KQ^T, UV^T⟩ = ⟨K, UV^T Q⟩ ≤ ‖K‖_F‖Q‖_F ≤
½(‖K‖_F² + ‖Q‖_F²). Its last step (AM–GM: ½(a² + b²) − ab = ½(a − b)²) is structural: certified once, exactly,
by
sympy (``am_gm_certified``), never sampled. The step that can fail numerically — ‖KQ^T‖_⋆ ≤ ‖K‖_F‖Q‖_F, with
the
nuclear norm of the product computed from its own SVD — is sampled where it is tight: factorisations
K = U√Σ G, Q = V√Σ G^{-T} with G = O(I + εE) near orthogonal (ε from 1e-6 to 1), padded with extra columns
when
m > rank, an adversarial descent of ½(‖K‖² + ‖Q‖²) over G, and fully random Gaussian pairs (K, Q).

Hypotheses implemented: the instance's W is a certified Att-SVM⋆(opt) solution of unit-sphere data (n ∈ 3..4,
T ∈ 3..4, d ∈ 4..6, d ≥ max(n, T − 1) so Att-SVM is feasible; a quarter of the instances scaled by 10^±4,
where a
rank decided by an absolute threshold is wrong), plus a random W of random rank r ∈ 1..d scaled by 10^U(−6,
6);
m = n − 1 < n.

Predictions.

* ``attains``: the SVD factorisation reproduces W (FACT_RTOL) and ½(‖K‖² + ‖Q‖²) equals ‖W‖_⋆ computed
  independently as Σ√eig(W^T W) (NUC_INDEP_RTOL); for the SVM solution also the certified SDP objective
  (2·GAP_TOL).
* ``never_below``: AM–GM certified exactly; over every sampled factorisation, ‖KQ^T‖_⋆ ≤ ‖K‖_F‖Q‖_F
(LOWER_RTOL) and
  ½(‖K‖² + ‖Q‖²) ≥ ‖KQ^T‖_⋆ (LOWER_RTOL).
* ``rank_constrained``: the relaxation's certified rank (numerics.svm, relative gap) equals an independent
count of
  its singular values above RANK_RTOL·σ₁ and lies in [1, min(n, d)]; if it is ≤ m, the m-column factorisation
  is
  feasible for Att-SVM(opt) (FEAS_TOL) with ½(‖K‖² + ‖Q‖²) = the certified SDP value: the rank-constrained
  optimum,
  held. If it is > m: *undecided* ("relaxation not tight", counted in ``relaxation_tight`` = 0), never PASS.
* ``certificate_rejects_wrong``: the SDP certificate accepts the answer and rejects 1.05·W (feasible, not
optimal).

Negative control (``nuclear-factorisation-control``), at the boundary of the claim: the Frobenius norm in
place of
the nuclear one, "‖W‖_F = min ½(‖K‖² + ‖Q‖²)", on W of rank exactly 2 with σ₂/σ₁ ∈ [1e-3, 1e-1] (at rank 1 the
two
norms agree and the claim is true). False: the attained minimum is ‖W‖_⋆ = ‖W‖_F + Θ(σ₂), refuted by
``attains``.
A weaker check passes it: no sampled factorisation ever goes below ‖W‖_F (they never go below ‖W‖_⋆ ≥ ‖W‖_F).

Numerics: numpy SVD / eigh, numerics.svm.solve_att_svm(norm="nuc") and certify_att_svm, sympy (AM–GM).
"""

from __future__ import annotations

import functools

import numpy as np

from checks import Criterion, Profile, Theorem, decide, failed, register, undecided
from numerics import tolerances as tol
from numerics.data import AttentionData, random_unit_sphere
from numerics.svm import certify_att_svm, solve_att_svm
from numerics.tokens import min_margin

#: KQ^T = W for the SVD factorisation: products of float64 factors, ~1e-15 relative; 1e-12 leaves room.
FACT_RTOL = 1e-12
#: ‖W‖_⋆ from Σ√eig(W^T W): eigh of W^T W has absolute error ~1e-16‖W‖², so a zero singular value comes back
#: as
#: up to ~1e-8‖W‖ (the square root amplifies), times at most d ≤ 8 of them: 1e-6 relative is safe and far
#: below
#: any O(σ₂) error (the control's gap is ≥ 1e-4 relative).
NUC_INDEP_RTOL = 1e-6
#: The inequality ‖KQ^T‖_⋆ ≤ ‖K‖_F‖Q‖_F (and ≤ ½(‖K‖² + ‖Q‖²)) judged on float64 products whose nuclear norm
#: is
#: an SVD sum accurate to ~1e-14 relative; at the minimiser the two sides are equal, so the slack is rounding
#: only.
LOWER_RTOL = 1e-10
#: Certified SDP value vs ½(‖K‖² + ‖Q‖²) of its factorisation: both from the certified answer (duality gap ≤
#: GAP_TOL).
OBJ_RTOL = 2 * tol.GAP_TOL
#: The wrong answer the certificate must reject: 1.05·W^mm_⋆ is feasible and 5 % above optimal.
WRONG_FACTOR = 1.05
#: Share of the data scaled by 10^±4 (W ~ 1e∓8): the input on which an absolute rank threshold fails.
SCALED_SHARE, SCALES = 0.25, (1e4, 1e-4)
#: Adversarial descent over G: steps of gradient descent on log ½(‖K G‖² + ‖Q G^{-T}‖²), step size.
DESCENT_LR = 0.05

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"samples": 8, "descent_steps": 40}),
    "full": Profile(instances=60, min_confirmed=50, params={"samples": 30, "descent_steps": 150}),
    "paper": Profile(instances=200, min_confirmed=170, params={"samples": 60, "descent_steps": 300}),
}


@functools.cache
def am_gm_certified() -> bool:
    """½(a² + b²) − ab ≡ ½(a − b)² over the reals (sympy, exact): so ½(a² + b²) ≥ ab, the structural step of
    the
    lower bound. Certified once per process."""
    import sympy as sp

    a, b = sp.symbols("a b", real=True)
    return bool(sp.expand(sp.Rational(1, 2) * (a**2 + b**2) - a * b - sp.Rational(1, 2) * (a - b) ** 2) == 0)


def svd_factors(W: np.ndarray, r: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """K = U√Σ, Q = V√Σ (first r singular triples; all when r is None)."""
    U, s, Vt = np.linalg.svd(W)
    r = len(s) if r is None else r
    root = np.sqrt(s[:r])
    return U[:, :r] * root, Vt[:r].T * root


def nuc_indep(W: np.ndarray) -> float:
    """‖W‖_⋆ = tr √(W^T W) from a symmetric eigendecomposition (independent of the SVD path)."""
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(W.T @ W), 0, None)).sum())


def nuc(W: np.ndarray) -> float:
    return float(np.linalg.svd(W, compute_uv=False).sum())


def energy(K: np.ndarray, Q: np.ndarray) -> float:
    return 0.5 * float(np.sum(K * K) + np.sum(Q * Q))


def sampled_factorisations(
    W: np.ndarray, rng, samples: int, steps: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Factorisations of W near the minimiser (G = O(I + εE)), padded ones, the end of a descent over G, and
    random Gaussian pairs (whose product is another matrix; the inequality is judged on KQ^T itself)."""
    d = W.shape[0]
    K0, Q0 = svd_factors(W)
    out = []
    for _ in range(samples):
        O, _ = np.linalg.qr(rng.standard_normal((d, d)))
        eps = 10.0 ** rng.uniform(-6, 0)
        G = O @ (np.eye(d) + eps * rng.standard_normal((d, d)) / np.sqrt(d))
        out.append((K0 @ G, Q0 @ np.linalg.inv(G).T))
        extra = int(rng.integers(1, 3))  # m = d + extra: padded columns, Q's extra columns zero
        out.append((np.hstack([K0, rng.standard_normal((d, extra))]), np.hstack([Q0, np.zeros((d, extra))])))
        out.append((rng.standard_normal((d, d)), rng.standard_normal((d, d))))
    G = np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d)  # descent start off the minimiser
    for _ in range(steps):  # d/dG ½(‖K0 G‖² + ‖Q0 G^{-T}‖²) = K0^T K0 G − G^{-1} Q0^T Q0 G^{-T} G^{-1}
        Gi = np.linalg.inv(G)
        grad = K0.T @ K0 @ G - Gi @ (Q0.T @ Q0) @ Gi.T @ Gi
        G = G - DESCENT_LR * grad / max(np.linalg.norm(grad), 1e-300) * min(1.0, np.linalg.norm(grad))
    out.append((K0 @ G, Q0 @ np.linalg.inv(G).T))
    return out


def random_rank_matrix(d: int, r: int, rng, gaps=None) -> np.ndarray:
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.sort(rng.uniform(0.1, 1.0, r))[::-1] if gaps is None else np.asarray(gaps, float)
    return (U[:, :r] * s) @ V[:, :r].T


@register
class NuclearFactorisation(Theorem):
    id = "nuclear-factorisation"
    depends_on = ("svm-nuc", "rank", "certificate")
    title = ("‖W‖_⋆ = min ½(‖K‖² + ‖Q‖²) over KQᵀ = W (attained by the SVD), and rank-constrained Att-SVM⋆ "
             "with m < n")
    reference = "TLTO §3 (Att-SVM⋆ and the (K, Q) parametrisation; THEORY.md §3)"
    statement = (
        r"\|W\|_\star=\min_{KQ^\top=W}\tfrac12(\|K\|_F^2+\|Q\|_F^2);\ \operatorname{rank}W^{mm}_{\star}\le m"
        r"\Rightarrow W^{mm}_{\star}\text{ solves the rank-}m\text{ Att-SVM}^\star"
    )
    hypotheses_text = (
        "certified Att-SVM⋆(opt) solutions of unit-sphere data (n in 3..4, T in 3..4, d in 4..6, a quarter "
        "scaled by 10^±4) and random W of random rank; m = n − 1 < n; AM–GM certified once by sympy"
    )
    profiles = PROFILES
    plot_metric = "min_energy_gap"
    criteria = (
        Criterion("SVD factorisation: |½(‖K‖² + ‖Q‖²) − ‖W‖_⋆| / ‖W‖_⋆", "<=", NUC_INDEP_RTOL),
        Criterion("sampled factorisations: min (‖K‖‖Q‖ − ‖KQᵀ‖_⋆) / ‖KQᵀ‖_⋆", ">=", f"-{LOWER_RTOL:g}",
                  plot_metric="min_energy_gap"),
        Criterion("AM–GM: ½(a² + b²) − ab − ½(a − b)² (sympy, exact)", "==", 0),
        Criterion("relaxation rank ≤ m → factorisation feasible and optimal; rank > m", "->", "undecided"),
        Criterion("SDP certificate on 1.05·W", "is", "rejected"),
    )

    def not_applicable(self, data):
        return (
            "a statement about factorisations W = KQᵀ of matrices and the rank-constrained nuclear SVM "
            "of its own instances (m = n − 1); given data add nothing to it"
        )

    def instance(self, rng, ctx):
        n, T = int(rng.integers(3, 5)), int(rng.integers(3, 5))
        d = int(rng.integers(max(n, T - 1, 4), 7))
        data = random_unit_sphere(n, T, d, rng=rng)
        scale = 1.0
        if rng.random() < SCALED_SHARE:
            scale = float(SCALES[int(rng.integers(len(SCALES)))])
            data = AttentionData(data.X * scale, data.Y, data.Z * scale, data.v)
        r = int(rng.integers(1, d + 1))
        Wr = random_rank_matrix(d, r, rng) * 10.0 ** rng.uniform(-6, 6)
        return {"data": data, "W_rand": Wr, "m": n - 1, "scale": scale, "seed": int(rng.integers(2**31))}

    def prepare(self, instances, ctxs):
        return [{"sol": solve_att_svm(inst["data"], norm="nuc")} for inst in instances]

    def assume_feasible(self, inst, st, ctx):
        return decide(st["sol"].feasible, "Att-SVM(opt) infeasible (verified Farkas certificate)")

    def target(self, W: np.ndarray) -> float:
        """The norm the claim says the minimum equals: nuclear (independently computed)."""
        return nuc_indep(W)

    def _matrices(self, inst, st):
        return {"svm": st["sol"].W, "random": inst["W_rand"]}

    def check_attains(self, inst, st, ctx):
        worst_fact, worst_gap, m = 0.0, 0.0, {}
        for name, W in self._matrices(inst, st).items():
            K, Q = svd_factors(W)
            fact = float(np.linalg.norm(K @ Q.T - W) / np.linalg.norm(W))
            target = self.target(W)
            gap = abs(energy(K, Q) - target) / target
            worst_fact, worst_gap = max(worst_fact, fact), max(worst_gap, gap)
            m[f"attain_gap_{name}"] = gap
        m.update(fact_residual=worst_fact, attain_gap=worst_gap)
        if worst_fact > FACT_RTOL:
            return failed(f"the SVD factorisation does not reproduce W ({worst_fact:.3g} relative)", **m)
        if "attain_gap_svm" in m:
            sol = st["sol"]
            obj = abs(energy(*svd_factors(sol.W)) - sol.objective) / sol.objective
            m["sdp_objective_gap"] = obj
            if obj > OBJ_RTOL:
                return failed(
                    f"½(‖K‖² + ‖Q‖²) of the SVM solution differs from the certified SDP value by {obj:.3g}",
                    **m,
                )
        return decide(
            worst_gap <= NUC_INDEP_RTOL,
            f"the minimum attained by K = U√Σ, Q = V√Σ differs from the claimed "
            f"norm by {worst_gap:.3g} (relative)",
            **m,
        )

    def check_never_below(self, inst, st, ctx):
        rng = np.random.default_rng(inst["seed"])
        worst_cs, worst_e, count = np.inf, np.inf, 0
        for W in self._matrices(inst, st).values():
            for K, Q in sampled_factorisations(W, rng, int(ctx.params.get("samples", 8)),
                                               int(ctx.params.get("descent_steps", 40))):
                P = K @ Q.T
                t = nuc(P)
                if t == 0:
                    continue
                worst_cs = min(worst_cs, (np.linalg.norm(K) * np.linalg.norm(Q) - t) / t)
                worst_e = min(worst_e, (energy(K, Q) - t) / t)
                count += 1
        m = {"am_gm_certified_exactly": int(am_gm_certified()), "factorisations": count,
             "min_energy_gap": float(worst_cs), "min_energy_over_nuc": float(worst_e)}
        if not am_gm_certified():
            return failed("½(a² + b²) − ab = ½(a − b)² failed symbolically", **m)
        return decide(
            worst_cs >= -LOWER_RTOL and worst_e >= -LOWER_RTOL,
            f"a factorisation goes below the nuclear norm of its product ({worst_cs:.3g}, {worst_e:.3g})",
            **m,
        )

    def check_rank_constrained(self, inst, st, ctx):
        data, sol, mcols = inst["data"], st["sol"], inst["m"]
        s = np.linalg.svd(sol.W, compute_uv=False)
        own = int(np.sum(s > tol.RANK_RTOL * s[0]))
        m = {"relaxation_rank": int(sol.rank), "rank_independent": own, "m": mcols}
        if sol.rank != own or not 1 <= sol.rank <= min(data.n, data.d):
            return failed(
                f"the certified rank {sol.rank} disagrees with the relative-gap count {own} or leaves "
                f"[1, min(n, d) = {min(data.n, data.d)}]",
                **m,
            )
        if sol.rank > mcols:
            return undecided(
                f"relaxation not tight: the certified convex relaxation has rank {sol.rank} > m = {mcols}; "
                "the rank-constrained problem is non-convex and is not decided here",
                relaxation_tight=0,
                **m,
            )
        K, Q = svd_factors(sol.W, mcols)
        Wm = K @ Q.T
        feas = min_margin(data, Wm, sol.alpha)
        obj = abs(energy(K, Q) - sol.objective) / sol.objective
        m.update(relaxation_tight=1, rank_m_min_margin=feas, rank_m_objective_gap=obj)
        return decide(
            feas >= 1 - tol.FEAS_TOL and obj <= OBJ_RTOL,
            f"the rank-{mcols} factorisation of the relaxation is not feasible (min margin {feas:.9f}) or "
            "not "
            f"optimal (objective gap {obj:.3g})",
            **m,
        )

    def check_certificate_rejects_wrong(self, inst, st, ctx):
        sol, data = st["sol"], inst["data"]
        ok = certify_att_svm(data, sol.alpha, sol.W, sol.lam, norm="nuc").verified
        bad = certify_att_svm(data, sol.alpha, WRONG_FACTOR * sol.W, sol.lam, norm="nuc").verified
        return decide(
            ok and not bad,
            f"the SDP certificate {'rejects the answer' if not ok else 'accepts 1.05·W'}",
            wrong_accepted=int(bad),
        )


@register
class NuclearFactorisationControl(NuclearFactorisation):
    id = "nuclear-factorisation-control"
    depends_on = ("svm-nuc", "rank", "certificate")
    title = "Control: ‖W‖_F = min ½(‖K‖² + ‖Q‖²) over KQᵀ = W, on W of rank 2 (false)"
    statement = r"\|W\|_F=\min_{KQ^\top=W}\tfrac12(\|K\|_F^2+\|Q\|_F^2)\quad(\operatorname{rank}W=2)"
    hypotheses_text = "W of rank exactly 2, σ₂/σ₁ in [1e-3, 1e-1] (near rank 1, where the claim holds)"
    expected = "FAIL"
    control_of = "nuclear-factorisation"
    plot_metric = "attain_gap"
    criteria = (Criterion("|½(‖K‖² + ‖Q‖²) at the minimiser − ‖W‖_F| / ‖W‖_F", "<=", NUC_INDEP_RTOL,
                          plot_metric="attain_gap"),)

    def instance(self, rng, ctx):
        d = int(rng.integers(3, 7))
        W = random_rank_matrix(d, 2, rng, gaps=[1.0, 10.0 ** rng.uniform(-3, -1)]) * 10.0 ** rng.uniform(
            -3, 3
        )
        return {"W": W, "seed": int(rng.integers(2**31))}

    def sizes(self, inst):
        return {"d": int(inst["W"].shape[0])}

    def prepare(self, instances, ctxs):
        return [{} for _ in instances]

    def target(self, W):
        return float(np.linalg.norm(W))

    def _matrices(self, inst, st):
        return {"W": inst["W"]}

    assume_feasible = None
    check_rank_constrained = None
    check_certificate_rejects_wrong = None

    def assume_rank_two(self, inst, st, ctx):
        s = np.linalg.svd(inst["W"], compute_uv=False)
        return decide(
            int(np.sum(s > tol.RANK_RTOL * s[0])) == 2,
            "W does not have rank 2",
            sigma_ratio=float(s[1] / s[0]),
        )
