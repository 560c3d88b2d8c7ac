"""The GD sabotages of :mod:`checks.power.sabotage`. ``run_gd`` (every backend, and sequence and prompt
GD, which run on it) is broken through its one step hook (:func:`numerics.gd.step_hook`): the hook
replaces each step's direction by a broken one (no-op, ascent, random), scales its step size (0.5x, 2x),
or changes nothing and only sends the run down the explicit path, whose steps are built from the pieces
another sabotage breaks (the softmax, the gradient). The regularisation paths run on run_gd too (W / (K, Q):
numerics.regpath.Projected; the prompt's: numerics.prompt_path.OnSphere) and are broken by the same hook;
the joint (v, p) path (Adam and L-BFGS, not GD) is replaced by its random start (noop-gd). The catalogue,
the components and the injection machinery live in :mod:`checks.power.sabotage`. Never import these into
normal code paths: they are for power analysis only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The random-direction sabotage draws from this fixed seed (a reproducible bug).
RANDOM_SEED = 20230831

#: The step-size sabotages: lr scaled by these factors.
LR_SCALES = {"lr-half": 0.5, "lr-double": 2.0}

# (module, attribute, factory(current) -> replacement)
Patch = tuple[str, str, Callable[[Any], Callable]]


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


def gd_hook(mode: str) -> Callable[[], Callable]:
    """The step-hook factory (numerics.gd.step_hook) of a GD sabotage: ``mode`` one of "noop", "ascent",
    "random", "descent" (directions as :func:`_direction`) or a key of :data:`LR_SCALES`. Called once per
    run: the random mode draws from a generator seeded RANDOM_SEED at the start of every run."""

    def factory():
        import torch

        if mode in LR_SCALES:
            f = LR_SCALES[mode]
            return lambda grads, lr: (grads, lr * f)
        if mode == "noop":
            return lambda grads, lr: (None, lr)  # no step: every run returns its start
        if mode == "descent":
            return lambda grads, lr: (grads, lr)
        gen = torch.Generator(device="cpu").manual_seed(RANDOM_SEED)
        return lambda grads, lr: ([_direction(mode, g, gen) for g in grads], lr)

    factory.__qualname__ = f"gd_hook({mode!r})"
    return factory


def _vp_noop(original):
    """joint_vp_path that returns its first random start on the spheres (no Adam, no L-BFGS)."""
    import numpy as np

    def joint_vp_path(X, Y, radii, *, keys=None, loss="logistic", starts=8, rng, iters=120, v_radii=None):
        from numerics.prompt import VPPath, joint_vp_loss

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
        gens = [rng] * B if isinstance(rng, np.random.Generator) else list(rng)  # one per dataset, or shared
        V, P, LL = [], [], []
        for r_v, r_p in zip(vr, rad, strict=True):
            a = np.stack([gens[k].standard_normal((starts, d))[0] for k in range(B)])
            b = np.stack([gens[k].standard_normal((starts, dk))[0] for k in range(B)])
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
    """The patches of a GD sabotage besides its step hook: the joint (v, p) path, the one optimiser not on
    run_gd, returns its random start under noop-gd."""
    return [("numerics.prompt", "joint_vp_path", _vp_noop)] if mode == "noop" else []
