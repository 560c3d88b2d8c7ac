"""The ``start`` argument of numerics.regpath.regularization_path: a given direction as one more candidate
at every radius, put on the ball's boundary and optimised like the others (rp-kq-rank re-solves its path
from the ball point R·W_m/‖W_m‖_⋆ with it)."""

from __future__ import annotations

import numpy as np
import pytest

from numerics import attention as att
from numerics.data import random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.regpath import regularization_path


def _ball_loss(data, W0, radii, param, m):
    """L at the start's point on the ball of each radius (Frobenius for W; the rank-m truncation at nuclear
    norm R for (K, Q))."""
    import torch

    if param == "KQ":
        U, S, Vh = np.linalg.svd(W0)
        W0 = (U[:, :m] * S[:m]) @ Vh[:m]
        nrm = S[:m].sum()
    else:
        nrm = np.linalg.norm(W0)
    b = att.batch_from_data([data] * len(radii))
    W = torch.as_tensor(np.stack([r * W0 / nrm for r in radii]), dtype=torch.float64)
    return att.loss(b.X, b.Y, b.Z, W, b.linear_head()).numpy()


@pytest.mark.parametrize("param,m", [("W", None), ("KQ", 1), ("KQ", 2)])
def test_start_is_a_candidate_on_the_ball(param, m):
    """With a step too small to move (lr 1e-12, one step) every candidate stays where it starts: the path's
    loss is at most the start's ball point's at every radius, and the point lies on the boundary."""
    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(2))
    W0 = np.random.default_rng(3).standard_normal((5, 5))
    radii = np.array([1.0, 2.0, 4.0])
    kw = dict(param=param, m=m, steps=1, lr=1e-12, restarts=2, seed=4)
    rp = regularization_path(data, radii, start=W0, **kw)
    ball = _ball_loss(data, W0, radii, param, m or 5)
    assert np.all(rp.loss[:, 0] <= ball * (1 + 1e-12))
    np.testing.assert_allclose(rp.norms[:, 0], radii, rtol=1e-9)
    if param == "KQ":
        assert rp.K is not None and rp.K.shape == (3, 1, 5, m)


def test_start_adds_to_the_random_candidates():
    """The random draws are those of the run without ``start``: at the first radius (no warm start) the
    candidates are a superset, so the best loss is no larger."""
    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(5))
    W0 = np.random.default_rng(6).standard_normal((5, 5))
    kw = dict(param="KQ", m=1, steps=60, restarts=3, seed=7)
    with_start = regularization_path(data, [2.0], start=W0, **kw)
    without = regularization_path(data, [2.0], **kw)
    assert with_start.loss[0, 0] <= without.loss[0, 0] * (1 + 1e-12)


def test_start_arguments_are_checked():
    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(2))
    with pytest.raises(InvalidInputError, match="cannot be combined"):
        regularization_path(data, [1.0], start=np.eye(5), cone=(np.eye(5), 0.1), steps=2)
    with pytest.raises(InvalidInputError, match="finite nonzero"):
        regularization_path(data, [1.0], start=np.zeros((5, 5)), steps=2)
    with pytest.raises(InvalidInputError, match="finite nonzero"):
        regularization_path(data, [1.0], start=np.eye(4), steps=2)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_start_with_per_instance_radii_equals_separate_runs(param):
    """One start per instance and a (J, R) radii array: each instance's path is the one it has alone."""
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=2)
    starts = np.random.default_rng(9).standard_normal((2, 5, 5))
    radii = np.array([[1.0, 3.0], [2.0, 6.0]])
    kw = dict(param=param, m=2, steps=30, restarts=2)
    both = regularization_path(datas, radii, seed=[11, 12], start=starts, **kw)
    for r in range(2):
        alone = regularization_path([datas[r]], radii[:, r], seed=[11 + r], start=starts[r], **kw)
        np.testing.assert_allclose(both.loss[:, r], alone.loss[:, 0], rtol=1e-9)
        np.testing.assert_allclose(both.W[:, r], alone.W[:, 0], rtol=0, atol=1e-9 * np.abs(alone.W).max())
