"""numerics.prompt: closed-form ∇_p vs autograd, GD on TLZO's fixture, joint (v, p) path fixture."""

import numpy as np
import pytest
import torch

from numerics.errors import SolverError
from numerics.prompt import joint_vp_path, prompt_grad, prompt_keys, prompt_loss, prompt_scores, run_prompt_gd
from numerics.svm import solve_joint_vp_svm

FIX_KEYS = np.array([[[-0.1, 1.0], [1.0, 0.0], [0.0, 0.0]]])


def _corr(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_prompt_grad_matches_autograd():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 2, 4, 5))
    W = rng.standard_normal((3, 4, 5))
    K = torch.as_tensor(np.einsum("rntd,rkd->rntk", X, W))  # keys W x
    g = torch.as_tensor(rng.standard_normal((3, 2, 4)))
    for loss in ("logistic", "exponential", "linear"):
        p = torch.as_tensor(rng.standard_normal((3, 4)), dtype=torch.float64).requires_grad_(True)
        prompt_loss(K, g, p, loss).sum().backward()
        closed = prompt_grad(K, g, p.detach(), loss)
        assert torch.allclose(closed, p.grad, rtol=1e-10, atol=1e-12), loss


def test_keys_and_scores_shapes():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 3, 4))
    assert prompt_keys(X, np.eye(4)).shape == (2, 3, 4)
    assert np.allclose(prompt_scores(X, [1, -1], np.ones(4)), np.array([1, -1])[:, None] * X.sum(-1))


def test_local_fixture_converges_to_1_0_and_tie_escapes():
    init = 60 * np.array([[np.cos(0.01), np.sin(0.01)]] * 2)
    g = np.array([[[1.0, 0.9, 0.5]], [[1.0, 0.9, 0.9]]])
    res = run_prompt_gd(np.stack([FIX_KEYS] * 2), g, steps=1500, lr=0.05, init=init)
    assert 1 - _corr(res.p[0], np.array([1.0, 0.0])) < 1e-4
    assert (
        1 - _corr(res.p[1], np.array([1.0, 0.0])) > 0.5
    )  # γ3 = 0.9: leaves the cone (towards the global p^mm)
    assert _corr(res.p[1], np.array([-0.1, 1.0])) > 0.9


@pytest.mark.parametrize("normalized", [False, True])
def test_a_per_instance_step_moves_each_prompt_by_its_own_step(normalized):
    """One step size per instance (p-svm-gd's plain η = 1/L_p, its drawn local starts' LR·R/60): the batched
    run equals each instance run alone with its own step (the step is reshaped to p's rank, (R, dk))."""
    rng = np.random.default_rng(0)
    K, g = rng.standard_normal((3, 2, 3, 4)), rng.standard_normal((3, 2, 3))
    init = rng.standard_normal((3, 4))
    lrs = [0.1, 0.2, 0.3]
    both = run_prompt_gd(K, g, steps=5, lr=lrs, normalized=normalized, init=init).p
    for j, lr in enumerate(lrs):
        alone = run_prompt_gd(K[j], g[j], steps=5, lr=lr, normalized=normalized, init=init[j][None]).p[0]
        assert np.allclose(both[j], alone, rtol=1e-12, atol=1e-14)


def test_gradient_stays_exact_when_saturated():
    # at ‖p‖ = 200 the non-selected probability is e^{-200}: the centred form must still see it
    p = torch.tensor([[200.0, 0.0]], dtype=torch.float64)
    G = prompt_grad(
        torch.as_tensor(FIX_KEYS[None]), torch.tensor([[[1.0, 0.9, 0.5]]], dtype=torch.float64), p
    )
    assert torch.all(torch.isfinite(G)) and G[0, 0] < 0  # descent direction pushes p_1 up


def test_joint_path_fixture():
    X = np.array([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], [0.5, 1.5]]], dtype=float)
    Y = np.array([1.0, -1.0, 1.0])
    v_sol, p_sol = solve_joint_vp_svm(X, Y, np.ones(3, dtype=np.int64))
    assert np.allclose(p_sol.w, [1.0, 0.0], atol=1e-7)
    path = joint_vp_path(X, Y, [1.0, 4.0, 16.0], rng=np.random.default_rng(0), starts=4, iters=60)
    assert 1 - _corr(path.v[-1], np.array([0.0, 1.0])) < 1e-3
    assert 1 - _corr(path.p[-1], p_sol.w) < 5e-3
    assert 1 - _corr(path.p[-1], np.array([1.25, 0.25])) > 5e-3  # not the full p-SVM


FIX_TIGHT = np.array([[[0, 0], [1, 1]], [[0, 0], [1, -1]], [[0, 0], [0.5, 1]]], dtype=float)
FIX_Y = np.array([1.0, -1.0, 1.0])


def test_joint_path_of_a_dataset_does_not_depend_on_its_batch():
    # each dataset of a batch is solved on its own from its own generator (numerics.prompt.joint_vp_path): the
    # batch computes exactly what the call alone computes, so the answers agree to rounding (1e-12 leaves
    # room only for a different summation order; the solver's own tolerance, 1e-16 change in log L, is not
    # what is compared -- a coupled line search moved answers by O(1) here)
    X = FIX_TIGHT * 3.0
    X[2, 1] = (0.5 * 3.0, 4.5)  # non-tight: the third example clears the head margin
    Xs = np.stack([FIX_TIGHT, X, FIX_TIGHT * 2.0])
    Ys = np.stack([FIX_Y] * 3)
    radii, kw = [1.0, 4.0], dict(starts=3, iters=30, v_radii=[1.0, 16.0])
    batch = joint_vp_path(Xs, Ys, radii, rng=[np.random.default_rng(s) for s in (5, 6, 7)], **kw)
    for k, seed in enumerate((5, 6, 7)):
        alone = joint_vp_path(Xs[k], Ys[k], radii, rng=np.random.default_rng(seed), **kw)
        for f in ("v", "p", "log_loss"):
            np.testing.assert_allclose(getattr(batch[k], f), getattr(alone, f), rtol=1e-12, atol=1e-12)
    # one generator for a batch is spawned into one per dataset: the same contract
    g = np.random.default_rng(9)
    spawned = np.random.default_rng(9).spawn(3)
    batch = joint_vp_path(Xs, Ys, radii, rng=g, **kw)
    alone = joint_vp_path(Xs[1], Ys[1], radii, rng=spawned[1], **kw)
    np.testing.assert_allclose(batch[1].p, alone.p, rtol=1e-12, atol=1e-12)


def test_joint_path_finite_when_margins_reach_minus_hundreds():
    # at r = R² = 256 with tokens of norm ~ 4, Adam's random starts have margins u ≈ −10³: log ℓ's large-u
    # branch e^{−u} overflowed there and its zero-weighted gradient (0·inf) was NaN, which the former code
    # returned as the path's answer on seeds 1 and 2 (measured)
    X = FIX_TIGHT * 4.0
    for seed in (1, 2):
        path = joint_vp_path(X, FIX_Y, [1.0, 4.0, 16.0], v_radii=[1.0, 16.0, 256.0],
                             rng=np.random.default_rng(seed), starts=4, iters=60)
        assert np.all(np.isfinite(path.v)) and np.all(np.isfinite(path.p))
        # the minimum, not just a finite number: the unit head (0, 1) has margin 4 on every example, so
        # log L → −256·4 as the softmax selects the second tokens (measured −1024.02)
        assert path.log_loss[-1] < -0.99 * 256.0 * 4.0
        assert 1 - _corr(path.v[-1], np.array([0.0, 1.0])) < 1e-3


def test_joint_path_raises_on_a_non_finite_minimum():
    X = np.stack([FIX_TIGHT, FIX_TIGHT.copy()])
    X[1, 0, 1, 0] = np.nan
    with pytest.raises(SolverError, match="dataset 1 of the batch: non-finite"):
        joint_vp_path(X, np.stack([FIX_Y] * 2), [1.0], rng=np.random.default_rng(0), starts=2, iters=5)
