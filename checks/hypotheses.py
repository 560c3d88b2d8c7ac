"""The catalogue's hypotheses as pure, named predicates: one definition each.

Theorems call these from their ``assume_*`` methods and ``attnsvm assumptions`` calls the same
functions, so a hypothesis rate in the assumption report is by construction the rate the theorems
see. Each predicate is pure (no side effects, no solving: it takes the solved SVM when it needs one)
and cheap.

Definitions (docs/theory.md, "Definitions"):

- **B.1**: every non-optimal token of every example is a support token of W^mm (its margin
  constraint is active in the certified solution).
- **B.2**: in every example all non-optimal scores γ_it (t ≠ opt_i) are equal, within
  :data:`numerics.tolerances.TIE_TOL` (scores are O(1) on the suite's data; the same tolerance
  decides ties of the optimal token).
- **Assumption A** (TLTO): the loss ℓ is strictly decreasing, ℓ′ is bounded and Lipschitz on bounded
  intervals — proved symbolically per loss by :func:`theory.losses.assumption_a`.

>>> import numpy as np
>>> b2_spread(np.array([[1.0, 0.3, 0.3], [0.2, 0.9, 0.2]]), np.array([0, 1]))
0.0
>>> b2_holds(np.array([[1.0, 0.3, 0.4]]), np.array([0]))
False
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from numerics import tolerances as tol


def b2_spread(gamma: np.ndarray, opt: np.ndarray) -> float:
    """max_i (max_{t≠opt_i} γ_it − min_{t≠opt_i} γ_it): how far the data are from B.2 (0 on B.2 data).

    ``gamma`` (n, T) token scores, ``opt`` (n,) the optimal (or selected) token per example."""
    gamma = np.asarray(gamma, dtype=float)
    n, T = gamma.shape
    mask = np.ones((n, T), dtype=bool)
    mask[np.arange(n), np.asarray(opt)] = False
    rest = gamma[mask].reshape(n, T - 1)
    return float(np.max(rest.max(1) - rest.min(1))) if T > 1 else 0.0


def b2_holds(gamma: np.ndarray, opt: np.ndarray) -> bool:
    """B.2: every example's non-optimal scores are equal (within TIE_TOL)."""
    return b2_spread(gamma, opt) <= tol.TIE_TOL


def b1_holds(support: Sequence[Sequence[int] | np.ndarray] | None, T: int, *, feasible: bool = True) -> bool:
    """B.1: Att-SVM(opt) is feasible and every non-optimal token of every example is a support token.

    ``support`` is the certified solution's support sets (``SVMSolution.support``): one list of
    token indices per example."""
    return bool(feasible and support is not None and all(len(s) == T - 1 for s in support))


def b1_or_b2(sol: Any, gamma: np.ndarray, opt: np.ndarray) -> tuple[bool, bool]:
    """(B.1, B.2) of one instance, from its certified Att-SVM(opt) solution and its scores."""
    return b1_holds(sol.support, gamma.shape[1], feasible=sol.feasible), b2_holds(gamma, opt)


@functools.cache
def loss_satisfies_assumption_a(loss: str) -> bool:
    """Assumption A for a named catalogue loss, decided by the sympy proof (cached per loss: the proof
    is a fact about the loss, certified once, not sampled per instance)."""
    from theory.losses import assumption_a

    return bool(assumption_a(loss).holds)


__all__ = ["b1_holds", "b1_or_b2", "b2_holds", "b2_spread", "loss_satisfies_assumption_a"]
