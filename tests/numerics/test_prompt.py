"""numerics.prompt: closed-form ∇_p vs autograd, GD on TLZO's fixture, joint (v, p) path fixture."""

import numpy as np
import torch

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
