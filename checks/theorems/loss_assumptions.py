r"""loss-assumptions: every catalogue loss satisfies Assumption A.

Statement (TLTO, arXiv 2308.16898, §2, Assumption A on the loss; THEORY.md §4 ``loss-assumptions``)::

    l is strictly decreasing (l'(u) < 0 for all real u), and l' is bounded and Lipschitz on every bounded
    interval [-B, B],

for l in {logistic log(1 + e^{-u}), exponential e^{-u}, linear -u}.

Hypotheses implemented: none (the claim is about three fixed functions). For breadth the instances also cover
parametrised members of the exponential and linear families -- e^{-c u}, -c u with a random rational
temperature c in [1/2, 3] and a random interval half-width B in 1..20 -- and the logistic loss with B in
{1, 5, 20} (scaled logistic losses log(1 + e^{-c u}) are left out: theory's sympy extrema are unusable for
them, taking minutes or raising TypeError).

Predictions (each instance):

* ``decreasing``: the sympy proof of :func:`theory.losses.assumption_a` (sign assumptions and ``solveset``
agree
  that {u : l'(u) >= 0} is empty), cross-checked numerically: l' < 0 on a dense grid of [-50 B, 50 B]
  (a disagreement between proof and grid is a failure, not a pass).
* ``bounded_lipschitz``: l'' exists and is continuous on R (``continuous_domain``), so l' is bounded and
  Lipschitz on [-B, B] with the exact constants sup|l'| and sup|l''| that sympy computes; cross-checked: the
  grid values of |l'| and the grid difference quotients of l' on [-B, B] stay below those constants.

Negative control ``loss-assumptions-control`` (at the boundary of Assumption A): losses that are strictly
decreasing and C^1 but whose derivative is not Lipschitz on a bounded interval -- the "sqrt kink" l(u) = -c u
- a (2/3) sign(u - u1) |u - u1|^{3/2}, l'(u) = -c - a sqrt|u - u1| < 0 (continuous, bounded on [-B, B], and
with |l'(u) - l'(u1)| / |u - u1| = a / sqrt|u - u1| -> oo), with c = a = 1, u1 = 0 first, then random
rationals c, a in [1/2, 3] and u1 in [-B/2, B/2]. Such a loss passes ``decreasing`` (and every check of the
derivative's sign or boundedness); it is refuted only by ``bounded_lipschitz``, and only by a proof that the
difference quotient diverges (theory.losses.assumption_a's ``lipschitz_counter``: an exact one-sided limit),
cross-checked on a numeric sequence of difference quotients. (A discontinuous l'' alone does not refute: l' =
-1 - |u| is Lipschitz; such a loss comes out undecided.) The earlier control, the squared loss, failed only
the "decreasing" half, which a check of the sign alone would already refute.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from checks import Criterion, Profile, Theorem, failed, held, register, undecided
from theory.losses import CONTROL_LOSSES as LOSSES_CONTROL
from theory.losses import LOSSES, assumption_a
from theory.model import U

#: Grid points used to cross-check the sympy proof numerically.
GRID_POINTS = 20001

#: Grid points of the sign cross-check on [-50 B, 50 B]. Float64 underflows e^{-u} to 0 at u > 745 (which
#: would fake a non-negative derivative) and overflows e^{u} at u > 709, so every point whose float64 value is
#: not a normal number far from underflow (|l'| < SIGN_FLOAT_MIN, 0, ±inf or nan) is evaluated again with
#: mpmath (53-bit mantissa like float64, unbounded exponent: the same arithmetic without the range limits).
SIGN_GRID_POINTS = 2001
SIGN_FLOAT_MIN = 1e-280

#: Relative slack when comparing grid values with sympy's exact sup|l'| and sup|l''|: float64 evaluation
#: of exp/log at |u| <= 20 c is accurate to a few ulps, 1e-9 leaves ample room and catches any real excess.
BOUND_RTOL = 1e-9

#: Interval half-widths B for the logistic instances (each proof costs ~1 s of sympy; cached per process).
LOGISTIC_B = (1, 5, 20)

CATALOGUE = tuple(LOSSES)  # ("logistic", "exponential", "linear")

PROFILES = {
    "quick": Profile(instances=6, min_confirmed=6),
    "full": Profile(instances=60, min_confirmed=60),
    "paper": Profile(instances=200, min_confirmed=200),
}


@dataclass(frozen=True)
class LossInstance:
    name: str  # catalogue name, or a description of the parametrised variant
    expr: sp.Expr  # l(u) in theory.model.U
    B: int


def _rational(rng: np.random.Generator, lo: float, hi: float) -> sp.Rational:
    """A random rational p/q in [lo, hi] with q in 1..4 (exact for sympy)."""
    q = int(rng.integers(1, 5))
    p = int(rng.integers(int(np.ceil(lo * q)), int(np.floor(hi * q)) + 1))
    return sp.Rational(p, q)


def _numeric(expr: sp.Expr):
    d1 = sp.diff(expr, U)
    return sp.lambdify(U, d1, "numpy"), d1


@register
class LossAssumptions(Theorem):
    id = "loss-assumptions"
    depends_on = ()
    title = "Each catalogue loss satisfies Assumption A"
    reference = "TLTO (arXiv 2308.16898) §2, Assumption A; THEORY.md §4"
    statement = (r"\ell \in \{\log(1+e^{-u}),\ e^{-u},\ -u\}:\ \ell'(u) < 0\ \forall u\in\mathbb{R},\ "
                 r"\ell' \text{ bounded and Lipschitz on } [-B, B]")
    hypotheses_text = (
        "none; instances: the three catalogue losses, then e^{-cu} and -cu (c rational in [1/2, 3]) "
        "with random B in 1..20, and the logistic loss with B in {1, 5, 20}"
    )
    profiles = PROFILES
    plot_metric = "lipschitz_constant"
    criteria = (
        Criterion("sympy (theory.losses.assumption_a): ℓ'(u) < 0 for all u", "proved", "exact"),
        Criterion(
            f"max of ℓ' on a {SIGN_GRID_POINTS}-point grid of [−50B, 50B], float64 and mpmath where float64 "
            "under- or overflows (cross-check)", "<", 0.0
        ),
        Criterion("sympy: ℓ' bounded and Lipschitz on [−B, B] (ℓ'' continuous)", "proved", "exact"),
        Criterion(
            f"grid sup|ℓ'| and grid Lipschitz quotient ({GRID_POINTS} points of [−B, B]) over sympy's "
            "constants, minus 1 (relative excess)",
            "<=",
            BOUND_RTOL,
        ),
        Criterion(
            "refuted (not Lipschitz): difference quotients of ℓ' at sympy's counter-point as |u − u0| = "
            "1e-2 → 1e-8",
            "strictly increasing",
            "every step",
        ),
        Criterion(
            "inconclusive: sympy's counter-point not confirmed by the quotients, or continuity of ℓ'' "
            "undecided",
            "→",
            "inconclusive",
        ),
    )

    def not_applicable(self, data):
        return ("a claim about the loss functions themselves (sympy proofs of Assumption A); "
                "it involves no dataset")

    def instance(self, rng, ctx):
        k = ctx.instance
        B = int(rng.integers(1, 21))
        family = CATALOGUE[k % 3]
        if k < 3:
            return LossInstance(family, LOSSES[family], 10)  # theory's default B
        if family == "logistic":
            # theory.losses.assumption_a on log(1 + e^{-c u}), c != 1, is not usable: sympy's extrema take up
            # to minutes or raise TypeError (e.g. c = 7/3, B = 5), so the logistic family varies only B, over
            # a small set whose proofs are cached per process.
            return LossInstance("logistic", LOSSES["logistic"], int(rng.choice(LOGISTIC_B)))
        c = _rational(rng, 0.5, 3.0)
        return LossInstance(f"{family}(c u), c = {c}", LOSSES[family].xreplace({U: c * U}), B)

    def proof(self, inst: LossInstance):
        return assumption_a(inst.expr, B=inst.B)

    def check_decreasing(self, inst, state, ctx):
        r = self.proof(inst)
        f1, d1 = _numeric(inst.expr)
        fmp = sp.lambdify(U, d1, "mpmath")
        grid = np.linspace(-50 * inst.B, 50 * inst.B, SIGN_GRID_POINTS)
        with np.errstate(all="ignore"):
            fl = np.broadcast_to(np.asarray(f1(grid), dtype=float), grid.shape)
        out_of_range = ~np.isfinite(fl) | (np.abs(fl) < SIGN_FLOAT_MIN)
        vals = [fmp(mpmath.mpf(float(u))) for u in grid[out_of_range]]  # mpmath: no underflow, no overflow
        if (~out_of_range).any():
            vals.append(mpmath.mpf(float(fl[~out_of_range].max())))
        top = max(vals)
        grid_max = float(top) if top != 0 else 0.0
        m = {"grid_max_derivative": grid_max, "B": inst.B}
        if not r.decreasing:
            u0, val = r.decreasing_counter
            num = float(f1(float(u0)))
            return failed(
                f"{inst.name}: l'({u0}) = {val} >= 0 (sympy counter-value; numerically l'({float(u0):g}) = "
                f"{num:g}); grid max of l' = {grid_max:.3g}",
                counter_u=float(u0),
                counter_derivative=num,
                **m,
            )
        if top >= 0:
            return failed(f"{inst.name}: sympy proved l' < 0 but the grid finds l' = {grid_max:g} >= 0", **m)
        return held(**m)

    def check_bounded_lipschitz(self, inst, state, ctx):
        r = self.proof(inst)
        if r.lipschitz_counter is not None:
            u0 = float(r.lipschitz_counter[0])
            f1, d1 = _numeric(inst.expr)
            f0 = float(
                d1.subs(U, r.lipschitz_counter[0])
            )  # exact l'(u0): the lambdified form may divide by u - u0
            hs = 10.0 ** -np.arange(2, 9, 2)  # difference quotients of l' at u0 + h and u0 - h
            with np.errstate(all="ignore"):  # numpy's select evaluates both branches of a piecewise l'
                quot = np.fmax(np.abs(f1(u0 + hs) - f0) / hs, np.abs(f1(u0 - hs) - f0) / hs)
            m = {"counter_u": u0, "quotient_growth": float(quot[-1] / quot[0])}
            if np.all(np.diff(quot) > 0):
                return failed(
                    f"{inst.name}: l' is not Lipschitz at u = {u0:g}: |l'(u) - l'(u0)| / |u - u0| -> oo "
                    f"(sympy limit; numerically {quot[0]:.3g} -> {quot[-1]:.3g} as |u - u0| = 1e-2 -> 1e-8)",
                    **m,
                )
            return undecided(
                f"{inst.name}: sympy finds a diverging difference quotient at {u0:g} but the grid "
                "does not confirm it",
                **m,
            )
        if not r.smooth and r.smooth_counter is None:
            return undecided(f"{inst.name}: l'' not shown continuous and no point found where l' fails to be "
                             "Lipschitz: the proof machinery cannot decide")
        if not (r.smooth and r.bounded and r.lipschitz):
            where = f" (l'' not continuous at {r.smooth_counter[0]})" if r.smooth_counter else ""
            return failed(f"{inst.name}: l' not shown bounded and Lipschitz on [-{inst.B}, {inst.B}]{where}")
        f1, _ = _numeric(inst.expr)
        grid = np.linspace(-inst.B, inst.B, GRID_POINTS)
        vals = np.broadcast_to(np.asarray(f1(grid), dtype=float), grid.shape)
        dbound, lconst = float(r.derivative_bound), float(r.lipschitz_constant)
        grid_sup = float(np.abs(vals).max())
        grid_lip = float(np.abs(np.diff(vals) / np.diff(grid)).max())
        m = {"derivative_bound": dbound, "lipschitz_constant": lconst, "grid_sup_derivative": grid_sup,
             "grid_lipschitz": grid_lip}
        if grid_sup > dbound * (1 + BOUND_RTOL) or grid_lip > lconst * (1 + BOUND_RTOL) + 1e-300:
            return failed(
                f"{inst.name}: grid exceeds sympy's constants (sup|l'| {grid_sup:.6g} vs {dbound:.6g}, "
                f"Lipschitz {grid_lip:.6g} vs {lconst:.6g})",
                **m,
            )
        return held(**m)


def sqrt_kink(c=1, a=1, u1=0) -> sp.Expr:
    """l(u) = -c u - a (2/3) sign(u - u1) |u - u1|^{3/2}: strictly decreasing, C^1, l' not Lipschitz at u1."""
    w = U - u1
    R = sp.Rational(2, 3)
    return -c * U + a * sp.Piecewise(
        (-R * w ** sp.Rational(3, 2), w >= 0), (R * (-w) ** sp.Rational(3, 2), True)
    )


@register
class LossAssumptionsControl(LossAssumptions):
    id = "loss-assumptions-control"
    depends_on = ()
    title = "Control: a strictly decreasing C^1 loss whose l' is not Lipschitz satisfies Assumption A (false)"
    statement = (r"\ell(u) = -cu - \tfrac23 a\,\mathrm{sign}(u-u_1)|u-u_1|^{3/2}:\ "
                 r"\ell' \text{ Lipschitz on } [-B, B]\ (\text{false at } u_1)")
    expected = "FAIL"
    control_of = "loss-assumptions"
    hypotheses_text = ("none; instances: the sqrt-kink loss -u - (2/3) sign(u)|u|^{3/2}, then -c u - a (2/3) "
                       "sign(u - u1)|u - u1|^{3/2} with random rationals c, a in [1/2, 3], u1 in [-B/2, B/2]")
    plot_metric = "counter_u"

    def instance(self, rng, ctx):
        k = ctx.instance
        B = int(rng.integers(1, 21))
        if k == 0:
            return LossInstance("sqrt-kink", LOSSES_CONTROL["sqrt-kink"], 10)
        c, a, u1 = _rational(rng, 0.5, 3.0), _rational(rng, 0.5, 3.0), _rational(rng, -B / 2, B / 2)
        return LossInstance(f"sqrt-kink(c = {c}, a = {a}, u1 = {u1})", sqrt_kink(c, a, u1), B)
