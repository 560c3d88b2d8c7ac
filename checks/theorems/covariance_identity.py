r"""covariance-identity: the directional derivative of the attention loss is an average of covariances.

Statement (TLTO, arXiv 2308.16898, §2 and the landscape proofs of its appendix; THEORY.md §2)::

    <grad L(W), M> = (1/n) sum_i l'_i Cov_{s_i}(gamma_i, X_i M z_i)      for every direction M,

with l'_i = l'(gamma_i^T s_i), s_i = S(X_i W z_i), gamma_i = Y_i X_i v (linear head) and
Cov_s(a, b) = sum_t s_t a_t b_t - (sum_t s_t a_t)(sum_t s_t b_t). Since l' < 0 (Assumption A), M is a descent
direction wherever every covariance is positive.

Hypotheses implemented (exactly): linear head; the loss is a smooth catalogue loss (sympy,
:func:`theory.losses.assumption_a`). Nothing else: the identity holds for every W and M.

Predictions:

* ``symbolic``: :func:`theory.derivations.covariance_identity` -- <grad L, M> by ``sympy.diff`` for an
undefined loss,
  M a matrix of free symbols, at small sizes (``SYMBOLIC_SIZES``).
* ``cov_vs_autograd``: the covariance sum against <grad, M> with grad from torch autograd of an independent
  reference forward pass; ``cov_vs_fd``: against the directional derivative d/de L(W + e M) by 4-point central
  differences (with a Richardson error estimate; too inaccurate -> inconclusive); ``cov_vs_closed_form``:
  against <numerics.attention.grad_W, M>. Error relative to the *term scale* (1/n) sum_i |l'_i| (sum_t s_t
  |a_t b_t| + |sum_t s_t a_t| |sum_t s_t b_t|), which bounds both sides' summands (so that an inner product
  that cancels to ~0 is still judged fairly), below ``GRAD_RTOL``.
* ``descent_sign`` (the corollary): if every Cov_{s_i}(gamma_i, X_i M z_i) > 0 then <grad L(W), M> < 0.

Instance family: unit-sphere data (cross- and self-attention), n in 1..5, T in 2..6, d in 1..6, the three
losses in turn, W and M Gaussian with log-uniform scales in [0.1, 5]; every third M is rank one (u z^T-like),
and on every fourth instance M = -W (the radial direction). With ``--data`` the given data and head are used.

Negative control ``covariance-identity-control``: the identity without the mean term,
(1/n) sum_i l'_i sum_t s_t a_t b_t. Refuted symbolically (theory's counter-value) and numerically
(the missing (1/n) sum_i l'_i E[a] E[b] is of the order of the term scale).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, register, undecided
from checks.theorems._given import need_head
from numerics.data import AttentionData
from numerics.tolerances import GRAD_RTOL
from theory import derivations, general
from theory.losses import assumption_a

from ._gradients import (
    EPS,
    FD_ERR_SHARE,
    LOSSES,
    Case,
    autograd_grad,
    draw_data,
    draw_matrix,
    effective_scores,
    judge_symbolic,
    lib_grad_W,
    loss_prime_np,
    reference_loss,
)

#: Step of the directional difference quotient along M/||M|| (unit-scale data): truncation ~h^4 = 1e-12,
#: rounding ~eps |L| / h ~ 1e-13, both far below GRAD_RTOL.
FD_STEP = 1e-3

#: Rounding floor in ulps of the term scale (the sums have at most n T terms of that size).
ROUNDOFF_ULPS = 1e3

SYMBOLIC_SIZES = {
    "quick": ((1, 2, 2), (2, 2, 2), (1, 3, 2)),
    "full": ((1, 2, 1), (1, 2, 2), (2, 2, 2), (1, 3, 2), (2, 3, 2)),
}

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=50),
    "paper": Profile(instances=200, min_confirmed=180),
}


def covariance_terms(data: AttentionData, W: np.ndarray, M: np.ndarray, loss: str, variant: str = "correct"
                     ) -> tuple[float, float, np.ndarray]:
    """((1/n) sum_i l'_i Cov_{s_i}(gamma_i, X_i M z_i), term scale, covariances (n,)).

    ``variant="no-mean"`` drops the product of means (the control's claim).
    """
    case = Case(data, W, loss, "linear")
    s, a, u = effective_scores(case, W)  # (n, T), (n, T), (n,)
    b = np.einsum("ntd,de,ne->nt", data.X, M, data.Z)  # (n, T): X_i M z_i
    second = (s * a * b).sum(-1)
    means = (s * a).sum(-1) * (s * b).sum(-1)
    cov = second - means
    claim = second if variant == "no-mean" else cov
    lp = loss_prime_np(u, loss)
    scale = float(np.mean(np.abs(lp) * ((s * np.abs(a * b)).sum(-1) + np.abs(means))))
    return float(np.mean(lp * claim)), scale, cov


@dataclass(frozen=True, eq=False)
class CovInstance:
    data: AttentionData
    W: np.ndarray
    M: np.ndarray  # the direction
    loss: str
    direction: str  # its kind: "Gaussian", "rank one" or "radial (-W)"


@dataclass(frozen=True, eq=False)
class CovState:
    """The sides of the identity at (W, M): inner products <grad L(W), M> and the covariance sum."""

    ad: float  # with grad from torch autograd of the reference forward pass
    cf: float  # with numerics.attention.grad_W
    fd: float  # directional central difference
    fd_err: float  # its error bound
    rhs: float  # the covariance sum (the claim)
    scale: float  # term scale
    cov: np.ndarray  # (n,) the covariances Cov_{s_i}(gamma_i, X_i M z_i)


def _directional_fd(case: Case, M: np.ndarray, h: float = FD_STEP) -> tuple[float, float]:
    """d/de L(W + e M) by 4-point central differences along the unit direction, and its error bound."""
    nM = float(np.linalg.norm(M))
    if nM == 0:
        return 0.0, 0.0
    U = M / nM
    offs = np.array([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0]) * h
    with torch.no_grad():
        F = reference_loss(case, torch.as_tensor(case.W[None] + offs[:, None, None] * U[None],
                                                 dtype=torch.float64)).numpy()
    fm4, fm2, fm1, fp1, fp2, fp4 = F
    g_h = (8 * (fp1 - fm1) - (fp2 - fm2)) / (12 * h)
    g_2h = (8 * (fp2 - fm2) - (fp4 - fm4)) / (24 * h)
    err = abs(g_h - g_2h) / 15 + 3 * EPS * np.abs(F).max() / h
    return g_h * nM, err * nM


@register
class CovarianceIdentity(Theorem):
    id = "covariance-identity"
    depends_on = ("gradient",)
    title = "Directional derivative of the loss = average of softmax covariances"
    reference = "TLTO (arXiv 2308.16898) §2 and appendix (landscape proofs); THEORY.md §2"
    statement = (r"\langle \nabla L(W), M\rangle = \frac1n \sum_{i=1}^n \ell'_i\,"
                 r"\operatorname{Cov}_{s_i}(\gamma_i, X_i M z_i),\quad \operatorname{Cov}_s(a,b) = "
                 r"\textstyle\sum_t s_t a_t b_t - (\sum_t s_t a_t)(\sum_t s_t b_t)")
    hypotheses_text = "linear head; smooth catalogue loss (sympy); any W, any direction M"
    profiles = PROFILES
    accepts_data = True
    plot_metric = "rel_err_cov_vs_autograd"
    criteria = (
        Criterion(
            f"|covariance sum − ⟨autograd ∇L, M⟩| / term scale (plus {ROUNDOFF_ULPS:g} ulps)",
            "<=",
            GRAD_RTOL,
            plot_metric="rel_err_cov_vs_autograd",
        ),
        Criterion("|covariance sum − ⟨numerics.attention.grad_W, M⟩| / term scale", "<=", GRAD_RTOL),
        Criterion(
            f"|covariance sum − directional central difference (step {FD_STEP:g})| / term scale; refuted "
            "beyond it plus the quotient's error bound",
            "<=",
            GRAD_RTOL,
        ),
        Criterion(
            "inconclusive: the quotient's error bound above this share of the tolerance", ">", FD_ERR_SHARE
        ),
        Criterion("where every covariance is > 0: ⟨∇L(W), M⟩", "<", 0.0),
        Criterion("sympy: the identity at the cycled small symbolic sizes", "proved (residual 0)", "exact"),
    )
    variant = "correct"

    def not_applicable(self, data):
        return need_head(data)

    def instance(self, rng: np.random.Generator, ctx: Context) -> CovInstance:
        k = ctx.instance
        data = draw_data(rng, ctx)
        W = draw_matrix(rng, data.d, data.d)
        if k % 4 == 3:
            M, direction = -W, "radial (-W)"
        elif k % 3 == 2:
            M = 10 ** rng.uniform(-1, np.log10(5)) * np.outer(
                rng.standard_normal(data.d), rng.standard_normal(data.d)
            )
            direction = "rank one"
        else:
            M, direction = draw_matrix(rng, data.d, data.d), "Gaussian"
        return CovInstance(data, W, M, LOSSES[k % 3], direction)

    def prepare(self, instances: Sequence[CovInstance], ctxs: Sequence[Context]) -> list[CovState]:
        states = []
        for inst in instances:
            case = Case(inst.data, inst.W, inst.loss, "linear")
            G_ad = autograd_grad(functools.partial(reference_loss, case), inst.W)
            rhs, scale, cov = covariance_terms(inst.data, inst.W, inst.M, inst.loss, self.variant)
            fd, fd_err = _directional_fd(case, inst.M)
            states.append(
                CovState(
                    ad=float(np.sum(G_ad * inst.M)),
                    cf=float(np.sum(lib_grad_W(case, inst.W) * inst.M)),
                    fd=fd,
                    fd_err=fd_err,
                    rhs=rhs,
                    scale=scale,
                    cov=cov,
                )
            )
        return states

    # -- hypotheses --------------------------------------------------------------------------------
    def assume_linear_head(self, inst: CovInstance, state: CovState, ctx: Context) -> bool:
        return inst.data.v is not None

    def assume_smooth_loss(self, inst: CovInstance, state: CovState, ctx: Context) -> bool:
        return assumption_a(inst.loss).smooth

    # -- predictions -------------------------------------------------------------------------------
    def _tol(self, state: CovState) -> float:
        return GRAD_RTOL * state.scale + ROUNDOFF_ULPS * EPS * state.scale

    def _rel(self, state: CovState, other: float) -> float:
        return abs(state.rhs - other) / state.scale if state.scale > 0 else 0.0

    def check_cov_vs_autograd(self, inst: CovInstance, state: CovState, ctx: Context) -> Outcome:
        rel = self._rel(state, state.ad)
        return decide(abs(state.rhs - state.ad) <= self._tol(state),
                      f"covariance sum {state.rhs:.6e} vs <autograd grad, M> {state.ad:.6e}: "
                      f"error {rel:.2e} of the term scale > {GRAD_RTOL:.0e}",
                      rel_err_cov_vs_autograd=rel, inner_product=state.ad, term_scale=state.scale)

    def check_cov_vs_closed_form(self, inst: CovInstance, state: CovState, ctx: Context) -> Outcome:
        rel = self._rel(state, state.cf)
        return decide(abs(state.rhs - state.cf) <= self._tol(state),
                      f"covariance sum vs <numerics.attention.grad_W, M>: error {rel:.2e} of the term scale",
                      rel_err_cov_vs_closed_form=rel)

    def check_cov_vs_fd(self, inst: CovInstance, state: CovState, ctx: Context) -> Outcome:
        tol, fd_err = self._tol(state), state.fd_err
        err = abs(state.rhs - state.fd)
        m = {"rel_err_cov_vs_fd": self._rel(state, state.fd),
             "fd_err_estimate": fd_err / state.scale if state.scale > 0 else 0.0}
        if err > tol + fd_err:
            return failed(
                f"covariance sum {state.rhs:.6e} vs directional difference quotient {state.fd:.6e} "
                f"(error bound {fd_err:.1e})",
                **m,
            )
        if err > tol or fd_err > FD_ERR_SHARE * tol:
            return undecided(f"difference quotient error {fd_err:.1e} too large to decide at {tol:.1e}", **m)
        return held(**m)

    def check_descent_sign(self, inst: CovInstance, state: CovState, ctx: Context) -> Outcome:
        all_pos = bool(np.all(state.cov > 0))
        m = {"all_covariances_positive": float(all_pos)}
        if not all_pos:
            return held(**m)  # the corollary says nothing here
        return decide(state.ad < 0, f"every covariance > 0 but <grad L, M> = {state.ad:.3e} >= 0", **m)

    def check_symbolic(self, inst: CovInstance, state: CovState, ctx: Context) -> Outcome:
        sizes = SYMBOLIC_SIZES["quick" if ctx.profile == "quick" else "full"]
        n, T, d = sizes[ctx.instance % len(sizes)]
        r = derivations.covariance_identity(n, T, d, variant=self.variant)
        m = {"symbolic_size": n * T * d, "symbolic_seconds": r.seconds}
        gen = general.covariance_general(self.variant)  # every size (theory.general, cached)
        return judge_symbolic(r, gen, m, f"(n,T,d)=({n},{T},{d})")


@register
class CovarianceIdentityControl(CovarianceIdentity):
    id = "covariance-identity-control"
    depends_on = ("gradient",)
    title = "Control: the covariance identity without the mean term (false)"
    statement = (r"\langle \nabla L(W), M\rangle \overset{?}{=} \frac1n \sum_{i=1}^n \ell'_i"
                 r"\sum_t s_{it} \gamma_{it} (X_i M z_i)_t")
    expected = "FAIL"
    control_of = "covariance-identity"
    variant = "no-mean"
