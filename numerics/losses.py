"""The loss names of the numerics and their numpy maps (torch-free, so the compiled GD path of
:mod:`numerics.gd` runs without importing torch).

:data:`LOSSES` and :func:`check_loss` are the one list of loss names (:mod:`numerics.attention` re-exports
them next to its torch table ``LOSS_FNS``); :data:`LOSS_NP` gives l(u) on numpy arrays, elementwise the
same functions as ``LOSS_FNS`` (THEORY.md §1), logistic with torch's softplus threshold (softplus(x) = x
for x > 20) so both give the same value up to rounding (tested in tests/numerics/test_gd_numpy.py).

Examples
--------
>>> import numpy as np
>>> float(LOSS_NP["logistic"](np.array(0.0)))  # log 2
0.6931471805599453
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .errors import InvalidInputError

LOSSES = ("logistic", "exponential", "linear")

#: torch.nn.functional.softplus's default threshold: above it softplus(x) returns x itself.
SOFTPLUS_THRESHOLD = 20.0


def check_loss(loss: str) -> str:
    """``loss`` if it is one of :data:`LOSSES`, else :class:`InvalidInputError`."""
    if loss not in LOSSES:
        raise InvalidInputError(f"unknown loss {loss!r}; expected one of {', '.join(LOSSES)}")
    return loss


def _softplus(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp overflows only where the threshold branch is taken
        return np.where(x > SOFTPLUS_THRESHOLD, x, np.log1p(np.exp(np.minimum(x, SOFTPLUS_THRESHOLD))))


#: l(u) on numpy arrays: logistic softplus(-u), exponential e^{-u}, linear -u.
LOSS_NP: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "logistic": lambda u: _softplus(-u),
    "exponential": lambda u: np.exp(-u),
    "linear": lambda u: -u,
}

#: l'(u) on numpy arrays: logistic -sigmoid(-u) = -e^{-log(1 + e^u)} (no overflow, and no cancellation for
#: large u, where 1 - tanh(u/2) would round to 0 beyond u ~ 19), exponential -e^{-u}, linear -1; the same
#: maps as the derivatives of ``LOSS_FNS`` (tested to 1e-14 relative on [-60, 60]).
LOSS_DERIV_NP: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "logistic": lambda u: -np.exp(-np.logaddexp(0.0, u)),
    "exponential": lambda u: -np.exp(-u),
    "linear": lambda u: -np.ones_like(u),
}
