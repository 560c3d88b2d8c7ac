"""The machinery of the gradient identity checks: gradient-closed-form's instances, hypotheses and predictions
(sympy at small sizes and for all sizes, closed form vs autograd vs central differences, a Hypothesis search),
as the base class :class:`GradientCheck` that gradient_closed_form.py and kq_chain_rule.py both subclass (a
theorem module never imports another)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from checks import Context, Criterion, Outcome, Profile, Theorem, decide, failed, held, undecided
from checks.theorems._given import need_head
from numerics.tolerances import GRAD_RTOL
from theory import derivations, general
from theory.losses import assumption_a

from ._gradients import (
    EPS,
    FD_ERR_SHARE,
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
    gradient_discrepancy,
    hypothesis_search,
    judge_symbolic,
    lib_grad_W,
    reference_loss,
    rel_err,
    relu_pattern_ok,
    stencil_points,
    term_scale,
)

#: Symbolic sizes (n, T, d, head) cycled through by the instances; each proof is cached per process.
SYMBOLIC_SIZES = {
    "quick": ((1, 2, 2, "linear"), (2, 2, 2, "linear"), (1, 2, 1, "softplus")),
    "full": ((1, 2, 1, "linear"), (1, 2, 2, "linear"), (2, 2, 2, "linear"), (2, 3, 2, "linear"),
             (1, 2, 1, "softplus"), (1, 2, 2, "softplus")),
}


PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"search_examples": 25}),
    "full": Profile(instances=60, min_confirmed=50, params={"search_examples": 60}),
    "paper": Profile(instances=200, min_confirmed=180, params={"search_examples": 150}),
}


def symbolic_size(ctx: Context) -> tuple:
    sizes = SYMBOLIC_SIZES["quick" if ctx.profile == "quick" else "full"]
    return sizes[ctx.instance % len(sizes)]


@dataclass(frozen=True, eq=False)
class GradInstance:
    """One instance of a gradient identity check: a numeric case, or the seed of a Hypothesis search."""

    case: Case | None  # None for a Hypothesis-search instance
    search_seed: int | None


@dataclass(frozen=True, eq=False)
class GradState:
    """The prepared gradients of a numeric case (a search instance has no state: None)."""

    G_ad: np.ndarray  # autograd of the independent reference forward pass
    G_fd: np.ndarray  # 4-point central differences
    fd_err: float  # their error bound
    G_cf: np.ndarray  # the closed form under test
    scale: float  # term scale (rounding floor)
    pattern: tuple[bool, float]  # ReLU pattern constant on the stencil, distance to the kink


class GradientCheck(Theorem):
    """The gradient identity check (instances, hypotheses, predictions); no statement of its own:
    gradient-closed-form (gradient_closed_form.py) and kq-chain-rule (kq_chain_rule.py) subclass it and set
    their id, title, reference, statement and hypotheses_text."""

    depends_on = ("gradient",)
    profiles = PROFILES
    accepts_data = True
    plot_metric = "rel_err_closed_vs_autograd"
    #: the rules of every gradient identity check (kq-chain-rule inherits them: its closed form is [∇_K; ∇_Q])
    criteria = (
        Criterion("sympy: the identity at the cycled small symbolic sizes", "proved (residual 0)", "exact"),
        Criterion(
            f"‖closed form − autograd‖_F / max of their norms (plus {ROUNDOFF_ULPS:g} ulps of the term "
            "scale)",
            "<=",
            GRAD_RTOL,
            plot_metric="rel_err_closed_vs_autograd",
        ),
        Criterion(
            f"closed form and autograd vs 4-point central differences (step {FD_STEP:g}), relative; refuted "
            "beyond it plus the difference quotient's error bound",
            "<=",
            GRAD_RTOL,
        ),
        Criterion(
            "inconclusive: the difference quotient's error bound above this share of the tolerance",
            ">",
            FD_ERR_SHARE,
        ),
        Criterion(
            "Hypothesis search (every 4th generated instance): cases whose closed form misses the tolerance",
            "==",
            0,
        ),
    )
    variant = "correct"

    def not_applicable(self, data):
        return need_head(data)

    def instance(self, rng: np.random.Generator, ctx: Context) -> GradInstance:
        k = ctx.instance
        family = k % 4
        if family == 3 and ctx.data is None:
            return GradInstance(None, int(rng.integers(0, 2**31)))
        loss = LOSSES[k % 3]
        data = draw_data(rng, ctx, self_attention=(family == 1) if family < 2 else None)
        relu = family == 2 and ctx.data is None
        W = draw_matrix(rng, data.d, data.d)
        head, V = draw_head(rng, data, relu, W)
        fam = {0: "cross/self unit-sphere", 1: "self-attention unit-sphere", 2: "ReLU head"}.get(
            family, "given data"
        )
        if ctx.data is not None:
            fam = "given data"
        return GradInstance(Case(data, W, loss, head, V, family=fam), None)

    def prepare(self, instances: Sequence[GradInstance], ctxs: Sequence[Context]) -> list[GradState | None]:
        states: list[GradState | None] = []
        for inst in instances:
            if inst.case is None:
                states.append(None)
                continue
            case = inst.case
            f = lambda t, case=case: reference_loss(case, t)  # noqa: E731
            G_ad = autograd_grad(f, case.W)
            G_fd, fd_err = fd_grad(f, case.W)
            states.append(GradState(G_ad=G_ad, G_fd=G_fd, fd_err=fd_err, G_cf=self.closed_form(case),
                                    scale=term_scale(case, case.W),
                                    pattern=relu_pattern_ok(case, stencil_points(case.W, FD_STEP))))
        return states

    def closed_form(self, case: Case) -> np.ndarray:
        return lib_grad_W(case, case.W)

    # -- hypotheses --------------------------------------------------------------------------------
    def assume_smooth_loss(self, inst: GradInstance, state: GradState | None, ctx: Context) -> bool:
        losses = LOSSES if inst.case is None else (inst.case.loss,)
        return all(assumption_a(name).smooth for name in losses)

    def assume_relu_pattern_constant(self, inst: GradInstance, state: GradState | None, ctx: Context
                                     ) -> bool | Outcome:
        if inst.case is None:
            return True
        assert state is not None
        ok, closest = state.pattern
        return decide(ok, "a ReLU pre-activation changes sign on the stencil", kink_distance=closest)

    # -- predictions -------------------------------------------------------------------------------
    def check_symbolic(self, inst: GradInstance, state: GradState | None, ctx: Context) -> Outcome:
        n, T, d, head = symbolic_size(ctx)
        r = derivations.gradient_closed_form(n, T, d, head=head, variant=self.variant)
        m = {"symbolic_size": n * T * d, "symbolic_seconds": r.seconds}
        gen = general.gradient_general(self.variant)  # every size (theory.general, cached)
        return judge_symbolic(r, gen, m, f"(n,T,d)=({n},{T},{d}), {head} head", entry="")

    def check_closed_vs_autograd(self, inst: GradInstance, state: GradState | None, ctx: Context) -> Outcome:
        if inst.case is None:
            return self._search(inst, ctx)
        assert state is not None
        tol = self._tol(state, state.G_ad)
        err = float(np.linalg.norm(state.G_cf - state.G_ad))
        rel = rel_err(state.G_cf, state.G_ad)
        return decide(err <= tol, f"closed form vs autograd: relative error {rel:.3e} > {GRAD_RTOL:.0e}",
                      rel_err_closed_vs_autograd=rel, grad_norm=float(np.linalg.norm(state.G_ad)))

    def check_closed_vs_fd(self, inst: GradInstance, state: GradState | None, ctx: Context) -> Outcome:
        if inst.case is None:
            return held()
        assert state is not None
        return self._vs_fd("closed form vs central differences", state.G_cf, state, "rel_err_closed_vs_fd")

    def check_autograd_vs_fd(self, inst: GradInstance, state: GradState | None, ctx: Context) -> Outcome:
        if inst.case is None:
            return held()
        assert state is not None
        return self._vs_fd("autograd vs central differences", state.G_ad, state, "rel_err_autograd_vs_fd")

    # -- helpers -----------------------------------------------------------------------------------
    def _tol(self, state: GradState, G: np.ndarray) -> float:
        return float(GRAD_RTOL * np.linalg.norm(G) + ROUNDOFF_ULPS * EPS * state.scale)

    def _vs_fd(self, name: str, G: np.ndarray, state: GradState, metric: str) -> Outcome:
        G_fd, fd_err = state.G_fd, state.fd_err
        tol = self._tol(state, G_fd)
        err = float(np.linalg.norm(G - G_fd))
        nrm = float(np.linalg.norm(G_fd))
        m = {metric: rel_err(G, G_fd), "fd_err_estimate": fd_err / nrm if nrm > 0 else 0.0}
        if err > tol + fd_err:
            return failed(
                f"{name}: relative error {m[metric]:.3e} > {GRAD_RTOL:.0e} (finite-difference error "
                f"bound {fd_err:.1e})",
                **m,
            )
        if err <= tol and fd_err <= FD_ERR_SHARE * tol:
            return held(**m)
        return undecided(
            f"{name}: finite-difference error {fd_err:.1e} too large to decide at tolerance {tol:.1e}", **m
        )

    def _search(self, inst: GradInstance, ctx: Context) -> Outcome:
        assert inst.search_seed is not None
        found, m = hypothesis_search(gradient_cases(), gradient_discrepancy(self.variant), inst.search_seed,
                                     int(ctx.params.get("search_examples", 30)))
        if found is None:
            return held(**m)
        err, tol = gradient_discrepancy(self.variant)(found)
        return failed(f"Hypothesis found a minimal counterexample (n,T,d)=({found.data.n},{found.data.T},"
                      f"{found.data.d}), {found.loss} loss: closed form off by {err:.3e} > {tol:.1e}", **m)
