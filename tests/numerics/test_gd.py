"""numerics.gd: batched GD against an independent per-instance autograd GD, determinism, reg. path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numerics import attention as att
from numerics import gd, gd_common, kernels, regpath
from numerics.data import AttentionData, random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.tokens import corr

DT = torch.float64


def _autograd_gd(data: AttentionData, params, *, steps, lr, normalized=True, V=None, weight_decay=0.0):
    """Independent reference: per-instance plain-torch autograd GD (what the authors' code does), on
    loss + weight_decay * sum of the squared Frobenius norms of the parameters."""
    X = torch.tensor(data.X)
    Y = torch.tensor(data.Y)
    Z = torch.tensor(data.Z)
    v = None if data.v is None else torch.tensor(data.v)
    params = [p.clone().requires_grad_(True) for p in params]

    def loss_fn():
        W = params[0] if len(params) == 1 else params[0] @ params[1].T
        logits = torch.einsum("ntd,de,ne->nt", X, W, Z)
        s = torch.softmax(logits, dim=-1)
        if V is None:
            # Y f = gamma^T s written as gamma_r + sum_t s_t (gamma_t - gamma_r), r the most-attended token:
            # the same function, but its autograd backward does not cancel once the softmax saturates
            # (the textbook form gives gradients that are rounding noise at large ||W||).
            gamma = Y[:, None] * (X @ v)  # (n, T)
            gr = gamma.gather(1, logits.detach().argmax(1, keepdim=True))  # (n, 1)
            margin = gr.squeeze(1) + (s * (gamma - gr)).sum(-1)
            return torch.nn.functional.softplus(-margin).mean()
        u = torch.einsum("nt,ntd->nd", s, X)
        f = torch.relu(u @ V).sum(-1)
        return torch.nn.functional.softplus(-Y * f).mean()

    def objective():
        return loss_fn() + weight_decay * sum(p.square().sum() for p in params)

    for _ in range(steps):
        grads = torch.autograd.grad(objective(), params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                if normalized:  # rescale first: once the softmax saturates g.norm() underflows
                    big = g.abs().max()
                    if big > 0:
                        p -= lr * (g / big) / (g / big).norm()
                else:
                    p -= lr * g
    W = params[0] if len(params) == 1 else params[0] @ params[1].T
    return W.detach().numpy()


def _paper_instances(seed):
    """The paper's local-convergence setting: n=6, T=8, d=10, cross-attention, unit sphere."""
    return random_unit_sphere(6, 8, 10, rng=np.random.default_rng(seed), R=3)


# Normalised GD at lr 0.1 amplifies rounding differences on some instances (see the (K, Q) test);
# each test uses a data seed whose three instances are well-conditioned for its parametrisation.
@pytest.fixture(scope="module")
def paper_instances_W():
    return _paper_instances(2023)


@pytest.fixture(scope="module")
def paper_instances_KQ():
    return _paper_instances(0)


def test_W_gd_matches_independent_autograd_paper_setting(paper_instances_W):
    res = gd.run_gd(paper_instances_W, gd.GDConfig(param="W", steps=2000, lr=0.1), init=gd.RandomInit(0))
    W0 = 0.01 * gd_common._normal((10, 10), 3, 0)
    for r, dt in enumerate(paper_instances_W):
        ref = _autograd_gd(dt, [W0[r]], steps=2000, lr=0.1)
        assert corr(res.W[r], ref) > 0.98
    assert np.all(res.norms > 100)  # normalised GD: ||W|| grows ~ lr per step
    # Before the dynamics amplify rounding differences (normalised GD near directional convergence
    # zig-zags; an init perturbed by 1e-15 can move the final W by 1e-2), iterates agree tightly.
    short = gd.run_gd(paper_instances_W, gd.GDConfig(param="W", steps=200, lr=0.1), init=gd.RandomInit(0))
    for r, dt in enumerate(paper_instances_W):
        np.testing.assert_allclose(
            short.W[r], _autograd_gd(dt, [W0[r]], steps=200, lr=0.1), rtol=1e-9, atol=1e-10
        )
    np.testing.assert_allclose(res.norms, np.linalg.norm(res.W, axis=(1, 2)))


def test_KQ_gd_matches_independent_autograd_paper_setting(paper_instances_KQ):
    res = gd.run_gd(paper_instances_KQ, gd.GDConfig(param="KQ", steps=2000, lr=0.1), init=gd.RandomInit(0))
    K0, Q0 = 0.01 * gd_common._normal((10, 10), 3, 0), 0.01 * gd_common._normal((10, 10), 3, 1)
    short = gd.run_gd(paper_instances_KQ, gd.GDConfig(param="KQ", steps=100, lr=0.1), init=gd.RandomInit(0))
    for r, dt in enumerate(paper_instances_KQ):  # before chaos sets in, iterates agree tightly
        np.testing.assert_allclose(short.W[r], _autograd_gd(dt, [K0[r], Q0[r]], steps=100, lr=0.1),
                                   rtol=1e-7, atol=1e-8)
    assert res.K.shape == (3, 10, 10) and res.Q.shape == (3, 10, 10)
    np.testing.assert_allclose(res.W, res.K @ np.swapaxes(res.Q, 1, 2))
    # (K, Q) normalised GD at lr 0.1 is chaotic on some instances: a 1e-16 change of the init moves
    # even the reference to corr 0.83-0.96 with itself after 2000 steps on about 1 instance in 4 (data
    # seeds 1-3). The data seed here gives instances where the trajectory is well-conditioned; the
    # 100-step comparison above checks the implementation exactly.
    for r, dt in enumerate(paper_instances_KQ):
        assert corr(res.W[r], _autograd_gd(dt, [K0[r], Q0[r]], steps=2000, lr=0.1)) > 0.98


def test_plain_gd_and_relu_head_match_autograd():
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(1), R=2)
    W0 = torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(3), dtype=DT)
    res = gd.run_gd(datas, gd.GDConfig(steps=200, lr=0.5, geometry="plain"), init=W0)
    V = torch.randn(5, 4, generator=torch.Generator().manual_seed(4), dtype=DT)
    res_relu = gd.run_gd(datas, gd.GDConfig(steps=200, lr=0.1), init=W0, head=att.ReLUHead(V))
    # (K, Q) normalised GD amplifies rounding differences quickly (1e-15 -> O(1) within 200 steps
    # on this instance, for every implementation), so compare a short run exactly.
    res_relu_kq = gd.run_gd(datas, gd.GDConfig(param="KQ", steps=50, lr=0.1, m=3), init=gd.RandomInit(5),
                            head=att.ReLUHead(V))
    K0, Q0 = 0.01 * gd_common._normal((5, 3), 2, 5), 0.01 * gd_common._normal((5, 3), 2, 6)
    for r, dt in enumerate(datas):
        np.testing.assert_allclose(res.W[r], _autograd_gd(dt, [W0[r]], steps=200, lr=0.5, normalized=False),
                                   rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(res_relu.W[r], _autograd_gd(dt, [W0[r]], steps=200, lr=0.1, V=V),
                                   rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(res_relu_kq.W[r], _autograd_gd(dt, [K0[r], Q0[r]], steps=50, lr=0.1, V=V),
                                   rtol=1e-8, atol=1e-9)


def test_batched_equals_per_instance_and_determinism():
    """Batched GD is the per-instance program run side by side.

    Equality is tested where it is well-conditioned: over 10 steps the batched and single runs differ
    only by BLAS reduction order (~1e-15 per step), so 1e-10 is a wide margin on any CPU. Over long runs
    the (K, Q) trajectory amplifies those roundings (measured: 5e-9 at step 200, ~1 % relative at
    step 300 on AVX-512 vs AVX2), so there only what the theory says is stable is compared: the
    direction W/||W|| (corr > 0.999) and the token each example selects. The same call twice in one
    process is bit-identical (determinism is a property of one machine).
    """
    datas = random_unit_sphere(4, 5, 6, rng=np.random.default_rng(5), R=3)
    seeds = [11, 12, 13]
    for param in ("W", "KQ"):
        batched = gd.run_gd(datas, gd.GDConfig(param=param, steps=300, lr=0.1), init=gd.RandomInit(seeds))
        again = gd.run_gd(datas, gd.GDConfig(param=param, steps=300, lr=0.1), init=gd.RandomInit(seeds))
        np.testing.assert_array_equal(batched.W, again.W)
        short = gd.run_gd(datas, gd.GDConfig(param=param, steps=10, lr=0.1), init=gd.RandomInit(seeds))
        for r, dt in enumerate(datas):
            single_short = gd.run_gd(dt, gd.GDConfig(param=param, steps=10, lr=0.1),
                                     init=gd.RandomInit([seeds[r]]))
            np.testing.assert_allclose(single_short.W[0], short.W[r], rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(single_short.loss[0], short.loss[r], rtol=1e-10)
            single = gd.run_gd(dt, gd.GDConfig(param=param, steps=300, lr=0.1),
                               init=gd.RandomInit([seeds[r]]))
            a, b = single.W[0].ravel(), batched.W[r].ravel()
            assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.999
            sel_a = [int(np.argmax(dt.X[i] @ single.W[0] @ dt.Z[i])) for i in range(dt.n)]
            sel_b = [int(np.argmax(dt.X[i] @ batched.W[r] @ dt.Z[i])) for i in range(dt.n)]
            assert sel_a == sel_b
    a = gd.run_gd(datas, gd.GDConfig(steps=50, lr=0.1), init=gd.RandomInit(1))
    b = gd.run_gd(datas, gd.GDConfig(steps=50, lr=0.1), init=gd.RandomInit(1))
    c = gd.run_gd(datas, gd.GDConfig(steps=50, lr=0.1), init=gd.RandomInit(2))
    np.testing.assert_array_equal(a.W, b.W)
    assert not np.array_equal(a.W, c.W)


def test_record_trajectory():
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(6), R=2)
    res = gd.run_gd(datas, gd.GDConfig(steps=25, lr=0.1), record_every=10)
    np.testing.assert_array_equal(res.iterations, [0, 10, 20, 25])
    assert res.W_traj.shape == (4, 2, 5, 5) and res.loss_traj.shape == (4, 2)
    np.testing.assert_allclose(res.W_traj[-1], res.W)
    np.testing.assert_allclose(res.loss_traj[-1], res.loss)
    b = att.batch_from_data(datas)
    L = att.loss(b.X, b.Y, b.Z, torch.as_tensor(res.W_traj[1]), b.linear_head())
    np.testing.assert_allclose(res.loss_traj[1], L.numpy())
    assert np.all(np.diff(np.linalg.norm(res.W_traj, axis=(2, 3)), axis=0) > 0)
    kq = gd.run_gd(datas, gd.GDConfig(param="KQ", steps=25, lr=0.1), record_every=10)
    assert kq.W_traj.shape == (4, 2, 5, 5)
    short = gd.run_gd(datas, gd.GDConfig(steps=25, lr=0.1))
    assert short.iterations is None and short.W_traj is None and short.loss_traj is None


@pytest.mark.parametrize("backend", ["torch", pytest.param("numba", marks=pytest.mark.skipif(
    not kernels.available(), reason="numba not installed"))])
def test_saturated_softmax_does_not_blow_up(backend):
    """Long normalised runs saturate the softmax (tiny gradients): steps must stay of size lr."""
    datas = random_unit_sphere(6, 8, 10, rng=np.random.default_rng(0), R=4)
    for param in ("W", "KQ"):
        res = gd.run_gd(datas, gd.GDConfig(param=param, steps=1500, lr=0.5, backend=backend))
        assert np.all(np.isfinite(res.W))
        bound = 0.01 * 10 * 3 + 1500 * 0.5  # init + steps * lr per parameter
        if param == "W":
            assert np.all(res.norms <= bound)
        else:
            assert np.all(np.linalg.norm(res.K, axis=(1, 2)) <= bound)


def test_regularization_path_constraint_active():
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=2)
    radii = [1.0, 2.0, 4.0]
    rp = regpath.regularization_path(datas, radii, steps=150, restarts=2)
    assert rp.W.shape == (3, 2, 5, 5) and rp.loss.shape == (3, 2)
    assert rp.constraint_active.all()
    np.testing.assert_allclose(
        np.linalg.norm(rp.W, axis=(2, 3)), np.array(radii)[:, None] * np.ones((1, 2)), rtol=1e-8
    )
    assert np.all(np.diff(rp.loss, axis=0) < 0)  # larger ball, smaller loss
    kq = regpath.regularization_path(datas, radii, param="KQ", steps=150, restarts=2)
    assert kq.constraint_active.all()
    np.testing.assert_allclose(kq.norms, np.array(radii)[:, None] * np.ones((1, 2)), rtol=1e-8)
    half = 0.5 * (np.linalg.norm(kq.K, axis=(2, 3)) ** 2 + np.linalg.norm(kq.Q, axis=(2, 3)) ** 2)
    np.testing.assert_allclose(half, kq.norms)
    assert np.all(np.linalg.svd(kq.W, compute_uv=False).sum(-1) <= kq.norms * (1 + 1e-9))  # ||KQ^T||_* <= R


def test_regularization_path_beats_random_points_on_sphere():
    dt = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(8))
    rp = regpath.regularization_path(dt, [2.0], steps=200, restarts=2)
    b = att.batch_from_data(dt)
    P = torch.randn(200, 5, 5, generator=torch.Generator().manual_seed(0), dtype=DT)
    P = 2.0 * P / torch.linalg.matrix_norm(P, keepdim=True)
    L = att.loss(
        b.X.expand(200, -1, -1, -1), b.Y.expand(200, -1), b.Z.expand(200, -1, -1), P, b.linear_head()
    )
    assert rp.loss[0, 0] <= float(L.min()) + 1e-12


def _autograd_objective_grads(data, params, weight_decay, V=None):
    """Textbook autograd gradient of mean softplus(-Y f) + wd * sum ||p||_F^2 (independent of numerics)."""
    X, Y, Z = (torch.tensor(a) for a in (data.X, data.Y, data.Z))
    params = [p.clone().requires_grad_(True) for p in params]
    W = params[0] if len(params) == 1 else params[0] @ params[1].T
    s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=-1)
    u = torch.einsum("nt,ntd->nd", s, X)
    f = u @ torch.tensor(data.v) if V is None else torch.relu(u @ V).sum(-1)
    obj = torch.nn.functional.softplus(-Y * f).mean() + weight_decay * sum(p.square().sum() for p in params)
    return [g.numpy() for g in torch.autograd.grad(obj, params)]


@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("relu", [False, True])
def test_weight_decay_gradient_is_autograd_of_loss_plus_decay(param, relu):
    """One plain GD step with lr = 1 moves each parameter by exactly minus the gradient of
    L + wd * (||W||^2, resp. ||K||^2 + ||Q||^2); a large wd so the decay term is not negligible."""
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(21), R=2)
    gen = torch.Generator().manual_seed(22)
    V = torch.randn(5, 4, generator=gen, dtype=DT) if relu else None
    head = att.ReLUHead(V) if relu else None
    wd = 0.3
    if param == "W":
        W0 = torch.randn(2, 5, 5, generator=gen, dtype=DT)
        res = gd.run_gd(datas, gd.GDConfig(steps=1, lr=1.0, geometry="plain", wd=wd), init=W0, head=head)
        for r, dt in enumerate(datas):
            (g,) = _autograd_objective_grads(dt, [W0[r]], wd, V)
            np.testing.assert_allclose(W0[r].numpy() - res.W[r], g, rtol=1e-10, atol=1e-12)
    else:
        K0, Q0 = torch.randn(2, 5, 3, generator=gen, dtype=DT), torch.randn(2, 5, 3, generator=gen, dtype=DT)
        res = gd.run_gd(datas, gd.GDConfig(param="KQ", m=3, steps=1, lr=1.0, geometry="plain", wd=wd),
                        init=(K0, Q0), head=head)
        for r, dt in enumerate(datas):
            gK, gQ = _autograd_objective_grads(dt, [K0[r], Q0[r]], wd, V)
            np.testing.assert_allclose(K0[r].numpy() - res.K[r], gK, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(Q0[r].numpy() - res.Q[r], gQ, rtol=1e-10, atol=1e-12)


def test_weight_decay_runs_match_independent_autograd():
    """Short normalised and plain runs with weight decay against the independent autograd loop."""
    datas = random_unit_sphere(6, 8, 10, rng=np.random.default_rng(0), R=2)
    gen = torch.Generator().manual_seed(23)
    W0 = (torch.rand(2, 10, 10, generator=gen, dtype=DT) * 2 - 1) / 10 ** 0.5
    K0, Q0 = ((torch.rand(2, 10, 10, generator=gen, dtype=DT) * 2 - 1) / 10 ** 0.5 for _ in range(2))
    for wd, normalized, lr in ((1e-3, True, 0.1), (2.2e-16, True, 0.1), (0.05, False, 0.5)):
        rw = gd.run_gd(datas, gd.GDConfig(steps=100, lr=lr,
                                          geometry="normalized" if normalized else "plain", wd=wd), init=W0)
        rk = gd.run_gd(datas, gd.GDConfig(param="KQ", steps=100, lr=lr,
                                          geometry="normalized" if normalized else "plain", wd=wd),
                       init=(K0, Q0))
        for r, dt in enumerate(datas):
            np.testing.assert_allclose(
                rw.W[r], _autograd_gd(dt, [W0[r]], steps=100, lr=lr, normalized=normalized, weight_decay=wd),
                rtol=1e-7, atol=1e-8)
            np.testing.assert_allclose(
                rk.W[r],
                _autograd_gd(dt, [K0[r], Q0[r]], steps=100, lr=lr, normalized=normalized, weight_decay=wd),
                rtol=1e-7,
                atol=1e-8,
            )


def test_weight_decay_zero_is_the_unchanged_fused_path_and_decay_bounds_the_norm():
    datas = random_unit_sphere(6, 8, 10, rng=np.random.default_rng(0), R=3)
    for param in ("W", "KQ"):
        a = gd.run_gd(datas, gd.GDConfig(param=param, steps=300, lr=0.1), init=gd.RandomInit(4))
        b = gd.run_gd(datas, gd.GDConfig(param=param, steps=300, lr=0.1, wd=0.0), init=gd.RandomInit(4))
        np.testing.assert_array_equal(a.W, b.W)
    # Saturated (K, Q) runs: without decay normalised GD grows ||K Q^T|| without bound (until the softmax
    # underflows exactly); with wd = eps the decay term balances the data gradient and the norm settles.
    eps = float(np.finfo(np.float64).eps)
    free = gd.run_gd(datas, gd.GDConfig(param="KQ", steps=2000, lr=0.1), init=gd.RandomInit(4))
    wd = gd.run_gd(datas, gd.GDConfig(param="KQ", steps=2000, lr=0.1, wd=eps), init=gd.RandomInit(4),
                   record_every=500)
    assert np.all(np.isfinite(wd.W)) and np.all(wd.norms < free.norms)
    late = np.linalg.norm(wd.W_traj[-2:], axis=(2, 3))  # iterations 1500 and 2000
    assert np.all(np.abs(late[1] - late[0]) <= 0.2 * late[0])


@pytest.mark.parametrize(
    "cfg,match",
    [
        (dict(param="V", steps=1, lr=0.1), "unknown param 'V'"),
        (dict(loss="hinge", steps=1, lr=0.1), "unknown loss 'hinge'"),
        (dict(steps=-1, lr=0.1), "steps must be an integer >= 0"),
        (dict(steps=1.5, lr=0.1), "steps must be an integer >= 0"),
        (dict(steps=1, lr=0.0), "lr must be a finite number > 0"),
        (dict(steps=1, lr=float("nan")), "lr must be a finite number > 0"),
        (dict(steps=1, lr=[0.1, -0.1]), "lr must be a finite number > 0 or a sequence"),
        (dict(steps=1, lr=[0.1, 0.2, 0.3]), "lr has 3 entries for 2 instances"),
        (dict(param="KQ", steps=1, lr=0.1, m=0), "m must be an integer >= 1"),
        (dict(steps=1, lr=0.1, wd=-1e-3), "weight_decay must be a finite number >= 0"),
        (dict(param="KQ", steps=1, lr=0.1, wd=float("nan")), "weight_decay must be"),
        (dict(steps=1, lr=0.1, wd=True), "weight_decay must be"),
        (dict(steps=1, lr=0.1, geometry="sphere"), "geometry must be"),
        (dict(steps=1, lr=0.1, geometry=None), "geometry must be"),
    ],
)
def test_gd_config_validation(cfg, match):
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(9), R=2)
    with pytest.raises(InvalidInputError, match=match):
        gd.run_gd(datas, gd.GDConfig(**cfg))


@pytest.mark.parametrize(
    "param,kwargs,match",
    [
        ("W", dict(record_every=0), "record_every"),
        ("W", dict(init=np.zeros((3, 3))), r"init W must have shape"),
        ("W", dict(init=np.full((5, 5), np.nan)), "NaN"),
        ("KQ", dict(init=np.zeros((5, 5))), r"pair \(K, Q\)"),
        ("W", dict(init=gd.RandomInit([1, 2, 3])), "one per instance"),
        ("W", dict(head="relu"), "head must be None"),
    ],
)
def test_run_gd_validation(param, kwargs, match):
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(9), R=2)
    with pytest.raises(InvalidInputError, match=match):
        gd.run_gd(datas, gd.GDConfig(steps=1, lr=0.1, param=param), **kwargs)
    with pytest.raises(InvalidInputError, match="cfg must be"):
        gd.run_gd(datas, dict(steps=1, lr=0.1))


def test_validation_head_and_radii():
    dt = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(10))
    with pytest.raises(InvalidInputError, match="no linear head"):
        gd.run_gd(AttentionData(dt.X, dt.Y), gd.GDConfig(steps=1, lr=0.1))
    for radii in ([], [1.0, -1.0], [[1.0, 2.0]], [[[1.0]]], [np.inf]):  # (J, R) radii need R = 1 column here
        with pytest.raises(InvalidInputError, match="radii"):
            regpath.regularization_path(dt, radii, steps=5)
    with pytest.raises(InvalidInputError, match="restarts"):
        regpath.regularization_path(dt, [1.0], steps=5, restarts=0)
    assert gd.run_gd(dt, gd.GDConfig(steps=0, lr=0.1)).W.shape == (1, 5, 5)


def test_regularization_path_per_instance_seeds_replay_exactly():
    """With one seed per instance, an instance's path does not depend on the batch it ran in."""
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=3)
    radii = [1.0, 2.0, 4.0]
    for param in ("W", "KQ"):
        batch = regpath.regularization_path(datas, radii, param=param, steps=60, restarts=2,
                                            seed=[11, 12, 13])
        alone = regpath.regularization_path([datas[1]], radii, param=param, steps=60, restarts=2, seed=[12])
        np.testing.assert_allclose(batch.W[:, 1], alone.W[:, 0], rtol=1e-12, atol=1e-12)
    with pytest.raises(InvalidInputError):
        regpath.regularization_path(datas, radii, seed=[1, 2])


# -- the compiled CPU kernels (numerics.kernels) ------------------------------------------------------

needs_numba = pytest.mark.skipif(
    not kernels.available(), reason="numba not installed (kernels unavailable)"
)


@needs_numba
def test_kernel_backend_matches_independent_autograd(paper_instances_W, paper_instances_KQ):
    W0 = 0.01 * gd_common._normal((10, 10), 3, 0)
    short = gd.run_gd(paper_instances_W, gd.GDConfig(param="W", steps=200, lr=0.1, backend="numba"),
                      init=gd.RandomInit(0))
    for r, dt in enumerate(paper_instances_W):
        np.testing.assert_allclose(
            short.W[r], _autograd_gd(dt, [W0[r]], steps=200, lr=0.1), rtol=1e-9, atol=1e-10
        )
    K0, Q0 = 0.01 * gd_common._normal((10, 10), 3, 0), 0.01 * gd_common._normal((10, 10), 3, 1)
    short = gd.run_gd(paper_instances_KQ, gd.GDConfig(param="KQ", steps=100, lr=0.1, backend="numba"),
                      init=gd.RandomInit(0))
    for r, dt in enumerate(paper_instances_KQ):
        np.testing.assert_allclose(short.W[r], _autograd_gd(dt, [K0[r], Q0[r]], steps=100, lr=0.1),
                                   rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(short.W, short.K @ np.swapaxes(short.Q, 1, 2))


@needs_numba
@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
@pytest.mark.parametrize("param,m", [("W", None), ("KQ", None), ("KQ", 3)])
def test_kernel_backend_equals_torch_backend(loss, param, m):
    # R = 11 is not a multiple of the 8 SIMD lanes: the padded instances must not leak into the result
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(7), R=11)
    # (K, Q) GD here turns chaotic after ~120 steps (rounding differences grow ~10x per 20 steps, in
    # either backend alone too): compare before that
    steps, every = (300, 120) if param == "W" else (100, 40)
    cfg = gd.GDConfig(param=param, m=m, steps=steps, lr=0.05, loss=loss)
    a = gd.run_gd(datas, cfg.but(backend="torch"), init=gd.RandomInit(list(range(11))), record_every=every)
    b = gd.run_gd(datas, cfg.but(backend="numba"), init=gd.RandomInit(list(range(11))), record_every=every)
    assert (a.backend, b.backend) == ("torch", "numba")
    np.testing.assert_allclose(b.W, a.W, rtol=1e-9, atol=1e-9 * np.abs(a.W).max())
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(b.iterations, [0, every, 2 * every, steps])
    np.testing.assert_allclose(b.W_traj, a.W_traj, rtol=1e-9, atol=1e-9 * np.abs(a.W).max())
    np.testing.assert_allclose(b.norms, np.linalg.norm(b.W, axis=(1, 2)))
    if param == "KQ":
        assert b.K.shape == (11, 5, m or 5)
        np.testing.assert_allclose(b.W, b.K @ np.swapaxes(b.Q, 1, 2))
    # instance 4 alone (per-instance seeds: the same init): the same iterates as in the batch
    one = gd.run_gd(datas[4], cfg.but(backend="numba"), init=gd.RandomInit([4]), record_every=every)
    np.testing.assert_allclose(one.W[0], b.W[4], rtol=1e-12, atol=1e-12 * np.abs(b.W[4]).max())


@needs_numba
def test_kernel_backend_keeps_centred_scores_deep_in_saturation():
    """Regression: compiled with fastmath=True, the most-attended token's weight (g_r - g_r) - m' = -m'
    came out 0 once the logit gaps passed ~36 (as if computed g_r - (g_r + m')): (K, Q)-GD froze at
    ||W|| ~ 130 while the torch path went on to ~800 (kq-gd-nuclear's setting, found by the full profile)."""
    rng = np.random.default_rng(0)
    datas = [random_unit_sphere(4, 5, 8, rng=rng) for _ in range(3)]
    K0, Q0 = 0.3 * rng.standard_normal((3, 8, 8)), 0.3 * rng.standard_normal((3, 8, 8))
    cfg = gd.GDConfig(param="KQ", steps=5000, lr=0.005)
    a = gd.run_gd(datas, cfg.but(backend="torch"), init=(K0, Q0))
    b = gd.run_gd(datas, cfg.but(backend="numba"), init=(K0, Q0))
    # 5000 steps: the backends differ by reduction order (FMA, SIMD width), so compare what is stable
    # deep in saturation -- the norm (the bug froze it at ~130 vs ~800) and the direction -- with
    # tolerances far from rounding yet far tighter than the regression's factor 6.
    assert np.all(a.norms > 300) and np.all(b.norms > 300)
    np.testing.assert_allclose(b.norms, a.norms, rtol=1e-3)
    assert min(corr(a.W[r], b.W[r]) for r in range(3)) > 1 - 1e-6


@needs_numba
def test_kernel_blocks_of_instances_give_the_same_iterates(monkeypatch):
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(8), R=21)
    for param in ("W", "KQ"):
        cfg = gd.GDConfig(param=param, steps=60, lr=0.05, backend="numba")
        kw = dict(init=gd.RandomInit(list(range(21))), record_every=25)
        whole = gd.run_gd(datas, cfg, **kw)
        monkeypatch.setattr(gd, "KERNEL_BLOCK", 8)  # 21 instances in blocks of 8, 8 and 5
        blocked = gd.run_gd(datas, cfg, **kw)
        monkeypatch.undo()
        np.testing.assert_allclose(
            blocked.W_traj, whole.W_traj, rtol=1e-12, atol=1e-12 * np.abs(whole.W).max()
        )
        if param == "KQ":
            np.testing.assert_allclose(blocked.K, whole.K, rtol=1e-12, atol=1e-14)


def test_backend_choice_and_errors(monkeypatch):
    datas = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(1), R=2)
    with pytest.raises(InvalidInputError, match="backend must be one of"):
        gd.run_gd(datas, gd.GDConfig(steps=2, lr=0.1, backend="cuda"))
    numba = gd.GDConfig(steps=2, lr=0.1, backend="numba")
    if kernels.available():
        for cfg, kw, why in (
            (numba.but(geometry="plain"), {}, "normalized=False"),
            (numba.but(wd=0.1), {}, "weight_decay"),
            (numba.but(param="KQ", wd=0.1), {}, "weight_decay"),
            (numba.but(geometry=gd.Mirror(3), wd=0.1), {}, "mirror"),
            (numba.but(geometry=gd.Mirror(3), param="KQ"), {}, "mirror"),
            (numba.but(geometry=gd.Mirror(3)), dict(head=att.ReLUHead(np.ones((5, 2)))), "ReLUHead"),
            (numba.but(lr=(0.1, 0.2)), {}, "per-instance step size"),
            (numba, dict(head=att.ReLUHead(np.ones((5, 2)))), "ReLUHead"),
        ):
            with pytest.raises(InvalidInputError, match=why):
                gd.run_gd(datas, cfg, **kw)
    batch = att.batch_from_data(datas)
    head = batch.linear_head()
    small, big = gd.KERNEL_MIN_WORK // 2 - 1, gd.KERNEL_MIN_WORK // 2  # R = 2 instances
    assert gd.code_path(gd.GDConfig(steps=small, lr=0.1), batch, head) == "fused"  # too small to compile
    assert gd.code_path(gd.GDConfig(steps=big, lr=0.1), batch, head) == (
        "numba" if kernels.available() else "fused")
    assert gd.code_path(gd.GDConfig(steps=big, lr=(0.1, 0.2)), batch, head, scalar_lr=False) == "fused"
    assert gd.code_path(gd.GDConfig(steps=10 ** 9, lr=0.1, backend="torch"), batch, head) == "fused"
    assert gd.code_path(gd.GDConfig(steps=1, lr=0.1, wd=0.1), batch, head) == "explicit"
    mirror = gd.GDConfig(steps=1, lr=0.1, geometry=gd.Mirror(3))
    assert gd.code_path(mirror, batch, head) == "fused"  # numerics.gd_torch.run_mirror (too small to compile)
    for cfg in (mirror.but(steps=big), mirror.but(steps=big, lr=(0.1, 0.2)),  # numerics.kernels.md_steps
                mirror.but(steps=big, geometry=gd.Mirror(1.75, normalized=True))):
        assert gd.code_path(cfg, batch, head, scalar_lr=isinstance(cfg.lr, float)) == (
            "numba" if kernels.available() else "fused")
    assert gd.code_path(mirror.but(steps=10 ** 9, backend="torch"), batch, head) == "fused"
    if kernels.available():
        assert gd.run_gd(datas, mirror.but(steps=2, backend="numba")).backend == "numba"
    assert gd.code_path(mirror.but(wd=0.1), batch, head) == "explicit"
    assert gd.code_path(mirror.but(param="KQ"), batch, head) == "explicit"
    with gd.step_hook(lambda: lambda g, lr: (g, lr)):
        assert gd.code_path(gd.GDConfig(steps=10 ** 9, lr=0.1), batch, head) == "explicit"
        assert gd.code_path(mirror, batch, head) == "explicit"
    monkeypatch.setenv("ATTNSVM_NO_NUMBA", "1")  # the escape hatch: everything on the torch path
    assert gd.code_path(gd.GDConfig(steps=10 ** 9, lr=0.1), batch, head) == "fused"
    with pytest.raises(InvalidInputError, match="numba is not installed"):
        gd.run_gd(datas, gd.GDConfig(steps=2, lr=0.1, backend="numba"))
