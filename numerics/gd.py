"""The one gradient-descent engine: ``run_gd(data, cfg, *, init, head, device, record_every)`` (THEORY.md
§2, §4-6).

A run is three parts, each pluggable, and one driver:

* the **model** (:class:`Model`; ``cfg.param``): which parameters GD moves and how they make the attention
  matrix W. Built in: :data:`W_MODEL` (W itself) and :data:`KQ_MODEL` (W = K Q^T, K and Q (d, m)). A model
  is three methods -- ``start`` (the initial parameters), ``grads`` (the gradient of the loss per parameter)
  and ``W`` (the current attention matrix, for records and the loss) -- so a further model fills the same
  slot and runs on the same driver, step hook and geometries (the explicit path below): sequence / causal
  attention (numerics.sequence), the prompt (numerics.prompt), next-token prediction
  (numerics.ntp_gd.NTPModel) and the linear NTP model (numerics.ntp_linear.LinearNTPModel) do.
* the **geometry** (:class:`Geometry`; ``cfg.geometry``): how a gradient becomes a step. :data:`PLAIN`
  (W <- W - lr grad), :data:`NORMALIZED` (each parameter moves by lr grad / ||grad||_F, per instance; the
  authors' protocol) and :class:`Mirror` (the l_p mirror map psi(W) = (1/p) sum |W_ab|^p: grad psi(W+) =
  grad psi(W) - lr grad L(W), or with ``normalized=True`` the gradient divided by its dual (l_q, 1/p + 1/q
  = 1) norm; p = 2 is plain (resp. normalised) GD exactly). A geometry may also schedule the step size
  (:meth:`Geometry.step_size`, step k of n): the regularisation paths' geometries do,
  numerics.regpath.Projected (projected normalised GD onto the ball of W or (K, Q), optionally a cone) and
  numerics.prompt_path.OnSphere (normalised GD on the prompt's sphere), so the paths' steps run on this
  driver and its step hook.
* the **step size** ``cfg.lr``: one number, or one per instance (an array of R numbers): a batch of
  instances with their own step sizes is one run.

The driver (:func:`run_gd`) validates, draws or checks the start, picks the code path by one rule
(:func:`code_path`) and records iterations 0, k, 2k, ... and the last. The code paths compute the same
iterates up to rounding (tested):

* ``"numba"``: the compiled CPU kernels of :mod:`numerics.kernels`, all steps of all instances in one
  call (normalised geometry, W or (K, Q), linear head, no weight decay, CPU float64, one scalar step
  size), 4-7x faster than the tensor programs at the paper's sizes; and the ℓp mirror-descent kernel for a
  :class:`Mirror` geometry on W (plain or normalised, a step size per instance allowed; 1.3-13x faster than
  the fused mirror program on the md checks' B.2 shape, p = 1.75 the least: math.pow per entry).
  ``backend="auto"`` takes them for runs of at least :data:`KERNEL_MIN_WORK` instance-steps.
* ``"fused"``: the batched tensor programs of :mod:`numerics.gd_torch` (CPU or CUDA, any head; plain or
  normalised; W in logit space, (K, Q) through the closed-form gradient without forming W), and a model's
  own program where it has one for the run (:meth:`Model.fused_applies`, :meth:`Model.run_fused`: plain GD
  in logit space for the NTP and linear NTP models, numerics.gd_torch.run_ce_logits), and the mirror program
  for a :class:`Mirror` geometry on W without weight decay (numerics.gd_torch.run_mirror: the dual variable
  held between steps, the step's two products through a per-instance feature map on CPU), never while a step
  hook is registered.
* ``"explicit"``: one loop for every model and geometry (:func:`numerics.gd_torch.run_explicit`): the
  parameters are held explicitly, each step is ``model.grads`` (+ weight decay), then the step hook, then
  ``geometry.update``. It serves the mirror geometries on (K, Q) or with weight decay, W with weight decay,
  models other than W / (K, Q) and every run while a step hook is registered.

The step hook. :func:`step_hook` registers, for the runs inside a ``with`` block (or
:func:`add_step_hook` until removed), a factory called once at the start of every run; what it returns
is called on every step with the gradients (one (R, ...) tensor per parameter, weight decay included) and
the step size (a float, or an (R, 1, 1) tensor) and returns the pair the geometry then uses (gradients
None: the step is skipped). It is the one place where a run's step can be changed from outside; while
one is registered every run takes the explicit path, so a changed step reaches all backends alike.

Examples
--------
>>> import numpy as np
>>> from numerics.data import random_unit_sphere
>>> datas = random_unit_sphere(4, 5, 6, rng=np.random.default_rng(0), R=3)
>>> res = run_gd(datas, GDConfig(steps=50, lr=0.1))
>>> res.W.shape, res.loss.shape
((3, 6, 6), (3,))
>>> AUTHORS.lr, AUTHORS.steps, AUTHORS.geometry is NORMALIZED, AUTHORS_KQ.wd == AUTHORS_WD > 0
(0.1, 2000, True, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import gd_common, kernels
from .data import AttentionData, stack
from .errors import InvalidInputError
from .gd_common import (
    NORM_FLOOR_FACTOR,
    GDResult,
    _check_m,
    _drive,
    _init_array,
    _init_tensor,
    _normal,
    _np,
    _prepare,
    _record_points,
)
from .losses import LOSS_NP, check_loss
from .tokens import softmax_rows

if TYPE_CHECKING:
    from . import attention as att

__all__ = [
    "AUTHORS", "AUTHORS_KQ", "AUTHORS_WD", "BACKENDS", "KERNEL_BLOCK", "KERNEL_CHUNK", "KERNEL_MIN_WORK",
    "KQ_MODEL", "NORMALIZED", "PLAIN", "W_MODEL", "GDConfig", "Geometry", "Mirror", "Model", "RandomInit",
    "add_step_hook", "code_path", "run_gd", "step_hook", "uniform_init", "warm_kernels",
]

BACKENDS = ("auto", "torch", "numba")


# -- the geometry plug ------------------------------------------------------------------------------

class Geometry:
    """How a gradient becomes a step: :meth:`update` moves the parameters in place.

    ``params`` and ``grads``: one (R, ...) tensor per parameter; ``lr`` a float or an (R, 1, 1) tensor;
    ``tiny`` the dtype's smallest normal number (a norm floor). ``scale_free``: the step does not depend on
    the gradient's scale (then the engine may rescale the token weights to max |c| = 1 first, which keeps
    a saturated softmax's tiny gradient representable)."""

    name = "geometry"
    scale_free = False

    def update(self, params: list, grads: list, lr: Any, tiny: float) -> None:
        raise NotImplementedError

    def step_size(self, lr: Any, k: int, steps: int) -> Any:
        """The step size of step ``k`` of ``steps`` (``lr``: the run's, a float or an (R, 1, 1) tensor): the
        run's own here; a geometry with a schedule overrides it (numerics.regpath.Projected). The step hook
        sees, and may change, what this returns."""
        return lr


def _descend(params: list, grads: list, lr: Any, tiny: float, norm_ord: float | None) -> None:
    """p <- p - lr g, or with ``norm_ord`` p <- p - lr g / ||g||_ord (per instance), in place. A per-instance
    ``lr`` (an (R, 1, 1) tensor, shaped for W) is reshaped to each parameter's rank (the prompt p is (R,
    dk))."""
    import torch

    for p, g in zip(params, grads, strict=True):
        lr_p = lr if isinstance(lr, float) else lr.reshape((-1,) + (1,) * (p.ndim - 1))
        if norm_ord is None:
            if isinstance(lr_p, float):
                p.sub_(g, alpha=lr_p)
            else:
                p.sub_(g * lr_p)
            continue
        dims = tuple(range(1, g.ndim))
        if norm_ord == 2.0:
            nrm = torch.linalg.vector_norm(g, ord=2, dim=dims, keepdim=True)
        else:  # (sum |g|^q)^(1/q): vector_norm's general order is ~2.4x slower here (measured, (100, 8, 8))
            nrm = g.abs().pow_(norm_ord).sum(dims, keepdim=True).pow_(1.0 / norm_ord)
        nrm = nrm.clamp_min(tiny)
        if isinstance(lr_p, float):
            p.addcdiv_(g, nrm, value=-lr_p)
        else:
            p.sub_(g / nrm * lr_p)


@dataclass(frozen=True)
class _Plain(Geometry):
    """W <- W - lr grad."""

    name = "plain"

    def update(self, params, grads, lr, tiny):
        _descend(params, grads, lr, tiny, None)


@dataclass(frozen=True)
class _Normalized(Geometry):
    """W <- W - lr grad / ||grad||_F, per instance and per parameter (K and Q separately)."""

    name = "normalized"
    scale_free = True

    def update(self, params, grads, lr, tiny):
        _descend(params, grads, lr, tiny, 2.0)


@dataclass(frozen=True)
class Mirror(Geometry):
    """Mirror descent with the l_p potential psi(W) = (1/p) sum_ab |W_ab|^p, p > 1.

    grad psi(W) = sign(W) |W|^(p-1) (entrywise); a step is grad psi(W+) = grad psi(W) - lr g with
    g = grad L(W) (``normalized=False``) or g = grad L(W) / ||grad L(W)||_q, the dual norm, q = p / (p - 1)
    (``normalized=True``); W+ = sign(u) |u|^(1/(p-1)) for u = grad psi(W+). p = 2: psi = ||W||^2 / 2,
    grad psi the identity and the step plain (normalised) GD exactly."""

    p: float
    normalized: bool = False

    def __post_init__(self):
        if (isinstance(self.p, bool) or not isinstance(self.p, (int, float, np.integer, np.floating))
                or not math.isfinite(self.p) or self.p <= 1):
            raise InvalidInputError(f"the mirror map's p must be a finite number > 1, got {self.p!r}")
        object.__setattr__(self, "p", float(self.p))

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"mirror-l{self.p:g}" + ("-normalized" if self.normalized else "")

    @property
    def scale_free(self) -> bool:  # type: ignore[override]
        return self.normalized

    def dual(self, w):
        """grad psi(W) = sign(W) |W|^(p-1), a new tensor."""
        import torch

        return torch.sign(w) * w.abs().pow(self.p - 1.0)

    def primal(self, u, out) -> None:
        """W = (grad psi)^{-1}(u) = sign(u) |u|^(1/(p-1)), written into ``out`` (copysign: sign(u) |u|^a
        up to the sign of a zero)."""
        import torch

        torch.pow(u.abs(), 1.0 / (self.p - 1.0), out=out)
        out.copysign_(u)

    def dual_step(self, u, g, lr, tiny) -> None:
        """u <- u - lr g, or with ``normalized`` u <- u - lr g / ||g||_q (per instance), in place: the step
        on the dual variable is PLAIN's / NORMALIZED's with the dual norm (p = 2: theirs bit for bit)."""
        _descend([u], [g], lr, tiny, self.p / (self.p - 1.0) if self.normalized else None)

    def update(self, params, grads, lr, tiny):
        for w, g in zip(params, grads, strict=True):
            u = self.dual(w)
            self.dual_step(u, g, lr, tiny)
            self.primal(u, w)


#: Plain GD: W <- W - lr grad.
PLAIN: Geometry = _Plain()
#: Normalised GD (the authors'): W <- W - lr grad / ||grad||_F per instance and parameter.
NORMALIZED: Geometry = _Normalized()
_GEOMETRIES = {"plain": PLAIN, "normalized": NORMALIZED}


# -- the model plug ---------------------------------------------------------------------------------

class Model:
    """What GD moves: the slot a new model family fills (e.g. next-token prediction).

    ``start(init, R, d, m, device, dtype)``: the initial parameters, a list of (R, ...) tensors, from
    ``init`` (an explicit array / tuple, or a :class:`RandomInit`). ``grads(batch, head, params, loss,
    gamma, direction_only)``: the gradient of the (unregularised) loss per parameter, each instance of
    the batch independently (``gamma``: what :meth:`context` precomputed); ``direction_only`` allows one
    positive factor per instance on all of them (only scale-free geometries ask). ``W(params)``: the
    current attention matrix (R, d, d), a new tensor (records keep it). ``weight_decay`` adds
    wd * sum ||param||_F^2 for every parameter.

    Where the data are not attention data (X, Y, Z, v), a model also overrides :meth:`prepare` (the
    run's data as a batch whose ``X`` is (R, n, T, d), and the head), :meth:`context` and :meth:`loss`;
    numerics.sequence.SequenceModel (sequence / causal attention, every position a query) and
    numerics.ntp_gd.NTPModel (next-token prediction) are two."""

    name = "model"

    def prepare(self, data: Any, head: Any, device: Any, dtype: Any) -> tuple[Any, Any]:
        """(batch, head) of attention data (numerics.attention.batch_from_data; head None: data.v); an
        attention.AttentionBatch with an explicit head is used as it is (the regularisation paths' batches of
        candidates, numerics.regpath)."""
        from . import attention as att

        if isinstance(data, att.AttentionBatch) and head is not None:
            return data, head
        return _prepare(data, head, device, dtype)

    def context(self, batch, head):
        """What every step's gradient reuses: the linear head's fixed scores (None for another head)."""
        return head.fixed_scores(batch.X, batch.Y)

    def loss(self, batch, head, W, loss: str):
        """L(W) per instance (R,)."""
        from . import attention as att

        return att.loss(batch.X, batch.Y, batch.Z, W, head, loss)

    def start(self, init: Any, R: int, d: int, m: int, device: Any, dtype: Any) -> list:
        raise NotImplementedError

    def grads(self, batch, head, params: list, loss: str, gamma, direction_only: bool) -> list:
        raise NotImplementedError

    def W(self, params: list):
        raise NotImplementedError

    def fused_applies(self, cfg: GDConfig) -> bool:
        """Whether the model's own fused tensor program (:meth:`run_fused`) runs ``cfg``: False here (the
        explicit loop). :func:`code_path` asks only while no step hook is registered, so a hook -- and
        whatever it changes -- always sees the explicit loop's steps."""
        return False

    def run_fused(self, batch, head, params: list, cfg: GDConfig, lr: Any, record_every: Any) -> GDResult:
        """The model's fused program where :meth:`fused_applies` (the explicit loop's iterates up to
        rounding; ``lr`` a float or an (R, 1, 1) tensor, ``params`` from :meth:`start`)."""
        raise NotImplementedError


@functools.cache
def _attention() -> Any:
    """numerics.attention, imported on first use (importing numerics.gd never imports torch); cached, since a
    relative import inside the per-step functions below costs ~1 us a step (measured: ~4 % of a
    regularisation path's projected step)."""
    from . import attention

    return attention


def _token_weights(batch, head, W, loss, gamma, direction_only, logits=None):
    """The token weights c (R, n, T) of grad L(W) = (1/n) sum_i X_i^T c_i z_i^T (attention.token_weights),
    rescaled to max |c| = 1 when ``direction_only``. ``logits``: x_it^T W z_i (R, n, T) where the caller has
    them (then ``W`` is not read)."""
    import torch

    att = _attention()
    s = gd_common._softmax_rows(att.logits(batch.X, batch.Z, W) if logits is None else logits)
    c = att.token_weights(batch.X, batch.Y, s, head, loss, gamma)[1]
    if direction_only:  # c is token_weights' own new tensor: divided in place
        # max |c| per instance (abs + amax: the inf-norm exactly, ~4x faster than vector_norm's inf order)
        c = c.div_(c.abs().amax((1, 2), keepdim=True).clamp_min_(torch.finfo(c.dtype).tiny))
    return c


@dataclass(frozen=True)
class _WModel(Model):
    """GD on W itself."""

    name = "W"

    def start(self, init, R, d, m, device, dtype):
        W0 = init.scale * _normal((d, d), R, init.seed) if isinstance(init, RandomInit) else init
        return [_init_tensor(W0, "W", (d, d), R, device, dtype)]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        c = _token_weights(batch, head, params[0], loss, gamma, direction_only)
        return [_attention().grad_from_weights(batch.X, batch.Z, c)]

    def W(self, params):
        return params[0].clone()


@dataclass(frozen=True)
class _KQModel(Model):
    """GD on (K, Q), W = K Q^T: grad_K = grad L(W) Q, grad_Q = grad L(W)^T K."""

    name = "KQ"

    def start(self, init, R, d, m, device, dtype):
        if isinstance(init, RandomInit):
            seed = init.seed
            K0 = init.scale * _normal((d, m), R, seed)
            Q0 = init.scale * _normal(
                (d, m), R, [s + 1 for s in seed] if not isinstance(seed, (int, np.integer)) else seed + 1
            )
        else:
            if not (isinstance(init, (tuple, list)) and len(init) == 2):
                raise InvalidInputError("init for param='KQ' must be a pair (K, Q)")
            K0, Q0 = init
        return [_init_tensor(K0, "K", (d, m), R, device, dtype),
                _init_tensor(Q0, "Q", (d, m), R, device, dtype)]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        import torch

        K, Q = params
        c = _token_weights(batch, head, torch.bmm(K, Q.mT), loss, gamma, direction_only)
        G = _attention().grad_from_weights(batch.X, batch.Z, c)
        return [torch.bmm(G, Q), torch.bmm(G.mT, K)]

    def W(self, params):
        import torch

        return torch.bmm(params[0], params[1].mT)


#: GD on W (``param="W"``).
W_MODEL: Model = _WModel()
#: GD on (K, Q) with W = K Q^T (``param="KQ"``).
KQ_MODEL: Model = _KQModel()
_MODELS = {"W": W_MODEL, "KQ": KQ_MODEL}


# -- settings ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RandomInit:
    """The default start: ``scale`` * N(0, 1) entries drawn on CPU from ``seed`` (an int for the batch, or
    one int per instance), so CPU and CUDA start equal; for (K, Q), Q from seed + 1."""

    seed: int | tuple[int, ...] = 0
    scale: float = 0.01

    def __post_init__(self):
        if not (isinstance(self.scale, (int, float)) and not isinstance(self.scale, bool)
                and math.isfinite(self.scale) and self.scale >= 0):
            raise InvalidInputError(f"init_scale must be a finite number >= 0, got {self.scale!r}")
        if isinstance(self.seed, (list, np.ndarray)):
            object.__setattr__(self, "seed", tuple(self.seed))


@dataclass(frozen=True)
class GDConfig:
    """The settings of one GD run (everything but the data, the start, the head, the device and what is
    recorded). Frozen; derive variants with :meth:`but` (``AUTHORS.but(param="KQ")``).

    steps (>= 0); lr > 0, one number or one per instance (a sequence of R numbers, kept as a tuple);
    geometry: :data:`NORMALIZED` (default), :data:`PLAIN`, a :class:`Mirror`, or "normalized" / "plain";
    loss: a name of numerics.losses; param: "W", "KQ" or a :class:`Model`; m: the (K, Q) width (d by
    default); wd >= 0: the loss gets wd * sum ||param||_F^2 (its gradient 2 wd param joins the data
    gradient before the geometry: with wd > 0 the data gradient keeps its true scale); backend: "auto",
    "torch" or "numba" (:func:`code_path`); dtype: a torch dtype (float64 by default); progress: a
    progress bar on stderr."""

    steps: int
    lr: float | tuple[float, ...]
    geometry: Geometry | str = "normalized"
    loss: str = "logistic"
    param: str | Model = "W"
    m: int | None = None
    wd: float = 0.0
    backend: str = "auto"
    dtype: Any = None
    progress: bool = False

    def __post_init__(self):  # noqa: C901 (one check per field)
        put = object.__setattr__
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 0:
            raise InvalidInputError(f"steps must be an integer >= 0, got {self.steps!r}")
        put(self, "steps", int(self.steps))
        put(self, "lr", _check_lr(self.lr))
        geometry = _GEOMETRIES.get(self.geometry, self.geometry) if isinstance(self.geometry, str) \
            else self.geometry
        if not isinstance(geometry, Geometry):
            raise InvalidInputError(
                f"geometry must be 'plain', 'normalized' or a numerics.gd.Geometry, got {self.geometry!r}")
        put(self, "geometry", geometry)
        check_loss(self.loss)
        if not (self.param in _MODELS or isinstance(self.param, Model)):
            raise InvalidInputError(f"unknown param {self.param!r}; expected 'W' or 'KQ' (or a Model)")
        if self.m is not None:
            _check_m(self.m, 1)
        wd = self.wd
        if (isinstance(wd, bool) or not isinstance(wd, (int, float, np.floating, np.integer))
                or not math.isfinite(wd) or wd < 0):
            raise InvalidInputError(f"weight_decay must be a finite number >= 0, got {wd!r}")
        put(self, "wd", float(wd))
        if self.backend not in BACKENDS:
            raise InvalidInputError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")

    @property
    def model(self) -> Model:
        return _MODELS[self.param] if isinstance(self.param, str) else self.param

    @property
    def normalized(self) -> bool:
        """Whether the step ignores the gradient's scale (normalised GD, or a normalised mirror map)."""
        return cast(Geometry, self.geometry).scale_free

    def but(self, **changes: Any) -> GDConfig:
        """A copy with ``changes`` (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)


def _check_lr(lr: Any) -> float | tuple[float, ...]:
    def ok(x):
        return (not isinstance(x, bool) and isinstance(x, (int, float, np.floating, np.integer))
                and math.isfinite(x) and x > 0)

    if isinstance(lr, (Sequence, np.ndarray)) and not isinstance(lr, str):
        vals = tuple(np.asarray(lr, dtype=object).ravel().tolist()) if np.ndim(lr) <= 1 else None
        if not vals or not all(ok(x) for x in vals):
            raise InvalidInputError(f"lr must be a finite number > 0 or a sequence of them, got {lr!r}")
        return tuple(float(x) for x in vals)
    if not ok(lr):
        raise InvalidInputError(f"lr must be a finite number > 0, got {lr!r}")
    return float(lr)


#: The authors' weight decay for (K, Q): torch.finfo(torch.double).eps.
AUTHORS_WD = float(np.finfo(np.float64).eps)

#: The authors' protocol (the umich-sota/TF-as-SVM notebooks as this project reproduces it): normalised
#: GD, step 0.1, 2000 steps, on W. Every reproduction and theorem that runs "the authors' protocol"
#: passes this value (or :meth:`GDConfig.but` of it).
AUTHORS = GDConfig(steps=2000, lr=0.1, geometry=NORMALIZED)
#: ... on (K, Q): the loss gets eps (||K||_F^2 + ||Q||_F^2), eps = float64 machine epsilon (their W loss
#: has no such term); K, Q start from nn.Linear's default initialisation (:func:`uniform_init`).
AUTHORS_KQ = AUTHORS.but(param="KQ", wd=AUTHORS_WD)


def uniform_init(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    """nn.Linear(d, ·)'s default weight initialisation, the authors' start: uniform on ±1/√d (fan_in = d)."""
    b = 1.0 / np.sqrt(d)
    return rng.uniform(-b, b, size=shape)


# -- the step hook ----------------------------------------------------------------------------------

#: A step transform: (grads, lr) -> (grads or None, lr), called on every step of a run.
StepTransform = Callable[[list, Any], tuple[Any, Any]]
_STEP_HOOKS: list[Callable[[], StepTransform]] = []


def add_step_hook(factory: Callable[[], StepTransform]) -> Callable[[], None]:
    """Register ``factory`` (called once per run; it returns the run's step transform) for every later
    run in this process; returns the function that removes it. See the module doc."""
    _STEP_HOOKS.append(factory)

    def remove() -> None:
        if factory in _STEP_HOOKS:
            _STEP_HOOKS.remove(factory)

    return remove


@contextlib.contextmanager
def step_hook(factory: Callable[[], StepTransform]) -> Iterator[None]:
    """Register ``factory`` for the runs inside the ``with`` block (:func:`add_step_hook`)."""
    remove = add_step_hook(factory)
    try:
        yield
    finally:
        remove()


def step_hooks() -> tuple[Callable[[], StepTransform], ...]:
    """The registered step-hook factories (empty in every normal run)."""
    return tuple(_STEP_HOOKS)


def _run_transform() -> StepTransform | None:
    """The step transform of a run that starts now: the registered hooks' transforms, composed in order."""
    if not _STEP_HOOKS:
        return None
    fs = [f() for f in _STEP_HOOKS]

    def transform(grads, lr):
        for f in fs:
            grads, lr = f(grads, lr)
            if grads is None:
                break
        return grads, lr

    return transform


# -- the driver -------------------------------------------------------------------------------------

#: backend="auto" compiles (first use of a shape on a machine, a few seconds; cached on disk after) only
#: for runs of at least this many instance-steps: below it the torch path finishes sooner.
KERNEL_MIN_WORK = 100_000

#: Steps per kernel call: between calls Python handles signals (Ctrl-C) and progress.
KERNEL_CHUNK = 250

#: Instances per kernel call (a multiple of kernels.LANES): larger batches run block by block, so the
#: working set (~5 KiB per instance at the paper's sizes) stays in L2 and the cost per instance-step
#: stays flat in R instead of rising once the batch spills to memory.
KERNEL_BLOCK = 128


def run_gd(
    data: AttentionData | Sequence[AttentionData] | Any,
    cfg: GDConfig,
    *,
    init: Any = None,
    head: att.Head | None = None,
    device: Any = "cpu",
    record_every: int | Sequence[int] | None = None,
) -> GDResult:
    """GD with ``cfg`` on every instance of ``data`` at once (R instances of one shape).

    ``data``: attention data (one or a list of R of one shape), or what ``cfg.model`` prepares (e.g. a
    numerics.sequence.SeqBatch). ``init``: the start -- W (R, d, d) or (d, d) for every instance, for "KQ" a
    pair (K, Q) of (R, d, m) or (d, m) arrays -- or a :class:`RandomInit` (None: ``RandomInit()``, seed 0 and
    scale 0.01). ``head=None`` uses the linear head data.v. ``record_every=k`` records iterations 0, k, 2k,
    ... and the last one (GDResult.iterations, W_traj, loss_traj); a sequence of iterations in [0, steps]
    (e.g. a log grid) records those and the last one. The code path: :func:`code_path`.
    """
    if not isinstance(cfg, GDConfig):
        raise InvalidInputError(f"cfg must be a numerics.gd.GDConfig, got {type(cfg).__name__}")
    _check_record(record_every, cfg.steps)
    init = RandomInit() if init is None else init
    if not _STEP_HOOKS:
        fast = _run_kernel_numpy(data, cfg, init, device, record_every, head)
        if fast is not None:
            return fast
    import torch  # every other run is a tensor program (or needs torch's generator for its initialisation)

    from . import gd_torch

    dtype = torch.float64 if cfg.dtype is None else cfg.dtype
    model = cfg.model
    batch, h = model.prepare(data, head, device, dtype)
    R, n, T, d = batch.X.shape
    lr = _lr_for(cfg.lr, R)
    width = _check_m(cfg.m, d) if model is KQ_MODEL else d  # the (K, Q) width m; d otherwise
    path = code_path(cfg, batch, h, isinstance(lr, float))
    if path == "numba":
        try:
            kernels.kernels(n, T, d, width)
        except InvalidInputError as exc:  # e.g. no writable kernel cache: auto falls back, numba reports it
            if cfg.backend == "numba":
                raise
            warnings.warn(f"{exc}; GD takes the torch path", RuntimeWarning, stacklevel=2)
            path = "fused"
    params = model.start(init, R, d, width, batch.X.device, dtype)
    if path == "numba":
        return _run_kernel(batch, h, model.name, params, cfg, lr, record_every)  # (md_steps for a Mirror)
    lr_arg = lr if isinstance(lr, float) else \
        torch.as_tensor(lr, dtype=dtype, device=batch.X.device)[:, None, None]  # (R, 1, 1)
    if path == "explicit":
        return gd_torch.run_explicit(batch, h, model, params, cfg, lr_arg, record_every, _run_transform())
    if _mirror_fused(cfg):
        return gd_torch.run_mirror(batch, h, model, params, cfg, lr_arg, record_every, _token_weights)
    if model not in (W_MODEL, KQ_MODEL):
        return model.run_fused(batch, h, params, cfg, lr_arg, record_every)
    if model is KQ_MODEL:
        return gd_torch.run_kq(batch, h, params[0], params[1], cfg, lr_arg, record_every)
    return gd_torch.run_w(batch, h, params[0], cfg, lr_arg, record_every)


def _check_record(record_every: Any, steps: int) -> None:
    """InvalidInputError unless ``record_every`` is None, an integer >= 1 or iterations in [0, steps]."""
    def is_int(k):
        return not isinstance(k, bool) and isinstance(k, (int, np.integer))

    if record_every is None or (is_int(record_every) and record_every >= 1):
        return
    if isinstance(record_every, (Sequence, np.ndarray)) and not isinstance(record_every, str) \
            and all(is_int(k) and 0 <= k <= steps for k in record_every):
        return
    raise InvalidInputError(f"record_every must be None, an integer >= 1 or a sequence of iterations in "
                            f"[0, {steps}], got {record_every!r}")


def _lr_for(lr: float | tuple[float, ...], R: int) -> float | np.ndarray:
    """The step size of a run of R instances: a float, or an (R,) array where the instances differ."""
    if isinstance(lr, float):
        return lr
    if len(lr) != R:
        raise InvalidInputError(f"lr has {len(lr)} entries for {R} instances (one per instance)")
    if len(set(lr)) == 1:
        return lr[0]
    return np.asarray(lr, dtype=np.float64)


def code_path(cfg: GDConfig, batch, head, scalar_lr: bool = True) -> str:
    """The one rule choosing a run's code path: "explicit", "numba" or "fused" (module doc).

    explicit: while a step hook is registered, for a non-built-in geometry (unless a :class:`Mirror` on W
    without weight decay: then the kernels or "fused", numerics.gd_torch.run_mirror, as below), a model other
    than W / (K, Q) (unless that model has a fused program for the run, :meth:`Model.fused_applies`: then
    "fused", the model's :meth:`Model.run_fused`), or W with weight decay. numba: ``backend="numba"`` (an
    error where the kernels do not apply) or "auto" with at least KERNEL_MIN_WORK instance-steps, where they
    apply (normalised GD or a Mirror geometry on W, linear head, no weight decay, CPU float64, one step size
    unless Mirror, numba available). fused otherwise."""
    model = cfg.model
    builtin = model in (W_MODEL, KQ_MODEL) and cfg.geometry in (PLAIN, NORMALIZED)
    if _STEP_HOOKS or not builtin or (model is W_MODEL and cfg.wd > 0):
        if not _STEP_HOOKS and not builtin and _mirror_fused(cfg):
            return _kernel_or_fused(cfg, batch, head, scalar_lr)  # the mirror program on W, or md_steps
        if cfg.backend == "numba" and not _STEP_HOOKS:
            raise InvalidInputError(f"backend='numba' does not apply to this run: {_why_explicit(cfg)}; "
                                    "use backend='torch' or 'auto'")
        if not _STEP_HOOKS and not builtin and model.fused_applies(cfg):
            return "fused"  # the model's own program (Model.run_fused)
        return "explicit"
    return _kernel_or_fused(cfg, batch, head, scalar_lr)


def _kernel_or_fused(cfg: GDConfig, batch, head, scalar_lr: bool) -> str:
    """code_path's choice between the compiled kernels and the fused tensor programs, for normalised GD on W
    or (K, Q) and for a Mirror geometry on W (numerics.kernels.md_steps: plain or normalised, any step sizes
    per instance)."""
    import torch

    from . import attention as att

    R = batch.X.shape[0]
    if cfg.backend == "torch" or (cfg.backend == "auto" and R * cfg.steps < KERNEL_MIN_WORK):
        return "fused"  # (before kernels.available(): a small run does not even import numba)
    mirror = _mirror_fused(cfg)
    why = None
    if cfg.geometry is not NORMALIZED and not mirror:
        why = "normalized=False"
    elif cfg.wd > 0:
        why = "weight_decay > 0"
    elif not isinstance(head, att.LinearHead):
        why = f"a {type(head).__name__} (the kernels take a linear head)"
    elif batch.X.device.type != "cpu":
        why = f"device {batch.X.device}"
    elif batch.X.dtype != torch.float64:
        why = f"dtype {batch.X.dtype}"
    elif not scalar_lr and not mirror:
        why = "a per-instance step size"
    elif not kernels.available():
        why = "numba is not installed (or ATTNSVM_NO_NUMBA is set)"
    if cfg.backend == "numba" and why is not None:
        raise InvalidInputError(
            f"backend='numba' does not apply to this run: {why}; use backend='torch' or 'auto'")
    return "numba" if why is None else "fused"


def _mirror_fused(cfg: GDConfig) -> bool:
    """Whether the fused mirror-descent program (numerics.gd_torch.run_mirror) runs ``cfg``: a Mirror
    geometry on W without weight decay (asked only while no step hook is registered)."""
    return cfg.model is W_MODEL and isinstance(cfg.geometry, Mirror) and cfg.wd == 0


def _why_explicit(cfg: GDConfig) -> str:
    if cfg.model not in (W_MODEL, KQ_MODEL):
        return f"the model {cfg.model.name}"
    if cfg.geometry not in (PLAIN, NORMALIZED):
        return f"the geometry {cast(Geometry, cfg.geometry).name}"
    return "weight_decay > 0"


def _is_float64(dtype: Any) -> bool:
    if dtype is None:
        return True
    import sys

    torch = sys.modules.get("torch")  # a torch dtype can only come from an imported torch
    return torch is not None and dtype is torch.float64


def _run_kernel_numpy(data, cfg: GDConfig, init, device, record_every, head) -> GDResult | None:
    """The compiled-kernel run without torch: normalised GD on W or (K, Q), the data's own linear heads
    (``head=None``), no weight decay, CPU float64, one step size, an explicit ``init``, and a run the
    kernels take (``backend="numba"``, or "auto" with at least KERNEL_MIN_WORK instance-steps). None when
    any of that does not hold: then the torch path decides (and reports why numba does not apply, or draws
    the default initialisation from torch's generator). Arrays, checks and results as the torch path's
    kernel run."""
    cpu = device is None or (isinstance(device, str) and device == "cpu")
    if (cfg.backend == "torch" or cfg.geometry is not NORMALIZED or cfg.wd > 0 or head is not None
            or isinstance(init, RandomInit) or not cpu or not _is_float64(cfg.dtype)
            or cfg.model not in (W_MODEL, KQ_MODEL)):
        return None
    datas = [data] if isinstance(data, AttentionData) else data
    if (not isinstance(datas, Sequence) or not datas or not all(isinstance(dt, AttentionData) for dt in datas)
            or any(dt.v is None for dt in datas)):
        return None  # the torch path reports what is wrong with the data
    R = len(datas)
    lr = _lr_for(cfg.lr, R)
    if (not isinstance(lr, float) or (cfg.backend == "auto" and R * cfg.steps < KERNEL_MIN_WORK)
            or not kernels.available()):
        return None
    arrays = stack(datas)
    X, Y, Z, v = (np.asarray(arrays[k], dtype=np.float64) for k in ("X", "Y", "Z", "v"))
    _, n, T, d = X.shape
    param = cfg.model.name
    width = _check_m(cfg.m, d) if param == "KQ" else d
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
    return _kernel_gd(X, Z, gamma, param, params, cfg, lr, record_every)


def _run_kernel(batch, head, param, params, cfg, lr, record_every) -> GDResult:
    """The torch path's entry to the kernels (tensors, any LinearHead): :func:`_kernel_gd` on numpy copies."""
    gamma = head.fixed_scores(batch.X, batch.Y)
    return _kernel_gd(_np(batch.X), _np(batch.Z), _np(gamma), param, [_np(p) for p in params], cfg, lr,
                      record_every)


def _kernel_loss(X: np.ndarray, Z: np.ndarray, gamma: np.ndarray, W: np.ndarray, loss: str) -> np.ndarray:
    """L(W) (R,) in numpy for a linear head: (1/n) sum_i l(s_i^T gamma_i) with s_i = softmax(X_i W z_i) and
    gamma_i = Y_i X_i v, i.e. numerics.attention.loss up to rounding."""
    lg = np.matmul(X, np.matmul(Z, np.swapaxes(W, -1, -2))[..., None])[..., 0]  # (R, n, T)
    s = softmax_rows(lg)
    return LOSS_NP[loss]((s * gamma).sum(-1)).mean(-1)


def _kernel_gd(X, Z, gamma, param, params, cfg: GDConfig, lr: float, record_every) -> GDResult:
    """Normalised GD through the compiled CPU kernels (numerics.kernels), numpy in and out (no torch); the
    same result type as the torch paths. X (R, n, T, d), Z (R, n, d), gamma (R, n, T) the linear head's
    fixed scores, params [W] or [K, Q] (R, d, m). State lives in instances-last arrays between kernel
    calls, one set per block of at most KERNEL_BLOCK instances (a block's working set stays in L2)."""
    R, n, T, d = X.shape
    steps, loss = cfg.steps, cfg.loss
    m = params[0].shape[-1] if param == "KQ" else d
    mod = kernels.kernels(n, T, d, m)
    tiny = float(np.finfo(np.float64).tiny)
    code = kernels.LOSS_CODES[loss]
    gn = -gamma
    mirror = cfg.geometry if isinstance(cfg.geometry, Mirror) else None
    if mirror is not None:  # the dual variable u = grad psi(W(0)) joins the state; lr per instance
        p = mirror.p
        params = [params[0], np.sign(params[0]) * np.abs(params[0]) ** (p - 1.0)]
        lrs = np.broadcast_to(np.asarray(lr, dtype=np.float64), (R,))
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
                # the step sizes (mirror), the ||G||^2 floor (W), nothing (K, Q)
                kernels.soa(lrs[sl]) if mirror is not None else
                (kernels.soa(floor[sl]) if param == "W" else None),
                [kernels.soa(p[sl]) for p in params],
            )
        )

    def run(k: int) -> None:
        for _, Xs, Zs, gs, fl, st in blocks:
            if mirror is not None:  # fl: the step sizes; st: [W, u]
                mod.md_steps(Xs, Zs, gs, st[1], st[0], k, fl, 1.0 / (mirror.p - 1.0),
                             mirror.p / (mirror.p - 1.0), mirror.normalized, code, tiny)
            elif param == "W":
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
        steps_from, steps, rec, cfg.progress, current_W, lambda Wk: _kernel_loss(X, Z, gamma, Wk, loss)
    )
    W = current_W()
    return GDResult(
        W=W, K=state(0) if param == "KQ" else None, Q=state(1) if param == "KQ" else None,
        norms=np.linalg.norm(W, axis=(-2, -1)), loss=_kernel_loss(X, Z, gamma, W, loss),
        iterations=np.array(its) if rec else None,
        W_traj=np.stack(Ws) if rec else None,
        loss_traj=np.stack(Ls) if rec else None,
        param=param, normalized=True if mirror is None else mirror.normalized, lr=lr, steps=steps,
        backend="numba",
    )


def warm_kernels(shapes=None, params: tuple[str, ...] = ("W", "KQ")) -> list[dict]:
    """Compile (or load from the disk cache) the kernels of ``shapes`` (default: CATALOGUE_SHAPES and every
    recorded shape: :mod:`numerics.kernels`) by one short run per parameterisation through :func:`run_gd`,
    so the compiled signatures are exactly those a check uses: "W" and "KQ" normalised GD, "mirror" the ℓp
    mirror-descent kernel on W (one signature serves every p, plain or normalised; shapes with m = d).
    Returns one {shape, param, seconds} per run."""
    import time

    from .data import random_unit_sphere

    if shapes is None:
        shapes = sorted({*kernels.CATALOGUE_SHAPES, *kernels.recorded_shapes()})
    out = []
    for n, T, d, m in shapes:
        data = random_unit_sphere(n, T, d, rng=np.random.default_rng(0))
        for param in params:
            if param in ("W", "mirror") and m != d:
                continue
            t0 = time.perf_counter()
            if param == "mirror":
                cfg = GDConfig(steps=1, lr=0.1, geometry=Mirror(3.0), backend="numba")
            else:
                cfg = GDConfig(steps=1, lr=0.1, param=param, m=m if param == "KQ" else None, backend="numba")
            run_gd([data], cfg)
            out.append({"shape": [n, T, d, m], "param": param, "seconds": time.perf_counter() - t0})
    return out
