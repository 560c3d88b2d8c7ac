"""Attention SVMs with certificates: the suite's ground truth (THEORY.md §3).

Every program here is a *homogeneous hard-margin SVM*::

    min ½‖w‖²  s.t.  A w ≥ b,  E w = e                                       (core)

solved once, by :func:`~numerics.svm.core._hard_margin_core`, for all of them:

* Att-SVM, Frobenius — ``solve_att_svm(data, alpha, norm="fro")``:
  ``W^mm_α = argmin ‖W‖_F  s.t. (x_{iα_i} − x_it)^T W z_i ≥ 1``;
* Att-SVM⋆, nuclear — ``solve_att_svm(data, alpha, norm="nuc")`` (an SDP, not the core);
* ℓp-AttSVM, entrywise ℓp (the limit of ℓp mirror descent) — :func:`solve_lp_att_svm` (a power-cone program,
  not the core; feasibility from the core);
* sequence / causal SVM — :func:`solve_seq_svm`;
* Gen-SVM directional and finite parts — :func:`gen_svm`;
* TLZO's p-SVM, relaxed p-SVM and the head SVM — :func:`solve_p_svm`, :func:`solve_head_svm`.

How the core solves (Frobenius): the Lawson–Hanson *least-distance programming* reduction
(Lawson & Hanson, "Solving Least Squares Problems", ch. 23) turns the SVM into one NNLS of size
(p+1) × m: ``min_{u ≥ 0} ‖[A^T; b^T] u − e_{p+1}‖``. The residual r gives ``w = −r_{1:p} / r_{p+1}``
and the dual multipliers ``λ = u / (1 − b^T u)``; a zero residual is exactly a Farkas vector
(``A^T u = 0, b^T u = 1, u ≥ 0``), so infeasibility falls out of the same solve. Att-SVM features
``(x_{iα}−x_it) z_i^T`` are first written in orthonormal bases of span{x-differences} ⊗ span{z_i}
(exact: the optimum lies in the span of the features), then the active set is re-solved by least
squares (polish) and the answer is certified by :func:`certify_att_svm`, which recomputes margins
and stationarity from the raw data and never looks at solver internals.

Support tokens (``SVMSolution.support``) follow THEORY.md's definition T_i(α): tokens whose margin
is within ``ACTIVE_TOL`` of 1 on the certified solution. Multipliers ``lam`` are reported separately;
under degeneracy an active token can carry λ = 0 (``positive_support`` gives the λ > 0 view).

References: TLTO = arXiv 2308.16898 (Att-SVM eq. (Att-SVM), (Att-SVM⋆), Gen-SVM, seq/causal);
TLZO = arXiv 2306.13596 (p-SVM, joint (v, p)).

Modules: :mod:`~numerics.svm.core` (results, the LDP/NNLS core, polishing, Farkas, the one certifier),
:mod:`~numerics.svm.att` (Att-SVM, the shared attention-row solve, local optimality),
:mod:`~numerics.svm.nuclear` (Att-SVM⋆: the certified SDP ladder), :mod:`~numerics.svm.exact` (exact rational
proofs), :mod:`~numerics.svm.gen` (Gen-SVM), :mod:`~numerics.svm.sequence` (sequence / causal SVM) and
:mod:`~numerics.svm.lp` (ℓp-AttSVM), :mod:`~numerics.svm.vectors` (TLZO's p-SVM, head SVM, joint (v, p)).
Patch a private helper in the module that defines it (``numerics.svm.nuclear._nuclear_sdp``), not here. The
naive per-pair cvxpy baseline of the benchmarks lives in :mod:`checks.bench_naive`.
"""

from .att import certify_att_svm, is_locally_optimal, locally_optimal, solve_att_svm, support_tokens
from .core import Certificate, SVMSolution, rank_by_gap
from .gen import GenSVMResult, fit_svmeq, gen_svm
from .lp import lp_norm, solve_lp_att_svm
from .nuclear import NUC_LADDER, NUC_LADDER_FULL
from .sequence import seq_scores, solve_seq_svm
from .vectors import VectorSVMSolution, solve_head_svm, solve_joint_vp_svm, solve_p_svm

__all__ = [
    "Certificate",
    "SVMSolution",
    "VectorSVMSolution",
    "GenSVMResult",
    "NUC_LADDER",
    "NUC_LADDER_FULL",
    "solve_att_svm",
    "solve_lp_att_svm",
    "lp_norm",
    "certify_att_svm",
    "support_tokens",
    "is_locally_optimal",
    "locally_optimal",
    "gen_svm",
    "fit_svmeq",
    "seq_scores",
    "solve_seq_svm",
    "solve_p_svm",
    "solve_head_svm",
    "solve_joint_vp_svm",
    "rank_by_gap",
]
