r"""no-stationary-points — under B.1 or B.2 the max-margin direction is a descent direction everywhere.

Statement (TLTO, arXiv 2308.16898, §4 "global convergence of gradient descent", reconstructed; THEORY.md §4):
under Assumption A on the loss, feasibility of Att-SVM for the optimal tokens, and

* B.1 — every non-optimal token of every example is a support token of W^mm, or
* B.2 — in every example all non-optimal tokens have the same score γ_it,

.. math:: \langle \nabla L(W), W^{mm} \rangle < 0 \quad \text{for every } W \in \mathbb{R}^{d\times d},

so L has no stationary point and GD's ‖W(k)‖ → ∞. (The paper's exact hypotheses may differ; this module
implements exactly the sufficient hypotheses above — "reconstructed".)

Hypotheses implemented (each an ``assume_*``): Assumption A — the instance's loss is one of the catalogue
losses logistic/exponential/linear (proved to satisfy A symbolically by the ``loss-assumptions`` check) and
ℓ' < 0 on the instance's score range; a unique optimal token in every example; Att-SVM(opt) feasible, with a
verified KKT certificate; and B.1 or B.2 *verified on the instance* — B.1 from the SVM's support tokens
(every t ≠ opt_i active within ACTIVE_TOL), B.2 from the scores (non-optimal scores equal within B2_TOL).

Measurement. By THEORY.md §2's covariance identity, with h_i = X_i W^mm z_i,

    ⟨∇L(W), W^mm⟩ = (1/n) Σ_i ℓ'(γ_i^T s_i) · Cov_{s_i}(γ_i, h_i),
    Cov_s(a, b) = ½ Σ_{t,τ} s_t s_τ (a_t − a_τ)(b_t − b_τ).

The pairwise form has no mean subtraction, and we evaluate it in log space (log s_t from a stable
log-softmax, log|ℓ'| in closed form), splitting positive and negative terms into two log-sum-exps. So the
sign is decided exactly even at ‖W‖ = 1e4 where every naive float gradient underflows to 0: the value is
e^P − e^N with P, N the two log-sums. Only when P and N agree to within LOG_PREC (a genuine cancellation
below float precision) or both are −∞ (every term vanishes exactly) is a sample ``undecided`` — never a
counterexample. W samples per instance: Gaussian W at norms 1e-3 … 1e4, W near ±W^mm directions, and
rank-one W pushing attention onto chosen tokens, plus a short gradient ascent of the inner product.

Given data (``--data``): every instance checks the given (X, Y, Z, v) — Assumption A, unique optimum,
feasibility and B.1/B.2 are verified on the data (real data rarely satisfy B.1/B.2: then the instances
are honestly vacuous, naming the hypothesis) — with the loss and the sampled W drawn from the instance
seed. The control runs its search on the given data too (they need not satisfy B.1/B.2).

Negative control (``no-stationary-points-control``): the same claim on generic unit-sphere data, without
B.1/B.2; hypotheses only A, unique optimum and feasibility. A search (random W, then gradient ascent on
the inner product) looks for a W with ⟨∇L(W), W^mm⟩ > 0 — verified in the exact log-space form — which
refutes it: attention concentrated on two non-optimal tokens t, τ with (γ_t − γ_τ)(h_t − h_τ) < 0 (the
SVM separates them in the "wrong" order) gives a positive inner product.
"""

from __future__ import annotations

import numpy as np

from checks import Profile, Theorem, decide, failed, held, register, undecided
from checks.strategies import b1_data, b2_data
from numerics.data import AttentionData, random_unit_sphere
from numerics.svm import solve_att_svm
from numerics.tokens import optimal_tokens, scores

from ._given import given_metrics, need_head

#: Two log-sums (positive and negative parts of the inner product) closer than this in log space
#: (relative difference 1e-9 of the two parts) are a cancellation below what float64 terms of
#: relative accuracy ~1e-15 summed over ≤ 10^3 pairs can resolve: undecided, never a sign.
LOG_PREC = 1e-9

#: B.2 holds if the non-optimal scores of an example agree to this (scores are O(1) and built
#: exactly equal by ``b2_data``; 1e-12 allows float rounding of Y_i * c only).
B2_TOL = 1e-12

#: Norms of the sampled W: from nearly uniform attention to softmax saturated far beyond float range.
NORMS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 1e2, 1e3, 1e4)

#: Losses satisfying Assumption A (THEORY.md §1; proved by the loss-assumptions check); each instance
#: draws one. log|ℓ'| is written out in closed form in ``log_abs_dloss``.
LOSSES = ("logistic", "exponential", "linear")

#: Gradient-ascent starts per instance (the samples closest to a positive inner product).
ASCENT_STARTS = 6

PROFILES = {
    "quick": Profile(instances=8, min_confirmed=6, params={"per_norm": 6, "ascent_steps": 40}),
    "full": Profile(instances=60, min_confirmed=50, params={"per_norm": 12, "ascent_steps": 120}),
    "paper": Profile(instances=200, min_confirmed=180, params={"per_norm": 25, "ascent_steps": 200}),
}


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


# -- the theorem -------------------------------------------------------------------------------
class _LandscapeBase(Theorem):
    """Shared hypotheses and the sign prediction; subclasses give the instance family."""

    profiles = PROFILES
    plot_metric = "min_log_gap"  # min over samples of log(−part) − log(+part): > 0 ⟺ all negative
    accepts_data = True

    def not_applicable(self, data):
        return need_head(data)

    def _loss(self, rng) -> str:
        return str(rng.choice(LOSSES))

    def _given(self, rng, ctx):
        """The instance on given data: the data themselves, a loss drawn from the instance seed."""
        return {"data": ctx.data, "kind": "given", "loss": self._loss(rng)}

    def assume_assumption_a(self, inst, state, ctx):
        g = scores(inst["data"])
        ok = inst["loss"] in LOSSES and dloss_negative_on(inst["loss"], float(g.min()), float(g.max()))
        return decide(ok, f"loss {inst['loss']} is not a catalogue loss with ℓ' < 0 on the score range")

    def assume_unique_optimum(self, inst, state, ctx):
        ot = optimal_tokens(inst["data"])
        return decide(ot.unique, "an example has tied optimal tokens", min_opt_gap=float(ot.gap.min()))

    def assume_feasible(self, inst, state, ctx):
        sol = solve_att_svm(inst["data"], norm="fro")
        inst["sol"] = sol
        if not sol.feasible:
            return failed("Att-SVM(opt) infeasible (verified Farkas certificate)")
        return held(wmm_norm=float(sol.objective))

    def _judge(self, inst, ctx, starts_from_ascent: bool):
        data, sol, loss = inst["data"], inst["sol"], inst["loss"]
        Wmm = sol.W
        per = int(ctx.params.get("per_norm", 6))
        steps = int(ctx.params.get("ascent_steps", 60))
        h = exact_margin_profile(data, sol)
        if h is None:
            return None, {}, None
        Ws = sample_ws(data, Wmm, ctx.rng, per)
        P, N, naive = signed_inner(data, Ws, Wmm, loss, h=h)
        cls = classify(P, N)
        # ascent from the 8 highest-valued samples of moderate norm (autograd is float, keep ‖W‖ ≤ 1e2)
        norms = np.linalg.norm(Ws, axis=(1, 2))
        gap0 = np.where(np.isfinite(P) | np.isfinite(N), P - N, 0.0)  # small = closest to a positive value
        cand = np.flatnonzero(norms <= 1e2)
        top = cand[np.argsort(gap0[cand])[:ASCENT_STARTS]]
        W2 = ascend(data, Wmm, loss, Ws[top], steps)
        P2, N2, naive2 = signed_inner(data, W2, Wmm, loss, h=h)
        cls2 = classify(P2, N2)
        allP, allN = np.concatenate([P, P2]), np.concatenate([N, N2])
        allc = np.concatenate([cls, cls2])
        naive_all = np.concatenate([naive, naive2])
        # sign margin: log-gap P − N (> 0 means negative inner product); the smallest is the closest call
        gap = np.where(np.isfinite(allP) | np.isfinite(allN), allP - allN, 0.0)
        metrics = dict(given_metrics(ctx), samples=int(allc.size), positive=int((allc > 0).sum()),
                       undecided=int((allc == 0).sum()),
                       naive_zero=int((naive_all == 0).sum()),
                       min_log_gap=float(np.min(gap)),
                       max_norm=float(np.linalg.norm(np.concatenate([Ws, W2]), axis=(1, 2)).max()))
        return allc, metrics, np.concatenate([Ws, W2])

    def check_descent_everywhere(self, inst, state, ctx):
        allc, metrics, _ = self._judge(inst, ctx, True)
        if allc is None:
            return undecided("exact (rational) KKT proof of W^mm failed: its margins are not known exactly")
        if (allc > 0).any():
            return failed("found W with <grad L(W), W^mm> > 0 (exact log-space sign)", **metrics)
        if (allc == 0).any():
            return undecided("some sampled inner products cancel below float precision", **metrics)
        return held(**metrics)


@register
class NoStationaryPoints(_LandscapeBase):
    id = "no-stationary-points"
    depends_on = ("svm-fro", "optimal-token")
    title = "Under B.1 or B.2, W^mm is a descent direction at every W (no stationary points)"
    reference = "TLTO (arXiv 2308.16898) §4, global convergence under B.1/B.2 — reconstructed"
    statement = (r"\text{A, Att-SVM(opt) feasible, (B.1 or B.2)} \Rightarrow "
                 r"\langle \nabla L(W), W^{mm}\rangle < 0\ \ \forall W")
    hypotheses_text = ("Assumption A (drawn loss logistic/exponential/linear, proved by loss-assumptions; ℓ'<0 on the score range); unique optimal "
                       "tokens; Att-SVM(opt) feasible with verified KKT certificate; B.1 (every non-optimal token "
                       "a support token of W^mm, from the certified solution) or B.2 (non-optimal scores of each "
                       "example equal within 1e-12), verified on the instance")

    def instance(self, rng, ctx):
        if ctx.data is not None:
            return self._given(rng, ctx)
        kind = "B1" if rng.random() < 0.5 else "B2"
        if kind == "B1":
            n, T = int(rng.integers(1, 4)), int(rng.integers(2, 5))
            data = b1_data(n, T, n * T + int(rng.integers(0, 3)), rng=rng)
        else:
            n, T = int(rng.integers(1, 6)), int(rng.integers(2, 7))
            data = b2_data(n, T, int(rng.integers(2, 9)), rng=rng, self_attention=bool(rng.random() < 0.3))
        return {"data": data, "kind": kind, "loss": self._loss(rng)}

    def assume_b1_or_b2(self, inst, state, ctx):
        data, sol = inst["data"], inst["sol"]
        if not sol.feasible:
            return failed("Att-SVM(opt) infeasible: B.1 undefined")
        opt = optimal_tokens(data).index
        b1 = all(set(sol.support[i].tolist()) == set(range(data.T)) - {int(opt[i])} for i in range(data.n))
        g = scores(data)
        mask = np.ones_like(g, dtype=bool)
        mask[np.arange(data.n), opt] = False
        others = g[mask].reshape(data.n, data.T - 1)
        b2 = bool(np.all(others.max(axis=1) - others.min(axis=1) <= B2_TOL))
        what = "the given data satisfy" if inst["kind"] == "given" else f"instance built for {inst['kind']} satisfies"
        return decide(b1 or b2, f"{what} neither B.1 nor B.2", b1=b1, b2=b2)


@register
class NoStationaryPointsControl(_LandscapeBase):
    id = "no-stationary-points-control"
    depends_on = ("svm-fro", "optimal-token")
    title = "Control: W^mm is a descent direction everywhere on generic data without B.1/B.2 (false)"
    reference = NoStationaryPoints.reference
    statement = r"\text{A, Att-SVM(opt) feasible} \Rightarrow \langle \nabla L(W), W^{mm}\rangle < 0\ \ \forall W"
    hypotheses_text = "Assumption A; unique optimal tokens; Att-SVM(opt) feasible — no B.1/B.2"
    expected = "FAIL"
    control_of = "no-stationary-points"

    def instance(self, rng, ctx):
        if ctx.data is not None:
            return self._given(rng, ctx)
        n, T = int(rng.integers(1, 4)), int(rng.integers(4, 7))
        d = int(rng.integers(T, T + 3))
        return {"data": random_unit_sphere(n, T, d, rng=rng), "kind": "generic", "loss": self._loss(rng)}
