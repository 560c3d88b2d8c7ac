"""Shared helpers of the landscape theorems (no-stationary-points, overparam-landscape): the inner product
⟨∇L(W), M⟩ signed exactly in log space, W samplers and a short ascent of it, the pairwise-product
certificate that fixes its sign for every W, and the trend rule for GD's norm divergence.

Not a theorem module (the leading underscore keeps ``catalogue.load_builtin`` from importing it as one).
"""

from __future__ import annotations

import numpy as np

from checks import Criterion, failed, held, undecided
from numerics.data import AttentionData
from numerics.tokens import scores

#: Two log-sums (positive and negative parts of the inner product) closer than this in log space
#: (relative difference 1e-9 of the two parts) are a cancellation below what float64 terms of
#: relative accuracy ~1e-15 summed over ≤ 10^3 pairs can resolve: undecided, never a sign.
LOG_PREC = 1e-9

#: Norms of the sampled W: from nearly uniform attention to softmax saturated far beyond float range.
NORMS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 1e2, 1e3, 1e4)

#: Losses satisfying Assumption A (THEORY.md §1; proved by the loss-assumptions check); each instance
#: draws one. log|ℓ'| is written out in closed form in ``log_abs_dloss``.
LOSSES = ("logistic", "exponential", "linear")

# -- the inner product, exactly signed ---------------------------------------------------------
def log_abs_dloss(loss: str, u: np.ndarray) -> np.ndarray:
    """log|ℓ'(u)| in closed form (ℓ' < 0 for every catalogue loss): logistic −softplus(u),
    exponential −u, linear 0."""
    if loss == "logistic":
        return -np.logaddexp(0.0, u)
    if loss == "exponential":
        return -u
    if loss == "linear":
        return np.zeros_like(u)
    raise ValueError(f"unknown loss {loss!r}")


def dloss_negative_on(loss: str, lo: float, hi: float) -> bool:
    """ℓ'(u) < 0 on a fine grid of [lo, hi] — the instance-level part of Assumption A that the argument
    uses (u_i = γ_i^T s_i is a convex combination of scores, so it never leaves [min γ, max γ]). The
    global statement (strictly decreasing on R, ℓ' bounded and Lipschitz on bounded sets) is proved
    symbolically by the ``loss-assumptions`` check for exactly these losses (theory.losses.LOSSES);
    re-running that sympy proof here would cost seconds per process."""
    u = np.linspace(lo, hi, 257)
    return bool(np.all(np.isfinite(log_abs_dloss(loss, u))))  # log|ℓ'| finite ⟺ ℓ' ≠ 0; sign is − by form


def exact_margin_profile(data: AttentionData, sol) -> np.ndarray | None:
    """h_i = X_i W^mm z_i of the *exact* Att-SVM solution of the float data (converted exactly to
    rationals), from the certified active set: solve G_SS λ_S = 1 over Q, W = Σ_S λ_s F_s, and prove KKT
    (λ_S ≥ 0, every margin ≥ 1) exactly. Returns h (n, T) as floats of the exact values relative to each
    example's first token (so exact ties — B.1's equal margins — stay exactly equal), or None when
    the proof fails. Why: under B.1 the non-optimal margins are *exactly* equal, and the sign of
    ⟨∇L(W), W^mm⟩ at W that concentrate attention on two non-optimal tokens is decided by those exact
    zeros; float rounding of W^mm (~1e-16) would otherwise dominate terms of size e^{-1000}."""
    from fractions import Fraction as Fr

    a = sol.alpha
    X = [[[Fr(float(x)) for x in row] for row in ex] for ex in data.X]
    Zq = [[Fr(float(x)) for x in z] for z in data.Z]
    S = [(i, t) for i, sup in enumerate(sol.positive_support) for t in sup.tolist()]
    rows = [(i, t) for i in range(data.n) for t in range(data.T) if t != a[i]]
    if not S:
        return None

    def dot(u, w):
        return sum(p * q for p, q in zip(u, w, strict=False))

    def D(i, t):
        return [p - q for p, q in zip(X[i][a[i]], X[i][t], strict=False)]

    zz = [[dot(Zq[i], Zq[j]) for j in range(data.n)] for i in range(data.n)]
    DS = [D(i, t) for i, t in S]
    G = [[dot(DS[p], DS[q]) * zz[S[p][0]][S[q][0]] for q in range(len(S))] for p in range(len(S))]
    k = len(S)
    M = [row[:] + [Fr(1)] for row in G]
    piv_cols, r = [], 0
    for c in range(k):
        pr = next((j for j in range(r, k) if M[j][c] != 0), None)
        if pr is None:
            continue
        M[r], M[pr] = M[pr], M[r]
        inv = 1 / M[r][c]
        M[r] = [x * inv for x in M[r]]
        for j in range(k):
            if j != r and M[j][c] != 0:
                f = M[j][c]
                M[j] = [x - f * y for x, y in zip(M[j], M[r], strict=False)]
        piv_cols.append(c)
        r += 1
    if any(M[j][k] != 0 for j in range(r, k)):
        return None
    lam = [Fr(0)] * k
    for j, c in enumerate(piv_cols):
        lam[c] = M[j][k]
    if any(x < 0 for x in lam):
        return None
    # h_it = Σ_s λ_s (D_s · x_it)(z_s · z_i)
    h = [[sum(lam[p] * dot(DS[p], X[i][t]) * zz[S[p][0]][i] for p in range(k)) for t in range(data.T)]
         for i in range(data.n)]
    for i, t in rows:
        if h[i][a[i]] - h[i][t] < 1:
            return None
    return np.array([[float(h[i][t] - h[i][0]) for t in range(data.T)] for i in range(data.n)])


def moved_profile(data: AttentionData, h: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The margin profile h (relative to each example's first token, :func:`exact_margin_profile`) of the
    matrix moved by D: h + X_i D z_i, relative likewise. For a predicted W^mm perturbed through the resolution
    seam (D = W' − W^mm); D = 0 returns h itself (its exact ties intact)."""
    if not np.any(D):
        return h
    g = np.einsum("ntd,de,ne->nt", data.X, D, data.Z)
    return h + (g - g[:, :1])


def signed_inner(data: AttentionData, W: np.ndarray, M: np.ndarray, loss: str,
                 gamma: np.ndarray | None = None, h: np.ndarray | None = None) -> tuple[float, float, float]:
    """⟨∇L(W), M⟩ for a batch of W (R, d, d) as (P, N, naive): the inner product equals
    −(e^P − e^N)/n with P (N) the log-sum of the positive (negative) covariance terms weighted by |ℓ'|;
    ``naive`` is the plain float64 value of the §2 gradient formula (underflows at large ‖W‖).
    Returns arrays of shape (R,)."""
    g = scores(data) if gamma is None else gamma  # (n, T)
    W = np.asarray(W, dtype=np.float64).reshape(-1, data.d, data.d)  # (R, d, d)
    logits = np.einsum("ntd,rde,ne->rnt", data.X, W, data.Z)  # (R, n, T)
    mx = logits.max(axis=2, keepdims=True)
    logs = logits - mx - np.log(np.exp(logits - mx).sum(axis=2, keepdims=True))  # (R, n, T) log-softmax
    s = np.exp(logs)
    u = np.einsum("rnt,nt->rn", s, g)  # (R, n) γ_i^T s_i
    lc = log_abs_dloss(loss, u)  # (R, n)
    if h is None:
        h = np.einsum("ntd,de,ne->nt", data.X, M, data.Z)  # (n, T)
    iu, ju = np.triu_indices(data.T, 1)
    prod = (g[:, iu] - g[:, ju]) * (h[:, iu] - h[:, ju])  # (n, P) pair products
    with np.errstate(divide="ignore"):
        lmag = np.log(np.abs(prod))  # (n, P), −inf where a pair contributes nothing
    terms = lc[:, :, None] + logs[:, :, iu] + logs[:, :, ju] + lmag[None]  # (R, n, P)
    terms = terms.reshape(terms.shape[0], -1)
    sign = np.broadcast_to(np.sign(prod)[None], (W.shape[0],) + prod.shape).reshape(W.shape[0], -1)

    def lse(mask):
        t = np.where(mask, terms, -np.inf)
        m = t.max(axis=1)
        ok = np.isfinite(m)
        out = np.full(t.shape[0], -np.inf)
        out[ok] = m[ok] + np.log(np.exp(t[ok] - m[ok, None]).sum(axis=1))
        return out

    P, N = lse(sign > 0), lse(sign < 0)
    # naive §2 formula: ℓ'_i · s_i^T(γ∘h) − (s^T γ)(s^T h), averaged
    dl = -np.exp(lc)
    cov = np.einsum("rnt,nt->rn", s, g * h) - u * np.einsum("rnt,nt->rn", s, h)
    naive = (dl * cov).mean(axis=1)
    return P, N, naive


def classify(P: np.ndarray, N: np.ndarray) -> np.ndarray:
    """Per sample: -1 inner product < 0 (P > N), +1 inner product > 0, 0 undecided (cancellation or 0)."""
    out = np.zeros(P.shape, dtype=int)
    both_inf = ~np.isfinite(P) & ~np.isfinite(N)
    diff = np.where(both_inf, 0.0, P - N)  # P − N; ±inf when one side is empty
    out[diff > LOG_PREC] = -1
    out[diff < -LOG_PREC] = 1
    return out


def sample_ws(data: AttentionData, Wmm: np.ndarray, rng: np.random.Generator, per_norm: int) -> np.ndarray:
    """Candidate W (R, d, d): Gaussian at every norm in NORMS, ±W^mm-like directions, and rank-one W that
    push attention of every example towards one random token (where B-free claims tend to break)."""
    d = data.d
    out = []
    u = Wmm / np.linalg.norm(Wmm)
    for r in NORMS:
        G = rng.standard_normal((per_norm, d, d))
        G /= np.linalg.norm(G, axis=(1, 2), keepdims=True)
        out.append(r * G)
        E = rng.standard_normal((per_norm, d, d))
        E /= np.linalg.norm(E, axis=(1, 2), keepdims=True)
        sgn = rng.choice([-1.0, 1.0], size=(per_norm, 1, 1))
        eps = 10.0 ** rng.uniform(-3, 0, size=(per_norm, 1, 1))
        near = sgn * u[None] + eps * E
        out.append(r * near / np.linalg.norm(near, axis=(1, 2), keepdims=True))
        # attention onto random tokens: W = Σ_i x_{i t_i} z_i^T / stuff (least-norm push)
        for _ in range(max(1, per_norm // 3)):
            t = rng.integers(0, data.T, size=data.n)
            P = (data.X[np.arange(data.n), t][:, :, None] * data.Z[:, None, :]).sum(axis=0)
            out.append(r * P / max(np.linalg.norm(P), 1e-300))
    return np.concatenate([np.asarray(o).reshape(-1, d, d) for o in out])


def ascend(data: AttentionData, M: np.ndarray, loss: str, W0: np.ndarray, steps: int, lr: float = 0.1
           ) -> np.ndarray:
    """A short Adam ascent of ⟨∇L(W), M⟩ (torch autograd, float64), batched over the starts W0 (R, d, d);
    returns the final iterates. Used to look for positive values; every result is re-judged exactly."""
    import torch

    X = torch.tensor(data.X)
    Z = torch.tensor(data.Z)
    g = torch.as_tensor(scores(data))
    h = torch.einsum("ntd,de,ne->nt", X, torch.as_tensor(M), Z)
    W = torch.tensor(W0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([W], lr=lr)
    for _ in range(steps):
        logits = torch.einsum("ntd,rde,ne->rnt", X, W, Z)
        s = torch.softmax(logits, dim=2)
        u = (s * g).sum(2)
        if loss == "logistic":
            dl = -torch.sigmoid(-u)
        elif loss == "exponential":
            dl = -torch.exp(-u)
        else:
            dl = -torch.ones_like(u)
        cov = (s * g * h).sum(2) - u * (s * h).sum(2)
        f = (dl * cov).mean(1)  # (R,)
        opt.zero_grad()
        (-f.sum()).backward()
        opt.step()
    return W.detach().numpy()




# -- the structural certificate ------------------------------------------------------------------
def pair_products(gamma: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(γ_it − γ_iτ)(h_it − h_iτ) for every example and token pair t < τ, shape (n, T(T−1)/2)."""
    iu, ju = np.triu_indices(gamma.shape[1], 1)
    return (gamma[:, iu] - gamma[:, ju]) * (h[:, iu] - h[:, ju])


def sign_fixed(gamma: np.ndarray, h: np.ndarray) -> tuple[bool, dict]:
    """Is the sign of ⟨∇L(W), M⟩ (h_i = X_i M z_i) negative for EVERY W, by construction?

    ⟨∇L(W), M⟩ = (1/n) Σ_i ℓ'_i · ½ Σ_{t,τ} s_it s_iτ (γ_it − γ_iτ)(h_it − h_iτ) (THEORY.md §2). The softmax
    has full support (s_it > 0 for every finite W) and ℓ' < 0 (Assumption A), so if every pair product is
    ≥ 0 and one is > 0 the inner product is < 0 at every W — a finite, exact check (h from the exact
    rational KKT solution, products of float64 values whose zeros are exact ties). Under B.1 (h_it equal
    for t ≠ opt) or B.2 (γ_it equal for t ≠ opt) the non-optimal pairs vanish and the optimal pairs are
    (γ_opt − γ_t)(h_opt − h_t) > 0: the paper's argument, certified per instance."""
    p = pair_products(gamma, h)
    ok = bool(p.min() >= 0.0 and p.max() > 0.0)
    return ok, {"sign_fixed_by_construction": int(ok), "min_pair_product": float(p.min()),
                "negative_pairs": int((p < 0).sum())}


def pair_ws(data: AttentionData, gamma: np.ndarray, h: np.ndarray, norms=NORMS) -> np.ndarray:
    """Adversarial W (R, d, d) for every pair with (γ_t − γ_τ)(h_t − h_τ) < 0 in example i: the least-squares
    W whose logits are 1 on t and τ in example i and 0 on its other tokens, and 1 on one token (opt) and 0
    elsewhere in every other example; scaled to each norm in ``norms``. At large norm the attention of
    example i sits on {t, τ} and every other example's covariance term vanishes like e^{-‖W‖}, so the sign
    is that of the negative pair product times ℓ' < 0: positive. Empty when no pair product is negative."""
    from numerics.tokens import optimal_tokens

    p = pair_products(gamma, h)
    iu, ju = np.triu_indices(data.T, 1)
    opt = optimal_tokens(data).index
    A = (data.X[:, :, :, None] * data.Z[:, None, None, :]).reshape(data.n * data.T, -1)  # (nT, d²)
    out = []
    for i, q in zip(*np.nonzero(p < 0), strict=True):
        target = np.zeros((data.n, data.T))
        target[np.arange(data.n), opt] = 1.0
        target[i] = 0.0
        target[i, iu[q]] = target[i, ju[q]] = 1.0
        w, *_ = np.linalg.lstsq(A, target.reshape(-1), rcond=None)
        W = w.reshape(data.d, data.d)
        nw = np.linalg.norm(W)
        if nw > 0:
            out += [r * W / nw for r in norms]
    return np.asarray(out).reshape(-1, data.d, data.d)


def search_positive(
    data: AttentionData,
    M: np.ndarray,
    loss: str,
    rng: np.random.Generator,
    *,
    per_norm: int,
    ascent_steps: int,
    h: np.ndarray | None = None,
    extra: np.ndarray | None = None,
    starts: int = 6,
) -> tuple[np.ndarray, dict]:
    """Look for W with ⟨∇L(W), M⟩ > 0: Gaussian / near-±M / token-pushing samples at every norm, the
    ``extra`` candidates (e.g. ``pair_ws``), then a short ascent from the ``starts`` closest calls of
    moderate norm; every candidate judged by the exact log-space sign. Returns (classes, metrics):
    classes +1 positive, −1 negative, 0 undecided (see ``classify``)."""
    Ws = sample_ws(data, M, rng, per_norm)
    if extra is not None and len(extra):
        Ws = np.concatenate([Ws, extra])
    P, N, _ = signed_inner(data, Ws, M, loss, h=h)
    gap0 = np.where(np.isfinite(P) | np.isfinite(N), P - N, 0.0)  # small = closest to a positive value
    cand = np.flatnonzero(np.linalg.norm(Ws, axis=(1, 2)) <= 1e2)  # autograd ascent in float: ‖W‖ ≤ 1e2
    W2 = ascend(data, M, loss, Ws[cand[np.argsort(gap0[cand])[:starts]]], ascent_steps)
    P2, N2, _ = signed_inner(data, W2, M, loss, h=h)
    allP, allN = np.concatenate([P, P2]), np.concatenate([N, N2])
    c = classify(allP, allN)
    gap = np.where(np.isfinite(allP) | np.isfinite(allN), allP - allN, 0.0)
    return c, {"samples": int(c.size), "positive": int((c > 0).sum()), "undecided": int((c == 0).sum()),
               "min_log_gap": float(gap.min())}


# -- GD's norm divergence, judged by its trend -----------------------------------------------------
#: Normalised GD moves ‖W‖ by at most lr per step; once the direction settles it moves by ≈ lr (the step
#: is aligned with W). Over the last half of the run the norm must grow by at least this share of the
#: largest possible growth lr·(steps/2): a run whose norm levels off (converging to a finite point)
#: grows by a vanishing share. 0.5 is far below the ≈ 0.9–1.0 measured on B.1/B.2 and over-parameterised
#: instances at 400 steps and far above the 0 of an optimiser that does not move.
DIVERGE_SHARE = 0.5
#: Not levelling off: the last quarter's growth is at least this share of the third quarter's (a norm
#: converging to a limit has geometrically shrinking increments).
DECEL_SHARE = 0.5
#: The loss 'rose' only beyond float64 rounding of an O(1) mean of n terms (a saturated linear loss is
#: flat to the last bit at the end of a run).
LOSS_RTOL = 1e-12

#: The decision rules of :func:`judge_divergence`, for the theorems' ``criteria`` (report).
DIVERGENCE_CRITERIA = (
    Criterion(
        "growth of ‖W(k)‖_F over the last half of normalised GD, as a share of the most it can move "
        "(lr·steps/2)",
        ">=",
        DIVERGE_SHARE,
        plot_metric="norm_growth_share",
    ),
    Criterion(
        "growth of ‖W(k)‖_F over the last quarter / over the third quarter (not levelling off)",
        ">=",
        DECEL_SHARE,
    ),
    Criterion("refuted: ‖W(k)‖_F grew over the last half by", "<=", 0.0),
    Criterion(
        "refuted: L(W(S)) ≥ L(W(0)), or L rose over the last half by more than (relative)", ">", LOSS_RTOL
    ),
    Criterion(
        "inconclusive (budget): growing, loss falling, but a share above is missed", "→", "inconclusive"
    ),
)


def judge_divergence(norms: np.ndarray, losses: np.ndarray, lr: float, steps: int):
    """The Outcome of 'GD's ‖W(k)‖ → ∞ while L(W(k)) decreases', from ``norms`` and ``losses`` recorded at
    equally spaced iterations 0..steps. failed: the norm did not grow over the last half (an optimiser that
    does not move), or the loss ends above its start or rose over the last half (not a descent method;
    compared with the start because a saturated loss is flat to the last bit at the end); held: the norm grew
    by at least DIVERGE_SHARE of the most normalised GD can move AND did not decelerate (last quarter ≥
    DECEL_SHARE × third quarter); undecided otherwise (growing but slowing: budget)."""
    norms, losses = np.asarray(norms, float), np.asarray(losses, float)
    k = len(norms) - 1
    mid, q3 = k // 2, (3 * k) // 4
    grow = float(norms[-1] - norms[mid])
    g3, g4 = float(norms[q3] - norms[mid]), float(norms[-1] - norms[q3])
    share = grow / (lr * (steps - steps * mid / k))
    m = {
        "norm_growth_share": share,
        "final_norm": float(norms[-1]),
        "loss_drop_last_half": float(losses[mid] - losses[-1]),
    }
    if not grow > 0:
        return failed(
            f"‖W(k)‖ did not grow over the last half ({norms[mid]:.4g} → {norms[-1]:.4g}): no progress", **m
        )
    if not losses[-1] < losses[0]:
        return failed(f"the loss did not decrease from the start ({losses[0]:.4g} → {losses[-1]:.4g})", **m)
    if losses[-1] > losses[mid] + LOSS_RTOL * abs(losses[mid]):
        return failed(f"the loss rose over the last half ({losses[mid]:.4g} → {losses[-1]:.4g})", **m)
    if share >= DIVERGE_SHARE and g4 >= DECEL_SHARE * g3:
        return held(**m)
    return undecided(
        f"‖W‖ grows but slowly or decelerating (share {share:.2f}, quarters {g3:.3g}, {g4:.3g})", **m
    )
