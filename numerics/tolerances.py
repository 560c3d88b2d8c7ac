"""Named tolerances, each with the reason for its value. Reports record them (see ``as_dict``)."""

from __future__ import annotations

#: Relative singular-value gap for ranks: sigma_j counts if sigma_j > RANK_RTOL * sigma_1.
#: Interior-point solutions are accurate to ~1e-8 relative, so 1e-6 sits well above solver
#: noise and well below any genuine singular value of a certified solution.
RANK_RTOL = 1e-6

#: Primal feasibility of an Att-SVM solution: constraints must hold to >= 1 - FEAS_TOL.
FEAS_TOL = 1e-7

#: A constraint is active (its token is a support token) if its margin is within this of 1.
ACTIVE_TOL = 1e-6

#: KKT stationarity residual, relative to ||W||_F.
KKT_TOL = 1e-6

#: Duality gap of the nuclear-norm SDP, relative to the objective.
GAP_TOL = 1e-6

#: Optimal-token ties: two scores within this are treated as tied (unit data have O(1) scores).
TIE_TOL = 1e-9

#: Rows of W in span{z_i}: ||W (I - P_Z)||_F <= SPAN_TOL * ||W||_F.
SPAN_TOL = 1e-6

#: Gradient agreement (closed form vs autograd vs central differences), relative error, float64.
GRAD_RTOL = 1e-6

#: Gen-SVM selection thresholds of the authors' experiments (TLTO): selected if s > TAU_H,
#: masked if s <= TAU_L, ambiguous in between.
TAU_H = 1e-3
TAU_L = 1e-6


def as_dict() -> dict[str, float]:
    """All tolerances by name, for reports."""
    return {k: v for k, v in globals().items() if k.isupper() and isinstance(v, float)}


#: Farkas certificate: ||sum_s lam_s F_s|| <= FARKAS_TOL * sum_s lam_s ||F_s||. A polished Farkas vector is an
#: SVD null vector (residual ~1e-15 relative); at 1e-9 any feasible W would need ||W||_F >= 1e9 / max||F_s||
#: (b^T lam = 1), far beyond every norm a feasible instance of the suite's families produces.
FARKAS_TOL = 1e-9

#: theory/ vs numerics: the expressions proved for all sizes, lambdified (theory.instantiate), against
#: numerics.attention, relative to max(1, max|reference|). Both are float64 evaluations of the same function
#: on O(1) data (|W| entries <= ~3, so softmax logits stay O(10)); they differ only in summation order and the
#: softmax max-shift, i.e. a few ulp per term over at most n*T*d^2 <= ~100 terms (~1e-14). 1e-12 leaves 100x
#: for other BLAS reduction orders and still catches any wrong term (those are >= 1e-3 on such data).
FORMAL_RTOL = 1e-12
