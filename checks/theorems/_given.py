"""Shared helpers for theorems that run on user-given data (``attnsvm check --data FILE.npz|digits``).

Not a theorem module (the leading underscore keeps ``catalogue.load_builtin`` from importing it as one).

On given data every instance of a theorem uses the *same* dataset; what still differs between instances
(and replays exactly from the instance seed) is the randomness the theorem draws itself: the selection α,
the initialisations of GD, the sampled W, the path restarts. The one-line reasons below are what the
report prints for a theorem that cannot run on the given data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

NEEDS_HEAD = (
    "needs a linear head v in the data (key 'v'): the token scores gamma_it = Y_i v^T x_it define its claim"
)


def need_head(data: Any) -> str | None:
    """The not-applicable reason of a theorem whose claim involves the token scores (None if v is given)."""
    if data is not None and data.v is None:
        return NEEDS_HEAD
    return None


def given_metrics(ctx: Any) -> dict[str, int]:
    """Metrics recording the shape of the given data (empty without --data, so constructed runs are
    unchanged)."""
    data = getattr(ctx, "data", None)
    if data is None:
        return {}
    return {"data_n": int(data.n), "data_T": int(data.T), "data_d": int(data.d)}


def _remember(cache: dict, key: Any, value: Any, keep: int = 4) -> None:
    """Insert into a small per-process cache (the entry holds the dataset, so its id stays valid)."""
    cache[key] = value
    while len(cache) > keep:
        cache.pop(next(iter(cache)))


# -- selections α ≠ opt that switch one example to its second-best token ---------------------------
_SWITCH_CACHE: dict[int, tuple[Any, list[tuple[int, np.ndarray, bool, Any]]]] = {}


def switched_selections(data: Any) -> list[tuple[int, np.ndarray, bool, Any]]:
    """For every example i: (i, α, locally optimal?, certified W^mm_α solution) with α = opt except
    α_i = the second-best token of example i, kept only where Att-SVM(α) is feasible — the construction of
    ``checks.strategies.local_alpha_data``, enumerated deterministically on the given data (n solves).
    Cached per dataset object (one run loads the data once)."""
    from numerics.svm import is_locally_optimal, solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    hit = _SWITCH_CACHE.get(id(data))
    if hit is not None and hit[0] is data:
        return hit[1]
    opt = optimal_tokens(data).index
    second = np.argsort(scores(data), axis=1)[:, -2]
    out = []
    for i in range(data.n):
        alpha = opt.copy()
        alpha[i] = second[i]
        sol = solve_att_svm(data, alpha)
        if sol.feasible:
            out.append((i, alpha, bool(is_locally_optimal(data, alpha, sol)), sol))
    _remember(_SWITCH_CACHE, id(data), (data, out))
    return out


def switched_candidates(
    data: Any, locally_optimal: bool, accept: Any = None
) -> list[tuple[int, np.ndarray, Any]]:
    """``switched_selections`` with the requested local optimality (and ``accept(alpha, sol)`` if given):
    a list of (i, α, W^mm_α solution)."""
    return [(i, a, sol) for i, a, lo, sol in switched_selections(data)
            if lo == locally_optimal and (accept is None or accept(a, sol))]


def draw_candidate(cands: list, rng: np.random.Generator) -> tuple[int, np.ndarray, Any]:
    """One candidate (i, α copy, solution), uniformly from the instance's rng."""
    i, a, sol = cands[int(rng.integers(len(cands)))]
    return i, a.copy(), sol


# -- deterministic subsets -------------------------------------------------------------------------
_SUBSET_CACHE: dict[tuple[int, int], tuple[Any, Any]] = {}


def class_subset(data: Any, per_class: int) -> Any:
    """The first ``per_class`` examples of each label (-1 and +1), in their original order — a documented,
    deterministic subset for checks whose claim is out of numerical reach (or too slow) on all n examples.
    Returns the data themselves when they are already that small."""
    hit = _SUBSET_CACHE.get((id(data), per_class))
    if hit is not None and hit[0] is data:
        return hit[1]
    idx = np.concatenate([np.flatnonzero(data.Y < 0)[:per_class], np.flatnonzero(data.Y > 0)[:per_class]])
    idx.sort()
    sub = data if idx.size == data.n else data.subset(idx)
    _remember(_SUBSET_CACHE, (id(data), per_class), (data, sub))
    return sub


def subset_metrics(ctx: Any, sub: Any) -> dict[str, int]:
    """``given_metrics`` of the subset actually used, plus the size of the full given data
    (``data_n_given``)."""
    data = getattr(ctx, "data", None)
    if data is None:
        return {}
    return {"data_n": int(sub.n), "data_T": int(sub.T), "data_d": int(sub.d), "data_n_given": int(data.n)}
