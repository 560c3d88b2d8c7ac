"""The regularisation paths on the GD engine (numerics.regpath.Projected, numerics.prompt_path.OnSphere
through numerics.gd.run_gd): one step against an independent computation (autograd gradient, explicit
projection or rotation), the decaying schedule the step hook sees, and the hook reaching every step of every
radius (the seam the power sabotages use)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from numerics import attention as att
from numerics import gd
from numerics.data import random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.prompt import PromptBatch, PromptModel, prompt_loss
from numerics.prompt_path import OnSphere, prompt_reg_path
from numerics.regpath import Projected, regularization_path

DATA = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(21), R=2)


def _autograd(W0: np.ndarray) -> np.ndarray:
    """grad L(W) (R, d, d) by autograd of numerics.attention.loss (not the engine's closed form)."""
    batch = att.batch_from_data(DATA)
    W = torch.tensor(W0, requires_grad=True)
    att.loss(batch.X, batch.Y, batch.Z, W, batch.linear_head(), "logistic").sum().backward()
    return W.grad.numpy()


def test_one_projected_step_is_normalised_step_then_ball():
    """W1 = P_B(W0 - eta G/||G||), eta = lr R (step 0 of the schedule), P_B the radial map into ||W|| <= R;
    from a point inside the ball whose step leaves it, so the projection acts."""
    R, lr = 2.0, 0.3
    W0 = np.random.default_rng(3).standard_normal((2, 5, 5))
    W0 *= 1.9 / np.linalg.norm(W0, axis=(1, 2), keepdims=True)
    res = gd.run_gd(DATA, gd.GDConfig(steps=1, lr=lr, geometry=Projected(R)), init=W0)
    G = _autograd(W0)
    step = W0 - lr * R * G / np.linalg.norm(G, axis=(1, 2), keepdims=True)
    want = step * np.minimum(1.0, R / np.linalg.norm(step, axis=(1, 2), keepdims=True))
    np.testing.assert_allclose(res.W, want, rtol=1e-12, atol=1e-12)  # a few roundings of O(1) numbers
    assert np.all(np.linalg.norm(want, axis=(1, 2)) > 1.9)  # the step moved outward: a real projection


def test_kq_step_stays_in_the_factor_ball():
    """(K, Q) after any projected step: ||K||^2 + ||Q||^2 <= 2R, equal when the step left the ball."""
    R = 3.0
    K0, Q0 = (np.random.default_rng(s).standard_normal((2, 5, 5)) for s in (4, 5))
    s = np.sqrt(2 * R / (np.square(K0).sum((1, 2)) + np.square(Q0).sum((1, 2))))[:, None, None]
    res = gd.run_gd(DATA, gd.GDConfig(steps=5, lr=0.5, param="KQ", geometry=Projected(R, param="KQ")),
                    init=(K0 * s, Q0 * s))
    tot = np.square(res.K).sum((1, 2)) + np.square(res.Q).sum((1, 2))
    np.testing.assert_allclose(tot, 2 * R, rtol=1e-12)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_step_hook_sees_every_step_of_every_radius_with_the_schedule(param):
    """One hook run per radius, one call per step, with the step size lr * scale * (1 - k/steps): scale = R
    for W, sqrt(R) for (K, Q)."""
    radii, steps, lr = [1.0, 4.0], 3, 0.05
    seen: list = []

    def factory():
        seen.append([])
        return lambda grads, step_lr: (seen[-1].append(step_lr) or grads, step_lr)

    with gd.step_hook(factory):
        regularization_path(DATA, radii, param=param, steps=steps, lr=lr, restarts=1)
    assert gd.step_hooks() == ()
    for R, got in zip(radii, seen, strict=True):
        scale = R if param == "W" else math.sqrt(R)
        assert got == [lr * scale * (1.0 - k / steps) for k in range(steps)]
    assert len(seen) == len(radii)


def test_an_ascending_hook_breaks_the_path():
    """A hook that climbs (the power sabotage ascent-gd) reaches the path: a higher loss at every radius."""
    radii = [1.0, 2.0, 4.0]
    good = regularization_path(DATA, radii, steps=40, restarts=1)
    with gd.step_hook(lambda: lambda grads, lr: ([-g for g in grads], lr)):
        bad = regularization_path(DATA, radii, steps=40, restarts=1)
    assert np.all(bad.loss > good.loss)


# -- the prompt paths (normalised Riemannian GD on the sphere) ------------------------------------------

_rng = np.random.default_rng(31)
KEYS, SCORES = _rng.standard_normal((2, 3, 4, 3)), _rng.standard_normal((2, 3, 4))


def test_one_sphere_step_rotates_along_the_tangential_descent_direction():
    """u1 = cos(lr) u0 + sin(lr) t, t the unit tangential part of -grad L(R u0) (autograd of prompt_loss)."""
    R, lr = 3.0, 0.2
    u0 = _rng.standard_normal((2, 3))
    u0 /= np.linalg.norm(u0, axis=-1, keepdims=True)
    p = torch.tensor(R * u0, requires_grad=True)
    prompt_loss(torch.as_tensor(KEYS), torch.as_tensor(SCORES), p).sum().backward()
    G = p.grad.numpy()
    t = -(G - (G * u0).sum(-1, keepdims=True) * u0)
    t /= np.linalg.norm(t, axis=-1, keepdims=True)
    want = np.cos(lr) * u0 + np.sin(lr) * t

    class OnR(PromptModel):  # the prompt model at p = R u (the path's parametrisation)
        def grads(self, batch, head, params, loss, gamma, direction_only):
            return super().grads(batch, head, [R * params[0]], loss, gamma, direction_only)

    batch = PromptBatch(torch.as_tensor(KEYS), torch.as_tensor(SCORES))
    res = gd.run_gd(batch, gd.GDConfig(steps=1, lr=lr, geometry=OnSphere(R), param=OnR()), init=u0)
    np.testing.assert_allclose(res.W, want, rtol=0, atol=1e-12)


def test_step_hook_reaches_the_prompt_path():
    """One hook run per radius and sweep (upward: every radius; downward: all but the largest), one call per
    step with the angle lr (1 - k/steps) of the random starts (the upward warm start and the downward sweep:
    (lr / R)(1 - k/steps)); a climbing hook leaves a path of higher excess loss at every radius."""
    radii, steps, lr = [1.0, 4.0], 3, 0.1
    ref = np.argmax(SCORES, -1)
    seen: list = []

    def factory():
        seen.append([])
        return lambda grads, step_lr: (seen[-1].append(step_lr) or grads, step_lr)

    with gd.step_hook(factory):
        prompt_reg_path(KEYS, SCORES, radii, ref=ref, rng=np.random.default_rng(0), steps=steps, lr=lr)
    angles = [[np.asarray(a, dtype=float).ravel() for a in run] for run in seen]
    assert len(angles) == 2 * len(radii) - 1 and all(len(run) == steps for run in angles)
    sched = np.array([1.0 - k / steps for k in range(steps)])
    for run in angles[:len(radii)]:  # upward: the random starts' angles
        np.testing.assert_allclose([a.max() for a in run], lr * sched, rtol=1e-15)
    np.testing.assert_allclose([a.min() for a in angles[1]], lr / radii[1] * sched, rtol=1e-15)  # warm start
    for run, R in zip(angles[len(radii):], radii[-2::-1], strict=True):  # downward
        np.testing.assert_allclose([a.max() for a in run], lr / max(1.0, R) * sched, rtol=1e-15)
    kw = dict(ref=ref, steps=40, restarts=1)
    good = prompt_reg_path(KEYS, SCORES, radii, rng=np.random.default_rng(0), **kw)
    with gd.step_hook(lambda: lambda grads, lr: ([-g for g in grads], lr)):
        bad = prompt_reg_path(KEYS, SCORES, radii, rng=np.random.default_rng(0), **kw)
    assert np.all(bad.excess > good.excess)


def test_a_zero_path_point_warm_starts_as_zero():
    """A cone path's point can be exactly 0 (the projection of a point in the polar cone); its warm start at
    the next radius stays 0, not 0 * (R / tiny) = 0 * inf = NaN for R >= 4 (a silent NaN path before)."""
    from numerics.regpath import _w_starts

    P = torch.ones((2, 3, 3), dtype=torch.float64)
    prev = torch.zeros((1, 3, 3), dtype=torch.float64)
    out = _w_starts(P, prev, 4.0, 4.0, None, 2, torch.finfo(torch.float64).tiny)
    assert torch.isfinite(out).all() and torch.equal(out[2], prev[0])
    np.testing.assert_allclose(torch.linalg.matrix_norm(out[:2]).numpy(), 4.0, rtol=1e-15)


def test_selection_start_lies_in_the_selection_cone():
    """selection_start: a unit direction with every margin of ``ref`` > 0 (R·p selects ref for large R);
    no direction selects a token that another token dominates (infeasible: InfeasibleError); bad ref: 2."""
    from numerics.errors import InfeasibleError
    from numerics.prompt_path import selection_start

    rng = np.random.default_rng(3)
    K = rng.standard_normal((4, 3, 5))
    ref = np.array([0, 2, 1, 0])
    p = selection_start(K, ref)
    assert abs(np.linalg.norm(p) - 1) < 1e-12
    D = K[np.arange(4), ref][:, None, :] - K
    marg = np.einsum("ntk,k->nt", D, p)
    marg[np.arange(4), ref] = np.inf
    assert marg.min() > 0
    K2 = np.zeros((1, 2, 2))
    K2[0, 1] = [1.0, 0.0]  # token 0 (the origin) vs token 1 and its mirror image: none selects token 0 ...
    K3 = np.concatenate([K2, np.array([[[0.0, 0.0], [-1.0, 0.0]]])])  # ... in both examples at once
    with pytest.raises(InfeasibleError):
        selection_start(K3, np.array([0, 0]))
    with pytest.raises(InvalidInputError):
        selection_start(K, np.array([0, 3, 1, 0]))


def test_per_instance_generators_replay_an_instance_alone():
    """With one Generator per instance (``rng`` a sequence), each instance draws its random starts from its
    own: instance 1 of a batch of two and the same instance alone, seeded alike, get the same path (the
    batch's rows are independent computations; 1e-12: batched against single matrix products, whose
    reduction order may differ in the last bits). One shared Generator is a different (valid) draw."""
    radii = np.array([1.0, 4.0])
    keys2 = np.stack([KEYS[0], KEYS[0][:, ::-1]])
    scores2 = np.stack([SCORES[0], SCORES[0][:, ::-1]])
    ref2 = np.stack([np.zeros(KEYS.shape[1], dtype=int), np.full(KEYS.shape[1], KEYS.shape[2] - 1)])
    kw = dict(steps=30, restarts=2)
    gens = [np.random.default_rng(s) for s in (5, 6)]
    both = prompt_reg_path(keys2, scores2, radii, ref=ref2, rng=gens, **kw)
    alone = prompt_reg_path(keys2[1:], scores2[1:], radii, ref=ref2[1:], rng=[np.random.default_rng(6)], **kw)
    np.testing.assert_allclose(both.p[1], alone.p[0], rtol=0, atol=1e-12)
    shared = prompt_reg_path(keys2, scores2, radii, ref=ref2, rng=np.random.default_rng(5), **kw)
    assert shared.p.shape == both.p.shape
    with pytest.raises(InvalidInputError, match="one per instance"):
        prompt_reg_path(keys2, scores2, radii, ref=ref2, rng=[np.random.default_rng(5)], **kw)
