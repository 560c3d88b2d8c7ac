r"""kq-chain-rule: the gradients of the factored loss L(K, Q) = L(K Q^T).

Statement (TLTO, arXiv 2308.16898, §3, the (K, Q) parameterisation; THEORY.md §2 "Factored")::

    grad_K L(K Q^T) = grad L(W) Q,    grad_Q L(K Q^T) = grad L(W)^T K,    W = K Q^T,

with K, Q in R^{d x m} and grad L(W) the closed form of THEORY.md §2.

Hypotheses implemented (exactly): the loss is a smooth catalogue loss (sympy,
:func:`theory.losses.assumption_a`);
for the ReLU head, the activation pattern is constant on the finite-difference stencil (see
:mod:`checks.theorems._gradient_check`). There is no other hypothesis: the identity is the chain rule.

Predictions:

* ``symbolic``: :func:`theory.derivations.kq_chain_rule` -- both sides by ``sympy.diff`` for an undefined loss
  at small symbolic sizes (``SYMBOLIC_SIZES``; d >= 2 so that a transpose matters).
* ``closed_vs_autograd``, ``closed_vs_fd``, ``autograd_vs_fd``: :func:`numerics.attention.grad_KQ` against
torch
  autograd of an independent reference forward pass of L(K Q^T) in (K, Q), and 4-point central differences
  in every entry of K and Q; relative error of the stacked [grad_K; grad_Q] < ``GRAD_RTOL`` (float64); an
  inaccurate difference quotient makes the instance inconclusive.
* Every fourth instance: a Hypothesis search (seeded, deterministic) over small data, K, Q and losses for a
  disagreement between the closed form and autograd.

Instance family: unit-sphere data (cross/self-attention), n in 1..5, T in 2..6, d in 2..6, m in 1..d+1, K and
Q Gaussian with log-uniform scale in [0.1, 5] (per factor), the three losses in turn, linear or ReLU head;
Hypothesis-drawn data with d >= 2. With ``--data`` the given data and linear head are used.

Negative control ``kq-chain-rule-control``: the transposes swapped, grad_K = grad L(W)^T Q and
grad_Q = grad L(W) K. Refuted symbolically (counter-value from theory) and numerically wherever grad L(W)
is not symmetric (d >= 2 generic data); Hypothesis shrinks a counterexample to a minimal size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from checks import Context, Outcome, Profile, failed, held, register
from checks.theorems._given import need_head
from numerics import attention as att
from numerics.tolerances import GRAD_RTOL
from theory import derivations, general

from ._gradient_check import GradientCheck as _Base
from ._gradient_check import GradInstance, GradState
from ._gradients import (
    EPS,
    FD_STEP,
    LOSSES,
    ROUNDOFF_ULPS,
    Case,
    autograd_grad,
    draw_data,
    draw_head,
    draw_matrix,
    fd_grad,
    gradient_cases,
    hypothesis_search,
    judge_symbolic,
    lib_grad_W,
    reference_loss,
    relu_pattern_ok,
    stencil_points,
    term_scale,
)

#: Symbolic sizes (n, T, d, m); the (K, Q) proofs are costlier than the W ones, so quick uses the smallest.
SYMBOLIC_SIZES = {
    "quick": ((1, 2, 2, 1),),
    "full": ((1, 2, 2, 1), (1, 2, 2, 2), (2, 2, 2, 1)),
}

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"search_examples": 25}),
    "full": Profile(instances=60, min_confirmed=50, params={"search_examples": 50}),
    "paper": Profile(instances=200, min_confirmed=180, params={"search_examples": 120}),
}


def _factors(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(K, Q) of a factorised case (every kq-chain-rule case is drawn with both)."""
    assert case.K is not None and case.Q is not None
    return case.K, case.Q


def _theta(case: Case) -> np.ndarray:
    K, Q = _factors(case)
    return np.concatenate([K.reshape(-1), Q.reshape(-1)])


def _kq_fun(case: Case):
    d, m = _factors(case)[0].shape

    def fun(theta: torch.Tensor) -> torch.Tensor:  # (B, 2 d m) -> (B,)
        K = theta[:, : d * m].reshape(-1, d, m)
        Q = theta[:, d * m:].reshape(-1, d, m)
        return reference_loss(case, K @ Q.mT)

    return fun


def lib_grad_KQ(case: Case) -> np.ndarray:
    """numerics.attention.grad_KQ stacked as one vector [grad_K; grad_Q]."""
    X, Y, Z = case.tensors()
    t = lambda a: torch.as_tensor(a, dtype=torch.float64).unsqueeze(0)  # noqa: E731
    gK, gQ = att.grad_KQ(
        X.unsqueeze(0), Y.unsqueeze(0), Z.unsqueeze(0), t(case.K), t(case.Q), case.lib_head(), case.loss
    )
    return np.concatenate([gK[0].reshape(-1).numpy(), gQ[0].reshape(-1).numpy()])


def swapped_grad_KQ(case: Case) -> np.ndarray:
    """The control's claim: grad_K = grad L(W)^T Q, grad_Q = grad L(W) K."""
    K, Q = _factors(case)
    G = lib_grad_W(case, K @ Q.T)
    return np.concatenate([(G.T @ Q).reshape(-1), (G @ K).reshape(-1)])


def _kq_scale(case: Case) -> float:
    """Term scale of the gradient times the factor norms (bounds every summand of grad_K, grad_Q)."""
    K, Q = _factors(case)
    return term_scale(case, K @ Q.T) * max(float(np.linalg.norm(K)), float(np.linalg.norm(Q)), 1.0)


def kq_discrepancy(variant: str):
    def fn(case: Case):
        g_ad = autograd_grad(_kq_fun(case), _theta(case))
        g_cf = lib_grad_KQ(case) if variant == "correct" else swapped_grad_KQ(case)
        tol = GRAD_RTOL * max(np.linalg.norm(g_ad), np.linalg.norm(g_cf)) + ROUNDOFF_ULPS * EPS * _kq_scale(
            case
        )
        return float(np.linalg.norm(g_cf - g_ad)), tol

    return fn


@dataclass(frozen=True, eq=False)
class KQInstance(GradInstance):
    """A kq-chain-rule instance: a case drawn with its factors K, Q (``case.K``, ``case.Q``), or the seed of a
    Hypothesis search. Its state is the gradient checks' :class:`GradState`, of the stacked [∇_K; ∇_Q]."""


@register
class KQChainRule(_Base):
    id = "kq-chain-rule"
    depends_on = ("gradient",)
    title = "Factored gradients: grad_K = grad L(W) Q and grad_Q = grad L(W)^T K"
    reference = "TLTO (arXiv 2308.16898) §3, (K, Q) parameterisation; THEORY.md §2"
    statement = (r"\nabla_K L(KQ^\top) = \nabla L(W)\, Q,\qquad \nabla_Q L(KQ^\top) = \nabla L(W)^\top K,"
                 r"\qquad W = K Q^\top")
    hypotheses_text = ("smooth catalogue loss (sympy); ReLU head: activation pattern constant on the "
                       "finite-difference stencil")
    profiles = PROFILES
    accepts_data = True
    plot_metric = "rel_err_closed_vs_autograd"
    variant = "correct"

    def not_applicable(self, data):
        if (reason := need_head(data)) is not None:
            return reason
        if data is not None and data.d < 2:
            return "needs d >= 2 (for d = 1 the transposes coincide and the control is vacuous)"
        return None

    def instance(self, rng: np.random.Generator, ctx: Context) -> KQInstance:
        k = ctx.instance
        family = k % 4
        if family == 3 and ctx.data is None:
            return KQInstance(None, int(rng.integers(0, 2**31)))
        loss = LOSSES[k % 3]
        data = draw_data(rng, ctx, min_d=2, self_attention=(family == 1) if family < 2 else None)
        m = int(rng.integers(1, data.d + 2))
        K = draw_matrix(rng, data.d, m)
        Q = draw_matrix(rng, data.d, m)
        W = K @ Q.T
        head, V = draw_head(rng, data, family == 2 and ctx.data is None, W)
        fam = (
            "given data"
            if ctx.data is not None
            else {0: "unit-sphere", 1: "self-attention", 2: "ReLU head"}[family]
        )
        return KQInstance(Case(data, W, loss, head, V, family=fam, K=K, Q=Q), None)

    def prepare(self, instances: Sequence[GradInstance], ctxs: Sequence[Context]) -> list[GradState | None]:
        states: list[GradState | None] = []
        for inst in instances:
            if inst.case is None:
                states.append(None)
                continue
            case = inst.case
            fun, theta = _kq_fun(case), _theta(case)
            g_fd, fd_err = fd_grad(fun, theta, FD_STEP)
            d, m = _factors(case)[0].shape
            pts = stencil_points(theta, FD_STEP)
            Wpts = pts[:, : d * m].reshape(-1, d, m) @ pts[:, d * m:].reshape(-1, d, m).transpose(0, 2, 1)
            g_ad = autograd_grad(fun, theta)
            g_cf = lib_grad_KQ(case) if self.variant == "correct" else swapped_grad_KQ(case)
            states.append(GradState(G_ad=g_ad, G_fd=g_fd, fd_err=fd_err, G_cf=g_cf, scale=_kq_scale(case),
                                    pattern=relu_pattern_ok(case, Wpts)))
        return states

    def check_symbolic(self, inst: GradInstance, state: GradState | None, ctx: Context) -> Outcome:
        sizes = SYMBOLIC_SIZES["quick" if ctx.profile == "quick" else "full"]
        n, T, d, m = sizes[ctx.instance % len(sizes)]
        r = derivations.kq_chain_rule(n, T, d, m, variant=self.variant)
        metrics = {"symbolic_size": n * T * d * m, "symbolic_seconds": r.seconds}
        gen = general.kq_chain_rule_general(self.variant)  # every size (theory.general, cached)
        return judge_symbolic(r, gen, metrics, f"(n,T,d,m)=({n},{T},{d},{m})", entry=" of [grad_K; grad_Q]")

    def _search(self, inst: GradInstance, ctx: Context) -> Outcome:
        assert inst.search_seed is not None
        disc = kq_discrepancy(self.variant)
        found, m = hypothesis_search(gradient_cases(min_d=2, with_kq=True), disc, inst.search_seed,
                                     int(ctx.params.get("search_examples", 25)))
        if found is None:
            return held(**m)
        err, tol = disc(found)
        m_found = _factors(found)[0].shape[1]
        return failed(f"Hypothesis found a minimal counterexample (n,T,d,m)=({found.data.n},{found.data.T},"
                      f"{found.data.d},{m_found}), {found.loss} loss: off by {err:.3e} > {tol:.1e}",
                      counterexample_m=m_found, **m)


@register
class KQChainRuleControl(KQChainRule):
    id = "kq-chain-rule-control"
    depends_on = ("gradient",)
    title = "Control: factored gradients with the transposes swapped (false)"
    statement = (
        r"\nabla_K L \overset{?}{=} \nabla L(W)^\top Q,\qquad \nabla_Q L \overset{?}{=} \nabla L(W)\, K"
    )
    expected = "FAIL"
    control_of = "kq-chain-rule"
    variant = "swapped-transposes"

