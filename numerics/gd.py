"""Batched gradient descent on attention weights, and the regularisation path (THEORY.md §2, §4, §5).

All instances of one shape run as one tensor program (no Python loop over instances), on CPU or CUDA,
float64 by default. Normalised GD as the authors ran it: each parameter moves by lr * grad / ||grad||_F,
per instance (for (K, Q): K and Q separately).

W-parametrised GD runs in *logit space*: with token weights c_i (numerics.attention.token_weights)
the step G = sum_j X_j^T c_j z_j^T changes the logits by (M c)_i (TokenGram) and has
||G||_F^2 = c^T M c, so each step is one softmax, a few elementwise ops and one batched product;
W = W(0) - sum_j X_j^T A_j z_j^T is rebuilt from the accumulated weights A only when recorded.
(K, Q)-GD uses the closed-form gradient through P = Z Q without forming W or G (five small batched
products and two per-example ones per step); the projected regularisation path the explicit one.
With a linear head every step runs on preallocated buffers with in-place / ``out=`` kernels and no
host synchronisation (per-op overhead, not arithmetic, dominates at the paper's sizes).

On CPU the common case (normalised GD, linear head, no weight decay, float64) of a large enough run
goes to the compiled kernels of :mod:`numerics.kernels` instead (``backend="auto"``): all steps of all
instances in one compiled call, SIMD across instances, 4-7x faster than the tensor program above at
the paper's sizes. ``backend="torch"`` forces the tensor program (the only path on CUDA, and for other
heads, plain GD and weight decay); both paths give the same iterates up to rounding (tested).

Examples
--------
>>> import numpy as np
>>> from numerics.data import random_unit_sphere
>>> datas = random_unit_sphere(4, 5, 6, rng=np.random.default_rng(0), R=3)
>>> res = run_gd(datas, steps=50, lr=0.1)
>>> res.W.shape, res.loss.shape
((3, 6, 6), (3,))
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import attention as att
from . import kernels
from .data import AttentionData
from .errors import InvalidInputError

PARAMS = ("W", "KQ")

#: A radius constraint counts as active when the final norm is within this relative distance of
#: the radius: every projected step that leaves the ball lands exactly on it (up to rounding).
ACTIVE_RTOL = 1e-8

#: Floor of the computed ||G||_F^2 = c^T M c, relative to its rounding-error bound
#: eps * max|M| * ||c||_1^2 (with max |c| = 1, ||c||_1 <= nT): below it the gradient is zero at working precision, and the floor keeps
#: the normalised step bounded by lr instead of dividing rounding noise by rounding noise.
NORM_FLOOR_FACTOR = 64.0


@dataclass(frozen=True)
class GDResult:
    """Final and (optionally) recorded iterates of a batched GD run; numpy, float64.

    W (R, d, d) final attention weights (K Q^T for "KQ"); K, Q (R, d, m) or None; norms (R,) ||W||_F;
    loss (R,) final loss; iterations (S,), W_traj (S, R, d, d), loss_traj (S, R) when recorded;
    backend the code path that ran ("torch" or "numba", see :func:`run_gd`).
    """

    W: np.ndarray
    K: np.ndarray | None
    Q: np.ndarray | None
    norms: np.ndarray
    loss: np.ndarray
    iterations: np.ndarray | None = None
    W_traj: np.ndarray | None = None
    loss_traj: np.ndarray | None = None
    param: str = "W"
    normalized: bool = True
    lr: float = 0.1
    steps: int = 0
    backend: str = "torch"  # the code path that ran: "torch" or "numba"


@dataclass(frozen=True)
class RegPathResult:
    """Regularisation path: for each radius R_j the best constrained minimiser found.

    radii (J,); W (J, R, d, d); loss (J, R); constraint_active (J, R) bool; norms (J, R) the constrained
    quantity (||W||_F, or (||K||_F^2 + ||Q||_F^2)/2 for "KQ"); K, Q (J, R, d, m) or None.
    """

    radii: np.ndarray
    W: np.ndarray
    loss: np.ndarray
    constraint_active: np.ndarray
    norms: np.ndarray
    K: np.ndarray | None = None
    Q: np.ndarray | None = None
    param: str = "W"


# -- argument handling --------------------------------------------------------------------------

def _check_common(param: str, loss: str, steps: Any, lr: Any) -> tuple[int, float]:
    if param not in PARAMS:
        raise InvalidInputError(f"unknown param {param!r}; expected 'W' or 'KQ'")
    att.check_loss(loss)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InvalidInputError(f"steps must be an integer >= 0, got {steps!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.floating, np.integer)) or not math.isfinite(lr) or lr <= 0:
        raise InvalidInputError(f"lr must be a finite number > 0, got {lr!r}")
    return int(steps), float(lr)


def _prepare(data, head, device, dtype) -> tuple[att.AttentionBatch, att.Head]:
    if device is None:
        device = "cpu"
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r} requested but CUDA is not available; use device='cpu'")
    batch = att.batch_from_data(data, device=device, dtype=dtype, require_head=head is None)
    if head is None:
        h: att.Head = batch.linear_head()
    elif isinstance(head, att.Head):
        h = head.to(device=device, dtype=dtype)
    else:
        raise InvalidInputError(f"head must be None (linear head from data.v) or an attention.Head, got {type(head).__name__}")
    return batch, h


def _normal(shape: tuple[int, ...], R: int, seed: Any) -> torch.Tensor:
    """Standard normal draws (R, *shape) on CPU float64 from explicit generators (device independent).

    ``seed`` int: one generator for the whole batch; sequence of R ints: one generator per instance.
    """
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        return torch.randn((R, *shape), generator=gen, dtype=torch.float64)
    seeds = list(seed) if isinstance(seed, (Sequence, np.ndarray)) else None
    if seeds is None or len(seeds) != R or not all(isinstance(s, (int, np.integer)) for s in seeds):
        raise InvalidInputError(f"seed must be an int or a sequence of {R} ints (one per instance), got {seed!r}")
    out = [torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(int(s)), dtype=torch.float64)
           for s in seeds]
    return torch.stack(out)


def _init_tensor(a: Any, name: str, shape: tuple[int, ...], R: int, device, dtype) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(a.detach().cpu() if isinstance(a, torch.Tensor) else a, dtype=np.float64))
    if tuple(t.shape) == shape:
        t = t.expand(R, *shape)
    if tuple(t.shape) != (R, *shape):
        raise InvalidInputError(f"init {name} must have shape {(R, *shape)} or {shape}, got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise InvalidInputError(f"init {name} contains NaN or Inf")
    return t.to(device=device, dtype=dtype).clone()


def _softmax_rows(lg: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis, max-subtracted (stable at any scale); new tensor."""
    e = (lg - lg.amax(-1, keepdim=True)).exp_()
    return e.div_(e.sum(-1, keepdim=True))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def _progress(steps: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=steps, desc="gd", unit="step")


# -- GD ------------------------------------------------------------------------------------------

def run_gd(
    data: AttentionData | Sequence[AttentionData],
    *,
    param: str = "W",
    steps: int,
    lr: float,
    normalized: bool = True,
    loss: str = "logistic",
    m: int | None = None,
    seed: int | Sequence[int] = 0,
    init: Any = None,
    device: Any = "cpu",
    record_every: int | None = None,
    head: att.Head | None = None,
    init_scale: float = 0.01,
    dtype: torch.dtype = torch.float64,
    progress: bool = False,
    weight_decay: float = 0.0,
    backend: str = "auto",
) -> GDResult:
    """Batched (normalised) GD on L(W) or L(K Q^T) for every instance of ``data`` at once.

    W <- W - lr grad/||grad||_F per instance (``normalized=True``), else W <- W - lr grad.
    For "KQ", K and Q (R, d, m), m = d by default, step separately with their own gradient norms.
    Initialisation: ``init`` (W (R,d,d) or (d,d); for "KQ" a pair (K, Q)), else init_scale * N(0, 1)
    entries drawn on CPU from ``seed`` (int, or one int per instance) so CPU and CUDA start equal.
    ``head=None`` uses the linear head data.v. ``record_every=k`` records iterations 0, k, 2k, ... and
    the last one.

    ``weight_decay`` (wd >= 0) minimises L + wd ||W||_F^2 ("W") or L + wd (||K||_F^2 + ||Q||_F^2) ("KQ"):
    the step direction is the true gradient of that objective (data gradient + 2 wd W, resp. + 2 wd K and
    + 2 wd Q), normalised per parameter when ``normalized``. The authors' (K, Q) experiment adds this term
    with wd = float64 eps (THEORY.md §6). With wd > 0 the data gradient is not rescaled (the max |c| = 1
    safeguard would change the ratio of the two terms; the decay term keeps the norm representable),
    and "W" runs an explicit-W loop (the decay term 2 wd W leaves the token-weight span of the fused
    logit-space step unless W(0) = 0). wd = 0 runs exactly the fused paths.

    ``backend``: "torch" (the batched tensor program, CPU or CUDA, any head), "numba" (the compiled CPU
    kernels of :mod:`numerics.kernels`: normalised, linear head, no weight decay, CPU float64; an error
    otherwise) or "auto" (numba where it applies and the run has at least :data:`KERNEL_MIN_WORK`
    instance-steps, else torch). Both give the same iterates up to rounding.
    """
    steps, lr = _check_common(param, loss, steps, lr)
    if (isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float, np.floating, np.integer))
            or not math.isfinite(weight_decay) or weight_decay < 0):
        raise InvalidInputError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
    wd = float(weight_decay)
    if record_every is not None and (isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer))
                                     or record_every < 1):
        raise InvalidInputError(f"record_every must be None or an integer >= 1, got {record_every!r}")
    if not (isinstance(init_scale, (int, float)) and math.isfinite(init_scale) and init_scale >= 0):
        raise InvalidInputError(f"init_scale must be a finite number >= 0, got {init_scale!r}")
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    batch, h = _prepare(data, head, device, dtype)
    R, n, T, d = batch.shape
    use_kernel = _use_kernel(backend, batch, h, normalized, wd, R * steps)
    if param == "KQ":
        m = _check_m(m, d)
    if use_kernel:
        try:
            kernels.kernels(n, T, d, m if param == "KQ" else d)
        except InvalidInputError as exc:  # e.g. no writable kernel cache: auto falls back, numba reports it
            if backend == "numba":
                raise
            warnings.warn(f"{exc}; GD takes the torch path", RuntimeWarning, stacklevel=2)
            use_kernel = False
    if param == "KQ":
        if init is None:
            K0 = init_scale * _normal((d, m), R, seed)
            Q0 = init_scale * _normal((d, m), R, [s + 1 for s in seed] if not isinstance(seed, (int, np.integer)) else seed + 1)
        else:
            if not (isinstance(init, (tuple, list)) and len(init) == 2):
                raise InvalidInputError("init for param='KQ' must be a pair (K, Q)")
            K0, Q0 = init
        K = _init_tensor(K0, "K", (d, m), R, batch.X.device, dtype)
        Q = _init_tensor(Q0, "Q", (d, m), R, batch.X.device, dtype)
        if use_kernel:
            return _run_kernel(batch, h, "KQ", (K, Q), steps, lr, loss, record_every, progress)
        return _run_kq(batch, h, K, Q, steps, lr, normalized, loss, record_every, progress, wd)
    W0 = init_scale * _normal((d, d), R, seed) if init is None else init
    W0 = _init_tensor(W0, "W", (d, d), R, batch.X.device, dtype)
    if use_kernel:
        return _run_kernel(batch, h, "W", W0, steps, lr, loss, record_every, progress)
    if wd > 0:
        return _run_w_explicit(batch, h, W0, steps, lr, normalized, loss, record_every, progress, wd)
    return _run_w(batch, h, W0, steps, lr, normalized, loss, record_every, progress)


BACKENDS = ("auto", "torch", "numba")

#: backend="auto" compiles (first use of a shape on a machine, a few seconds; cached on disk after) only
#: for runs of at least this many instance-steps: below it the torch path finishes sooner.
KERNEL_MIN_WORK = 100_000

#: Steps per kernel call: between calls Python handles signals (Ctrl-C) and progress.
KERNEL_CHUNK = 250

#: Instances per kernel call (a multiple of kernels.LANES): larger batches run block by block, so the
#: working set (~5 KiB per instance at the paper's sizes) stays in L2 and the cost per instance-step
#: stays flat in R instead of rising once the batch spills to memory.
KERNEL_BLOCK = 128


def _use_kernel(backend: str, batch, head, normalized: bool, wd: float, work: int) -> bool:
    """Whether this run takes the compiled kernels (``backend="numba"`` where they do not apply: error)."""
    if backend == "torch" or (backend == "auto" and work < KERNEL_MIN_WORK):
        return False  # (before kernels.available(): a small run does not even import numba)
    why = None
    if not normalized:
        why = "normalized=False"
    elif wd > 0:
        why = "weight_decay > 0"
    elif not isinstance(head, att.LinearHead):
        why = f"a {type(head).__name__} (the kernels take a linear head)"
    elif batch.X.device.type != "cpu":
        why = f"device {batch.X.device}"
    elif batch.X.dtype != torch.float64:
        why = f"dtype {batch.X.dtype}"
    elif not kernels.available():
        why = "numba is not installed (or ATTNSVM_NO_NUMBA is set)"
    if backend == "numba":
        if why is not None:
            raise InvalidInputError(f"backend='numba' does not apply to this run: {why}; use backend='torch' or 'auto'")
        return True
    return why is None


def _drive(steps_from, steps: int, rec: set[int], progress: bool, current_W, loss_of):
    """Run ``steps_from(k, stop)`` up to each record point and record (iterations, W, loss) there; the
    hot loop itself has no checks. Progress is updated every 100 steps when asked for."""
    its, Ws, Ls = [], [], []
    bar = _progress(steps, progress)
    k = 0
    for stop in [*sorted(rec), steps]:
        while k < stop:
            chunk = min(stop, k + 100) if bar is not None else stop
            steps_from(k, chunk)
            if bar is not None:
                bar.update(chunk - k)
            k = chunk
        if stop in rec and (not its or its[-1] != stop):
            Wk = current_W()
            its.append(stop)
            Ws.append(Wk)
            Ls.append(loss_of(Wk))
    if bar is not None:
        bar.close()
    return its, Ws, Ls


def _check_m(m: Any, d: int) -> int:
    """The (K, Q) width: d by default, else an integer >= 1."""
    m = d if m is None else m
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InvalidInputError(f"m must be an integer >= 1, got {m!r}")
    return int(m)


def _record_points(steps: int, record_every: int | None) -> set[int]:
    if record_every is None:
        return set()
    return set(range(0, steps + 1, record_every)) | {steps}


def _norm_floor(entry_bound: torch.Tensor, nT: int) -> torch.Tensor:
    """Floor of the computed ||G||_F^2 (see NORM_FLOOR_FACTOR) for token weights rescaled to max |c| = 1
    (so ||c||_1 <= nT and the rounding bound is eps * bound * (nT)^2)."""
    eps, tiny = torch.finfo(entry_bound.dtype).eps, torch.finfo(entry_bound.dtype).tiny
    return (NORM_FLOOR_FACTOR * eps * nT ** 2 * entry_bound).clamp_min(tiny)


#: Logit-space W-GD re-centres each row of logits on its maximum only every few steps: a normalised
#: step moves a logit by at most lr * |x_it| |z_i| (|X_i G z_i| <= ||G||_F |x_it| |z_i|), so between
#: re-centrings no row maximum drifts by more than this (exp stays within e^{+-SHIFT_DRIFT_MAX}: no
#: overflow, and the largest weight of a row never underflows), and one amax/sub pair is saved per step.
SHIFT_DRIFT_MAX = 64.0
#: ... but at least every this many steps.
SHIFT_EVERY_MAX = 16


@torch.inference_mode()
def _run_w(batch, head, W0, steps, lr, normalized, loss, record_every, progress) -> GDResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n, T, d = X.shape
    gram = att.TokenGram(X, Z)
    gamma = head.fixed_scores(X, Y)  # (R, n, T) or None (general head)
    tiny = torch.finfo(X.dtype).tiny
    floor = _norm_floor(gram.entry_bound, n * T)  # (R, 1, 1)
    # State: LA[0] = logits X_i W z_i up to a per-row shift, LA[1] = -A, the accumulated token weights
    # with W = W0 + sum_j X_j^T LA[1]_j z_j^T. Both move along CM = [M c, c] in one fused update.
    LA = torch.empty((2, R, n, T), dtype=X.dtype, device=X.device)
    lg, accn = LA[0], LA[1]
    lg.copy_(att.logits(X, Z, W0))
    accn.zero_()
    CM = torch.empty_like(LA)
    every = 1
    if normalized and steps > 0 and R > 0:  # one host sync before the loop, none inside it
        drift = lr * float(gram.entry_bound.max().sqrt())  # max per-step change of any logit
        every = int(min(SHIFT_EVERY_MAX, max(1.0, SHIFT_DRIFT_MAX / drift))) if drift > 0 else SHIFT_EVERY_MAX
    if gamma is not None and normalized and gram.dense:
        step = _w_step_linear(gram, gamma, lg, CM, LA, floor, lr, loss, tiny)
        recentre = step.recentre
    else:
        step = _w_step_general(X, Y, head, gram, gamma, lg, CM, LA, floor, lr, n, normalized, loss, tiny)

        def recentre():
            lg.sub_(lg.amax(-1, keepdim=True))

    def current_W() -> torch.Tensor:
        return W0 + gram.weights_to_W(accn)

    def steps_from(k: int, stop: int) -> None:
        for j in range(k, stop):
            if j % every == 0:
                recentre()
            step()

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, progress, current_W, lambda Wk: att.loss(X, Y, Z, Wk, head, loss))
    W = current_W()
    final_loss = att.loss(X, Y, Z, W, head, loss)
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.matrix_norm(W)), loss=_np(final_loss),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="W", normalized=normalized, lr=lr, steps=steps,
    )


def _w_step_linear(gram, gamma, lg, CM, LA, floor, lr, loss, tiny):
    """One normalised logit-space step for a linear head (W-independent gamma), fused on preallocated
    buffers (about 17 kernels; the (R, 1, nT) x (R, nT, nT) product dominates).

    c = l'(m) (diag(s) - s s^T) gamma with s = e / S, e = exp(lg), S = sum_t e_t, m = s^T gamma, computed
    as c = (e g - e m') w with g = -gamma, m' = s^T g = -m and w = -l'(m) / S (for the logistic loss
    -l'(m) = sigmoid(-m) = sigmoid(m'), accurate where sigmoid(m) - 1 would cancel).
    """
    R, n, T = lg.shape
    Mc, c = CM[0], CM[1]
    c_row, Mc_row = c.view(R, 1, n * T), Mc.view(R, 1, n * T)
    g0 = gamma.neg()  # (R, n, T)
    # Scores are centred on a reference token r per row, g = g0 - g0[r], g_r0 = g0[r]: then
    # g_t - m' = g_t - sum_u s_u g_u is accurate for the most-attended token when r is that token (the
    # naive form cancels once the softmax saturates). r is refreshed by ``recentre`` (every re-centring
    # of the logits); in between the top token can only change while the softmax is not saturated,
    # where the cancellation is harmless.
    g = torch.empty_like(g0)
    g_r0 = torch.empty((R, n, 1), dtype=lg.dtype, device=lg.device)
    E = torch.empty_like(CM)  # [e, e g]
    e, eg = E[0], E[1]
    SP = torch.empty((2, R, n, 1), dtype=lg.dtype, device=lg.device)  # [S, sum_t e_t g_t]
    S, mneg = SP[0], SP[1]
    c2 = c.view(R, n * T)
    absc = torch.empty_like(c2)
    Mc_col = Mc_row.mT  # (R, nT, 1)
    nrm2 = torch.empty((R, 1, 1), dtype=lg.dtype, device=lg.device)
    M = gram.M

    def recentre():
        lg.sub_(lg.amax(-1, keepdim=True))
        torch.gather(g0, -1, lg.argmax(-1, keepdim=True), out=g_r0)
        torch.sub(g0, g_r0, out=g)

    def step():
        torch.exp(lg, out=e)
        torch.mul(e, g, out=eg)
        torch.sum(E, -1, keepdim=True, out=SP)
        mneg.div_(S)  # m' - g_r0 (R, n, 1), with m' = -m
        if loss == "logistic":
            w = torch.sigmoid(mneg + g_r0).div_(S)
        else:
            w = att.loss_derivative((mneg + g_r0).neg_(), loss).div_(S).neg_()
        torch.addcmul(eg, e, mneg, value=-1.0, out=c).mul_(w)
        # only the direction of G matters: rescale c to max |c| = 1 so that ||G||^2 = c^T M c
        # cannot underflow when the softmax saturates
        c2.div_(torch.abs(c2, out=absc).amax(-1, keepdim=True).clamp_min_(tiny))
        torch.bmm(c_row, M, out=Mc_row)  # (M c)^T = c^T M: X_i G z_i
        torch.bmm(c_row, Mc_col, out=nrm2)  # ||G||_F^2 = c^T M c (of the rescaled c)
        scale = torch.maximum(nrm2, floor, out=nrm2).rsqrt_()  # (R, 1, 1): 1 / ||G||
        LA.addcmul_(CM, scale, value=-lr)  # lg -= lr M c / ||G||, -A -= lr c / ||G||

    step.recentre = recentre
    return step


def _w_step_general(X, Y, head, gram, gamma, lg, CM, LA, floor, lr, n, normalized, loss, tiny):
    """One logit-space step, any head, normalised or not (allocating; the general path)."""
    Mc_buf, c_buf = CM[0], CM[1]

    def step():
        s = _softmax_rows(lg)  # (R, n, T)
        c = att.token_weights(X, Y, s, head, loss, gamma)[1]  # (R, n, T)
        if normalized:  # only the direction of G matters: rescale c to max |c| = 1 so that
            c = c / _maxabs(c, tiny)  # ||G||^2 = c^T M c cannot underflow when the softmax saturates
        Mc = gram.apply(c)  # (R, n, T): X_i G z_i
        c_buf.copy_(c)
        Mc_buf.copy_(Mc)
        if normalized:
            nrm2 = (c * Mc).sum((1, 2), keepdim=True)  # (R, 1, 1): ||G||_F^2 (of the rescaled c)
            LA.addcmul_(CM, torch.maximum(nrm2, floor).rsqrt_(), value=-lr)
        else:
            LA.sub_(CM, alpha=lr / n)  # grad L = G / n

    return step


def _maxabs(c: torch.Tensor, tiny: float) -> torch.Tensor:
    """max_{i,t} |c_it| per instance (R, 1, 1), at least ``tiny``."""
    return torch.linalg.vector_norm(c, float("inf"), dim=(1, 2), keepdim=True).clamp_min_(tiny)


def _kq_grads(X, Y, Z, K, Q, head, loss, gamma, direction_only=False):
    """Closed-form (grad_K, grad_Q) (R, d, m) at W = K Q^T, explicit form (no autograd).

    ``direction_only``: both gradients rescaled by one positive factor per instance (max |c| = 1),
    which normalised steps ignore and which keeps tiny gradients of a saturated softmax representable.
    """
    W = torch.bmm(K, Q.mT)  # (R, d, d)
    s = _softmax_rows(torch.matmul(X, torch.bmm(Z, W.mT).unsqueeze(-1)).squeeze(-1))  # (R, n, T)
    _, c = att.token_weights(X, Y, s, head, loss, gamma)  # (R, n, T)
    if direction_only:
        c = c / _maxabs(c, torch.finfo(c.dtype).tiny)
    G = att.grad_from_weights(X, Z, c)  # (R, d, d), includes 1/n
    return torch.bmm(G, Q), torch.bmm(G.mT, K)


@torch.inference_mode()
def _run_kq(batch, head, K, Q, steps, lr, normalized, loss, record_every, progress, wd=0.0) -> GDResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n = X.shape[:2]
    gamma = head.fixed_scores(X, Y)
    tiny = torch.finfo(X.dtype).tiny
    # K and Q live stacked in P (2R, d, m), their gradients in Gr, so one norm and one update serve both
    P = torch.cat([K, Q]).contiguous()
    K, Q = P[:R], P[R:]
    Gr = torch.empty_like(P)
    # With weight decay the data gradient must keep its true scale (no max |c| = 1 rescale): the step
    # direction is that of data gradient + decay gradient, and a per-instance rescale of one term only
    # would change it. The decay term 2 wd (K, Q) keeps the gradient norm representable instead.
    direction_only = normalized and wd == 0
    if gamma is not None:
        data_grads = _kq_grads_linear(X, Z, gamma, K, Q, Gr, loss, direction_only, tiny)
    else:
        def data_grads():
            gK, gQ = _kq_grads(X, Y, Z, K, Q, head, loss, gamma, direction_only=direction_only)
            Gr[:R].copy_(gK)
            Gr[R:].copy_(gQ)
    if wd > 0:
        def grads():
            data_grads()
            Gr.add_(P, alpha=2.0 * wd)  # grad of wd (||K||^2 + ||Q||^2): 2 wd K, 2 wd Q
    else:
        grads = data_grads  # the hot path: no extra kernel
    if normalized:
        def step():
            grads()
            P.addcdiv_(Gr, torch.linalg.vector_norm(Gr, dim=(1, 2), keepdim=True).clamp_min_(tiny), value=-lr)
    else:
        def step():
            grads()
            P.sub_(Gr, alpha=lr)

    def steps_from(k: int, stop: int) -> None:
        for _ in range(k, stop):
            step()

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, progress, lambda: torch.bmm(K, Q.mT),
                         lambda Wk: att.loss(X, Y, Z, Wk, head, loss))
    W = torch.bmm(K, Q.mT)
    return GDResult(
        W=_np(W), K=_np(K), Q=_np(Q), norms=_np(torch.linalg.matrix_norm(W)),
        loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="KQ", normalized=normalized, lr=lr, steps=steps,
    )


@torch.inference_mode()
def _run_w_explicit(batch, head, W0, steps, lr, normalized, loss, record_every, progress, wd) -> GDResult:
    """GD on L(W) + wd ||W||_F^2 with W held explicitly (the weight-decay path for "W").

    The fused logit-space step (:func:`_run_w`) writes W = W(0) + sum_j X_j^T A_j z_j^T and moves only
    the token weights A; the decay gradient 2 wd W has a W(0) component outside that span (and would
    also need ||W||_F per step for the normalisation), so this path forms W and its gradient each step:
    grad = (1/n) sum_i X_i^T c_i z_i^T + 2 wd W, with accurate (reference-token) token weights c.
    """
    if not wd > 0:
        raise InvalidInputError("_run_w_explicit is the weight-decay path; use _run_w for weight_decay = 0")
    X, Y, Z = batch.X, batch.Y, batch.Z
    tiny = torch.finfo(X.dtype).tiny
    gamma = head.fixed_scores(X, Y)
    W = W0.clone()

    def step():
        s = _softmax_rows(att.logits(X, Z, W))
        c = att.token_weights(X, Y, s, head, loss, gamma)[1]
        G = att.grad_from_weights(X, Z, c).add_(W, alpha=2.0 * wd)
        if normalized:
            W.addcdiv_(G, torch.linalg.matrix_norm(G, keepdim=True).clamp_min_(tiny), value=-lr)
        else:
            W.sub_(G, alpha=lr)

    rec = _record_points(steps, record_every)
    its, Ws, Ls = [], [], []
    bar = _progress(steps, progress)
    for k in range(steps + 1):
        if k in rec:
            its.append(k)
            Ws.append(W.clone())
            Ls.append(att.loss(X, Y, Z, W, head, loss))
        if k == steps:
            break
        step()
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return GDResult(
        W=_np(W), K=None, Q=None, norms=_np(torch.linalg.matrix_norm(W)), loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param="W", normalized=normalized, lr=lr, steps=steps,
    )


@torch.inference_mode()
def _run_kernel(batch, head, param, init, steps, lr, loss, record_every, progress) -> GDResult:
    """Normalised GD through the compiled CPU kernels (numerics.kernels); the same result type as the
    torch paths. State lives in instances-last numpy arrays between kernel calls, one set per block of
    at most KERNEL_BLOCK instances (a block's working set stays in the CPU's L2 cache)."""
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n, T, d = X.shape
    m = init[0].shape[-1] if param == "KQ" else d
    mod = kernels.kernels(n, T, d, m)
    gamma = head.fixed_scores(X, Y)
    tiny = float(np.finfo(np.float64).tiny)
    code = kernels.LOSS_CODES[loss]
    Xn, Zn, gn = _np(X), _np(Z), -_np(gamma)
    if param == "W":
        floor = _norm_floor(att.gram_entry_bound(X, Z), n * T).numpy()  # the torch path's, per instance
        params = [_np(init)]
    else:
        params = [_np(init[0]), _np(init[1])]
    blocks = []  # (slice, X, Z, gneg, floor or None, [state arrays])
    for lo in range(0, R, KERNEL_BLOCK):
        sl = slice(lo, min(R, lo + KERNEL_BLOCK))
        blocks.append((sl, kernels.soa(Xn[sl]), kernels.soa(Zn[sl]), kernels.soa(gn[sl]),
                       kernels.soa(floor[sl]) if param == "W" else None, [kernels.soa(p[sl]) for p in params]))

    def run(k: int) -> None:
        for _, Xs, Zs, gs, fl, st in blocks:
            if param == "W":
                mod.w_steps(Xs, Zs, gs, st[0], fl, k, lr, code, tiny)
            else:
                mod.kq_steps(Xs, Zs, gs, st[0], st[1], k, lr, code, tiny)

    def state(j: int) -> np.ndarray:  # parameter j of all instances, (R, ...)
        if not blocks:
            return params[j][:0]
        return np.concatenate([kernels.aos(st[j], sl.stop - sl.start) for sl, *_, st in blocks])

    def current_W() -> torch.Tensor:
        if param == "W":
            return torch.from_numpy(state(0))
        return torch.bmm(torch.from_numpy(state(0)), torch.from_numpy(state(1)).mT)

    def steps_from(k: int, stop: int) -> None:
        while k < stop:
            j = min(stop, k + KERNEL_CHUNK)
            run(j - k)
            k = j

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(steps_from, steps, rec, progress, current_W, lambda Wk: att.loss(X, Y, Z, Wk, head, loss))
    W = current_W()
    return GDResult(
        W=_np(W), K=state(0) if param == "KQ" else None, Q=state(1) if param == "KQ" else None,
        norms=_np(torch.linalg.matrix_norm(W)), loss=_np(att.loss(X, Y, Z, W, head, loss)),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack([_np(w) for w in Ws]) if rec else None,
        loss_traj=np.stack([_np(v) for v in Ls]) if rec else None,
        param=param, normalized=True, lr=lr, steps=steps, backend="numba",
    )


def _kq_grads_linear(X, Z, gamma, K, Q, Gr, loss, direction_only, tiny):
    """Closure writing (grad_K, grad_Q) at W = K Q^T into Gr = [grad_K; grad_Q] (2R, d, m), linear head,
    on preallocated buffers; ``direction_only`` as in :func:`_kq_grads` (max |c| = 1).

    Per step, without forming W or G (fewer and smaller batched products): P = Z Q (R, n, m),
    u_i = K (Q^T z_i) = rows of P K^T, logits X_i u_i (per-example matrix-vector products), token
    weights c (as in :func:`_w_step_linear`), g_i = X_i^T c_i / n, and with G = sum_i g_i z_i^T:
    grad_K = G Q = g^T P, grad_Q = G^T K = Z^T (g K).
    """
    R, n, T, d = X.shape
    dt, dev = X.dtype, X.device
    X600 = X.view(R * n, T, d)  # one (T, d) block per example
    g_ = gamma.neg()  # (R, n, T): see _w_step_linear
    m = K.shape[-1]
    ZQ = torch.empty((R, n, m), dtype=dt, device=dev)  # rows Q^T z_i
    U = torch.empty((R, n, d), dtype=dt, device=dev)  # rows W z_i = K Q^T z_i
    lg = torch.empty((R, n, T), dtype=dt, device=dev)
    E = torch.empty((2, R, n, T), dtype=dt, device=dev)  # [e, e g]
    e, eg = E[0], E[1]
    SP = torch.empty((2, R, n, 1), dtype=dt, device=dev)
    S, mneg = SP[0], SP[1]
    c = torch.empty((R, n, T), dtype=dt, device=dev)
    c2 = c.view(R, n * T)
    absc = torch.empty_like(c2)
    gc = torch.empty((R, n, T), dtype=dt, device=dev)  # centred scores
    g_r0 = torch.empty((R, n, 1), dtype=dt, device=dev)
    g = torch.empty((R, n, d), dtype=dt, device=dev)  # rows X_i^T c_i
    gKm = torch.empty((R, n, m), dtype=dt, device=dev)  # rows K^T g_i
    gK, gQ = Gr[:R], Gr[R:]
    U_col, lg_col = U.view(R * n, d, 1), lg.view(R * n, T, 1)
    c_row, g_row = c.view(R * n, 1, T), g.view(R * n, 1, d)
    Xn600 = (X / n).reshape(R * n, T, d)  # 1/n of the loss folded into g_i = X_i^T c_i / n
    ZT = Z.mT  # (R, d, n)

    def grads():
        torch.bmm(Z, Q, out=ZQ)
        torch.bmm(ZQ, K.mT, out=U)
        torch.bmm(X600, U_col, out=lg_col)  # x_it^T W z_i
        lg.sub_(lg.amax(-1, keepdim=True))
        # scores centred on the most-attended token (see _w_step_linear): no cancellation at saturation
        torch.gather(g_, -1, lg.argmax(-1, keepdim=True), out=g_r0)
        torch.sub(g_, g_r0, out=gc)
        torch.exp(lg, out=e)
        torch.mul(e, gc, out=eg)
        torch.sum(E, -1, keepdim=True, out=SP)
        mneg.div_(S)  # -m - g_r0 (R, n, 1)
        if loss == "logistic":
            w = torch.sigmoid(mneg + g_r0).div_(S)
        else:
            w = att.loss_derivative((mneg + g_r0).neg_(), loss).div_(S).neg_()
        torch.addcmul(eg, e, mneg, value=-1.0, out=c).mul_(w)
        if direction_only:
            c2.div_(torch.abs(c2, out=absc).amax(-1, keepdim=True).clamp_min_(tiny))
        torch.bmm(c_row, Xn600, out=g_row)  # X_i^T c_i / n
        torch.bmm(g.mT, ZQ, out=gK)  # G Q
        torch.bmm(g, K, out=gKm)
        torch.bmm(ZT, gKm, out=gQ)  # G^T K

    return grads


# -- regularisation path --------------------------------------------------------------------------

def regularization_path(
    data: AttentionData | Sequence[AttentionData],
    radii: Any,
    *,
    param: str = "W",
    loss: str = "logistic",
    steps: int = 500,
    lr: float = 0.05,
    restarts: int = 3,
    seed: int | Sequence[int] = 0,
    device: Any = "cpu",
    head: att.Head | None = None,
    m: int | None = None,
    dtype: torch.dtype = torch.float64,
    cone: Any = None,
) -> RegPathResult:
    """W_R = argmin_{||W||_F <= R} L(W) for each radius (for "KQ": ||K||_F^2 + ||Q||_F^2 <= 2R).

    ``cone=(centre, mu)``: the *local* path, restricted to the convex cone C_mu(centre) = {W : corr(W, centre)
    >= 1 - mu} (centre (d, d) or one per instance (R, d, d); mu a float or one per instance, in (0, 1)). Every
    start is put on the cone's boundary (:func:`_into_cone_start`) and every step projected onto it: for W
    exactly (:func:`project_cone`, then the ball: the projection onto a closed convex cone intersected with a
    ball about 0 is the cone projection rescaled into the ball); for (K, Q) a step whose W = K Q^T leaves the cone is replaced by the balanced factors of the
    cone projection of W (K = U sqrt(S), Q = V sqrt(S): (||K||^2 + ||Q||^2)/2 = ||W'||_* <= ||K Q^T||_*), then
    scaled into the ball; that step is not an exact projection in factor space (at the cone boundary it can raise
    the loss), so each (K, Q) candidate keeps its best iterate. Inside the cone the path is the unrestricted one.

    Projected normalised GD, batched over instances and candidates: at radius R_j the candidates are
    ``restarts`` random starts on the sphere (ball boundary) plus, for j > 0, the previous radius's
    solution rescaled to R_j (warm start); the best final loss wins per instance. Step k of ``steps``
    moves each parameter by lr * scale * (1 - k/steps) along its normalised gradient, scale = R_j for W
    and sqrt(R_j) for K, Q (their norms at the boundary), a linearly decaying schedule so the last
    iterate settles on the constrained minimiser instead of oscillating at the step size.
    """
    steps, lr = _check_common(param, loss, steps, lr)
    if steps < 1:
        raise InvalidInputError(f"steps must be >= 1 for a regularisation path, got {steps}")
    r = np.asarray(radii, dtype=np.float64) if not isinstance(radii, (int, float)) else np.array([float(radii)])
    if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or np.any(r <= 0):
        raise InvalidInputError(f"radii must be a non-empty 1-D sequence of finite numbers > 0, got {radii!r}")
    if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) or restarts < 1:
        raise InvalidInputError(f"restarts must be an integer >= 1, got {restarts!r}")
    if isinstance(seed, bool) or not (isinstance(seed, (int, np.integer)) or (
            isinstance(seed, (Sequence, np.ndarray)) and all(isinstance(v, (int, np.integer)) for v in seed))):
        raise InvalidInputError(f"seed must be an int or a sequence of ints (one per instance), got {seed!r}")
    batch, h = _prepare(data, head, device, dtype)
    R, n, T, d = batch.shape
    if param == "KQ":
        m = _check_m(m, d)
    with torch.inference_mode():
        if not isinstance(seed, (int, np.integer)) and len(seed) != R:
            raise InvalidInputError(f"seed must be an int or a sequence of {R} ints (one per instance), got {seed!r}")
        cone_t = None if cone is None else _cone_arg(cone, R, d, dev=batch.X.device, dtype=dtype)
        return _regpath(batch, h, r, param, loss, steps, lr, int(restarts), seed, int(m or d), dtype, cone_t)


def _cone_arg(cone: Any, R: int, d: int, *, dev, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated (unit centres (R, d, d), mu (R,)) of the ``cone`` argument of :func:`regularization_path`."""
    if not (isinstance(cone, (tuple, list)) and len(cone) == 2):
        raise InvalidInputError(f"cone must be a pair (centre, mu), got {type(cone).__name__}")
    A = np.asarray(cone[0], dtype=np.float64)
    if A.shape == (d, d):
        A = np.broadcast_to(A, (R, d, d))
    if A.shape != (R, d, d) or not np.all(np.isfinite(A)):
        raise InvalidInputError(f"cone centre must be a finite ({d}, {d}) or ({R}, {d}, {d}) array, got {A.shape}")
    nA = np.linalg.norm(A, axis=(1, 2))
    if np.any(nA == 0):
        raise InvalidInputError("cone centre must be non-zero")
    mu = np.broadcast_to(np.asarray(cone[1], dtype=np.float64), (R,))
    if not np.all((mu > 0) & (mu < 1)):
        raise InvalidInputError(f"cone mu must lie in (0, 1), got {cone[1]!r}")
    return (torch.as_tensor(A / nA[:, None, None], dtype=dtype, device=dev),
            torch.as_tensor(np.array(mu), dtype=dtype, device=dev))


def project_cone(W: torch.Tensor, centre: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """Frobenius projection of W (B, d, d) onto the convex cone {corr(W, centre) >= 1 - mu} (centre unit (B, d, d),
    mu (B,)): W itself inside; otherwise max(0, <W, e>) e with e = cos(th) centre + sin(th) U/||U||, cos(th) = 1 - mu,
    U the part of W orthogonal to the centre (the nearest boundary ray, in the plane of the centre and W)."""
    a = (W * centre).sum((1, 2))
    U = W - a[:, None, None] * centre
    u = torch.linalg.matrix_norm(U)
    c = 1.0 - mu
    sn = torch.sqrt(1.0 - c * c)
    inside = u * c <= a * sn
    Uh = U / u.clamp_min(torch.finfo(W.dtype).tiny)[:, None, None]
    e = c[:, None, None] * centre + sn[:, None, None] * Uh
    P = (a * c + u * sn).clamp_min(0.0)[:, None, None] * e
    return torch.where(inside[:, None, None], W, P)


def _into_cone_start(P: torch.Tensor, centre: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
    """A random start moved onto the cone's BOUNDARY, same Frobenius norm: ||P|| (cos(th) centre + sin(th) U/||U||),
    U the part of P orthogonal to the centre (a random boundary direction). Never the centre itself: a start at the
    limit direction would let an optimiser that does not move pass for one that converges."""
    a = (P * centre).sum((1, 2))
    U = P - a[:, None, None] * centre
    Uh = U / torch.linalg.matrix_norm(U, keepdim=True).clamp_min(torch.finfo(P.dtype).tiny)
    c = (1.0 - mu)[:, None, None]
    return torch.linalg.matrix_norm(P, keepdim=True) * (c * centre + torch.sqrt(1.0 - c * c) * Uh)


def _regpath(batch, head, radii, param, loss, steps, lr, restarts, seed, m, dtype, cone=None) -> RegPathResult:
    X, Y, Z = batch.X, batch.Y, batch.Z
    R, n, T, d = X.shape
    dev = X.device
    tiny = torch.finfo(dtype).tiny
    if isinstance(seed, (int, np.integer)):  # one generator for the batch
        gen = torch.Generator(device="cpu").manual_seed(int(seed))

        def draw(shape):  # (restarts*R, *shape), candidate c of instance r at c*R + r
            return torch.randn((restarts * R, *shape), generator=gen, dtype=torch.float64)
    else:  # one generator per instance: an instance's path does not depend on its batch (exact replay)
        gens = [torch.Generator(device="cpu").manual_seed(int(v)) for v in seed]

        def draw(shape):
            per = [torch.randn((restarts, *shape), generator=g, dtype=torch.float64) for g in gens]
            return torch.stack(per, dim=1).reshape(restarts * R, *shape)
    Ws, Ks, Qs, losses, norms = [], [], [], [], []
    prev = None  # previous radius's solution: W (R,d,d) or (K, Q)
    for j, rad in enumerate(radii):
        C = restarts + (prev is not None)
        # (C*R, ...) batch: candidate c of instance r sits at index c*R + r
        Xc, Yc, Zc = X.repeat(C, 1, 1, 1), Y.repeat(C, 1), Z.repeat(C, 1, 1)
        hc = head.repeat(C)
        gamma = hc.fixed_scores(Xc, Yc)
        cc = None if cone is None else (cone[0].repeat(C, 1, 1), cone[1].repeat(C))
        if param == "W":
            P = draw((d, d)).to(dev, dtype)
            if cone is not None:
                P = _into_cone_start(P, cone[0].repeat(restarts, 1, 1), cone[1].repeat(restarts))
            P = P * (rad / torch.linalg.matrix_norm(P, keepdim=True))
            if prev is not None:
                P = torch.cat([P, prev * (rad / torch.linalg.matrix_norm(prev, keepdim=True).clamp_min(tiny))])
            W = P
            for k in range(steps):
                eta = lr * rad * (1.0 - k / steps)
                G = _grad_dir(Xc, Yc, Zc, W, hc, loss, gamma)  # (C*R, d, d)
                W.addcdiv_(G, torch.linalg.matrix_norm(G, keepdim=True).clamp_min_(tiny), value=-eta)
                if cc is not None:
                    W = project_cone(W, *cc)
                W.mul_(torch.clamp(rad / torch.linalg.matrix_norm(W, keepdim=True).clamp_min_(tiny), max=1.0))
            Lc = att.loss(Xc, Yc, Zc, W, hc, loss).view(C, R)  # (C, R)
            best = Lc.argmin(0)  # (R,)
            Wb = W.view(C, R, d, d)[best, torch.arange(R, device=dev)]  # (R, d, d)
            prev = Wb
            Ws.append(Wb)
            nrm = torch.linalg.matrix_norm(Wb)
            Ks.append(None)
            Qs.append(None)
        else:
            K = draw((d, m)).to(dev, dtype)
            Q = draw((d, m)).to(dev, dtype)
            if cone is not None:  # balanced factors of a start on the cone boundary (see _into_cone_start)
                W0 = _into_cone_start(torch.bmm(K, Q.mT), cone[0].repeat(restarts, 1, 1), cone[1].repeat(restarts))
                U0, S0, Vh0 = torch.linalg.svd(W0)
                K, Q = U0[:, :, :m] * S0[:, None, :m].sqrt(), Vh0.mT[:, :, :m] * S0[:, None, :m].sqrt()
            s0 = torch.sqrt(2 * rad / (K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True)))
            K, Q = K * s0, Q * s0
            if prev is not None:
                Kp, Qp = prev
                sp = math.sqrt(rad / radii[j - 1])
                K, Q = torch.cat([K, Kp * sp]), torch.cat([Q, Qp * sp])
            if cc is not None:  # the cone step is not an exact projection in factor space: keep the best iterate
                Kb_, Qb_ = K.clone(), Q.clone()
                Lb_ = att.loss(Xc, Yc, Zc, torch.bmm(K, Q.mT), hc, loss)
            for k in range(steps):
                eta = lr * math.sqrt(rad) * (1.0 - k / steps)
                gK, gQ = _kq_grads(Xc, Yc, Zc, K, Q, hc, loss, gamma, direction_only=True)
                K.addcdiv_(gK, torch.linalg.matrix_norm(gK, keepdim=True).clamp_min_(tiny), value=-eta)
                Q.addcdiv_(gQ, torch.linalg.matrix_norm(gQ, keepdim=True).clamp_min_(tiny), value=-eta)
                if cc is not None:
                    K, Q = _cone_factors(K, Q, *cc, m)
                tot = K.square().sum((1, 2), keepdim=True) + Q.square().sum((1, 2), keepdim=True)
                sc = torch.clamp(torch.sqrt(2 * rad / tot.clamp_min_(tiny)), max=1.0)
                K.mul_(sc)
                Q.mul_(sc)
                if cc is not None:
                    Lk = att.loss(Xc, Yc, Zc, torch.bmm(K, Q.mT), hc, loss)
                    better = Lk < Lb_
                    Kb_[better], Qb_[better], Lb_ = K[better], Q[better], torch.minimum(Lk, Lb_)
            if cc is not None:
                K, Q = Kb_, Qb_
            W = torch.bmm(K, Q.mT)
            Lc = att.loss(Xc, Yc, Zc, W, hc, loss).view(C, R)
            best = Lc.argmin(0)
            idx = torch.arange(R, device=dev)
            Kb, Qb = K.view(C, R, d, m)[best, idx], Q.view(C, R, d, m)[best, idx]
            prev = (Kb, Qb)
            Wb = torch.bmm(Kb, Qb.mT)
            Ws.append(Wb)
            Ks.append(Kb)
            Qs.append(Qb)
            nrm = 0.5 * (Kb.square().sum((1, 2)) + Qb.square().sum((1, 2)))
        losses.append(Lc.gather(0, best.view(1, R)).view(R))
        norms.append(nrm)
    norms_np = np.stack([_np(v) for v in norms])  # (J, R)
    return RegPathResult(
        radii=radii.copy(),
        W=np.stack([_np(w) for w in Ws]),
        loss=np.stack([_np(v) for v in losses]),
        constraint_active=norms_np >= (1.0 - ACTIVE_RTOL) * radii[:, None],
        norms=norms_np,
        K=np.stack([_np(k) for k in Ks]) if param == "KQ" else None,
        Q=np.stack([_np(q) for q in Qs]) if param == "KQ" else None,
        param=param,
    )


def _cone_factors(K, Q, centre, mu, m):
    """(K, Q) with W = K Q^T kept where W is in the cone; elsewhere the balanced factors (U sqrt(S), V sqrt(S),
    first m singular triplets) of the cone projection of W (see :func:`regularization_path`)."""
    W = torch.bmm(K, Q.mT)
    P = project_cone(W, centre, mu)
    out = ~torch.all((P == W).flatten(1), dim=1)
    if not bool(out.any()):
        return K, Q
    Pn = P[out]
    nP = torch.linalg.matrix_norm(Pn, keepdim=True)
    Pn = torch.where(nP > 0, Pn, centre[out] * torch.linalg.matrix_norm(W[out], keepdim=True))  # polar: centre
    U, S, Vh = torch.linalg.svd(Pn)
    r = S[:, :m].sqrt()
    K, Q = K.clone(), Q.clone()
    K[out] = U[:, :, :m] * r[:, None, :]
    Q[out] = Vh.mT[:, :, :m] * r[:, None, :]
    return K, Q


def _grad_dir(X, Y, Z, W, head, loss, gamma):
    """A positive per-instance multiple of grad L(W) (R, d, d), rescaled so max |c| = 1 (see _kq_grads)."""
    s = _softmax_rows(torch.matmul(X, torch.bmm(Z, W.mT).unsqueeze(-1)).squeeze(-1))  # (R, n, T)
    _, c = att.token_weights(X, Y, s, head, loss, gamma)
    c = c / _maxabs(c, torch.finfo(c.dtype).tiny)
    return att.grad_from_weights(X, Z, c)
