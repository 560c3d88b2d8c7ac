"""numerics.kernels: layout helpers, the vectorised exp, the generated-module cache."""

from __future__ import annotations

import numpy as np
import pytest

from numerics import kernels as kn
from numerics.errors import InvalidInputError

needs_numba = pytest.mark.skipif(not kn.available(), reason="numba not installed")


def test_soa_aos_roundtrip_and_padding():
    a = np.arange(3 * 2 * 4, dtype=float).reshape(3, 2, 4)
    s = kn.soa(a)
    assert s.shape == (2, 4, 8) and s.flags.c_contiguous
    np.testing.assert_array_equal(
        s[..., 3:], np.repeat(a[-1][..., None], 5, axis=-1)
    )  # padding = last instance
    np.testing.assert_array_equal(kn.aos(s, 3), a)
    assert kn.padded(0) == 0 and kn.padded(8) == 8 and kn.padded(9) == 16


@needs_numba
def test_vectorised_exp_within_one_ulp_and_flushes_below_min_normal(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNSVM_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kn, "_MODULES", {})
    mod = kn.kernels(2, 3, 2, 2)
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.uniform(0, 760, 4000), -rng.exponential(1.0, 4000), -rng.uniform(0, 1e-6, 4000),
                        [0.0, -0.0, -1e-300, -np.log(2) / 2, -708.3, -745.2, -1e6]]).reshape(1, -1)
    E = x.copy()
    mod._exp_nonpositive(E, np.empty(x.shape, dtype=np.int64))
    ref = np.exp(x)
    normal = ref >= np.finfo(np.float64).tiny
    ulp = np.abs(E[normal] - ref[normal]) / np.spacing(ref[normal])
    assert ulp.max() <= 1.0
    assert np.all(E[~normal] <= ref[~normal]) and np.all(
        E[~normal] < 2.3e-308
    )  # flushed (or the same tiny value)
    assert E[0, -7] == 1.0 and E[0, -1] == 0.0
    assert list(tmp_path.glob("attnsvm_gd_*_n2_T3_d2_m2.py"))  # generated into the configured cache


def test_new_kernel_version_prunes_stale_modules(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNSVM_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(kn, "_MODULES", {})
    stale = tmp_path / "attnsvm_gd_000000000000_n2_T3_d2_m2.py"
    stale.write_text("# an older kernel source")
    (tmp_path / "__pycache__").mkdir()
    stale_cache = tmp_path / "__pycache__" / "attnsvm_gd_000000000000_n2_T3_d2_m2.w_steps-1.py311.nbi"
    stale_cache.write_text("x")
    kn.kernels(2, 3, 2, 2)
    assert not stale.exists() and not stale_cache.exists()
    assert (tmp_path / f"attnsvm_gd_{kn._VERSION}_n2_T3_d2_m2.py").exists()


def test_unwritable_kernel_cache_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ATTNSVM_KERNEL_CACHE", str(blocker / "sub"))
    monkeypatch.setattr(kn, "_MODULES", {})
    with pytest.raises(InvalidInputError, match="not writable"):
        kn.kernels(1, 2, 3, 4)


@needs_numba
def test_auto_backend_falls_back_to_torch_without_a_kernel_cache(tmp_path, monkeypatch):
    from numerics import gd
    from numerics.data import random_unit_sphere

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("ATTNSVM_KERNEL_CACHE", str(blocker / "sub"))
    monkeypatch.setattr(kn, "_MODULES", {})
    monkeypatch.setattr(gd, "KERNEL_MIN_WORK", 0)
    datas = random_unit_sphere(2, 3, 4, rng=np.random.default_rng(0), R=2)
    with pytest.warns(RuntimeWarning, match="torch path"):
        res = gd.run_gd(datas, gd.GDConfig(steps=5, lr=0.1))
    assert res.backend == "torch"
    with pytest.raises(InvalidInputError, match="not writable"):
        gd.run_gd(datas, gd.GDConfig(steps=5, lr=0.1, backend="numba"))


def test_no_numba_switch(monkeypatch):
    monkeypatch.setenv("ATTNSVM_NO_NUMBA", "1")
    assert not kn.available()
