"""Shared numerics of the gradient checks (gradient-closed-form, kq-chain-rule, covariance-identity):
an independent torch reference loss, autograd and 4-point finite-difference gradients with error
estimates, instance draws, and the Hypothesis search for a minimal counterexample."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from hypothesis.extra import numpy as hnp

from checks import decide, failed, held
from checks.strategies import attention_datasets
from numerics import attention as att
from numerics.data import AttentionData, random_unit_sphere
from numerics.tolerances import GRAD_RTOL

LOSSES = ("logistic", "exponential", "linear")
EPS = float(np.finfo(np.float64).eps)

#: Finite-difference step for unit-scale data (logits change by ~h): the 4-point stencil's truncation
#: error ~h^4 = 1e-12 and its rounding error ~eps |L| / h ~ 1e-13 are both far below GRAD_RTOL = 1e-6.
FD_STEP = 1e-3

#: The difference quotient decides only if its estimated error is below this share of the tolerance
#: (so that a GRAD_RTOL-sized discrepancy cannot hide in finite-difference error).
FD_ERR_SHARE = 0.1

#: ReLU head: pre-activations closer to 0 than this (relative to their scale) count as "at the kink".
KINK_MARGIN = 1e-6

#: Rounding floor of the gradient comparison, in ulps of the term scale
#: (1/n) sum_i |l'_i| ||X_i||_F ||gamma_i|| ||z_i|| (a bound on every summand's norm): when the sum cancels
#: far below its terms, float64 cannot give GRAD_RTOL relative to the (tiny) sum; 1e3 ulps ~ 2e-13.
ROUNDOFF_ULPS = 1e3



# -- shared numerics (also used by kq_chain_rule and covariance_identity) -------------------------------

def loss_np(u: np.ndarray, loss: str) -> np.ndarray:
    """l(u) for the catalogue losses (numpy)."""
    if loss == "logistic":
        return np.logaddexp(0.0, -u)
    if loss == "exponential":
        return np.exp(-u)
    return -u


def loss_prime_np(u: np.ndarray, loss: str) -> np.ndarray:
    """l'(u) for the catalogue losses (numpy)."""
    if loss == "logistic":
        return -1.0 / (1.0 + np.exp(u))
    if loss == "exponential":
        return -np.exp(-u)
    return -np.ones_like(u)


def _loss_torch(u: torch.Tensor, loss: str) -> torch.Tensor:
    if loss == "logistic":
        return torch.log1p(torch.exp(-u))  # plain formula, not numerics' softplus: an independent path
    if loss == "exponential":
        return torch.exp(-u)
    return -u


@dataclass(frozen=True)
class Case:
    """One numeric instance: data, a weight matrix W (or K, Q), a loss and a head."""

    data: AttentionData
    W: np.ndarray  # (d, d)
    loss: str
    head: str  # "linear" | "relu"
    V: np.ndarray | None = None  # (d, k) for the ReLU head
    family: str = "unit-sphere"
    K: np.ndarray | None = None  # (d, m)
    Q: np.ndarray | None = None  # (d, m)
    M: np.ndarray | None = None  # (d, d) direction (covariance identity)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t = lambda a: torch.tensor(np.array(a), dtype=torch.float64)  # noqa: E731 (copies: data are read-only)
        return t(self.data.X), t(self.data.Y), t(self.data.Z)

    def lib_head(self) -> att.Head:
        if self.head == "relu":
            return att.ReLUHead(torch.as_tensor(self.V, dtype=torch.float64))
        return att.LinearHead(torch.tensor(np.array(self.data.require_head()), dtype=torch.float64))


def reference_loss(case: Case, W: torch.Tensor) -> torch.Tensor:
    """L(W) for a batch W (B, d, d), written directly from the definitions (independent of
    numerics.attention)."""
    X, Y, Z = case.tensors()
    logits = torch.einsum("ntd,bde,ne->bnt", X, W, Z)  # (B, n, T): x_it^T W z_i
    s = torch.softmax(logits, dim=-1)
    u = torch.einsum("bnt,ntd->bnd", s, X)  # (B, n, d): X_i^T s_i
    if case.head == "relu":
        f = torch.relu(u @ torch.as_tensor(case.V, dtype=torch.float64)).sum(-1)  # (B, n)
    else:
        f = u @ torch.tensor(np.array(case.data.v), dtype=torch.float64)  # (B, n)
    return _loss_torch(Y * f, case.loss).mean(-1)  # (B,)


def preactivations(case: Case, W: np.ndarray) -> np.ndarray:
    """V^T X_i^T s_i for a batch W (B, d, d) -> (B, n, k) (ReLU head)."""
    assert case.V is not None  # a ReLU-head case carries its V (Case.V)
    X, Z = case.data.X, case.data.Z
    logits = np.einsum("ntd,bde,ne->bnt", X, W, Z)
    logits -= logits.max(-1, keepdims=True)
    s = np.exp(logits)
    s /= s.sum(-1, keepdims=True)
    return np.einsum("bnt,ntd,dk->bnk", s, X, case.V)


def autograd_grad(fun: Callable[[torch.Tensor], torch.Tensor], theta: np.ndarray) -> np.ndarray:
    """d fun / d theta by torch autograd; ``fun`` maps a batch (1, *shape) to (1,)."""
    t = torch.as_tensor(theta, dtype=torch.float64).unsqueeze(0).clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fun(t).sum(), t)
    return g[0].detach().numpy()


STENCIL = np.array([-4.0, -2.0, -1.0, 1.0, 2.0, 4.0])


def stencil_points(theta: np.ndarray, h: float) -> np.ndarray:
    """theta + o h e_j for every offset o in STENCIL and every entry j: (6 p, *theta.shape)."""
    p = theta.size
    flat = theta.reshape(-1)
    pts = flat[None, None, :] + (STENCIL[:, None, None] * h) * np.eye(p)[None, :, :]  # (6, p, p)
    return pts.reshape(6 * p, *theta.shape)


def fd_grad(fun: Callable[[torch.Tensor], torch.Tensor], theta: np.ndarray, h: float = FD_STEP
            ) -> tuple[np.ndarray, float]:
    """4-point central differences with step h, and a bound on their error (Frobenius norm).

    g_h = (8 (f(h) - f(-h)) - (f(2h) - f(-2h))) / (12 h) has error c h^4 + rounding; the same formula at
    2h has error 16 c h^4, so |g_h - g_2h| / 15 estimates the truncation error; rounding is bounded by
    3 eps max|f| / h per entry.
    """
    p = theta.size
    with torch.no_grad():
        F = fun(torch.as_tensor(stencil_points(theta, h), dtype=torch.float64)).numpy().reshape(6, p)
    fm4, fm2, fm1, fp1, fp2, fp4 = F
    g_h = (8 * (fp1 - fm1) - (fp2 - fm2)) / (12 * h)
    g_2h = (8 * (fp2 - fm2) - (fp4 - fm4)) / (24 * h)
    err = np.linalg.norm(g_h - g_2h) / 15 + np.sqrt(p) * 3 * EPS * np.abs(F).max() / h
    return g_h.reshape(theta.shape), float(err)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b||_F / max(||a||_F, ||b||_F) (0 when both vanish)."""
    den = max(np.linalg.norm(a), np.linalg.norm(b))
    return 0.0 if den == 0 else float(np.linalg.norm(a - b) / den)


def effective_scores(case: Case, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s (n, T), gamma (n, T), margins u (n,)): gamma_i = Y_i X_i grad h(X_i^T s_i)."""
    X, Y, Z = case.data.X, case.data.Y, case.data.Z
    logits = np.einsum("ntd,de,ne->nt", X, W, Z)
    logits -= logits.max(-1, keepdims=True)
    s = np.exp(logits)
    s /= s.sum(-1, keepdims=True)
    r = np.einsum("nt,ntd->nd", s, X)  # (n, d)
    if case.head == "relu":
        assert case.V is not None  # a ReLU-head case carries its V (Case.V)
        pre = r @ case.V  # (n, k)
        gh = (pre > 0).astype(float) @ case.V.T  # (n, d)
        u = Y * np.maximum(pre, 0).sum(-1)
    else:
        gh = np.broadcast_to(case.data.v, r.shape)
        u = Y * (r @ case.data.v)
    gamma = Y[:, None] * np.einsum("ntd,nd->nt", X, gh)
    return s, gamma, u


def closed_form_np(case: Case, W: np.ndarray, variant: str = "correct") -> np.ndarray:
    """(1/n) sum_i l'_i X_i^T (diag(s_i) - s_i s_i^T) gamma_i z_i^T; ``"no-outer"`` drops -s_i s_i^T."""
    s, gamma, u = effective_scores(case, W)
    c = s * gamma  # diag(s) gamma
    if variant != "no-outer":
        c = c - s * (s * gamma).sum(-1, keepdims=True)
    c = c * loss_prime_np(u, case.loss)[:, None]
    return np.einsum("ntd,nt,ne->de", case.data.X, c, case.data.Z) / case.data.n


def term_scale(case: Case, W: np.ndarray) -> float:
    """(1/n) sum_i |l'_i| ||X_i||_F ||gamma_i|| ||z_i||: bounds every summand of the gradient."""
    s, gamma, u = effective_scores(case, W)
    X, Z = case.data.X, case.data.Z
    return float(np.mean(np.abs(loss_prime_np(u, case.loss)) * np.linalg.norm(X, axis=(1, 2))
                         * np.linalg.norm(gamma, axis=1) * np.linalg.norm(Z, axis=1)))


def lib_grad_W(case: Case, W: np.ndarray) -> np.ndarray:
    """numerics.attention.grad_W (the production closed form) for one instance."""
    X, Y, Z = case.tensors()
    Wt = torch.as_tensor(W, dtype=torch.float64).unsqueeze(0)
    return att.grad_W(X.unsqueeze(0), Y.unsqueeze(0), Z.unsqueeze(0), Wt, case.lib_head(), case.loss)[
        0
    ].numpy()


def decide_agreement(name: str, err: float, tol: float, **metrics: Any):
    return decide(err <= tol, f"{name}: relative error {err:.3e} > {tol:.1e}", **metrics)


# -- instance drawing -------------------------------------------------------------------------------

def draw_data(
    rng: np.random.Generator, ctx, *, min_d: int = 1, self_attention: bool | None = None
) -> AttentionData:
    """The given data (--data) or unit-sphere data with random sizes, cross- or self-attention."""
    if ctx.data is not None:
        return ctx.data
    n = int(rng.integers(1, 6))
    T = int(rng.integers(2, 7))
    d = int(rng.integers(min_d, 7))
    sa = bool(rng.integers(0, 2)) if self_attention is None else self_attention
    return random_unit_sphere(n, T, d, rng=rng, self_attention=sa)


def draw_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """c G / sqrt(rows) with G standard normal and c log-uniform in [0.1, 5] (moderate to saturating)."""
    return 10 ** rng.uniform(-1, np.log10(5)) * rng.standard_normal((rows, cols)) / np.sqrt(rows)


def draw_head(rng: np.random.Generator, data: AttentionData, relu: bool, W: np.ndarray
              ) -> tuple[str, np.ndarray | None]:
    """Linear head, or a ReLU head with Gaussian V (d, k), k in 1..4, each hidden unit oriented so that it is
    active on at least one example at W (an all-inactive head makes f = 0 near W: a trivial instance)."""
    if not relu:
        return "linear", None
    k = int(rng.integers(1, 5))
    V = rng.standard_normal((data.d, k))
    pre = preactivations(Case(data, W, "linear", "relu", V), W[None])[0]  # (n, k)
    flip = np.where(
        pre.max(0) > 0, 1.0, -1.0
    )  # a unit inactive everywhere is active everywhere after flipping
    return "relu", V * flip


def relu_pattern_ok(case: Case, W_points: np.ndarray) -> tuple[bool, float]:
    """Is the ReLU activation pattern constant over ``W_points`` (B, d, d), none near the kink?"""
    if case.head != "relu":
        return True, float("inf")
    pre = preactivations(case, W_points)  # (B, n, k)
    scale = max(float(np.abs(pre).max()), 1e-300)
    same = bool(np.all((pre > 0) == (pre[:1] > 0)))
    closest = float(np.abs(pre).min() / scale)
    return same and closest > KINK_MARGIN, closest


# -- Hypothesis search -------------------------------------------------------------------------------

@st.composite
def gradient_cases(draw, *, min_d: int = 1, with_kq: bool = False):
    """Hypothesis strategy: (data, W or (K, Q), loss), small sizes, bounded entries."""
    data = draw(attention_datasets(max_n=3, max_T=4, min_d=min_d, max_d=4))
    elems = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False, width=64)
    loss = draw(st.sampled_from(LOSSES))
    if with_kq:
        m = draw(st.integers(1, data.d + 1))
        K = draw(hnp.arrays(np.float64, (data.d, m), elements=elems))
        Q = draw(hnp.arrays(np.float64, (data.d, m), elements=elems))
        return Case(data, K @ Q.T, loss, "linear", family="hypothesis", K=K, Q=Q)
    W = draw(hnp.arrays(np.float64, (data.d, data.d), elements=elems))
    return Case(data, W, loss, "linear", family="hypothesis")


#: Calls of the property allowed for shrinking after the first counterexample (shrinking is otherwise
#: unbounded and can take seconds); the result is always a verified counterexample, just not necessarily the
#: minimum. Each call costs ~2 property-free draws of Hypothesis's strategy, most of a control's time.
#: Measured on the full profile (15 searches each): 100 calls gave kq-chain-rule-control counterexamples of
#: 12 cells on average (n·T·d, smallest 4) in 7.2 s, 50 calls 19 cells (smallest 6) in 3.8 s, 25 calls 20
#: cells in 2.1 s; gradient-closed-form-control's smallest (2 cells) is found by all three.
SHRINK_BUDGET = 50


class _ShrinkBudgetSpent(BaseException):
    """Raised by the search's property once SHRINK_BUDGET is spent, to end Hypothesis's shrinker there
    (a BaseException, so Hypothesis does not take it for a failing example). Before, the property answered
    False from then on and the shrinker went on drawing cases it could no longer accept (~10^4 draws, most
    of a control's time); the answer is the same: the shrinker only tries cases smaller than its current
    target and keeps every accepted one, so its final answer is the last case the property accepted."""


def _case_key(case: Case) -> bytes:
    parts = [case.data.X, case.data.Y, case.data.Z, case.W]
    parts += [a for a in (case.data.v, case.K, case.Q) if a is not None]
    return (
        b"|".join(np.ascontiguousarray(a).tobytes() + str(a.shape).encode() for a in parts)
        + case.loss.encode()
    )


@contextlib.contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (>= 6.131) sometimes draws a number from the literals of the *local* modules that happen
    to be imported in the process, and caches that pool per process. A search would then depend on what else
    the process ran before (measured: kq-chain-rule and gradient-closed-form instances 3 and 7 gave other
    counterexamples in a full quick run than alone). Within a search the local pool is empty and the cache
    private, so the search depends on its seed alone; Hypothesis's own global constants still apply. A
    Hypothesis without these internals needs nothing done."""
    try:
        from hypothesis.internal.conjecture import providers as pv

        empty = type(pv._local_constants)(integers=type(pv._local_constants.integers)(),
                                          floats=type(pv._local_constants.floats)(key=pv.float_to_int),  # type: ignore[call-arg]  # a SortedSet at run time (typed as an AbstractSet)
                                          bytes=type(pv._local_constants.bytes)(),
                                          strings=type(pv._local_constants.strings)())
        saved = (pv._get_local_constants, pv.CONSTANTS_CACHE)
        private = type(saved[1])(saved[1].max_size)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another Hypothesis
        yield
        return
    pv._get_local_constants, pv.CONSTANTS_CACHE = (lambda: empty), private
    try:
        yield
    finally:
        pv._get_local_constants, pv.CONSTANTS_CACHE = saved


def hypothesis_search(strategy, discrepancy: Callable[[Case], tuple[float, float]], seed: int,
                      max_examples: int) -> tuple[Case | None, dict[str, Any]]:
    """Search ``strategy`` for a case with discrepancy err > tol (``discrepancy`` returns (err, tol)).

    Deterministic (random.Random(seed), no example database, no constants taken from whatever modules the
    process has imported: :func:`_no_local_constants`). Returns (minimal counterexample or None,
    metrics: examples tried, worst err/tol ratio seen).
    """
    seen = {"examples": 0, "worst_ratio": 0.0, "found": 0}
    memo: dict[bytes, bool] = {}
    accepted: list[Case] = []  # the last case the property accepted (the shrinker's current target)

    def bad(case: Case) -> bool:
        key = _case_key(case)
        if key in memo:  # replays (Hypothesis re-runs the final example) see the same answer
            if memo[key]:
                accepted[:] = [case]
            return memo[key]
        if seen["found"] and len(memo) >= seen["found"] + SHRINK_BUDGET:
            raise _ShrinkBudgetSpent  # keep the smallest counterexample found so far
        err, tol = discrepancy(case)
        seen["examples"] += 1
        ratio = err / tol if tol > 0 else (0.0 if err == 0 else float("inf"))
        seen["worst_ratio"] = max(seen["worst_ratio"], ratio)
        memo[key] = err > tol
        if memo[key]:
            accepted[:] = [case]
            if not seen["found"]:
                seen["found"] = len(memo)
        return memo[key]

    cfg = settings(max_examples=max_examples, database=None, deadline=None, derandomize=False,
                   suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])
    try:
        with _no_local_constants():
            found = find(strategy, bad, settings=cfg, random=random.Random(seed))
    except _ShrinkBudgetSpent:
        found = accepted[0]
    except NoSuchExample:
        return None, {"search_examples": seen["examples"], "search_worst_err_over_tol": seen["worst_ratio"]}
    d = found.data
    return found, {"search_examples": seen["examples"], "counterexample_n": d.n, "counterexample_T": d.T,
                   "counterexample_d": d.d, "counterexample_size": d.n * d.T * d.d}


def gradient_discrepancy(variant: str) -> Callable[[Case], tuple[float, float]]:
    """(||G_closed - G_autograd||, tolerance) with G_closed the library form (correct) or the numpy
    variant."""

    def fn(case: Case) -> tuple[float, float]:
        W = case.W
        G_ad = autograd_grad(lambda t: reference_loss(case, t), W)
        G_cf = lib_grad_W(case, W) if variant == "correct" else closed_form_np(case, W, variant)
        tol = GRAD_RTOL * max(np.linalg.norm(G_ad), np.linalg.norm(G_cf)) + ROUNDOFF_ULPS * EPS * term_scale(
            case, W
        )
        return float(np.linalg.norm(G_cf - G_ad)), float(tol)

    return fn


def judge_symbolic(r: Any, gen: Any, metrics: dict[str, Any], where: str, entry: str | None = None):
    """An identity checked by sympy at one small size (``r``) and proved for all sizes (``gen``,
    theory.general): held when both go through; failed when the all-size proof does not, or when the identity
    fails at the small size (``where`` names the size; with ``entry`` not None the counter-value's entry is
    named, followed by ``entry``). Records ``proved_all_sizes`` (and ``symbolic_residual``) in ``metrics``."""
    metrics["proved_all_sizes"] = gen.holds
    if r.holds and not gen.holds:
        return failed("the all-size proof (theory.general) did not go through: "
                      + "; ".join(s.what for s in gen.steps if not s.holds), **metrics)
    if r.holds:
        return held(**metrics)
    cv = r.counter_value
    at = "" if entry is None else f" at entry {cv.entry}{entry}"
    return failed(f"sympy: identity fails at {where}; counter-value residual {cv.residual_value:.3e}{at}",
                  symbolic_residual=cv.residual_value, **metrics)
