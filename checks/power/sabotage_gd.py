"""The GD sabotages of :mod:`checks.power.sabotage`: ``run_gd`` (both backends), the regularisation paths,
prompt and sequence GD and the joint (v, p) path replaced by explicit torch loops whose steps go along a
broken direction (no-op, ascent, random) or along the true one through a broken piece (the softmax, the
gradient). The catalogue, the components and the injection machinery live in :mod:`checks.power.sabotage`.
Never import these into normal code paths: they are for power analysis only."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator
from typing import Any

#: The random-direction sabotage draws from this fixed seed (a reproducible bug).
RANDOM_SEED = 20230831

# (module, attribute, factory(current) -> replacement)
Patch = tuple[str, str, Callable[[Any], Callable]]

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

        from numerics import attention as att
        from numerics import gd, gd_common, gd_torch

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
            batch, h = gd_common._prepare(data, head, device, dtype)
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
                s = gd_common._softmax_rows(att.logits(X, Z, W_of()))
                c = att.token_weights(X, Y, s, h, loss, gamma)[1]
                if normalized and wd == 0:  # only the direction matters (as in gd_torch._kq_grads)
                    c = c / gd_torch._maxabs(c, tiny)
                G = att.grad_from_weights(X, Z, c)
                gs = [G] if param == "W" else [torch.bmm(G, P[1]), torch.bmm(G.mT, P[0])]
                return [g + 2.0 * wd * p for g, p in zip(gs, P, strict=True)] if wd > 0 else gs

            rec = gd_common._record_points(steps, record_every)
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
                return gd_common.GDResult(
                    W=gd_common._np(W),
                    K=gd_common._np(P[0]) if param == "KQ" else None,
                    Q=gd_common._np(P[1]) if param == "KQ" else None,
                    norms=gd_common._np(torch.linalg.matrix_norm(W)),
                    loss=gd_common._np(att.loss(X, Y, Z, W, h, loss)),
                    iterations=np.array(its) if rec else None,
                    W_traj=np.stack([gd_common._np(w) for w in Ws]) if rec else None,
                    loss_traj=np.stack([gd_common._np(v) for v in Ls]) if rec else None,
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
            from numerics import regpath as rp

            with _swapped(rp, "_grad_dir", _grad_transform(mode, rp._grad_dir)), \
                    _swapped(rp, "_kq_grads", _grad_transform(mode, rp._kq_grads)):
                return original(*args, **kwargs)

        return regularization_path

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
        ("numerics.regpath", "regularization_path", _regpath(mode)),
        (
            "numerics.prompt",
            "run_prompt_gd",
            _within("numerics.prompt", "prompt_grad", mode, clear_stalled=noop),
        ),
        ("numerics.prompt_path", "prompt_reg_path", _within("numerics.prompt_path", "prompt_grad", mode)),
        ("numerics.prompt_path", "prompt_head_reg_path",
         _within("numerics.prompt_path", "prompt_head_grad", mode)),
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
