"""Sabotaged numerics for power analysis: the one seam through which a broken component is injected.

A theorem check is only worth the power behind it: a check that still PASSes when gradient descent
never moves, or when the SVM solver returns the wrong matrix, proves nothing. This module keeps a
catalogue of named sabotages -- each a realistic bug in one numeric component -- and injects them
*without editing any file*:

    with sabotage("noop-gd"):                   # in-process, restored on exit
        run_theorem(GDLocal, profile="quick")

    ATTNSVM_SABOTAGE=noop-gd attnsvm check gd-local    # a whole process (and its children)

``attnsvm power`` (checks/power.py) runs every theorem under every sabotage of a component the
theorem declares in ``Theorem.depends_on`` and reports which survived.

How the injection works. Each sabotage names (module, attribute) pairs and a factory building the
broken replacement from the original function. On entry the attribute of the defining module is
replaced, and so is every reference to the original held in the globals (or class attributes) of any
loaded module: ``from numerics.gd import run_gd`` in a theorem module, a plugin file or a test binds
its own global, so patching only ``numerics.gd`` would not reach it. A module imported while the
sabotage is active picks up the replacement from the defining module. On exit every slot holding a
replacement is given its original back, wherever it is (:func:`leaks` checks that none is left).
One sabotage (or one ``+``-joined combination) at a time; the environment variable installs it for
the life of the process (``checks`` honours it at import, so subprocesses inherit it).

GD has a torch path and compiled numba kernels (numerics.kernels): the GD sabotages (and those that
break a piece the GD step uses: the gradient, the softmax) replace ``run_gd`` as a whole by an
explicit-W torch loop built from the shared pieces (``attention.logits``, ``attention.token_weights``,
``attention.grad_from_weights``, ``gd._softmax_rows``), so both backends are broken alike. The SVM
sabotages sit *inside* the solvers, before the certificate: a certificate that catches the wrong
answer (SolverError -> the instance is an error) is the pipeline detecting the bug. The
``*-uncertified`` combinations add ``lax-certificate`` (every certificate reported verified), so the
wrong answer reaches the theorem's own checks.

Never import this module's sabotages into normal code paths: they are for power analysis only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .errors import InvalidInputError
from .sabotage_patches import (  # the SVM, softmax, mask, token, gradient and rank bugs
    SCALE,
    _absolute_rank,
    _argmin_tokens,
    _att_softmax_unnormalised,
    _dropped_core,
    _dropped_nuclear,
    _fro_for_nuclear,
    _lax,
    _mask_off,
    _rows_unnormalised,
    _scaled_core,
    _scaled_nuclear,
    _seq_svm_mask_off,
    _softmax_probs_unnormalised,
    _transposed,
)

#: The environment variable that installs sabotages for a whole process ("name" or "name+name").
ENV_VAR = "ATTNSVM_SABOTAGE"

#: Components a theorem may declare in ``Theorem.depends_on`` (and a sabotage may break).
COMPONENTS: dict[str, str] = {
    "gd": "W-parametrised gradient descent, numerics.gd.run_gd(param='W') (torch path and numba kernels)",
    "kq-gd": "(K, Q)-parametrised gradient descent, numerics.gd.run_gd(param='KQ')",
    "regpath": "the regularisation path, numerics.gd.regularization_path (W and (K, Q))",
    "prompt-gd": "GD on the prompt p, numerics.prompt.run_prompt_gd",
    "seq-gd": "GD on the sequence / causal loss, numerics.sequence.run_seq_gd",
    "vp-path": "the joint (v, p) regularisation path, numerics.prompt.joint_vp_path",
    "prompt-path": "the regularisation path of the prompt p, numerics.prompt.prompt_reg_path and "
    "prompt_head_reg_path (nonlinear head)",
    "gradient": "closed-form gradients of numerics.attention (grad_from_weights: grad_W, grad_KQ, GD steps)",
    "softmax": "the softmax maps numerics.tokens.softmax_probs, numerics.attention.softmax, gd._softmax_rows",
    "causal-mask": "the causal mask of sequence GD and of the causal SVM (numerics.sequence, numerics.svm)",
    "optimal-token": "the optimal-token selection numerics.tokens.optimal_tokens (and resolve_alpha)",
    "svm-fro": "Frobenius / Euclidean hard-margin SVMs (Att-SVM norm='fro', sequence SVM, Gen-SVM, p-SVM, "
        "head SVM)",
    "svm-nuc": "the nuclear-norm Att-SVM, solve_att_svm(norm='nuc')",
    "certificate": "the KKT / SDP / Farkas certificates of numerics.svm",
    "rank": "the numerical rank numerics.svm.rank_by_gap",
}

#: The random-direction sabotage draws from this fixed seed (a reproducible bug).
RANDOM_SEED = 20230831


# (module, attribute, factory(current) -> replacement)
Patch = tuple[str, str, Callable[[Any], Callable]]


@dataclass(frozen=True)
class Sabotage:
    """A named bug: the components it breaks, how, and the patches that inject it."""

    name: str
    breaks: tuple[str, ...]
    how: str
    patches: Callable[[], list[Patch]]
    default: bool = True  # part of the default `attnsvm power` matrix
    parts: tuple[str, ...] = ()  # a combination of other sabotages (then ``patches`` is unused)


# -- GD: an explicit-W torch loop standing in for run_gd (both backends) ----------------------------

def _direction(mode: str, g, gen):
    """The step direction the broken optimiser uses instead of the gradient ``g`` (R, ...)."""
    import torch

    if mode == "ascent":
        return -g
    if mode == "random":
        xi = torch.randn(g.shape, generator=gen, dtype=torch.float64).to(g.device, g.dtype)
        dims = tuple(range(1, g.ndim))
        scale = torch.linalg.vector_norm(g, dim=dims, keepdim=True) / torch.linalg.vector_norm(
            xi, dim=dims, keepdim=True).clamp_min(torch.finfo(g.dtype).tiny)
        return xi * scale
    if mode == "noop":
        return torch.zeros_like(g)
    return g  # "descent": the step itself is right (the sabotage sits in a piece it uses)


def _loop_run_gd(mode: str) -> Callable[[Any], Callable]:
    """Factory: run_gd replaced by an explicit loop whose steps go along ``_direction(mode, grad)``."""

    def factory(original):
        import numpy as np
        import torch

        from . import attention as att
        from . import gd

        def run_gd(data, *, param="W", steps, lr, normalized=True, loss="logistic", m=None, seed=0, init=None,
                   device="cpu", record_every=None, head=None, init_scale=0.01, dtype=torch.float64,
                   progress=False, weight_decay=0.0, backend="auto"):
            # the real run_gd with 0 steps validates every argument and draws the initialisation
            start = original(
                data,
                param=param,
                steps=0,
                lr=lr,
                normalized=normalized,
                loss=loss,
                m=m,
                seed=seed,
                init=init,
                device=device,
                record_every=None,
                head=head,
                init_scale=init_scale,
                dtype=dtype,
                weight_decay=weight_decay,
                backend="torch" if backend in gd.BACKENDS else backend,
            )
            steps, lr, wd = int(steps), float(lr), float(weight_decay)
            batch, h = gd._prepare(data, head, device, dtype)
            X, Y, Z = batch.X, batch.Y, batch.Z
            gamma = h.fixed_scores(X, Y)
            tiny = torch.finfo(dtype).tiny
            gen = torch.Generator(device="cpu").manual_seed(RANDOM_SEED)

            def t(a):
                return torch.as_tensor(a, dtype=dtype, device=X.device).clone()

            P = [t(start.W)] if param == "W" else [t(start.K), t(start.Q)]

            def W_of():
                return P[0] if param == "W" else torch.bmm(P[0], P[1].mT)

            def grads():
                s = gd._softmax_rows(att.logits(X, Z, W_of()))
                c = att.token_weights(X, Y, s, h, loss, gamma)[1]
                if normalized and wd == 0:  # only the direction matters (as in gd._kq_grads)
                    c = c / gd._maxabs(c, tiny)
                G = att.grad_from_weights(X, Z, c)
                gs = [G] if param == "W" else [torch.bmm(G, P[1]), torch.bmm(G.mT, P[0])]
                return [g + 2.0 * wd * p for g, p in zip(gs, P, strict=True)] if wd > 0 else gs

            rec = gd._record_points(steps, record_every)
            its, Ws, Ls = [], [], []
            with torch.inference_mode():
                for k in range(steps + 1):
                    if k in rec:
                        its.append(k)
                        Ws.append(W_of().clone())
                        Ls.append(att.loss(X, Y, Z, Ws[-1], h, loss))
                    if k == steps or mode == "noop" and not rec:
                        break
                    if mode == "noop":
                        continue
                    for p, g in zip(P, grads(), strict=True):
                        dvec = _direction(mode, g, gen)
                        if normalized:
                            nrm = torch.linalg.vector_norm(dvec, dim=(1, 2), keepdim=True).clamp_min(tiny)
                            p.addcdiv_(dvec, nrm, value=-lr)
                        else:
                            p.sub_(dvec, alpha=lr)
                W = W_of()
                return gd.GDResult(
                    W=gd._np(W),
                    K=gd._np(P[0]) if param == "KQ" else None,
                    Q=gd._np(P[1]) if param == "KQ" else None,
                    norms=gd._np(torch.linalg.matrix_norm(W)),
                    loss=gd._np(att.loss(X, Y, Z, W, h, loss)),
                    iterations=np.array(its) if rec else None,
                    W_traj=np.stack([gd._np(w) for w in Ws]) if rec else None,
                    loss_traj=np.stack([gd._np(v) for v in Ls]) if rec else None,
                    param=param,
                    normalized=normalized,
                    lr=lr,
                    steps=steps,
                    backend="torch",
                )

        return run_gd

    return factory


@contextlib.contextmanager
def _swapped(module, attr: str, value) -> Iterator[None]:
    """Call-scoped replacement of one module attribute (restored on exit)."""
    old = getattr(module, attr)
    setattr(module, attr, value)
    try:
        yield
    finally:
        setattr(module, attr, old)


def _grad_transform(mode: str, fn: Callable) -> Callable:
    """A gradient function whose result (a tensor or a tuple of tensors) is replaced by the broken
    direction."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(RANDOM_SEED)

    def broken(*args, **kwargs):
        out = fn(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(_direction(mode, g, gen) for g in out)
        return _direction(mode, out, gen)

    return broken


def _within(
    module_name: str, attr: str, mode: str, *, clear_stalled: bool = False
) -> Callable[[Any], Callable]:
    """Factory: the optimiser runs with ``module.attr`` (its gradient) broken for the duration of the call."""

    def factory(original):
        import numpy as np

        def optimiser(*args, **kwargs):
            mod = importlib.import_module(module_name)
            with _swapped(mod, attr, _grad_transform(mode, getattr(mod, attr))):
                res = original(*args, **kwargs)
            if clear_stalled:  # a silent no-op optimiser: no 'stalled' flag gives it away
                res = dataclasses.replace(res, stalled=np.zeros_like(res.stalled))
            return res

        return optimiser

    return factory


def _regpath(mode: str) -> Callable[[Any], Callable]:
    def factory(original):
        def regularization_path(*args, **kwargs):
            from . import gd

            with _swapped(gd, "_grad_dir", _grad_transform(mode, gd._grad_dir)), \
                    _swapped(gd, "_kq_grads", _grad_transform(mode, gd._kq_grads)):
                return original(*args, **kwargs)

        return regularization_path

    return factory


def _vp_noop(original):
    """joint_vp_path that returns its first random start on the spheres (no Adam, no L-BFGS)."""
    import numpy as np

    def joint_vp_path(X, Y, radii, *, keys=None, loss="logistic", starts=8, rng, iters=120, v_radii=None):
        from .prompt import VPPath, joint_vp_loss

        Xa = np.asarray(X, dtype=float)
        single = Xa.ndim == 3
        Xb, Yb = (Xa[None], np.asarray(Y, dtype=float)[None]) if single else (Xa, np.asarray(Y, dtype=float))
        Kb = (
            Xb
            if keys is None
            else (np.asarray(keys, dtype=float)[None] if single else np.asarray(keys, dtype=float))
        )
        B, d, dk = Xb.shape[0], Xb.shape[-1], Kb.shape[-1]
        rad = np.asarray(radii, dtype=float)
        vr = rad if v_radii is None else np.asarray(v_radii, dtype=float)
        V, P, LL = [], [], []
        for r_v, r_p in zip(vr, rad, strict=True):
            a = rng.standard_normal((B, starts, d))[:, 0]
            b = rng.standard_normal((B, starts, dk))[:, 0]
            v = r_v * a / np.linalg.norm(a, axis=-1, keepdims=True)
            p = r_p * b / np.linalg.norm(b, axis=-1, keepdims=True)
            V.append(v)
            P.append(p)
            LL.append(
                [np.log(joint_vp_loss(Xb[k], Yb[k], v[k], p[k], keys=Kb[k], loss=loss)) for k in range(B)]
            )
        V, P, LL = (np.stack(x, axis=1) for x in (V, P, LL))
        paths = [
            VPPath(radii=rad, v=V[k], p=P[k], log_loss=LL[k], restart_spread=np.zeros(len(rad)))
            for k in range(B)
        ]
        return paths[0] if single else paths

    return joint_vp_path


def _gd_patches(mode: str) -> list[Patch]:
    noop = mode == "noop"
    out: list[Patch] = [
        ("numerics.gd", "run_gd", _loop_run_gd(mode)),
        ("numerics.gd", "regularization_path", _regpath(mode)),
        (
            "numerics.prompt",
            "run_prompt_gd",
            _within("numerics.prompt", "prompt_grad", mode, clear_stalled=noop),
        ),
        ("numerics.prompt", "prompt_reg_path", _within("numerics.prompt", "prompt_grad", mode)),
        ("numerics.prompt", "prompt_head_reg_path", _within("numerics.prompt", "prompt_head_grad", mode)),
        (
            "numerics.sequence",
            "run_seq_gd",
            _within("numerics.sequence", "seq_grad", mode, clear_stalled=noop),
        ),
    ]
    if noop:
        out.append(("numerics.prompt", "joint_vp_path", _vp_noop))
    return out


def _descent_loop() -> Patch:
    return ("numerics.gd", "run_gd", _loop_run_gd("descent"))


# -- the catalogue -----------------------------------------------------------------------------------

_GD_BREAKS = ("gd", "kq-gd", "regpath", "prompt-gd", "seq-gd", "prompt-path")

CATALOGUE: dict[str, Sabotage] = {
    s.name: s
    for s in (
        Sabotage(
            "noop-gd",
            (*_GD_BREAKS, "vp-path"),
            "every optimiser returns its initialisation (run_gd, regularisation path, prompt / sequence GD, "
            "joint (v, p) path); no 'stalled' flag",
            lambda: _gd_patches("noop"),
        ),
        Sabotage(
            "ascent-gd",
            _GD_BREAKS,
            "every GD step climbs: +grad instead of -grad (run_gd, regularisation path, "
            "prompt / sequence GD)",
            lambda: _gd_patches("ascent"),
        ),
        Sabotage(
            "random-gd",
            _GD_BREAKS,
            "every GD step goes in a random direction with the gradient's norm",
            lambda: _gd_patches("random"),
        ),
        Sabotage(
            "frobenius-for-nuclear",
            ("svm-nuc",),
            "the nuclear-norm solver returns the Frobenius solution",
            lambda: [("numerics.svm.nuclear", "_solve_nuclear_ladder", _fro_for_nuclear)],
        ),
        Sabotage(
            "dropped-constraint-svm",
            ("svm-fro", "svm-nuc"),
            "every SVM solver ignores its binding constraint of largest multiplier",
            lambda: [
                ("numerics.svm.core", "_hard_margin_core", _dropped_core),
                ("numerics.svm.nuclear", "_solve_nuclear_ladder", _dropped_nuclear),
            ],
        ),
        Sabotage(
            "scaled-svm",
            ("svm-fro", "svm-nuc"),
            f"every SVM solver returns {SCALE} x its solution (feasible, not optimal)",
            lambda: [
                ("numerics.svm.core", "_hard_margin_core", _scaled_core),
                ("numerics.svm.nuclear", "_solve_nuclear_ladder", _scaled_nuclear),
            ],
        ),
        Sabotage(
            "lax-certificate",
            ("certificate",),
            "every certificate reports 'verified' whatever its residuals",
            lambda: [
                ("numerics.svm.core", "_certify", _lax),
                ("numerics.svm.core", "_farkas_certificate", _lax),
            ],
        ),
        Sabotage(
            "softmax-no-normaliser",
            ("softmax", "gd", "kq-gd", "regpath"),
            "the softmax maps return exp(logits - max) without dividing by the row sum (GD steps use it too)",
            lambda: [
                ("numerics.tokens", "softmax_probs", _softmax_probs_unnormalised),
                ("numerics.attention", "softmax", _att_softmax_unnormalised),
                ("numerics.gd", "_softmax_rows", _rows_unnormalised),
                _descent_loop(),
            ],
        ),
        Sabotage(
            "causal-mask-off",
            ("causal-mask",),
            "the causal mask allows every key (sequence GD and causal SVM)",
            lambda: [
                ("numerics.sequence", "causal_mask", _mask_off),
                ("numerics.svm.sequence", "solve_seq_svm", _seq_svm_mask_off),
            ],
        ),
        Sabotage(
            "argmin-optimal-token",
            ("optimal-token",),
            "optimal_tokens returns the argmin of the scores",
            lambda: [("numerics.tokens", "optimal_tokens", _argmin_tokens)],
        ),
        Sabotage(
            "transposed-gradient",
            ("gradient", "gd", "kq-gd", "regpath"),
            "grad_from_weights returns the transpose of the gradient (GD steps use it too)",
            lambda: [("numerics.attention", "grad_from_weights", _transposed), _descent_loop()],
        ),
        Sabotage(
            "absolute-rank-threshold",
            ("rank",),
            "rank_by_gap counts singular values above rtol (absolute) instead of rtol * sigma_1",
            lambda: [("numerics.svm.core", "rank_by_gap", _absolute_rank)],
        ),
        # the wrong SVM answers with the certificate silenced: do the theorem's own checks see them?
        Sabotage(
            "scaled-svm-uncertified",
            ("svm-fro", "svm-nuc"),
            "scaled-svm + lax-certificate",
            list,
            default=False,
            parts=("scaled-svm", "lax-certificate"),
        ),
        Sabotage(
            "dropped-constraint-svm-uncertified",
            ("svm-fro", "svm-nuc"),
            "dropped-constraint-svm + lax-certificate",
            list,
            default=False,
            parts=("dropped-constraint-svm", "lax-certificate"),
        ),
        Sabotage(
            "frobenius-for-nuclear-uncertified",
            ("svm-nuc",),
            "frobenius-for-nuclear + lax-certificate",
            list,
            default=False,
            parts=("frobenius-for-nuclear", "lax-certificate"),
        ),
    )
}

for _s in CATALOGUE.values():
    assert set(_s.breaks) <= set(COMPONENTS), _s.name
    assert set(_s.parts) <= set(CATALOGUE), _s.name


def default_names() -> list[str]:
    """The sabotages of the default power matrix (single bugs)."""
    return [n for n, s in CATALOGUE.items() if s.default]


def resolve(names: str | list[str] | tuple[str, ...]) -> list[Sabotage]:
    """Sabotages by name ("a+b" joins several); unknown names raise InvalidInputError."""
    if isinstance(names, str):
        names = [names]
    out: list[Sabotage] = []
    for spec in names:
        for name in str(spec).split("+"):
            name = name.strip()
            if name not in CATALOGUE:
                raise InvalidInputError(f"unknown sabotage {name!r}; known: {', '.join(CATALOGUE)}")
            s = CATALOGUE[name]
            out.extend(resolve(list(s.parts)) if s.parts else [s])
    return out


def breaks(names: str | list[str] | tuple[str, ...]) -> set[str]:
    """The components a sabotage (or combination) breaks."""
    return {c for spec in ([names] if isinstance(names, str) else names)
            for n in str(spec).split("+") for c in CATALOGUE[n.strip()].breaks}


# -- injection -----------------------------------------------------------------------------------------

_MARK = "__attnsvm_sabotage__"
_ACTIVE: list[str] = []


def active() -> tuple[str, ...]:
    """Names of the sabotages in force in this process (empty in every normal run)."""
    return tuple(_ACTIVE)


def _slots() -> Iterator[tuple[Any, str, Any]]:
    """(owner, name, value) for every module global and every class attribute of a class defined there."""
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        mname = d.get("__name__")
        for k, v in list(d.items()):
            yield d, k, v
            if issubclass(type(v), type) and type.__dict__["__dict__"].__get__(v).get("__module__") == mname:
                for ck, cv in list(type.__dict__["__dict__"].__get__(v).items()):
                    if type(cv) is types.FunctionType:
                        yield v, ck, cv


def _set(owner: Any, name: str, value: Any) -> None:
    if isinstance(owner, dict):
        owner[name] = value
    else:
        setattr(owner, name, value)


def _rebind(mapping: dict[int, tuple[Any, Any]]) -> None:
    """Replace every slot holding ``old`` by ``new`` for each id(old) -> (old, new)."""
    for owner, name, value in _slots():
        hit = mapping.get(id(value))
        if hit is not None and hit[0] is value:
            _set(owner, name, hit[1])


def leaks() -> list[str]:
    """Module globals / class attributes holding a sabotaged function (outside an active sabotage: a bug)."""
    out = []
    for owner, name, value in _slots():
        if type(value) is types.FunctionType and value.__dict__.get(_MARK):
            where = owner.get("__name__", "?") if isinstance(owner, dict) else owner.__qualname__
            out.append(f"{where}.{name} ({value.__dict__[_MARK]})")
    return out


def _install(names) -> Callable[[], None]:
    """Apply the sabotages; returns the function that undoes them."""
    sabs = resolve(names)
    label = "+".join(s.name for s in sabs)
    if _ACTIVE:
        raise RuntimeError(
            f"sabotage {label!r} requested while {'+'.join(_ACTIVE)!r} is active (one at a time)"
        )
    originals: dict[tuple[str, str], Any] = {}
    current: dict[tuple[str, str], Any] = {}
    for s in sabs:
        for mod_name, attr, factory in s.patches():
            key = (mod_name, attr)
            mod = importlib.import_module(mod_name)
            if key not in originals:
                originals[key] = getattr(mod, attr)
            fake = factory(current.get(key, originals[key]))
            setattr(fake, _MARK, label)
            current[key] = fake
    mapping = {id(originals[k]): (originals[k], current[k]) for k in originals}
    for (mod_name, attr), fake in current.items():
        setattr(importlib.import_module(mod_name), attr, fake)
    _rebind(mapping)
    _ACTIVE.extend(s.name for s in sabs)

    def undo() -> None:
        back = {id(fake): (fake, originals[k]) for k, fake in current.items()}
        for (mod_name, attr), orig in originals.items():
            setattr(importlib.import_module(mod_name), attr, orig)
        _rebind(back)  # also reaches modules imported while the sabotage was active
        _ACTIVE.clear()

    return undo


@contextlib.contextmanager
def sabotage(*names: str) -> Iterator[list[Sabotage]]:
    """Run the body with the named sabotages in force (``"a+b"`` or several names combine them);
    everything is restored on exit, also on an exception."""
    undo = _install(list(names))
    try:
        yield resolve(list(names))
    finally:
        undo()


def install_from_env(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Install the sabotage named in ``ATTNSVM_SABOTAGE`` for the rest of the process (no-op when unset or
    already installed); warns on stderr, since every verdict of the process is then a power test."""
    spec = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
    if not spec or _ACTIVE:
        return active()
    _install([spec])
    print(f"attnsvm: numerics sabotaged ({ENV_VAR}={spec}): verdicts are a power test, not results",
          file=sys.stderr)
    return active()
