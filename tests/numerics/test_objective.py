"""numerics.objective: the numpy API on one AttentionData equals the batched torch form row by row, and its
gradient is the derivative of its loss (central differences)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numerics import attention as att
from numerics import objective as obj
from numerics.data import random_unit_sphere
from numerics.errors import InvalidInputError


@pytest.fixture(scope="module")
def datas():
    return random_unit_sphere(4, 5, 3, rng=np.random.default_rng(0), R=3)


def test_numpy_api_equals_the_torch_batch_form(datas):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((3, 3, 3))
    K, Q = rng.standard_normal((3, 3, 2)), rng.standard_normal((3, 3, 2))
    b = att.batch_from_data(datas)
    L, G = att.loss_and_grad_W(b.X, b.Y, b.Z, torch.as_tensor(W), b.linear_head())
    gK, gQ = att.grad_KQ(b.X, b.Y, b.Z, torch.as_tensor(K), torch.as_tensor(Q), b.linear_head())
    for r, data in enumerate(datas):
        # the same float64 operations on a batch of one: equal up to the summation order of batched BLAS
        assert obj.loss(data, W[r]) == pytest.approx(float(L[r]), rel=1e-13)
        np.testing.assert_allclose(obj.grad_W(data, W[r]), G[r].numpy(), rtol=1e-12, atol=1e-15)
        k, q = obj.grad_KQ(data, K[r], Q[r])
        np.testing.assert_allclose(k, gK[r].numpy(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(q, gQ[r].numpy(), rtol=1e-12, atol=1e-15)
        s = obj.softmax_probs(data, W[r])
        np.testing.assert_allclose(s, att.softmax(b.X, b.Z, torch.as_tensor(W))[r].numpy(), rtol=1e-12)


def test_grad_W_is_the_derivative_of_loss(datas):
    data, W = datas[0], np.random.default_rng(2).standard_normal((3, 3))
    h = 1e-5  # central differences: error O(h^2 |L'''|) ~ 1e-10 on O(1) data, rounding O(eps / h) ~ 1e-11
    fd = np.zeros_like(W)
    for i in range(3):
        for j in range(3):
            E = np.zeros_like(W)
            E[i, j] = h
            fd[i, j] = (obj.loss(data, W + E) - obj.loss(data, W - E)) / (2 * h)
    np.testing.assert_allclose(obj.grad_W(data, W), fd, atol=1e-8)


def test_bad_shapes_are_one_line_errors(datas):
    with pytest.raises(InvalidInputError, match="W must have shape"):
        obj.grad_W(datas[0], np.zeros((2, 2)))
    with pytest.raises(InvalidInputError, match="K and Q"):
        obj.grad_KQ(datas[0], np.zeros((3, 2)), np.zeros((3, 1)))
