r"""The formal layer's proofs as machine-readable records: what is proved, for which sizes, what stays
numerical.

``PROOFS`` lists one :class:`ProofRecord` per statement. ``verify(id)`` runs the proof (a few seconds at
most) and returns its outcome; ``status_table()`` renders the table that README.md and docs/theory.md
show ("Formal layer"); tests/theory/test_formal.py checks that both documents list every record with its
status.

Statuses: **proved for all sizes** (sums over symbolic n, T, d, m, :mod:`theory.general`),
**proved at sizes ...** (explicit symbols at fixed sizes, :mod:`theory.derivations`), **proved per loss**
(Assumption A, :mod:`theory.losses`). What every proof leaves to numerics is in ``numerical``.

Examples
--------
>>> sorted(r.id for r in PROOFS)[:3]
['b1-covariance-bound', 'b2-covariance-bound', 'covariance-identity']
>>> verify("softmax-jacobian")["holds"]
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from numerics.errors import InvalidInputError


@dataclass(frozen=True)
class ProofRecord:
    id: str
    statement: str
    symbolic: str  # what was proved symbolically, and how
    sizes: str  # "all" or the fixed sizes
    numerical: str  # what remains a numerical check, and where it is done
    run: Callable  # () -> GeneralProof | Derivation | AssumptionAResult
    check: str  # the catalogue id that relies on it

    @property
    def status(self) -> str:
        if self.sizes == "all":
            return "proved for all sizes"
        if self.sizes == "per loss":
            return "proved per loss"
        return f"proved at sizes {self.sizes}"


def _g(name):
    def run():
        from . import general
        return getattr(general, name)()
    return run


def _st(name):
    def run():
        from . import stationarity
        return getattr(stationarity, name)()
    return run


def _smooth():
    from .smoothness import lipschitz_derivation
    return lipschitz_derivation()


def _softplus():
    from .derivations import gradient_closed_form
    return gradient_closed_form(1, 2, 2, head="softplus")


def _lemma():
    from .stationarity import no_stationary_point_lemma
    return no_stationary_point_lemma(2)


def _losses():
    from .losses import LOSSES, assumption_a
    return [assumption_a(k) for k in LOSSES]


_NUM_GRAD = (
    "closed form vs autograd vs central differences on random instances (gradient-closed-form check); "
    "the proved expression lambdified at (1,2,1), (2,3,2), (3,4,3) equals numerics.attention to FORMAL_RTOL "
    "(tests/theory/test_formal.py)"
)

PROOFS: tuple[ProofRecord, ...] = (
    ProofRecord(
        "softmax-jacobian",
        "dS(a)_t/da_tau = s_t (delta_t,tau - s_tau)",
        "sympy.diff of e^{a_t}/sum_sigma e^{a_sigma} with a symbolic T, normal form of the difference",
        "all",
        "none (used by every gradient)",
        _g("softmax_jacobian_general"),
        "gradient-closed-form",
    ),
    ProofRecord(
        "gradient-closed-form",
        "grad L(W) = (1/n) sum_i ell'(gamma_i^T s_i) X_i^T (diag s_i - s_i s_i^T) gamma_i z_i^T (linear head)",  # noqa: E501
        "sympy.diff of L(W) written with sums over symbolic n, T, d in a generic entry W[j,k], undefined "
        "loss ell (every differentiable loss); equal to the closed form's entry in the sums normal form",
        "all",
        _NUM_GRAD,
        _g("gradient_general"),
        "gradient-closed-form",
    ),
    ProofRecord(
        "gradient-closed-form-softplus",
        "the same closed form with gamma_i = Y_i X_i V sigmoid(V^T X_i^T s_i) (smooth nonlinear head)",
        "sympy.diff with explicit symbols, rational normal form",
        "(n, T, d) = (1, 2, 2) (k = 2)",
        "the ReLU head: closed form vs autograd vs central differences (gradient-closed-form check)",
        _softplus,
        "gradient-closed-form",
    ),
    ProofRecord(
        "stationary-conditions",
        "grad L(W) = 0 <=> for all j, k: sum_i ell'_i sum_t s_it (gamma_it - s_i^T gamma_i) X_itj z_ik = 0",
        "the (j,k) equation equals sympy.diff(L, W[j,k]) in the sums normal form",
        "all",
        "none",
        _g("stationarity_conditions_general"),
        "no-stationary-points",
    ),
    ProofRecord(
        "kq-chain-rule",
        "grad_K L(K Q^T) = grad L(W) Q, grad_Q L(K Q^T) = grad L(W)^T K",
        "sympy.diff of L(K Q^T) (W_pq = sum_r K_pr Q_qr, symbolic n, T, d, m) in K[a,b] and Q[a,b] equals "
        "the entries of grad L(W) Q and grad L(W)^T K",
        "all",
        "autograd/central differences (kq-chain-rule check); lambdified at (1,2,1,1), (2,3,2,1), (1,2,2,2) "
        "vs numerics.attention.grad_KQ (tests/theory/test_formal.py)",
        _g("kq_chain_rule_general"),
        "kq-chain-rule",
    ),
    ProofRecord(
        "covariance-identity",
        "(X M z)^T (diag s - s s^T) gamma = Cov_s(gamma, X M z); <grad L(W), M> = (1/n) sum_i ell'_i Cov_i",
        "the one-line identity for generic s, gamma, b in R^T, and sum_jk M_jk dL/dW_jk (sympy.diff) = "
        "(1/n) sum_i ell'_i Cov_{s_i}(gamma_i, X_i M z_i), both in the sums normal form",
        "all",
        "covariance-identity check (numeric, random W, M); lambdified vs <numerics grad, M> (tests)",
        _g("covariance_general"),
        "covariance-identity",
    ),
    ProofRecord(
        "b2-covariance-bound",
        "B.2: Cov_s(gamma, X W^mm z) >= Delta s_opt (1 - s_opt) > 0",
        "identity Cov = Delta s_o(1-s_o) + Delta s_o sum_t s_t (1-delta_to) xi_t (sum s = 1, symbolic T), "
        "sympy sign of the summand, 1 - s_o > 0 for T >= 2",
        "all",
        "that an instance satisfies B.2 and its margins are >= 1 (certified per instance); the bound on "
        "B.2 data at random W (tests/theory/test_formal.py)",
        _st("b2_covariance_bound"),
        "no-stationary-points",
    ),
    ProofRecord(
        "b1-covariance-bound",
        "B.1: Cov_s(gamma, X W^mm z) >= Delta_min s_opt (1 - s_opt) > 0",
        "identity Cov = Delta s_o(1-s_o) + s_o sum_t s_t (1-delta_to) zeta_t (all support tokens, symbolic "
        "T), sympy sign of the summand",
        "all",
        "that an instance satisfies B.1 (support tokens from the certified SVM); the bound on B.1 data at "
        "random W (tests/theory/test_formal.py)",
        _st("b1_covariance_bound"),
        "no-stationary-points",
    ),
    ProofRecord(
        "no-stationary-points",
        "A, Att-SVM(opt) feasible, B.1 or B.2 => <grad L(W), W^mm> < 0 at every W: no stationary point",
        "composition: stationarity conditions + covariance identity + B.1/B.2 bounds (all sizes) + ell' < 0 "
        "(Assumption A, per loss) + sympy sign of each summand ell'_i Cov_i",
        "all",
        "the hypotheses per instance and GD's norm divergence (no-stationary-points check)",
        _st("no_stationary_point_general"),
        "no-stationary-points",
    ),
    ProofRecord(
        "no-stationary-point-n1-T2",
        "n = 1, T = 2: grad L(W) = ell' s_1 s_2 (gamma_1 - gamma_2)(x_1 - x_2) z^T != 0",
        "explicit symbols, rational normal form; sign facts by sympy",
        "(n, T, d) = (1, 2, 2)",
        "none (superseded by no-stationary-points for all sizes)",
        _lemma,
        "no-stationary-points",
    ),
    ProofRecord(
        "smoothness-bound",
        "grad L is L_W-Lipschitz, L_W = (1/n) sum_i R_i^2 ||z_i||^2 (B2 Delta_i^2/4 + B1 Delta_i) "
        "(R_i = max_t ||x_it||, Delta_i <= 2 ||v|| R_i, B1 >= |ell'|, B2 >= |ell''|; logistic 1, 1/4)",
        "second directional derivative of ell(gamma^T S(a + eps b)) (sympy.diff, symbolic T), weighted "
        "Lagrange identity, Bhatia-Davis identity, mean in range, monotonicity (sympy signs)",
        "all",
        "measured ||grad L(W) - grad L(W')|| / ||W - W'|| and adversarial Hessian Rayleigh quotients <= "
        "theory.smoothness.lipschitz_bound, the bound every check uses (smoothness-step, tests)",
        _smooth,
        "smoothness-step",
    ),
    ProofRecord(
        "loss-assumptions",
        "logistic, exponential, linear losses satisfy Assumption A",
        "sympy: sign of ell' (assumptions + solveset), continuity of ell'' on R, bounds on [-B, B]",
        "per loss",
        "loss-assumptions check cross-checks numerically",
        _losses,
        "loss-assumptions",
    ),
)

BY_ID = {r.id: r for r in PROOFS}


def verify(pid: str) -> dict:
    """Run one proof; {"id", "holds", "status", "seconds", "steps"} (steps: (what, holds, method))."""
    import time

    if pid not in BY_ID:
        raise InvalidInputError(f"unknown proof {pid!r}; known: {sorted(BY_ID)}")
    rec = BY_ID[pid]
    t0 = time.perf_counter()
    out = rec.run()
    if isinstance(out, list):  # Assumption A, one result per loss
        holds = all(r.holds for r in out)
        steps = [(f"Assumption A for {r.name}", r.holds, r.decreasing_method) for r in out]
    elif hasattr(out, "steps"):
        holds, steps = out.holds, [(s.what, s.holds, s.method) for s in out.steps]
    else:
        holds, steps = out.holds, [(out.statement, out.holds, out.method)]
    return {"id": pid, "holds": bool(holds), "status": rec.status, "seconds": time.perf_counter() - t0,
            "steps": steps}


def status_table() -> str:
    """Markdown: | proof | statement | status | remains numerical | (the README / docs/theory.md table)."""
    rows = ["| proof | statement | status | what remains numerical |", "|---|---|---|---|"]
    rows += [f"| {r.id} | {r.statement} | {r.status} | {r.numerical} |" for r in PROOFS]
    return "\n".join(rows)
