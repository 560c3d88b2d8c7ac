"""How each sabotage of :mod:`numerics.sabotage` is built: factories that take the original function and
return the broken replacement (the catalogue, the components and the injection machinery live in
:mod:`numerics.sabotage`). Never import these into normal code paths: they are for power analysis only."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable, Iterator
from typing import Any

#: The random-direction sabotage draws from this fixed seed (a reproducible bug).
RANDOM_SEED = 20230831

#: ``scaled-svm``: the factor applied to the solver's answer (feasible, not optimal).
SCALE = 1.05

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
            from . import regpath

            with _swapped(regpath, "_grad_dir", _grad_transform(mode, regpath._grad_dir)), \
                    _swapped(regpath, "_kq_grads", _grad_transform(mode, regpath._kq_grads)):
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
        (
            "numerics.sequence",
            "run_seq_gd",
            _within("numerics.sequence", "seq_grad", mode, clear_stalled=noop),
        ),
    ]
    if noop:
        out.append(("numerics.prompt", "joint_vp_path", _vp_noop))
    return out


# -- SVM solvers (inside, before the certificate) ----------------------------------------------------

def _scaled_core(original):
    def _hard_margin_core(*args, **kwargs):
        core = original(*args, **kwargs)
        return core if core.w is None else dataclasses.replace(core, w=SCALE * core.w)

    return _hard_margin_core


# The nuclear seam is the whole certified ladder (numerics.svm.nuclear._solve_nuclear_ladder): each rung is
# certified inside it (and Newton-polished, which would undo a perturbed SDP answer), so a wrong answer must
# leave the ladder to be a bug that only solve_att_svm's final certificate can catch.
def _scaled_nuclear(original):
    def _solve_nuclear_ladder(*args, **kwargs):
        W, lam, name, attempts = original(*args, **kwargs)
        return SCALE * W, lam, name, attempts

    return _solve_nuclear_ladder


def _binding_row(lam) -> int | None:
    import numpy as np

    lam = np.asarray(lam, dtype=float)
    return int(np.argmax(lam)) if lam.size >= 2 and float(lam.max()) > 0 else None


def _dropped_core(original):
    """Solve, then solve again without the constraint of largest multiplier (a binding one)."""
    import numpy as np

    def _hard_margin_core(A, b, E=None, e=None, *, solver=None):
        core = original(A, b, E, e, solver=solver)
        j = _binding_row(core.lam) if core.status == "optimal" else None
        if j is None:
            return core
        keep = np.arange(len(b)) != j
        c2 = original(np.asarray(A)[keep], np.asarray(b)[keep], E, e, solver=solver)
        lam = np.zeros(len(b))
        lam[keep] = c2.lam
        return dataclasses.replace(c2, lam=lam)

    return _hard_margin_core


def _dropped_nuclear(original):
    import numpy as np

    def _solve_nuclear_ladder(rows, rungs, cache):
        W, lam, name, attempts = original(rows, rungs, cache)
        j = _binding_row(lam)
        if j is None:
            return W, lam, name, attempts
        keep = np.arange(len(rows.b)) != j
        sub = dataclasses.replace(rows, D=rows.D[keep], Zq=rows.Zq[keep], b=rows.b[keep], eq=rows.eq[keep])
        W, lam_k, name, attempts = original(sub, rungs, {})  # a fresh cache: the features of the kept rows
        lam = np.zeros(len(rows.b))
        lam[keep] = lam_k
        return W, lam, name, attempts

    return _solve_nuclear_ladder


def _fro_for_nuclear(original):
    """The nuclear solver answers with the Frobenius solution of the same (reduced) rows."""

    def _solve_nuclear_ladder(rows, rungs, cache):
        from .svm import core

        U, V = core._bases(rows)
        c = core._hard_margin_core(core._reduced_features(rows, U, V), rows.b)
        W = U @ c.w.reshape(U.shape[1], V.shape[1]) @ V.T
        return W, c.lam, "fro-as-nuc", ("fro-as-nuc: sabotaged",)

    return _solve_nuclear_ladder


def _lax(original):
    def certify(*args, **kwargs):
        return dataclasses.replace(original(*args, **kwargs), verified=True)

    return certify


# -- softmax, mask, tokens, gradient, rank -----------------------------------------------------------

def _softmax_probs_unnormalised(original):
    import numpy as np

    def softmax_probs(data, W):
        lg = np.einsum("ntd,de,ne->nt", data.X, np.asarray(W, dtype=np.float64), data.Z)
        return np.exp(lg - lg.max(axis=1, keepdims=True))  # the division by the row sum is missing

    return softmax_probs


def _att_softmax_unnormalised(original):
    def softmax(X, Z, W):
        from .attention import logits

        lg = logits(X, Z, W)
        return (lg - lg.amax(-1, keepdim=True)).exp()

    return softmax


def _rows_unnormalised(original):
    def _softmax_rows(lg):
        return (lg - lg.amax(-1, keepdim=True)).exp()

    return _softmax_rows


def _mask_off(original):
    def causal_mask(T, device="cpu"):
        import torch

        return torch.ones((T, T), dtype=torch.bool, device=device)

    return causal_mask


def _seq_svm_mask_off(original):
    def solve_seq_svm(X, gamma, *, causal=False, alpha=None, solver=None):
        return original(X, gamma, causal=False, alpha=alpha, solver=solver)

    return solve_seq_svm


def _argmin_tokens(original):
    import numpy as np

    def optimal_tokens(data, *, v=None, tie_tol=None):
        from . import tokens

        ot = original(data, v=v) if tie_tol is None else original(data, v=v, tie_tol=tie_tol)
        return dataclasses.replace(ot, index=np.argmin(tokens.scores(data, v), axis=1))

    return optimal_tokens


def _transposed(original):
    def grad_from_weights(X, Z, c):
        return original(X, Z, c).mT.clone()

    return grad_from_weights


def _absolute_rank(original):
    import numpy as np

    from . import tolerances as tol

    def rank_by_gap(W, rtol=tol.RANK_RTOL):
        if W is None:
            return 0, None
        s = np.linalg.svd(W, compute_uv=False)
        return int(np.sum(s > rtol)), s  # absolute threshold instead of rtol * sigma_1

    return rank_by_gap


def _descent_loop() -> Patch:
    return ("numerics.gd", "run_gd", _loop_run_gd("descent"))
