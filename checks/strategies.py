"""Instance strategies: random families that satisfy a theorem's hypotheses *by construction*
(filtering on a rare condition ends in 'unsatisfiable'), and Hypothesis strategies with shrinking.

Naming follows Hypothesis: plural nouns for strategies (``attention_datasets``), keyword-only bounds.
Plain builders (``b1_data``, ``b2_data``) take an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from numerics.data import AttentionData
from numerics.errors import InvalidInputError


def _check_sizes(n: int, T: int, d: int) -> None:
    for name, val, lo in (("n", n, 1), ("T", T, 2), ("d", d, 1)):
        if int(val) != val or val < lo:
            raise InvalidInputError(f"{name} must be an integer >= {lo}, got {val!r}")


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def b2_data(n: int, T: int, d: int, *, rng: np.random.Generator, gap: float = 0.5,
            self_attention: bool = False) -> AttentionData:
    """Data satisfying B.2: in every example all non-optimal tokens have the *same* score.

    The score lives in a dedicated coordinate (TLZO's construction): v = e_1, x_it[0] = Y_i * c_it with
    c = a_i for the optimal token and b_i = a_i - gap for all others; the remaining coordinates are
    random. Needs d >= 2.
    """
    _check_sizes(n, T, d)
    if d < 2:
        raise InvalidInputError(f"b2_data needs d >= 2 (one coordinate carries the score), got d={d}")
    Y = rng.choice(np.array([-1.0, 1.0]), size=n)
    X = rng.standard_normal((n, T, d)) / np.sqrt(d)  # (n, T, d)
    opt = rng.integers(0, T, size=n)
    a = rng.uniform(0.5, 1.0, size=n)
    c = np.repeat((a - gap)[:, None], T, axis=1)  # (n, T) non-optimal scores, all equal
    c[np.arange(n), opt] = a
    X[:, :, 0] = Y[:, None] * c
    v = np.zeros(d)
    v[0] = 1.0
    Z = None if self_attention else _unit(rng.standard_normal((n, d)))
    return AttentionData(X, Y, Z, v)


def b1_data(n: int, T: int, d: int, *, rng: np.random.Generator, shared: bool = False,
            query_corr: float = 0.0, norm_spread: float = 0.0, self_attention: bool = False) -> AttentionData:
    """Data built for B.1 (every non-optimal token is a support token of W^mm), cross-attention.

    Default (decoupled): tokens of all examples are orthonormal vectors (needs d >= n*T). Then the Att-SVM
    Gram matrix is G = blockdiag(I + 1 1^T) * (z_i . z_j), and with pairwise-orthogonal queries the dual
    solution lambda = G^{-1} 1 = 1/T > 0 makes every constraint active. Scores are arbitrary (a random unit
    head), so the optimal token is unique almost surely. The examples never interact: G is block diagonal.

    Interacting (issue 24): ``shared`` — the last token of every example is ONE common vector (a token all
    sequences contain; needs d >= n*(T-1) + 1), so the constraints of different examples share a difference
    term; ``query_corr`` in [0, 1) — the queries are z_i ∝ q_i + r u with a common direction u, corr(z_i, z_j)
    = query_corr for i ≠ j (needs d >= n + 1); ``norm_spread`` in [0, 1) — every token is scaled by a factor
    uniform on 1 ± norm_spread. G then has off-diagonal blocks and B.1 is no longer implied by the
    construction: it holds while λ = G^{-1} 1 stays positive, so a caller certifies it per instance
    (checks.hypotheses.b1_holds on the certified Att-SVM solution) and redraws where it fails.

    ``self_attention`` (needs ``shared``): z_i = x_i1 with the shared token moved to position 1, so every
    example's query is that one token (identical queries: the examples interact through every constraint);
    ``query_corr`` does not apply.
    """
    _check_sizes(n, T, d)
    if not (0.0 <= query_corr < 1.0 and 0.0 <= norm_spread < 1.0):
        raise InvalidInputError(f"b1_data needs query_corr and norm_spread in [0, 1), got {query_corr!r}, "
                                f"{norm_spread!r}")
    k = n * (T - 1) + 1 if shared else n * T
    if d < k:
        raise InvalidInputError(f"b1_data needs d >= {k} (orthonormal{' and one shared' if shared else ''} "
                                f"tokens), got d={d}")
    if self_attention and not shared:
        raise InvalidInputError("b1_data with self_attention needs shared=True (the shared token is the "
                                "query)")
    if query_corr > 0 and d < n + 1:
        raise InvalidInputError(f"b1_data with correlated queries needs d >= n + 1 = {n + 1}, got d={d}")
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    if shared:
        X = np.empty((n, T, d))
        X[:, : T - 1] = Q[:, : n * (T - 1)].T.reshape(n, T - 1, d)
        X[:, T - 1] = Q[:, n * (T - 1)]  # one token common to every example
    else:
        X = Q[:, : n * T].T.reshape(n, T, d)  # (n, T, d) orthonormal tokens
    if norm_spread > 0:
        scale = rng.uniform(1 - norm_spread, 1 + norm_spread, size=(n, T, 1))
        if shared:
            scale[:, T - 1] = scale[0, T - 1]  # the shared token stays one vector
        X = X * scale
    Qz, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Z = Qz[:, :n].T  # (n, d) orthonormal queries
    if query_corr > 0:  # z_i = (q_i + r u)/√(1 + r²): corr = r²/(1 + r²)
        Z = _unit(Z + np.sqrt(query_corr / (1 - query_corr)) * Qz[:, n])
    Y = rng.choice(np.array([-1.0, 1.0]), size=n)
    v = _unit(rng.standard_normal(d))
    if self_attention:
        # the shared token first: z_i = x_i1
        return AttentionData(np.ascontiguousarray(X[:, ::-1]), Y, None, v)
    return AttentionData(X, Y, Z, v)


# -- Hypothesis strategies ----------------------------------------------------------------------
@st.composite
def attention_datasets(draw, *, min_n: int = 1, max_n: int = 4, min_T: int = 2, max_T: int = 5,
                       min_d: int = 1, max_d: int = 6, self_attention: bool | None = None,
                       with_head: bool = True) -> AttentionData:
    """Random small datasets with bounded entries (shrinks towards few, short, low-dimensional examples)."""
    if not (1 <= min_n <= max_n and 2 <= min_T <= max_T and 1 <= min_d <= max_d):
        raise InvalidInputError(f"bad bounds: n {min_n}..{max_n}, T {min_T}..{max_T}, d {min_d}..{max_d}")
    n = draw(st.integers(min_n, max_n))
    T = draw(st.integers(min_T, max_T))
    d = draw(st.integers(min_d, max_d))
    elems = st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False, width=64)
    X = draw(hnp.arrays(np.float64, (n, T, d), elements=elems))
    Y = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
    sa = draw(st.booleans()) if self_attention is None else self_attention
    Z = None if sa else draw(hnp.arrays(np.float64, (n, d), elements=elems))
    v = draw(hnp.arrays(np.float64, (d,), elements=elems)) if with_head else None
    return AttentionData(X, Y, Z, v)


@st.composite
def generic_datasets(draw, *, min_n: int = 1, max_n: int = 4, min_T: int = 2, max_T: int = 5,
                     min_d: int = 1, max_d: int = 6) -> AttentionData:
    """Unit-sphere data from a drawn seed: generic (full-rank, no ties) almost surely."""
    n = draw(st.integers(min_n, max_n))
    T = draw(st.integers(min_T, max_T))
    d = draw(st.integers(min_d, max_d))
    seed = draw(st.integers(0, 2**32 - 1))
    from numerics.data import random_unit_sphere

    return random_unit_sphere(n, T, d, rng=np.random.default_rng(seed))


# -- GD families (gd/rp theorems) ---------------------------------------------------------------
def _second_best(g: np.ndarray) -> np.ndarray:
    return np.argsort(g, axis=1)[:, -2]


def _common_query(data: AttentionData) -> AttentionData:
    """The data with every example's query replaced by the first one's (no further draws): the prompt model of
    TLZO, logits x_it^T W z = k_it^T p with keys k_it = x_it and p = W z, so Att-SVM(α) is the p-SVM of the
    keys (W^mm_α = p^mm_α z^T, ‖W^mm_α‖_F = ‖p^mm_α‖ for the unit z)."""
    return AttentionData(data.X, data.Y, np.repeat(data.Z[:1], data.n, axis=0), data.v)


def local_alpha_data(n: int, T: int, d: int, *, rng: np.random.Generator, locally_optimal: bool = True,
                     tries: int = 60, self_attention: bool = False,
                     common_query: bool = False) -> tuple[AttentionData, np.ndarray]:
    """Unit-sphere data with a selection alpha != opt that is (``locally_optimal=True``) or is NOT
    (``False``) locally optimal in THEORY.md §3's sense, Att-SVM(alpha) feasible in both cases.

    alpha = opt except one random example, which selects its second-best token. Local optimality is
    decided by numerics.svm.is_locally_optimal (support tokens of the certified W^mm_alpha); a
    non-locally-optimal alpha therefore has a support token scoring higher than alpha_i (the optimal
    token of the switched example). Draws up to ``tries`` datasets; InvalidInputError if none fits.
    ``self_attention``: the same family with queries z_i = x_i1 (numerics.data.AttentionData with Z None).
    ``common_query``: one query z shared by all examples (``_common_query``: the prompt model, p = W z; TLZO's
    p-svm-gd draws its local family so).
    """
    from numerics.data import random_unit_sphere
    from numerics.svm import is_locally_optimal, solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    _check_sizes(n, T, d)
    for _ in range(tries):
        data = random_unit_sphere(n, T, d, rng=rng, self_attention=self_attention)
        if common_query:
            data = _common_query(data)
        ot = optimal_tokens(data)
        if not ot.unique:
            continue
        alpha = ot.index.copy()
        i = int(rng.integers(n))
        alpha[i] = _second_best(scores(data))[i]
        sol = solve_att_svm(data, alpha)
        if not sol.feasible:
            continue
        if is_locally_optimal(data, alpha, sol) == locally_optimal:
            return data, alpha
    kind = "locally optimal" if locally_optimal else "non-locally-optimal"
    raise InvalidInputError(f"no {kind} alpha found in {tries} draws at n={n}, T={T}, d={d}; "
                            "try another size (local optimality needs d >= max(n, T-1) for feasibility)")


def tied_alpha_data(n: int, T: int, d: int, *, rng: np.random.Generator,
                    tries: int = 60, offset: float = 0.0, self_attention: bool = False,
                    common_query: bool = False) -> tuple[AttentionData, np.ndarray]:
    """Unit-sphere data with a selection alpha != opt that is NOT locally optimal *at the boundary*: a
    support token of W^mm_alpha scores exactly as high as alpha_i (a tie), Att-SVM(alpha) feasible.

    alpha = opt except one random example i, which selects its second-best token; then that example's optimal
    token t is moved along the head v until its score equals alpha_i's (x_it -= c v with c = (gamma_it -
    gamma_{i alpha_i}) / (Y_i ||v||^2): the scores tie up to rounding, far below TIE_TOL). Kept when
    Att-SVM(alpha) of the modified data is feasible and t is one of its support tokens, so
    numerics.svm.is_locally_optimal is False only because of the tie (gamma_{i alpha_i} > gamma_it fails by
    equality). ``offset`` > 0 puts t that far ABOVE alpha_i instead (gamma_it = gamma_{i alpha_i} + offset:
    strictly not locally optimal, ``offset`` from the tie). Draws up to ``tries`` datasets; InvalidInputError
    if none fits. ``self_attention``: queries z_i = x_i1 (a moved first token moves its query with it).
    ``common_query``: one query shared by all examples (the prompt model, as in :func:`local_alpha_data`).
    """
    from numerics.data import random_unit_sphere
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    _check_sizes(n, T, d)
    for _ in range(tries):
        data = random_unit_sphere(n, T, d, rng=rng, self_attention=self_attention)
        if common_query:
            data = _common_query(data)
        ot = optimal_tokens(data)
        if not ot.unique:
            continue
        g = scores(data)
        i = int(rng.integers(n))
        alpha = ot.index.copy()
        alpha[i] = _second_best(g)[i]
        t = int(ot.index[i])
        X = np.array(data.X)
        X[i, t] -= (g[i, t] - g[i, alpha[i]] - offset) / (data.Y[i] * float(data.v @ data.v)) * data.v
        tied = AttentionData(X, data.Y, None if self_attention else data.Z, data.v)
        sol = solve_att_svm(tied, alpha)
        if sol.feasible and t in set(np.asarray(sol.support[i]).tolist()):
            return tied, alpha
    raise InvalidInputError(
        f"no tied non-locally-optimal alpha found in {tries} draws at n={n}, T={T}, d={d}"
    )


def valley_data(d: int, *, rng: np.random.Generator, min_score: float = 0.2) -> AttentionData:
    """Two examples with the SAME tokens and query and opposite labels (n = 2, T = 2, cross-attention): the
    loss depends on W only through δ = ⟨(x_1 − x_2) z^T, W⟩ and equals ½[ℓ(u) + ℓ(−u)], u = γ_1 + (γ_2 −
    γ_1)(1 − σ(δ)), with the first example's scores γ_1 > min_score > 0 > −min_score > γ_2. So u = 0 at the
    finite δ* = log(−γ_2/γ_1): a finite minimiser (a valley) for any loss with ℓ(u) + ℓ(−u) minimal at 0
    (logistic), and Att-SVM(opt) is infeasible (the two examples ask for opposite margins on the same feature;
    Farkas with λ = 1, 1). B.2 holds trivially (T = 2) and the optimal tokens are unique. Needs d >= 2.
    """
    if d < 2:
        raise InvalidInputError(f"valley_data needs d >= 2, got d={d}")
    for _ in range(1000):
        x = _unit(rng.standard_normal((2, d)))
        v = _unit(rng.standard_normal(d))
        g = x @ v
        if g[0] > min_score and g[1] < -min_score:
            z = _unit(rng.standard_normal(d))
            X = np.stack([x, x])  # (2, 2, d)
            return AttentionData(X, np.array([1.0, -1.0]), np.stack([z, z]), v)
    raise InvalidInputError(f"valley_data: no draw with scores of both signs beyond {min_score} at d={d}")


def tight_data(d: int, *, rng: np.random.Generator, delta: float, min_diam: float = 0.5) -> AttentionData:
    """One example, two unit tokens, scores ±Δ/2 (n = 1, T = 2, cross-attention): the family on which the
    proved smoothness bound (theory.smoothness.lipschitz_bound) is within 2× of the true L_W, by construction.

    The head is v = Δ (x_1 − x_2)/‖x_1 − x_2‖², so γ_1 − γ_2 = Δ and
    γ_1 + γ_2 = Δ(‖x_1‖² − ‖x_2‖²)/‖x_1 − x_2‖² = 0. L(W) = ℓ(γ_2 + Δ σ(δ)) depends on W only
    through δ = ⟨F, W⟩, F = (x_1 − x_2) z^T, ‖F‖_F = ρ = ‖x_1 − x_2‖‖z‖; the Hessian is rank one along F and
    at δ = 0 (s = (½, ½), u = 0, where ℓ''(0) = 1/4 is largest) its eigenvalue is ρ² ℓ''(0)(Δ/4)² = ρ²Δ²/64
    (the ℓ' term carries σ''(0) = 0). The proved bound is ρ²/4 ·
    (Δ²/16 + σ(Δ/2)Δ) (B2 = 1/4, B1 = sup|ℓ'| on [−Δ/2, Δ/2] = σ(Δ/2), token diameter ‖x_1 − x_2‖), so
    L_W / bound ≥ Δ/(Δ + 16σ(Δ/2)) ≥ Δ/(Δ + 16): 2/3 at Δ = 32, 4/5 at Δ = 64 (:func:`tight_curvature`).
    ``min_diam`` keeps the tokens apart (ρ bounded below). Needs d >= 2.
    """
    if d < 2:
        raise InvalidInputError(f"tight_data needs d >= 2, got d={d}")
    if not delta > 0:
        raise InvalidInputError(f"tight_data needs a score gap delta > 0, got {delta!r}")
    for _ in range(1000):
        x = _unit(rng.standard_normal((2, d)))
        e = x[0] - x[1]
        if np.linalg.norm(e) >= min_diam:
            z = _unit(rng.standard_normal(d))
            return AttentionData(x[None], np.array([1.0]), z[None], delta * e / float(e @ e))
    raise InvalidInputError(f"tight_data: no two unit tokens {min_diam} apart at d={d}")


def tight_curvature(data: AttentionData) -> tuple[np.ndarray, float, float]:
    """(F, λ₀, τ₀) of :func:`tight_data`: the direction F = (x_1 − x_2) z^T, the Hessian eigenvalue
    λ₀ = ‖F‖²Δ²/64 at δ = ⟨F, W⟩ = 0, and τ₀ = Δ/(Δ + 16σ(Δ/2)), the closed-form lower bound on
    λ₀ / lipschitz_bound(data) (a lower bound on the tightness: the sup of the curvature sits slightly
    off δ = 0, where the ℓ'σ'' term adds, within 0.1 % of λ₀ for Δ ≥ 32)."""
    x1, x2, z = data.X[0, 0], data.X[0, 1], data.Z[0]
    F = np.outer(x1 - x2, z)
    g = float(data.v @ (x1 - x2))
    lam = float(np.sum(F * F)) * g**2 / 64
    return F, lam, g / (g + 16 / (1 + np.exp(-g / 2)))
