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
from typing import TYPE_CHECKING, Any

import numpy as np

from . import kernels
from .data import AttentionData, stack
from .errors import InvalidInputError
from .gd_common import (
    NORM_FLOOR_FACTOR,
    GDResult,
    _check_common,
    _check_m,
    _drive,
    _init_array,
    _init_tensor,
    _normal,
    _np,
    _prepare,
    _record_points,
)
from .losses import LOSS_NP
from .tokens import softmax_rows

if TYPE_CHECKING:
    import torch

    from . import attention as att

# run_gd's pieces live in gd_common (results, checks, driver) and gd_torch (the tensor programs); the
# regularisation path is numerics.regpath. Each name is imported from the module that defines it.
__all__ = ["BACKENDS", "KERNEL_BLOCK", "KERNEL_CHUNK", "KERNEL_MIN_WORK", "run_gd", "warm_kernels"]


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
    dtype: torch.dtype | None = None,
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
    if record_every is not None and (
        isinstance(record_every, bool) or not isinstance(record_every, (int, np.integer)) or record_every < 1
    ):
        raise InvalidInputError(f"record_every must be None or an integer >= 1, got {record_every!r}")
    if not (isinstance(init_scale, (int, float)) and math.isfinite(init_scale) and init_scale >= 0):
        raise InvalidInputError(f"init_scale must be a finite number >= 0, got {init_scale!r}")
    if backend not in BACKENDS:
        raise InvalidInputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    fast = _run_kernel_numpy(data, param, steps, lr, normalized, loss, m, init, device, record_every, head,
                             dtype, progress, wd, backend)
    if fast is not None:
        return fast
    import torch  # every other run is a tensor program (or needs torch's generator for its initialisation)

    from .gd_torch import _run_kq, _run_w, _run_w_explicit

    dtype = torch.float64 if dtype is None else dtype
    batch, h = _prepare(data, head, device, dtype)
    R, n, T, d = batch.shape
    use_kernel = _use_kernel(backend, batch, h, normalized, wd, R * steps)
    width = _check_m(m, d) if param == "KQ" else d  # the (K, Q) width m; d for "W"
    if use_kernel:
        try:
            kernels.kernels(n, T, d, width)
        except InvalidInputError as exc:  # e.g. no writable kernel cache: auto falls back, numba reports it
            if backend == "numba":
                raise
            warnings.warn(f"{exc}; GD takes the torch path", RuntimeWarning, stacklevel=2)
            use_kernel = False
    if param == "KQ":
        if init is None:
            K0 = init_scale * _normal((d, width), R, seed)
            Q0 = init_scale * _normal(
                (d, width), R, [s + 1 for s in seed] if not isinstance(seed, (int, np.integer)) else seed + 1
            )
        else:
            if not (isinstance(init, (tuple, list)) and len(init) == 2):
                raise InvalidInputError("init for param='KQ' must be a pair (K, Q)")
            K0, Q0 = init
        K = _init_tensor(K0, "K", (d, width), R, batch.X.device, dtype)
        Q = _init_tensor(Q0, "Q", (d, width), R, batch.X.device, dtype)
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
    import torch

    from . import attention as att

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
            raise InvalidInputError(
                f"backend='numba' does not apply to this run: {why}; use backend='torch' or 'auto'"
            )
        return True
    return why is None


def _is_float64(dtype: Any) -> bool:
    if dtype is None:
        return True
    import sys

    torch = sys.modules.get("torch")  # a torch dtype can only come from an imported torch
    return torch is not None and dtype is torch.float64


def _run_kernel_numpy(data, param, steps, lr, normalized, loss, m, init, device, record_every, head, dtype,
                      progress, wd, backend) -> GDResult | None:
    """The compiled-kernel run without torch: normalised GD, the data's own linear heads (``head=None``),
    no weight decay, CPU float64, an explicit ``init``, and a run the kernels take (``backend="numba"``, or
    "auto" with at least KERNEL_MIN_WORK instance-steps). None when any of that does not hold: then the
    torch path decides (and reports why numba does not apply, or draws the default initialisation from
    torch's generator). Arrays, checks and results as the torch path's kernel run."""
    cpu = device is None or (isinstance(device, str) and device == "cpu")
    if (backend == "torch" or not normalized or wd > 0 or head is not None or init is None or not cpu
            or not _is_float64(dtype)):
        return None
    datas = [data] if isinstance(data, AttentionData) else data
    if (not isinstance(datas, Sequence) or not datas or not all(isinstance(dt, AttentionData) for dt in datas)
            or any(dt.v is None for dt in datas)):
        return None  # the torch path reports what is wrong with the data
    R = len(datas)
    if (backend == "auto" and R * steps < KERNEL_MIN_WORK) or not kernels.available():
        return None
    arrays = stack(datas)
    X, Y, Z, v = (np.asarray(arrays[k], dtype=np.float64) for k in ("X", "Y", "Z", "v"))
    _, n, T, d = X.shape
    width = _check_m(m, d) if param == "KQ" else d
    try:
        kernels.kernels(n, T, d, width)
    except InvalidInputError:
        return None  # no kernel cache: the torch path warns (auto) or reports it (numba)
    if param == "KQ":
        if not (isinstance(init, (tuple, list)) and len(init) == 2):
            raise InvalidInputError("init for param='KQ' must be a pair (K, Q)")
        params = [_init_array(init[0], "K", (d, width), R), _init_array(init[1], "Q", (d, width), R)]
    else:
        params = [_init_array(init, "W", (d, d), R)]
    gamma = Y[:, :, None] * np.matmul(X, v[:, None, :, None])[..., 0]  # LinearHead.fixed_scores, (R, n, T)
    return _kernel_gd(X, Z, gamma, param, params, steps, lr, loss, record_every, progress)


def _run_kernel(batch, head, param, init, steps, lr, loss, record_every, progress) -> GDResult:
    """The torch path's entry to the kernels (tensors, any LinearHead): :func:`_kernel_gd` on numpy copies."""
    gamma = head.fixed_scores(batch.X, batch.Y)
    params = [_np(init)] if param == "W" else [_np(init[0]), _np(init[1])]
    return _kernel_gd(_np(batch.X), _np(batch.Z), _np(gamma), param, params, steps, lr, loss, record_every,
                      progress)


def _kernel_loss(X: np.ndarray, Z: np.ndarray, gamma: np.ndarray, W: np.ndarray, loss: str) -> np.ndarray:
    """L(W) (R,) in numpy for a linear head: (1/n) sum_i l(s_i^T gamma_i) with s_i = softmax(X_i W z_i) and
    gamma_i = Y_i X_i v, i.e. numerics.attention.loss up to rounding."""
    lg = np.matmul(X, np.matmul(Z, np.swapaxes(W, -1, -2))[..., None])[..., 0]  # (R, n, T)
    s = softmax_rows(lg)
    return LOSS_NP[loss]((s * gamma).sum(-1)).mean(-1)


def _kernel_gd(X, Z, gamma, param, params, steps, lr, loss, record_every, progress) -> GDResult:
    """Normalised GD through the compiled CPU kernels (numerics.kernels), numpy in and out (no torch); the
    same result type as the torch paths. X (R, n, T, d), Z (R, n, d), gamma (R, n, T) the linear head's
    fixed scores, params [W] or [K, Q] (R, d, m). State lives in instances-last arrays between kernel
    calls, one set per block of at most KERNEL_BLOCK instances (a block's working set stays in L2)."""
    R, n, T, d = X.shape
    m = params[0].shape[-1] if param == "KQ" else d
    mod = kernels.kernels(n, T, d, m)
    tiny = float(np.finfo(np.float64).tiny)
    code = kernels.LOSS_CODES[loss]
    gn = -gamma
    if param == "W":  # the torch path's floor of ||G||_F^2 (gd_common._norm_floor), per instance
        bound = np.square(X).sum(-1).max((1, 2)) * np.square(Z).sum(-1).max(-1)  # attention.gram_entry_bound
        floor = np.maximum(NORM_FLOOR_FACTOR * float(np.finfo(np.float64).eps) * (n * T) ** 2 * bound, tiny)
    blocks = []  # (slice, X, Z, gneg, floor or None, [state arrays])
    for lo in range(0, R, KERNEL_BLOCK):
        sl = slice(lo, min(R, lo + KERNEL_BLOCK))
        blocks.append(
            (
                sl,
                kernels.soa(X[sl]),
                kernels.soa(Z[sl]),
                kernels.soa(gn[sl]),
                kernels.soa(floor[sl]) if param == "W" else None,
                [kernels.soa(p[sl]) for p in params],
            )
        )

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

    def current_W() -> np.ndarray:
        if param == "W":
            return state(0)
        return np.matmul(state(0), np.swapaxes(state(1), -1, -2))

    def steps_from(k: int, stop: int) -> None:
        while k < stop:
            j = min(stop, k + KERNEL_CHUNK)
            run(j - k)
            k = j

    rec = _record_points(steps, record_every)
    its, Ws, Ls = _drive(
        steps_from, steps, rec, progress, current_W, lambda Wk: _kernel_loss(X, Z, gamma, Wk, loss)
    )
    W = current_W()
    return GDResult(
        W=W, K=state(0) if param == "KQ" else None, Q=state(1) if param == "KQ" else None,
        norms=np.linalg.norm(W, axis=(-2, -1)), loss=_kernel_loss(X, Z, gamma, W, loss),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack(Ws) if rec else None,
        loss_traj=np.stack(Ls) if rec else None,
        param=param, normalized=True, lr=lr, steps=steps, backend="numba",
    )


def warm_kernels(shapes=None, params: tuple[str, ...] = ("W", "KQ")) -> list[dict]:
    """Compile (or load from the disk cache) the kernels of ``shapes`` (default: CATALOGUE_SHAPES and every
    recorded shape: :mod:`numerics.kernels`) by one short run per parameterisation through :func:`run_gd`,
    so the compiled signatures are exactly those a check uses. Returns one {shape, param, seconds} per run."""
    import time

    from .data import random_unit_sphere

    if shapes is None:
        shapes = sorted({*kernels.CATALOGUE_SHAPES, *kernels.recorded_shapes()})
    out = []
    for n, T, d, m in shapes:
        data = random_unit_sphere(n, T, d, rng=np.random.default_rng(0))
        for param in params:
            if param == "W" and m != d:
                continue
            t0 = time.perf_counter()
            run_gd([data], param=param, m=m if param == "KQ" else None, steps=1, lr=0.1, backend="numba")
            out.append({"shape": [n, T, d, m], "param": param, "seconds": time.perf_counter() - t0})
    return out
