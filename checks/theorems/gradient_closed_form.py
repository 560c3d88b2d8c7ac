r"""gradient-closed-form: the closed-form gradient of the attention loss is the true gradient.

Statement (TLTO, arXiv 2308.16898, §2 "Preliminaries"; THEORY.md §2)::

    grad L(W) = (1/n) sum_i l'(Y_i f_i) X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T,

with s_i = S(X_i W z_i), and gamma_i = Y_i X_i v for the linear head (gamma_i = Y_i X_i grad h(X_i^T s_i)
for a nonlinear head h, e.g. h(u) = 1^T ReLU(V^T u)).

Hypotheses implemented (exactly):

* ``smooth_loss``: the loss is a catalogue loss (logistic, exponential, linear) whose l'' exists and is
  continuous on R -- proved with sympy by :func:`theory.losses.assumption_a` (``smooth``).
* ``relu_pattern_constant``: for the ReLU head only, the activation pattern 1[V^T X_i^T s_i > 0] is the
  same at W and at every point of the finite-difference stencil, and no pre-activation is within
  ``KINK_MARGIN`` of 0 (the loss is smooth there; the ReLU kink is where the formula is a one-sided
  derivative only). Always true for the linear head.

Predictions (each instance):

* ``symbolic``: the identity derived with ``sympy.diff`` for an *undefined* loss l at a small symbolic
  size (cycled through ``SYMBOLIC_SIZES``; linear and smooth softplus heads) --
  :func:`theory.derivations.gradient_closed_form`.
* ``closed_vs_autograd`` and ``closed_vs_fd``: the production closed form :func:`numerics.attention.grad_W`
  against torch autograd of an *independent* reference forward pass written here, and against 4-point
  central differences with a Richardson error estimate; relative error < ``GRAD_RTOL`` (float64).
  ``autograd_vs_fd`` closes the triangle. If the difference quotient is not accurate enough to decide
  at ``GRAD_RTOL`` the instance is inconclusive, never confirmed.
* Every fourth instance instead runs a Hypothesis search (``checks.strategies.attention_datasets``,
  seeded from the instance RNG, so deterministic) for data, W and loss on which the closed form and autograd
  disagree: no counterexample in ``search_examples`` draws confirms; a counterexample is shrunk to a minimal
  one.

Instance family: unit-sphere data (cross- and self-attention), n in 1..5, T in 2..6, d in 1..6, the three
losses in turn, W = c G / sqrt(d) with G standard normal and c log-uniform in [0.1, 5]; linear head, or a
ReLU head with fixed Gaussian V (d x k, k in 1..4); plus Hypothesis-drawn data (entries in [-2, 2],
W entries in [-3, 3]). With ``--data`` the given data and its linear head are used and W, loss are drawn.

Negative control ``gradient-closed-form-control``: the gradient *without* the -s_i s_i^T term, claimed equal
to the true gradient. Refuted symbolically (theory's rational counter-value) and numerically (relative error
O(1)); the Hypothesis search shrinks a counterexample to a minimal size, recorded in metrics.

The helpers here (reference forward, finite differences, Hypothesis search) are shared with the
kq-chain-rule and covariance-identity modules.
"""

from __future__ import annotations

import numpy as np

from checks import register

from ._gradient_check import GradientCheck
from ._gradients import Case, closed_form_np


@register
class GradientClosedForm(GradientCheck):
    """gradient-closed-form: the statement above; the check itself is _gradient_check.py's GradientCheck
    (shared with kq-chain-rule)."""

    id = "gradient-closed-form"
    title = "The closed-form attention gradient equals the true gradient"
    reference = "TLTO (arXiv 2308.16898) §2, gradient of the empirical risk; THEORY.md §2"
    statement = (r"\nabla L(W) = \frac1n \sum_{i=1}^n \ell'(Y_i f_i)\, X_i^\top\left(\operatorname{diag}(s_i)"
                 r" - s_i s_i^\top\right)\gamma_i z_i^\top")
    hypotheses_text = (
        "smooth catalogue loss (sympy: l'' continuous on R); ReLU head: activation pattern constant "
        "on the finite-difference stencil (away from the kink)"
    )


@register
class GradientClosedFormControl(GradientClosedForm):
    id = "gradient-closed-form-control"
    depends_on = ("gradient",)
    title = "Control: the gradient without the -s s^T term equals the true gradient (false)"
    statement = (r"\nabla L(W) \overset{?}{=} \frac1n \sum_{i=1}^n \ell'(Y_i f_i)\, X_i^\top"
                 r"\operatorname{diag}(s_i)\,\gamma_i z_i^\top")
    expected = "FAIL"
    control_of = "gradient-closed-form"
    variant = "no-outer"
    plot_metric = "rel_err_closed_vs_autograd"

    def closed_form(self, case: Case) -> np.ndarray:
        return closed_form_np(case, case.W, "no-outer")
