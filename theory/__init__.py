"""attnsvm's formal layer: the attention model in sympy, identities proved symbolically, closed forms
lambdified so numerics can be held to them.

- :mod:`theory.model` -- symbols and model at small explicit sizes (linear and softplus heads).
- :mod:`theory.losses` -- ``LOSSES`` and :func:`assumption_a` (Assumption A, proved with sympy).
- :mod:`theory.derivations` -- softmax Jacobian, gradient closed form, (K, Q) chain rule, covariance
  identity, stationary-point conditions, the n=1, T=2 no-stationary-point lemma; each with wrong variants.
- :mod:`theory.lambdified` -- numpy/torch functions generated from the proved closed forms.
- :mod:`theory.sums` -- a normal form for finite sums with symbolic bounds (decides identities for all sizes).
- :mod:`theory.general` -- softmax Jacobian, gradient, (K, Q) chain rule, covariance identity, stationarity
  conditions proved for every n, T, d, m (index notation, symbolic bounds).
- :mod:`theory.stationarity` -- stationary-point conditions at fixed sizes, and the B.1/B.2 covariance bounds
  and the no-stationary-point argument for all sizes.
- :mod:`theory.smoothness` -- the derivation of an explicit L_W and :func:`lipschitz_bound` on data.
- :mod:`theory.instantiate` -- the all-size expressions lambdified at concrete sizes (compared with numerics).
- :mod:`theory.proofs` -- ``PROOFS``: every proof's statement, status (all sizes / fixed sizes), what remains
  numerical; ``verify(id)`` runs one.

References: TLTO (arXiv 2308.16898) §2-3; THEORY.md §1-2, §4 (first four catalogue rows).
"""

from .derivations import (
    METHODS,
    VARIANTS,
    CounterValue,
    Derivation,
    UndecidedIdentityError,
    closed_form_gradient,
    covariance_identity,
    gradient_closed_form,
    kq_chain_rule,
    softmax_jacobian,
    symbolic_gradient,
)
from .losses import CONTROL_LOSSES, LOSSES, AssumptionAResult, assumption_a, loss_derivative, loss_expr
from .model import HEADS, Exp, SymbolicModel, symbolic_model, to_exp
from .proofs import PROOFS, verify
from .smoothness import lipschitz_bound
from .stationarity import all_derivations, no_stationary_point_lemma, stationary_conditions

__all__ = [
    "METHODS", "VARIANTS", "CounterValue", "Derivation", "UndecidedIdentityError", "all_derivations",
    "closed_form_gradient", "covariance_identity", "gradient_closed_form", "kq_chain_rule",
    "no_stationary_point_lemma", "softmax_jacobian", "stationary_conditions", "symbolic_gradient",
    "CONTROL_LOSSES", "LOSSES", "AssumptionAResult", "assumption_a", "loss_derivative", "loss_expr",
    "HEADS", "Exp", "SymbolicModel", "symbolic_model", "to_exp", "PROOFS", "verify", "lipschitz_bound",
]
