"""numerics.sequence: closed-form sequence/causal gradients vs autograd, causal masking, batched GD."""

import numpy as np
import pytest
import torch

from numerics.sequence import causal_mask, run_seq_gd, seq_grad, seq_loss, seq_probs
from numerics.svm import seq_scores, solve_seq_svm


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_seq_grad_matches_autograd(causal, loss):
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.standard_normal((2, 3, 4, 5)))
    Y = rng.choice([-1.0, 1.0], size=(2, 3, 4))
    G = torch.as_tensor(np.stack([seq_scores(X[r].numpy(), Y[r], rng.standard_normal(5)) for r in range(2)]))
    W = torch.as_tensor(rng.standard_normal((2, 5, 5))).requires_grad_(True)
    seq_loss(X, G, W, causal, loss).sum().backward()
    assert torch.allclose(seq_grad(X, G, W.detach(), causal, loss), W.grad, rtol=1e-10, atol=1e-12)


def test_causal_mask_zero_mass_on_future_keys():
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.standard_normal((1, 2, 4, 3)))
    s = seq_probs(X, torch.as_tensor(rng.standard_normal((1, 3, 3))), causal=True)
    assert torch.all(s[..., ~causal_mask(4)] == 0)
    assert torch.allclose(s.sum(-1), torch.ones(1, 2, 4, dtype=torch.float64))


def test_future_tokens_do_not_change_causal_gradient_of_earlier_queries():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1, 1, 3, 4))
    G = rng.standard_normal((1, 1, 3, 3))
    W = torch.as_tensor(rng.standard_normal((1, 4, 4)))
    X2 = X.copy()
    X2[0, 0, 2] += 1.0  # change the last token
    G[..., 2, :] = 0.0  # and silence the last query so only queries 0, 1 contribute
    g1 = seq_grad(torch.as_tensor(X), torch.as_tensor(G), W, causal=True)
    g2 = seq_grad(torch.as_tensor(X2), torch.as_tensor(G), W, causal=True)
    assert torch.allclose(g1, g2)


def test_causal_gd_converges_to_causal_svm_on_b2_data():
    from checks.strategies import b2_data

    data = b2_data(2, 3, 5, rng=np.random.default_rng(3))
    X = np.array(data.X)
    g = data.Y[:, None] * (X @ data.v)
    for i, o in enumerate(g.argmax(1)):
        X[i, [0, o]] = X[i, [o, 0]]
    G = seq_scores(X, np.repeat(data.Y[:, None], 3, 1), data.v)
    sol = solve_seq_svm(X, G, causal=True)
    res = run_seq_gd(X, G, causal=True, steps=1500, lr=0.1)
    c = np.sum(res.W * sol.W) / np.linalg.norm(res.W) / np.linalg.norm(sol.W)
    assert 1 - c < 5e-3
