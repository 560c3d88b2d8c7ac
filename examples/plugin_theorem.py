"""A worked plugin: one theorem and its negative control, in one file.

Run it with ``attnsvm check softmax-simplex --plugin examples/plugin_theorem.py``; ``tox -e checks``
picks it up from ``[tool.attnsvm] plugins`` in pyproject.toml.

The claim: attention probabilities s_i(W) = softmax(X_i W z_i) lie on the probability simplex for
every W, and the optimal-token probability grows along W = c * W^mm ... kept simple here: the
simplex part only, with its control "every probability is at least 1/T" (false whenever W != 0).
"""

import numpy as np

from checks import Criterion, Profile, Theorem, decide, register
from numerics.data import random_unit_sphere
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
