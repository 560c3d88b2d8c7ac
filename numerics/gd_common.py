"""The shared pieces of :mod:`numerics.gd`: result types, argument checks, initialisation, the
record/progress driver and small tensor helpers (used by the torch loops, the kernel path and the
regularisation path). Importing it does not import torch (the compiled GD path runs without it): the
tensor helpers import torch and numerics.attention when called."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidInputError
from .losses import check_loss

if TYPE_CHECKING:  # annotations only: importing this module never imports torch
    import torch

    from . import attention as att

PARAMS = ("W", "KQ")

#: A radius constraint counts as active when the final norm is within this relative distance of
#: the radius: every projected step that leaves the ball lands exactly on it (up to rounding).
ACTIVE_RTOL = 1e-8

#: Floor of the computed ||G||_F^2 = c^T M c, relative to its rounding-error bound eps * max|M| * ||c||_1^2
#: (with max |c| = 1, ||c||_1 <= nT): below it the gradient is zero at working precision, and the floor keeps
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
    check_loss(loss)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InvalidInputError(f"steps must be an integer >= 0, got {steps!r}")
    if (
        isinstance(lr, bool)
        or not isinstance(lr, (int, float, np.floating, np.integer))
        or not math.isfinite(lr)
        or lr <= 0
    ):
        raise InvalidInputError(f"lr must be a finite number > 0, got {lr!r}")
    return int(steps), float(lr)


def _prepare(data, head, device, dtype) -> tuple[att.AttentionBatch, att.Head]:
    import torch

    from . import attention as att

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
        raise InvalidInputError(
            f"head must be None (linear head from data.v) or an attention.Head, got {type(head).__name__}"
        )
    return batch, h


def _normal(shape: tuple[int, ...], R: int, seed: Any) -> torch.Tensor:
    """Standard normal draws (R, *shape) on CPU float64 from explicit generators (device independent).

    ``seed`` int: one generator for the whole batch; sequence of R ints: one generator per instance.
    """
    import torch

    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        return torch.randn((R, *shape), generator=gen, dtype=torch.float64)
    seeds = list(seed) if isinstance(seed, (Sequence, np.ndarray)) else None
    if seeds is None or len(seeds) != R or not all(isinstance(s, (int, np.integer)) for s in seeds):
        raise InvalidInputError(
            f"seed must be an int or a sequence of {R} ints (one per instance), got {seed!r}"
        )
    out = [
        torch.randn(shape, generator=torch.Generator(device="cpu").manual_seed(int(s)), dtype=torch.float64)
        for s in seeds
    ]
    return torch.stack(out)


def _init_array(a: Any, name: str, shape: tuple[int, ...], R: int) -> np.ndarray:
    """An initial parameter as a fresh (R, *shape) float64 array (one ``shape`` array is used for every
    instance); InvalidInputError for a wrong shape or a non-finite entry. Accepts numpy or torch input."""
    if hasattr(a, "detach"):  # a torch tensor (torch is imported already)
        a = a.detach().cpu().numpy()
    t = np.asarray(a, dtype=np.float64)
    if t.shape == shape:
        t = np.broadcast_to(t, (R, *shape))
    if t.shape != (R, *shape):
        raise InvalidInputError(f"init {name} must have shape {(R, *shape)} or {shape}, got {t.shape}")
    if not np.isfinite(t).all():
        raise InvalidInputError(f"init {name} contains NaN or Inf")
    return np.array(t, dtype=np.float64)


def _init_tensor(a: Any, name: str, shape: tuple[int, ...], R: int, device, dtype) -> torch.Tensor:
    """:func:`_init_array` as a tensor on ``device`` in ``dtype``."""
    import torch

    return torch.as_tensor(_init_array(a, name, shape, R)).to(device=device, dtype=dtype)


def _softmax_rows(lg: torch.Tensor) -> torch.Tensor:
    """Row softmax over the last axis, max-subtracted (stable at any scale); new tensor."""
    e = (lg - lg.amax(-1, keepdim=True)).exp_()
    return e.div_(e.sum(-1, keepdim=True))


def _np(t: torch.Tensor) -> np.ndarray:
    import torch

    return t.detach().to("cpu", torch.float64).numpy()


def _progress(steps: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=steps, desc="gd", unit="step")


#: A KeyboardInterrupt raised inside a GD run carries the records made so far in this attribute:
#: (iterations list, W list of (R, d, d) arrays, loss list of (R,) arrays), all of equal length.
GD_RECORDS_ATTR = "gd_records"


def _drive(steps_from, steps: int, rec: set[int], progress: bool, current_W, loss_of):
    """Run ``steps_from(k, stop)`` up to each record point and record (iterations, W, loss) there; the
    hot loop itself has no checks. Progress is updated every 100 steps when asked for. An interrupt
    (Ctrl-C) propagates with the records so far attached (:data:`GD_RECORDS_ATTR`)."""
    its: list[int] = []
    Ws: list[Any] = []
    Ls: list[Any] = []
    bar = _progress(steps, progress)
    k = 0
    try:
        for stop in [*sorted(rec), steps]:
            while k < stop:
                chunk = min(stop, k + 100) if bar is not None else stop
                steps_from(k, chunk)
                if bar is not None:
                    bar.update(chunk - k)
                k = chunk
            if stop in rec and (not its or its[-1] != stop):
                Wk = current_W()
                Lk = loss_of(Wk)
                its.append(stop)
                Ws.append(Wk)
                Ls.append(Lk)
    except KeyboardInterrupt as exc:
        # the records so far travel with the interrupt (GD_RECORDS_ATTR): attnsvm gd writes them out
        def host(a):
            return _np(a) if hasattr(a, "detach") else np.asarray(a)

        setattr(exc, GD_RECORDS_ATTR, (list(its), [host(w) for w in Ws], [host(v) for v in Ls]))
        raise
    finally:
        if bar is not None:
            bar.close()
    return its, Ws, Ls


def _check_m(m: Any, d: int) -> int:
    """The (K, Q) width: d by default, else an integer >= 1."""
    m = d if m is None else m
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InvalidInputError(f"m must be an integer >= 1, got {m!r}")
    return int(m)


def _record_points(steps: int, record_every: Any) -> set[int]:
    """The recorded iterations: none; 0, k, 2k, ... for ``record_every=k``; or the given iterations; and the
    last one (numerics.gd.run_gd)."""
    if record_every is None:
        return set()
    if isinstance(record_every, (int, np.integer)):
        return set(range(0, steps + 1, int(record_every))) | {steps}
    return {int(k) for k in record_every} | {steps}


def _norm_floor(entry_bound: torch.Tensor, nT: int) -> torch.Tensor:
    """Floor of the computed ||G||_F^2 (see NORM_FLOOR_FACTOR) for token weights rescaled to max |c| = 1
    (so ||c||_1 <= nT and the rounding bound is eps * bound * (nT)^2)."""
    import torch

    eps, tiny = torch.finfo(entry_bound.dtype).eps, torch.finfo(entry_bound.dtype).tiny
    return (NORM_FLOOR_FACTOR * eps * nT ** 2 * entry_bound).clamp_min(tiny)
