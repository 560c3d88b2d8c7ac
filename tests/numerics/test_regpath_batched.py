"""Per-instance radii in numerics.regpath.regularization_path (issue 17: the local-path theorems batch a
block's instances into one path): a (J, R) radii array runs every instance on its own radii, and each
instance's path is the one it has alone (per-instance seeds and cones; same draws, same steps),
up to rounding."""

from __future__ import annotations

import numpy as np
import pytest

from numerics.data import random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.regpath import regularization_path

#: Batched vs alone, relative to max |W|: the same arithmetic per instance; batched products may round
#: differently in the last bit, and 40 projected steps carry that along at rounding level.
BATCH_RTOL = 1e-9


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_per_instance_radii_equal_separate_runs(param):
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=3)
    rng = np.random.default_rng(8)
    centres = rng.standard_normal((3, 5, 5))
    radii = np.array([[1.0, 2.0, 3.5], [2.0, 4.0, 7.0], [4.0, 8.0, 14.0]])  # (J, R): a column per instance
    kw = dict(param=param, steps=40, restarts=2)
    both = regularization_path(datas, radii, seed=[11, 12, 13], cone=(centres, 0.05), **kw)
    assert both.W.shape == (3, 3, 5, 5) and both.constraint_active.shape == (3, 3)
    for r in range(3):
        alone = regularization_path([datas[r]], radii[:, r], seed=[11 + r], cone=(centres[r], 0.05), **kw)
        scale = np.abs(alone.W).max()
        np.testing.assert_allclose(both.W[:, r], alone.W[:, 0], rtol=0, atol=BATCH_RTOL * scale)
        np.testing.assert_allclose(both.loss[:, r], alone.loss[:, 0], rtol=BATCH_RTOL)
        np.testing.assert_array_equal(both.constraint_active[:, r], alone.constraint_active[:, 0])
        np.testing.assert_allclose(both.norms[:, r], alone.norms[:, 0], rtol=BATCH_RTOL)


def test_per_instance_radii_need_one_column_per_instance():
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=2)
    with pytest.raises(InvalidInputError, match=r"shape \(J, 2\)"):
        regularization_path(datas, np.ones((3, 3)), steps=2)
    with pytest.raises(InvalidInputError, match="radii must be"):
        regularization_path(datas, np.ones((2, 2, 2)), steps=2)
