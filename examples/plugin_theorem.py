"""Worked plugins: two theorems, each with its negative control, in one file.

Run them with ``attnsvm check softmax-simplex grad-norm-bound --plugin examples/plugin_theorem.py``;
``tox -e checks`` picks them up from ``[tool.attnsvm] plugins`` in pyproject.toml.

``grad-norm-bound`` (below) is the README's "Writing a theorem and its control" worked through: a sharp
bound on ||grad L(W)||_F computed with the numpy numerics of :mod:`numerics.objective`, an integrity
prediction (the gradient is the derivative of the loss), a declared invariance (``invariant_to``), and a
control at the boundary of the bound that draws the theorem's own instances (``same_instances_as``) and
does not apply to given data. Its mathematics is in its docstring (the report points there).

The claim: attention probabilities s_i(W) = softmax(X_i W z_i) lie on the probability simplex for
every W, and the optimal-token probability grows along W = c * W^mm ... kept simple here: the
simplex part only, with its control "every probability is at least 1/T" (false whenever W != 0).
"""

import numpy as np

from checks import Criterion, Profile, Theorem, decide, register
from numerics.data import AttentionData, random_unit_sphere
from numerics.objective import grad_W, loss
from numerics.tokens import softmax_probs

#: rows of s_i(W) sum to 1 up to rounding: a stable softmax (max subtracted) sums T <= 10 terms in [0, 1],
#: so the error is a few ulps (~1e-15); 1e-12 leaves room for any BLAS order, and a naive softmax that
#: overflows at huge ||W|| gives NaN, which fails the comparison.
SUM_TOL = 1e-12

PROFILES = {
    "quick": Profile(instances=10, min_confirmed=10),
    "full": Profile(instances=60, min_confirmed=60),
    "paper": Profile(instances=200, min_confirmed=200),
}


@register
class SoftmaxSimplex(Theorem):
    id = "softmax-simplex"
    depends_on = ("softmax",)
    title = "Attention probabilities lie on the simplex (plugin example)"
    reference = "TLTO §2 (definition of the softmax map)"
    statement = r"s_i(W) = \mathbb{S}(X_i W z_i) \in \Delta^{T-1}\ \text{for all } W"
    hypotheses_text = "none"
    profiles = PROFILES
    accepts_data = True
    plot_metric = "sum_err"
    criteria = (
        Criterion("max_i |sum_t s_it(W) - 1|", "<", SUM_TOL, plot_metric="sum_err"),
        Criterion("min_it s_it(W)", ">=", 0.0),
    )

    def instance(self, rng, ctx):
        data = ctx.data if ctx.data is not None else random_unit_sphere(4, 5, 6, rng=rng)
        scale = 10.0 ** rng.uniform(-2, 6)  # include huge ||W|| where a naive softmax overflows
        return data, scale * rng.standard_normal((data.d, data.d))

    def check_simplex(self, inst, state, ctx):
        data, W = inst
        s = softmax_probs(data, W)
        err = float(np.abs(s.sum(axis=1) - 1).max())
        return decide(err < SUM_TOL and s.min() >= 0, "probabilities leave the simplex", sum_err=err)


@register
class SoftmaxSimplexControl(SoftmaxSimplex):
    id = "softmax-simplex-control"
    depends_on = ("softmax",)
    title = "Control: every attention probability is at least 1/T (false)"
    statement = r"s_{it}(W) \ge 1/T"
    expected = "FAIL"
    control_of = "softmax-simplex"
    plot_metric = "min_prob"
    criteria = (Criterion("min_it s_it(W)", ">=", "1/T - 1e-12"),)

    def check_simplex(self, inst, state, ctx):
        data, W = inst
        s = softmax_probs(data, W)
        return decide(s.min() >= 1 / data.T - 1e-12, "a probability is below 1/T", min_prob=float(s.min()))


# -- a gradient-level theorem with a sharp control (README, "Writing a theorem and its control") --------

#: Both sides of the bound are float64 sums of at most n*T*d <= 48 products of O(1) numbers: their rounding
#: error is ~1e-14 relative. 1e-9 leaves room for any BLAS order and is far below the control's 5% gap.
BOUND_RTOL = 1e-9
#: The control's factor: the same bound times 0.95, false exactly at the boundary (where B is attained).
SHARPNESS = 0.95
#: Central differences with step FD_STEP: truncation FD_STEP^2 / 6 * |L'''| ~ 2e-9 on unit data with
#: ||W|| = O(1), rounding eps * |L| / FD_STEP ~ 1e-12; an absolute 1e-7 is met by any correct gradient and
#: missed by a transposed or wrongly normalised one (entries O(0.01 - 0.1)). Absolute, not relative: on a
#: saturated softmax the gradient is ~1e-100 and a relative comparison with the differences' rounding noise
#: would fail.
FD_STEP, FD_TOL = 1e-4, 1e-7

GRAD_PROFILES = {
    "quick": Profile(instances=8, min_confirmed=8),
    "full": Profile(instances=60, min_confirmed=60),
    "paper": Profile(instances=200, min_confirmed=200),
}


def boundary_instance(rng, d=4):
    """n = 1, T = 2, x_2 = -x_1, W = 0: where the gradient-norm bound is attained (see GradNormBound)."""
    u, z, v = (w / np.linalg.norm(w) for w in rng.standard_normal((3, d)))
    data = AttentionData(np.stack([u, -u])[None], np.array([rng.choice([-1.0, 1.0])]), z[None], v)
    return data, np.zeros((d, d))


def gradient_bound(data, W):
    """B(W) = (1/n) sum_i |l'(Y_i f_i)| ||z_i|| max_t ||x_it|| (max_t gamma_it - min_t gamma_it) / 2."""
    s = softmax_probs(data, W)  # (n, T)
    gamma = data.Y[:, None] * (data.X @ data.v)  # (n, T): gamma_it = Y_i v^T x_it
    dl = -1.0 / (1.0 + np.exp(np.sum(s * gamma, axis=1)))  # logistic l'(u) = -1 / (1 + e^u)
    spread = (gamma.max(axis=1) - gamma.min(axis=1)) / 2
    xmax = np.linalg.norm(data.X, axis=2).max(axis=1)
    return float(np.mean(np.abs(dl) * np.linalg.norm(data.Z, axis=1) * xmax * spread))


@register
class GradNormBound(Theorem):
    """The gradient-norm bound (a worked example of a gradient-level plugin theorem).

    For the logistic loss and a linear head, grad L(W) = (1/n) sum_i X_i^T c_i z_i^T with token weights
    c_it = l'_i s_it (gamma_it - s_i^T gamma_i) (THEORY.md §2). The triangle inequality over i and t gives
    ||X_i^T c_i|| <= max_t ||x_it|| sum_t |c_it| = max_t ||x_it|| |l'_i| sum_t s_it |gamma_it - mean|, and the
    mean absolute deviation of a distribution on [min gamma, max gamma] is at most half that range, so

    ||grad L(W)||_F <= B(W) = (1/n) sum_i |l'_i| ||z_i|| max_t ||x_it|| (max_t gamma_it - min_t gamma_it) / 2.

    Every step is an equality when n = 1, T = 2, x_2 = -x_1 and W = 0 (then s = (1/2, 1/2)): the bound is
    sharp, and its control (0.95 B) is refuted exactly there. Half of the instances are drawn at that
    boundary.
    """

    id = "grad-norm-bound"
    depends_on = ("gradient", "softmax")
    invariant_to = {"transposed-gradient": "||G^T||_F = ||G||_F: the bound is a claim about the norm alone"}
    integrity = ("gradient_is_derivative",)
    title = "The attention gradient's norm is at most B(W) (plugin example, sharp)"
    reference = "plugin example: the triangle inequality on TLTO §2's closed-form gradient"
    statement = (r"\|\nabla L(W)\|_F \le \frac1n\sum_i |\ell'_i|\,\|z_i\|\max_t\|x_{it}\|\,"
                 r"\tfrac12(\max_t\gamma_{it}-\min_t\gamma_{it})")
    hypotheses_text = "logistic loss, linear head v (the dataset must carry v)"
    profiles = GRAD_PROFILES
    accepts_data = True
    plot_metric = "ratio"
    plot_scales = {"ratio": "linear"}  # the 0.95 vs 1 gap of the control must stay visible
    criteria = (Criterion("||grad L(W)||_F / B(W)", "<=", 1 + BOUND_RTOL, plot_metric="ratio"),
                Criterion("max |grad L(W) - central differences of L|", "<=", FD_TOL))

    def instance(self, rng, ctx):
        if ctx.data is not None:  # given data: one random W of norm O(1) per instance
            return ctx.data, rng.standard_normal((ctx.data.d, ctx.data.d)) / np.sqrt(ctx.data.d)
        if ctx.instance % 2 == 0:
            return boundary_instance(rng)
        return random_unit_sphere(3, 4, 4, rng=rng), rng.standard_normal((4, 4)) / 2

    def not_applicable(self, data):
        if data.v is None:
            return "the bound is stated for a linear head: the data carry no v"
        return None

    def check_gradient_is_derivative(self, inst, state, ctx):
        data, W = inst
        G = grad_W(data, W)
        fd = np.zeros_like(W)
        for i, j in np.ndindex(*W.shape):
            E = np.zeros_like(W)
            E[i, j] = FD_STEP
            fd[i, j] = (loss(data, W + E) - loss(data, W - E)) / (2 * FD_STEP)
        err = float(np.abs(G - fd).max())
        return decide(err <= FD_TOL, "grad_W is not the derivative of the loss", fd_err=err)

    def check_bound(self, inst, state, ctx):
        data, W = inst
        ratio = float(np.linalg.norm(grad_W(data, W))) / gradient_bound(data, W)
        return decide(ratio <= 1 + BOUND_RTOL, "the gradient norm exceeds B(W)", ratio=ratio)


@register
class GradNormBoundControl(GradNormBound):
    """0.95 B(W): false exactly at the boundary instances, where ||grad L(W)||_F = B(W)."""

    id = "grad-norm-bound-control"
    title = "Control: the gradient's norm is at most 0.95 B(W) (false at the boundary)"
    statement = r"\|\nabla L(W)\|_F \le 0.95\,B(W)"
    expected = "FAIL"
    control_of = "grad-norm-bound"
    same_instances_as = "grad-norm-bound"  # refuted on the instances where the theorem holds with equality
    criteria = (Criterion("||grad L(W)||_F / B(W)", "<=", SHARPNESS, plot_metric="ratio"),)

    def not_applicable(self, data):
        return ("a sharpness control is refuted only at the boundary (n = 1, T = 2, x_2 = -x_1, W = 0), "
                "which given data do not reach")

    def check_bound(self, inst, state, ctx):
        data, W = inst
        ratio = float(np.linalg.norm(grad_W(data, W))) / gradient_bound(data, W)
        return decide(ratio <= SHARPNESS, "the gradient norm exceeds 0.95 B(W)", ratio=ratio)
