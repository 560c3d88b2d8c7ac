"""Sabotaged numerics for power analysis: the one seam through which a broken component is injected.

A theorem check is only worth the power behind it: a check that still PASSes when gradient descent
never moves, or when the SVM solver returns the wrong matrix, proves nothing. This module keeps a
catalogue of named sabotages -- each a realistic bug in one numeric component -- and injects them
*without editing any file*:

    with sabotage("noop-gd"):                   # in-process, restored on exit
        run_theorem(GDLocal, profile="quick")

    attnsvm check gd-local --sabotage noop-gd   # a whole check run, every worker (recorded in run.json)

``attnsvm power`` (checks/power/matrix.py) runs every theorem under every sabotage of a component the
theorem declares in ``Theorem.depends_on`` and reports which survived.

How the injection works. Each sabotage names (module, attribute) pairs and a factory building the
broken replacement from the original function. On entry the attribute of the defining module is
replaced, and so is every reference to the original held in the globals (or class attributes) of any
loaded module: ``from numerics.gd import run_gd`` in a theorem module, a plugin file or a test binds
its own global, so patching only ``numerics.gd`` would not reach it. A module imported while the
sabotage is active picks up the replacement from the defining module. On exit every slot holding a
replacement is given its original back, wherever it is (:func:`leaks` checks that none is left).
One sabotage (or one ``+``-joined combination) at a time; ``attnsvm check --sabotage NAME`` installs it
for the run (forked workers inherit it, spawned ones call :func:`install`). Importing ``checks`` or
``numerics`` never installs one.

GD has a torch path and compiled numba kernels (numerics.kernels): the GD sabotages (and those that
break a piece the GD step uses: the gradient, the softmax) enter ``run_gd`` through its one step hook
(``numerics.gd.step_hook``, registered while the sabotage is in force: ``Sabotage.hook``). While a hook
is registered every run takes the engine's explicit path, built from the shared pieces
(``attention.logits``, ``attention.token_weights``, ``attention.grad_from_weights``,
``gd_common._softmax_rows``), so every backend is broken alike. The SVM
sabotages sit *inside* the solvers, before the certificate: a certificate that catches the wrong
answer (SolverError -> the instance is an error) is the pipeline detecting the bug. The
``*-uncertified`` combinations add ``lax-certificate`` (every certificate reported verified), so the
wrong answer reaches the theorem's own checks.

Never import this module's sabotages into normal code paths: they are for power analysis only.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from numerics.errors import InvalidInputError

from .patches import (  # the SVM, softmax, mask, token, gradient and rank bugs
    SCALE,
    TEMPERATURE,
    _absolute_rank,
    _argmin_tokens,
    _dropped_core,
    _dropped_nuclear,
    _fro_for_nuclear,
    _last_row_core,
    _last_row_nuclear,
    _lax,
    _mask_off,
    _mask_off_by_one,
    _np_rows_unnormalised,
    _ntp_no_equalities,
    _rows_unnormalised,
    _scaled_core,
    _scaled_fin,
    _scaled_lp,
    _scaled_nuclear,
    _scaled_w_star,
    _seq_svm_mask_off,
    _tempered,
    _transposed,
)
from .sabotage_gd import LR_SCALES, Patch, _gd_patches, gd_hook

#: Components a theorem may declare in ``Theorem.depends_on`` (and a sabotage may break).
COMPONENTS: dict[str, str] = {
    "gd": "W-parametrised gradient descent, numerics.gd.run_gd(param='W') (torch path and numba kernels)",
    "kq-gd": "(K, Q)-parametrised gradient descent, numerics.gd.run_gd(param='KQ')",
    "regpath": "the regularisation path, numerics.regpath.regularization_path (W and (K, Q))",
    "prompt-gd": "GD on the prompt p, numerics.prompt.run_prompt_gd",
    "seq-gd": "GD on the sequence / causal loss, numerics.sequence.run_seq_gd",
    "ntp-gd": "GD on next-token prediction, numerics.ntp_gd.run_ntp_gd and numerics.ntp_linear.run_linear_gd "
    "(run_gd with the NTP and linear-NTP models)",
    "vp-path": "the joint (v, p) regularisation path, numerics.prompt.joint_vp_path",
    "prompt-path": "the regularisation path of the prompt p, numerics.prompt_path.prompt_reg_path and "
    "prompt_head_reg_path (nonlinear head)",
    "gradient": "closed-form gradients of numerics.attention (grad_from_weights: grad_W, grad_KQ, GD steps)",
    "softmax": ("the softmax seam: numerics.tokens.softmax_rows (numpy: softmax_probs, GenFin, the kernels' "
                "loss), numerics.attention.softmax_logits (torch: attention, grad_W / grad_KQ, prompt, "
                "sequence, (v, p) paths) and gd_common._softmax_rows (GD steps)"),
    "causal-mask": "the causal mask of sequence GD and of the causal SVM (numerics.sequence, numerics.svm)",
    "optimal-token": "the optimal-token selection numerics.tokens.optimal_tokens (and resolve_alpha)",
    "svm-fro": "Frobenius / Euclidean hard-margin SVMs (Att-SVM norm='fro', sequence SVM, Gen-SVM, p-SVM, "
        "head SVM)",
    "svm-nuc": "the nuclear-norm Att-SVM, solve_att_svm(norm='nuc')",
    "svm-lp": "the entrywise lp-AttSVM, solve_lp_att_svm (its power-cone solve, svm.lp._solve_cvxpy)",
    "certificate": "the KKT / SDP / Farkas certificates of numerics.svm",
    "rank": "the numerical rank numerics.svm.rank_by_gap",
    "svm-ntp": "the NTP graph-SVM's rows, numerics.ntp.graph_rows (its SCC equality rows)",
    "ntp-fin": "the NTP finite parts: W^fin (numerics.ntp.finite_part) and the linear model's W⋆ "
    "(numerics.ntp_linear.w_star)",
}





#: The softmax seam (module, names): the first name a module has is patched -- the logits-taking seam of
#: issue 28 (attention.softmax_logits, tokens.softmax_rows) where it exists, else the map that computes the
#: softmax from (X, Z, W) or (data, W); gd_common._softmax_rows is the GD steps' own.
_SOFTMAX_SEAM = (
    ("numerics.attention", ("softmax_logits", "softmax")),
    ("numerics.tokens", ("softmax_rows", "softmax_probs")),
    ("numerics.gd_common", ("_softmax_rows",)),
)


def _softmax_seam_slot(mod: str, names: tuple[str, ...]) -> tuple[str, str]:
    m = importlib.import_module(mod)
    return mod, next(n for n in names if hasattr(m, n))


@dataclass(frozen=True)
class Sabotage:
    """A named bug: the components it breaks, how, and the patches that inject it."""

    name: str
    breaks: tuple[str, ...]
    how: str
    patches: Callable[[], list[Patch]]
    default: bool = True  # part of the default `attnsvm power` matrix
    parts: tuple[str, ...] = ()  # a combination of other sabotages (then ``patches`` is unused)
    hook: str | None = None  # run_gd's step hook while in force (sabotage_gd.gd_hook(hook)), or none


# -- the catalogue -----------------------------------------------------------------------------------

_GD_BREAKS = ("gd", "kq-gd", "regpath", "prompt-gd", "seq-gd", "prompt-path", "ntp-gd")

CATALOGUE: dict[str, Sabotage] = {
    s.name: s
    for s in (
        Sabotage(
            "noop-gd",
            (*_GD_BREAKS, "vp-path"),
            "every optimiser returns its initialisation (run_gd, regularisation path, prompt / sequence GD, "
            "joint (v, p) path); no 'stalled' flag",
            lambda: _gd_patches("noop"),
            hook="noop",
        ),
        Sabotage(
            "ascent-gd",
            _GD_BREAKS,
            "every GD step climbs: +grad instead of -grad (run_gd, regularisation path, "
            "prompt / sequence GD)",
            lambda: _gd_patches("ascent"),
            hook="ascent",
        ),
        Sabotage(
            "random-gd",
            _GD_BREAKS,
            "every GD step goes in a random direction with the gradient's norm",
            lambda: _gd_patches("random"),
            hook="random",
        ),
        *(
            Sabotage(
                name,
                ("gd", "kq-gd", "ntp-gd", "prompt-gd", "seq-gd"),  # every GD runs on run_gd
                f"every run_gd step has its step size scaled {f:g}x (a subtle bug: normalised GD still "
                "descends, only its pace changes)",
                list,
                default=False,
                hook=name,
            )
            for name, f in LR_SCALES.items()
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
            ("svm-fro", "svm-nuc", "svm-lp"),
            f"every SVM solver returns {SCALE} x its solution (feasible, not optimal)",
            lambda: [
                ("numerics.svm.core", "_hard_margin_core", _scaled_core),
                ("numerics.svm.nuclear", "_solve_nuclear_ladder", _scaled_nuclear),
                ("numerics.svm.lp", "_solve_cvxpy", _scaled_lp),
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
                ("numerics.tokens", "softmax_rows", _np_rows_unnormalised),
                ("numerics.attention", "softmax_logits", _rows_unnormalised),
                ("numerics.gd_common", "_softmax_rows", _rows_unnormalised),
            ],
            hook="descent",
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
            lambda: [("numerics.attention", "grad_from_weights", _transposed)],
            hook="descent",
        ),
        Sabotage(
            "absolute-rank-threshold",
            ("rank",),
            "rank_by_gap counts singular values above rtol (absolute) instead of rtol * sigma_1",
            lambda: [("numerics.svm.core", "rank_by_gap", _absolute_rank)],
        ),
        # subtle bugs (issue 23 item 5): one token, one row, a temperature of 1.1 (scaled-svm is the 1.05 one)
        Sabotage(
            "softmax-temperature",
            ("softmax", "gd", "kq-gd", "regpath", "seq-gd"),
            f"the softmax seam divides its logits by {TEMPERATURE} (GD steps use it too)",
            lambda: [(*_softmax_seam_slot(mod, names), _tempered) for mod, names in _SOFTMAX_SEAM],
            hook="descent",
        ),
        Sabotage(
            "causal-mask-off-by-one",
            ("causal-mask",),
            "the causal mask lets query k also see key k + 1 (tril with diagonal 1)",
            lambda: [("numerics.sequence", "causal_mask", _mask_off_by_one)],
        ),
        Sabotage(
            "last-row-dropped-svm",
            ("svm-fro", "svm-nuc"),
            "every SVM solver sees its constraint rows but the last (an off-by-one in the row builder)",
            lambda: [
                ("numerics.svm.core", "_hard_margin_core", _last_row_core),
                ("numerics.svm.nuclear", "_solve_nuclear_ladder", _last_row_nuclear),
            ],
        ),
        # next-token prediction's own solvers (issue 25): the graph-SVM's equality rows and the finite parts
        Sabotage(
            "ntp-equalities-dropped",
            ("svm-ntp",),
            "the NTP graph-SVM's rows lose their SCC equalities (graph_rows always builds TLTO's "
            "single-token rows; the certificate then certifies the wrong program)",
            lambda: [("numerics.ntp", "graph_rows", _ntp_no_equalities)],
        ),
        Sabotage(
            "scaled-finite-part",
            ("ntp-fin",),
            f"the NTP finite parts W^fin and W⋆ come back {SCALE}x (their reported gradient / residual "
            "unchanged)",
            lambda: [("numerics.ntp", "finite_part", _scaled_fin),
                     ("numerics.ntp_linear", "w_star", _scaled_w_star)],
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
    from numerics import gd

    out.extend(f"numerics.gd step hook ({getattr(h, _MARK, h.__qualname__)})" for h in gd.step_hooks())
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
    from numerics import gd

    removers = []
    for s in sabs:
        if s.hook is not None:
            hook_factory = gd_hook(s.hook)
            setattr(hook_factory, _MARK, label)
            removers.append(gd.add_step_hook(hook_factory))
    _ACTIVE.extend(s.name for s in sabs)

    def undo() -> None:
        for remove in removers:
            remove()
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


def install(name: str) -> tuple[str, ...]:
    """Install sabotage ``name`` for the rest of the process (a spawned worker of ``attnsvm check
    --sabotage NAME``); nothing when it is already in force (a forked worker inherits it)."""
    if not _ACTIVE:
        _install([name])
    return active()
