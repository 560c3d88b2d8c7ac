"""numerics.gd's engine parts: GDConfig (per-instance step size), the geometry plug (plain, normalised, the
l_p mirror map), the model plug and the step hook; each against an independent computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numerics import gd, kernels
from numerics.data import random_unit_sphere

DATA = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(11), R=3)
W0 = 0.3 * np.random.default_rng(12).standard_normal((3, 5, 5))
KQ0 = tuple(0.3 * np.random.default_rng(s).standard_normal((3, 5, 5)) for s in (13, 14))


def _identity_hook():
    return lambda grads, lr: (grads, lr)


# -- per-instance step size ---------------------------------------------------------------------------

@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("geometry", ["normalized", "plain"])
def test_per_instance_lr_equals_separate_runs(param, geometry):
    """One batched run with lr = (l_1, l_2, l_3) is the three runs with their own lr: 60 steps from a
    moderate start stay well before saturation, where the order of one product (lr * scale vs scale * lr)
    changes iterates by rounding only (1e-10 relative is ~1e5 ulps of headroom)."""
    lrs = (0.05, 0.2, 0.7)
    init = W0 if param == "W" else KQ0
    cfg = gd.GDConfig(steps=60, lr=lrs, param=param, geometry=geometry, backend="torch")
    batched = gd.run_gd(DATA, cfg, init=init, record_every=30)
    assert batched.lr.tolist() == list(lrs)
    for r, lr in enumerate(lrs):
        one = gd.run_gd(DATA[r], cfg.but(lr=lr), init=init[r] if param == "W" else (init[0][r], init[1][r]),
                        record_every=30)
        np.testing.assert_allclose(batched.W_traj[:, r], one.W_traj[:, 0], rtol=1e-10,
                                   atol=1e-10 * np.abs(one.W).max())
    with gd.step_hook(_identity_hook):  # the explicit path takes per-instance steps too
        explicit = gd.run_gd(DATA, cfg, init=init)
    np.testing.assert_allclose(explicit.W, batched.W, rtol=1e-10, atol=1e-10 * np.abs(batched.W).max())


def test_equal_per_instance_steps_are_one_step_size():
    """lr = (l, l, l) is lr = l exactly (the scalar code path, so also the kernels)."""
    a = gd.run_gd(DATA, gd.GDConfig(steps=20, lr=(0.1, 0.1, 0.1)), init=W0)
    b = gd.run_gd(DATA, gd.GDConfig(steps=20, lr=0.1), init=W0)
    assert np.array_equal(a.W, b.W) and a.lr == 0.1


# -- geometry plug ------------------------------------------------------------------------------------

@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("normalized", [False, True])
def test_mirror_p2_is_plain_or_normalised_gd_exactly(param, normalized):
    """psi = ||W||^2 / 2: grad psi is the identity, |u|^1 * sign(u) = u in floating point, and the dual
    norm is the Frobenius norm: the iterates are bit for bit those of plain (normalised) GD on the same
    (explicit) path; the fused programs (the mirror program on W, numerics.gd_torch.run_mirror, and plain
    GD's) agree to rounding."""
    init = W0 if param == "W" else KQ0
    base = gd.GDConfig(steps=40, lr=0.3, param=param, geometry="normalized" if normalized else "plain")
    mcfg = base.but(geometry=gd.Mirror(2, normalized=normalized))
    with gd.step_hook(_identity_hook):
        mirror = gd.run_gd(DATA, mcfg, init=init, record_every=10)
        plain = gd.run_gd(DATA, base, init=init, record_every=10)
    assert np.array_equal(mirror.W_traj, plain.W_traj)
    fused = gd.run_gd(DATA, base, init=init)
    for got in (mirror, gd.run_gd(DATA, mcfg, init=init)):
        np.testing.assert_allclose(got.W, fused.W, rtol=1e-10, atol=1e-10 * np.abs(fused.W).max())


@pytest.mark.parametrize("p", [1.75, 3.0])
@pytest.mark.parametrize("normalized", [False, True])
@pytest.mark.parametrize("feature_map", [True, False])
def test_mirror_fused_program_is_the_explicit_loop(p, normalized, feature_map, monkeypatch):
    """The fused mirror program (numerics.gd_torch.run_mirror: the dual variable held, the feature-map
    products on CPU, or ``model.grads`` without them) is the explicit loop's iteration up to rounding: 60
    steps from a moderate start, per-instance step sizes, records and the final loss (1e-10 relative: ~1e5
    ulps of headroom; no entry of W passes near 0 here, where p > 2 amplifies rounding,
    checks/bench/core.py)."""
    from numerics import gd_torch

    if not feature_map:
        monkeypatch.setattr(gd_torch, "FEATURE_MAP_MAX_BYTES", 0)
    cfg = gd.GDConfig(steps=60, lr=(0.05, 0.1, 0.2), geometry=gd.Mirror(p, normalized=normalized))
    fused = gd.run_gd(DATA, cfg, init=W0, record_every=20)
    with gd.step_hook(_identity_hook):
        explicit = gd.run_gd(DATA, cfg, init=W0, record_every=20)
    assert np.array_equal(fused.iterations, explicit.iterations)
    scale = np.abs(explicit.W_traj).max()
    np.testing.assert_allclose(fused.W_traj, explicit.W_traj, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(fused.loss_traj, explicit.loss_traj, rtol=1e-10)
    np.testing.assert_allclose(fused.loss, explicit.loss, rtol=1e-10)
    assert fused.lr.tolist() == [0.05, 0.1, 0.2] and fused.normalized == normalized and fused.K is None
    assert not np.array_equal(fused.W, W0)  # it moved


@pytest.mark.parametrize("p", [1.75, 2.0, 3.0, 4.0])
@pytest.mark.parametrize("normalized", [False, True])
def test_mirror_kernel_is_the_fused_program(p, normalized):
    """The compiled mirror kernel (numerics.kernels.md_steps: p = 2 the identity map, p = 3 a square root and
    the q = 3/2 norm by hand, other p math.pow) is the fused tensor program's iteration up to rounding: 60
    steps, per-instance step sizes, records, the final loss (1e-10 relative, as the fused program against the
    explicit loop above), and the run reports its backend."""
    if not kernels.available():
        pytest.skip("numba is not available")
    cfg = gd.GDConfig(steps=60, lr=(0.05, 0.1, 0.2), geometry=gd.Mirror(p, normalized=normalized))
    kern = gd.run_gd(DATA, cfg.but(backend="numba"), init=W0, record_every=20)
    fused = gd.run_gd(DATA, cfg.but(backend="torch"), init=W0, record_every=20)
    assert kern.backend == "numba" and fused.backend != "numba"
    assert np.array_equal(kern.iterations, fused.iterations)
    scale = np.abs(fused.W_traj).max()
    np.testing.assert_allclose(kern.W_traj, fused.W_traj, rtol=1e-10, atol=1e-10 * scale)
    np.testing.assert_allclose(kern.loss_traj, fused.loss_traj, rtol=1e-10)
    assert kern.lr.tolist() == [0.05, 0.1, 0.2] and kern.normalized == normalized and kern.K is None
    assert not np.array_equal(kern.W, W0)  # it moved


@pytest.mark.parametrize("p", [1.5, 3.0, 4.0])
@pytest.mark.parametrize("normalized", [False, True])
def test_mirror_step_is_the_lp_mirror_map(p, normalized):
    """One step against the definition, computed independently in numpy: grad psi(W+) = grad psi(W) - lr g,
    g = grad L (or grad L / ||grad L||_q, 1/p + 1/q = 1), grad psi(W) = sign(W) |W|^(p-1)."""
    lr = 0.05
    plain_step = gd.run_gd(DATA, gd.GDConfig(steps=1, lr=1.0, geometry="plain", backend="torch"), init=W0)
    G = W0 - plain_step.W  # grad L(W0), per instance (one plain step of size 1)
    if normalized:
        q = p / (p - 1)
        G = G / (np.abs(G) ** q).sum((1, 2), keepdims=True) ** (1 / q)
    u = np.sign(W0) * np.abs(W0) ** (p - 1) - lr * G
    want = np.sign(u) * np.abs(u) ** (1 / (p - 1))
    mirror = gd.Mirror(p, normalized=normalized)
    for backend in ("torch", "numba") if kernels.available() else ("torch",):  # fused program, md_steps
        got = gd.run_gd(DATA, gd.GDConfig(steps=1, lr=lr, geometry=mirror, backend=backend), init=W0)
        np.testing.assert_allclose(got.W, want, rtol=1e-9, atol=1e-12)
        assert got.normalized == normalized


def test_mirror_descent_descends_and_rejects_bad_p():
    """Small plain mirror steps decrease the loss (a descent method for any p > 1); p <= 1 is no mirror
    map."""
    start = gd.run_gd(DATA, gd.GDConfig(steps=0, lr=0.1), init=W0).loss
    for p in (1.5, 3.0):
        end = gd.run_gd(DATA, gd.GDConfig(steps=50, lr=0.05, geometry=gd.Mirror(p)), init=W0).loss
        assert np.all(end < start)
    for bad in (1.0, 0.5, float("inf"), True):
        with pytest.raises(gd.InvalidInputError, match="p must be a finite number > 1"):
            gd.Mirror(bad)


def test_a_new_geometry_plugs_in():
    """A Geometry subclass is used as given (here sign descent: W <- W - lr sign(grad L))."""
    calls = []

    class Sign(gd.Geometry):
        name = "sign"

        def update(self, params, grads, lr, tiny):
            calls.append(len(params))
            for p, g in zip(params, grads, strict=True):
                p.sub_(torch.sign(g), alpha=lr)

    res = gd.run_gd(DATA, gd.GDConfig(steps=3, lr=0.01, geometry=Sign()), init=W0)
    G = W0 - gd.run_gd(DATA, gd.GDConfig(steps=1, lr=1.0, geometry="plain"), init=W0).W
    first = gd.run_gd(DATA, gd.GDConfig(steps=1, lr=0.01, geometry=Sign()), init=W0).W
    np.testing.assert_allclose(first, W0 - 0.01 * np.sign(G), atol=1e-15)
    assert calls == [1, 1, 1, 1] and res.W.shape == (3, 5, 5)


# -- model plug ---------------------------------------------------------------------------------------

class _TwiceA(gd.Model):
    """W = 2A: a model the engine does not know, so it runs on the explicit path."""

    name = "2A"

    def start(self, init, R, d, m, device, dtype):
        return [torch.as_tensor(np.asarray(init) / 2, dtype=dtype, device=device).clone()]

    def grads(self, batch, head, params, loss, gamma, direction_only):
        (g,) = gd.W_MODEL.grads(batch, head, [2 * params[0]], loss, gamma, direction_only)
        return [2 * g]  # chain rule: dL/dA = 2 dL/dW

    def W(self, params):
        return 2 * params[0]


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_record_at_given_iterations(backend):
    """record_every may list the iterations to record (a log grid): those and the last, on every code path,
    equal to the same iterations of an every-step record; iterations outside [0, steps] are bad input."""
    cfg = gd.GDConfig(steps=10, lr=0.1, backend=backend)
    every = gd.run_gd(DATA, cfg, init=W0, record_every=1)
    some = gd.run_gd(DATA, cfg, init=W0, record_every=[0, 3, 7])
    assert some.iterations.tolist() == [0, 3, 7, 10]
    np.testing.assert_array_equal(some.W_traj, every.W_traj[[0, 3, 7, 10]])
    for bad in ([0, 11], [-1], [2.5], "3"):
        with pytest.raises(gd.InvalidInputError, match="record_every"):
            gd.run_gd(DATA, cfg, init=W0, record_every=bad)


def test_a_new_model_plugs_in():
    """Plain GD on A with W = 2A is plain GD on W with step 4 lr (A+ = A - 2 lr G, W+ = W - 4 lr G)."""
    mine = gd.run_gd(DATA, gd.GDConfig(steps=30, lr=0.05, geometry="plain", param=_TwiceA()), init=W0,
                     record_every=10)
    ref = gd.run_gd(DATA, gd.GDConfig(steps=30, lr=0.2, geometry="plain"), init=W0, record_every=10)
    np.testing.assert_allclose(mine.W_traj, ref.W_traj, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mine.loss_traj, ref.loss_traj, rtol=1e-10)
    assert mine.param == "2A" and mine.backend == "torch"
    with pytest.raises(gd.InvalidInputError, match="the model 2A"):
        gd.run_gd(DATA, gd.GDConfig(steps=1, lr=0.1, param=_TwiceA(), backend="numba"), init=W0)


# -- step hook ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["auto", "torch", "numba"])
def test_step_hook_sees_every_step_on_every_backend(backend):
    """A registered hook is made once per run and called once per step with the gradients (one per
    parameter) and the step size; what it returns is the step. Removed on leaving the block."""
    seen = []

    def factory():
        seen.append("run")

        def transform(grads, lr):
            seen.append((len(grads), tuple(grads[0].shape), lr))
            return grads, lr

        return transform

    for param, init in (("W", W0), ("KQ", KQ0)):
        seen.clear()
        with gd.step_hook(factory):
            gd.run_gd(DATA, gd.GDConfig(steps=4, lr=0.1, param=param, backend=backend), init=init)
        assert seen == ["run"] + [(1 if param == "W" else 2, (3, 5, 5), 0.1)] * 4
    assert gd.step_hooks() == ()


def test_step_hook_skips_and_scales_steps():
    """grads None skips the step (the run returns its start); a scaled lr is the run with that lr."""
    with gd.step_hook(lambda: lambda grads, lr: (None, lr)):
        still = gd.run_gd(DATA, gd.GDConfig(steps=10, lr=0.1), init=W0, record_every=5)
    assert np.array_equal(still.W, W0) and np.array_equal(still.W_traj[-1], W0)
    remove = gd.add_step_hook(lambda: lambda grads, lr: (grads, 3 * lr))
    try:
        tripled = gd.run_gd(DATA, gd.GDConfig(steps=10, lr=0.1), init=W0)
    finally:
        remove()
    ref = gd.run_gd(DATA, gd.GDConfig(steps=10, lr=0.1 * 3), init=W0)
    np.testing.assert_allclose(tripled.W, ref.W, rtol=1e-12, atol=1e-13)
