"""The compiled GD path without torch (issue 17, fresh-process GD): ``run_gd`` on the numba kernels with the
data's linear heads and an explicit init never imports torch, and gives what the torch-side entry to the same
kernels gives (the same compiled code; the head's scores gamma and the loss are computed in numpy here and in
torch there, so they agree to rounding)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from numerics import gd, gd_common, kernels
from numerics.data import random_unit_sphere
from numerics.losses import LOSS_NP, LOSSES

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba not installed / switched off")

#: Losses from two implementations of the same formula (numpy here, torch there): rounding only.
LOSS_RTOL = 1e-12
#: Iterates of the two entries, relative to max |W|: gamma = Y X v from numpy's and torch's products can
#: differ in the last bit, and normalised GD carries that along at rounding level (measured <= 5e-16 up
#: to 200 steps for W and 75 steps for (K, Q) on this data) until the softmax saturates and a token switch
#: amplifies it ((K, Q): 2e-12 at step 100; W: 3 % at step 300): so the comparison runs 60 steps.
ITERATE_RTOL = 1e-12


def test_numpy_losses_match_the_torch_table():
    import torch

    from numerics.attention import LOSS_FNS

    u = np.concatenate([np.linspace(-60, 60, 241), [-20.0 - 1e-9, -20.0, 19.999, 745.0, -700.0]])
    assert set(LOSS_NP) == set(LOSSES) == set(LOSS_FNS)
    for name in LOSSES:
        ours = LOSS_NP[name](u)
        ref = LOSS_FNS[name][0](torch.as_tensor(u)).numpy()
        np.testing.assert_allclose(ours, ref, rtol=LOSS_RTOL, atol=0, err_msg=name)


@needs_numba
def test_kernel_run_in_a_fresh_process_imports_no_torch():
    code = (
        "import sys, numpy as np\n"
        "from numerics.data import random_unit_sphere\n"
        "from numerics.gd import GDConfig, run_gd\n"
        "ds = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0), R=2)\n"
        "r = run_gd(ds, GDConfig(steps=5, lr=0.1, backend='numba'), init=0.01 * np.ones((2, 5, 5)))\n"
        "k = run_gd(ds, GDConfig(steps=5, lr=0.1, param='KQ', backend='numba'),\n"
        "           init=(np.eye(5), np.eye(5)))\n"
        "assert r.backend == k.backend == 'numba', (r.backend, k.backend)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False"]


@needs_numba
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_numpy_entry_equals_the_torch_entry(param):
    import torch

    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(3), R=11)
    rng = np.random.default_rng(4)
    if param == "W":
        init_np = 0.1 * rng.standard_normal((11, 5, 5))
        init_t = torch.as_tensor(init_np)
    else:
        init_np = (0.1 * rng.standard_normal((11, 5, 5)), 0.1 * rng.standard_normal((11, 5, 5)))
        init_t = tuple(torch.as_tensor(a) for a in init_np)
    cfg = gd.GDConfig(param=param, steps=60, lr=0.1, backend="numba")
    a = gd.run_gd(datas, cfg, init=init_np, record_every=20)  # the numpy entry (head=None, init given)
    head = gd_common._prepare(datas, None, "cpu", torch.float64)[1]
    b = gd.run_gd(datas, cfg, init=init_t, head=head, record_every=20)  # torch's
    assert a.backend == b.backend == "numba"
    scale = np.abs(a.W).max()
    np.testing.assert_allclose(a.W, b.W, rtol=0, atol=ITERATE_RTOL * scale)
    np.testing.assert_allclose(a.W_traj, b.W_traj, rtol=0, atol=ITERATE_RTOL * scale)
    np.testing.assert_array_equal(a.iterations, b.iterations)
    np.testing.assert_allclose(a.loss, b.loss, rtol=LOSS_RTOL)
    np.testing.assert_allclose(a.loss_traj, b.loss_traj, rtol=LOSS_RTOL)
    np.testing.assert_allclose(a.norms, b.norms, rtol=LOSS_RTOL)
    if param == "KQ":
        for x, y in ((a.K, b.K), (a.Q, b.Q)):
            np.testing.assert_allclose(x, y, rtol=0, atol=ITERATE_RTOL * np.abs(x).max())


@needs_numba
def test_numpy_entry_checks_init_like_the_torch_path():
    from numerics.errors import InvalidInputError

    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(5), R=2)
    with pytest.raises(InvalidInputError, match=r"init W must have shape \(2, 5, 5\) or \(5, 5\)"):
        gd.run_gd(datas, gd.GDConfig(steps=2, lr=0.1, backend="numba"), init=np.zeros((3, 5, 5)))
    with pytest.raises(InvalidInputError, match="init W contains NaN or Inf"):
        gd.run_gd(datas, gd.GDConfig(steps=2, lr=0.1, backend="numba"), init=np.full((5, 5), np.nan))
    with pytest.raises(InvalidInputError, match="must be a pair"):
        gd.run_gd(datas, gd.GDConfig(param="KQ", steps=2, lr=0.1, backend="numba"), init=np.zeros((5, 5)))
    # a (d, d) init: shared by every instance
    one = gd.run_gd(datas, gd.GDConfig(steps=3, lr=0.1, backend="numba"), init=0.01 * np.eye(5))
    assert one.W.shape == (2, 5, 5) and one.backend == "numba"
