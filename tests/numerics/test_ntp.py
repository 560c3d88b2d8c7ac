"""NTP numerics (numerics.ntp, numerics.ntp_gd, numerics.ntp_linear): the .npz contract, priority graphs, the
graph-SVM and its certificate, the finite part, the batched loss/gradient against autograd, and NTP GD on the
one GD engine (its step hook reaches it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from numerics.errors import InvalidInputError
from numerics.ntp import (
    NTPData,
    finite_part,
    graph_svm,
    load_dataset,
    priority_graphs,
    scc_json,
    smoothness_bound,
)
from numerics.ntp_gd import NTPBatch, ntp_grad, ntp_loss, run_ntp_gd
from numerics.tokens import corr

TOKENS = [[0, 1, 4], [1, 0, 4], [0, 1, 4], [2, 0, 4], [3, 2, 4]]
LABELS = [0, 1, 0, 2, 3]


def cyclic(seed=0, d=8):
    E = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, 5)))[0].T
    return NTPData(E, TOKENS, LABELS)


def test_roundtrip_and_dispatch(tmp_path):
    data = cyclic()
    p = tmp_path / "ntp.npz"
    data.save(p)
    back = load_dataset(p)
    assert isinstance(back, NTPData)
    assert np.array_equal(back.tokens, data.tokens) and np.array_equal(back.E, data.E)


@pytest.mark.parametrize("tokens, labels, match", [
    ([[0, 1, 7]], [0], "out of range"),
    ([[0, 1, 2]], [3], "does not occur in its sequence"),
    (np.array([[0.5, 1, 2]]), [0], "not an integer id"),
    ([[0, 1, 2]], [-1], "out of range"),
])
def test_bad_arrays(tokens, labels, match):
    with pytest.raises(InvalidInputError, match=match):
        NTPData(np.eye(5), tokens, labels)


def test_ragged_and_pickled_file(tmp_path):
    with pytest.raises(InvalidInputError, match="ragged"):
        NTPData(np.eye(5), [[0, 1, 2], [0, 1]], [0, 0])
    p = tmp_path / "ragged.npz"
    np.savez(p, E=np.eye(5), tokens=np.array([[0, 1, 2], [0, 1]], dtype=object), labels=np.array([0, 0]))
    with pytest.raises(InvalidInputError, match="object"):
        load_dataset(p)


def test_graph_sccs_in_topological_order():
    g = priority_graphs(cyclic())
    assert scc_json(g) == {"4": [[3], [2], [0, 1], [4]]}
    flipped = priority_graphs(cyclic(), flip=True)
    assert scc_json(flipped) == {"4": [[4], [0, 1], [2], [3]]}


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_graph_svm_certified(norm):
    data = cyclic()
    sol = graph_svm(data, norm=norm)
    assert sol.status == "optimal" and sol.certificate.verified
    # equality rows hold, strict rows have margin ≥ 1 (recomputed here from the data)
    E, W = data.E, sol.W
    assert abs((E[0] - E[1]) @ W @ E[4]) < 1e-7
    for y, j in [(2, 0), (3, 2), (0, 4)]:
        assert (E[y] - E[j]) @ W @ E[4] >= 1 - 1e-7


def test_single_token_svm_infeasible_on_cyclic_data():
    sol = graph_svm(cyclic(), equalities=False)
    assert sol.status == "infeasible" and sol.certificate.kind == "farkas" and sol.certificate.verified


def test_finite_part_log_ratio():
    """Two sequences labelled 0 and one labelled 1 over the SCC {0, 1}: W^fin balances p0/p1 = 2."""
    data = cyclic()
    fp = finite_part(data)
    assert fp.unique and fp.curvature > 0 and len(fp.basis) == 1
    E = data.E
    assert abs((E[0] - E[1]) @ fp.W @ E[4] - np.log(2)) < 1e-8
    wrong = finite_part(data, positions="all")
    assert wrong.unique and np.linalg.norm(wrong.W - fp.W) > 0.05


def test_acyclic_finite_part_is_zero():
    data = NTPData(np.eye(4), [[0, 1, 3], [1, 2, 3]], [0, 1])
    assert len(finite_part(data).basis) == 0


def test_closed_form_gradient_matches_autograd():
    datas = [cyclic(s) for s in range(3)]
    batch = NTPBatch.of(datas)
    W = torch.as_tensor(np.random.default_rng(1).standard_normal((3, 8, 8)), dtype=torch.float64)
    loss, G = ntp_loss(batch, W), ntp_grad(batch, W)
    Wa = W.clone().requires_grad_(True)
    la = ntp_loss(batch, Wa)
    la.sum().backward()
    # two float64 evaluations of the same sums: agreement to ~1e-15 relative; 1e-12 leaves room for any BLAS
    assert torch.allclose(loss, la.detach(), rtol=1e-12, atol=0)
    assert torch.allclose(G, Wa.grad, rtol=1e-10, atol=1e-13)


def test_gd_direction_and_finite_part():
    data = cyclic()
    sv, fp = graph_svm(data), finite_part(data)
    r = run_ntp_gd([data], steps=3000, lr=1 / smoothness_bound(data))
    W = r.W_traj[-1, 0]
    assert np.all(np.diff(r.loss[:, 0]) <= 1e-15)  # GD with η = 1/L descends
    assert 1 - corr(W, sv.W) < 5e-3 and np.linalg.norm(fp.project(W) - fp.W) < 5e-3


def test_ntp_gd_runs_on_the_engine_and_its_step_hook():
    """run_ntp_gd is run_gd with the NTP model: a registered step hook sees every step (here it halves the
    step size: the first step, at the same W(0), is half the clean one), a hook that skips every step leaves
    W(0), and batched per-dataset step sizes equal separate runs'."""
    from numerics.gd import step_hook

    datas = [cyclic(0), cyclic(1)]
    lrs = [1 / smoothness_bound(x) for x in datas]
    clean = run_ntp_gd(datas, steps=3, lr=lrs, record_at=[0, 1, 2, 3])
    seen = []

    def halve():
        def f(grads, lr):
            seen.append(1)
            return grads, lr * 0.5
        return f

    with step_hook(halve):
        half = run_ntp_gd(datas, steps=3, lr=lrs, record_at=[0, 1, 2, 3])
    assert len(seen) == 3
    step_clean = np.linalg.norm(clean.W_traj[1] - clean.W_traj[0], axis=(1, 2))
    step_half = np.linalg.norm(half.W_traj[1] - half.W_traj[0], axis=(1, 2))
    assert np.allclose(step_half, 0.5 * step_clean, rtol=1e-12)  # the first step: same gradient at W(0) = 0
    with step_hook(lambda: lambda grads, lr: (None, lr)):
        noop = run_ntp_gd(datas, steps=3, lr=lrs)
    assert not np.any(noop.W_traj)
    alone = run_ntp_gd(datas[1:], steps=3, lr=lrs[1], record_at=[3])
    # the same float64 operations on one instance or two: agreement to rounding (a scalar step size takes
    # torch's fused a - lr·b), 1e-12 leaves three orders for any BLAS
    assert np.allclose(alone.W_traj[-1, 0], clean.W_traj[-1, 1], rtol=1e-12, atol=1e-14)


# -- linear NTP (Thrampoulidis 2024): numerics.ntp_linear ----------------------------------------------
def test_linear_ntp_gd_on_the_engine_matches_numpy_gd():
    """run_linear_gd (run_gd with the linear-NTP model, batched over problems of one shape) takes the steps of
    plain GD with numpy's CE gradient (numerics.ntp_linear.ce): 50 steps agree to ~1e-14 (a smooth convex
    descent: rounding does not grow)."""
    from numerics.ntp_linear import ce, random_linear_ntp, run_linear_gd, smoothness

    probs = [random_linear_ntp(np.random.default_rng(s), 4, 8, 6) for s in range(2)]
    lrs = [1 / (2 * smoothness(p)) for p in probs]
    r = run_linear_gd(probs, steps=50, lr=lrs, record_at=[0, 50])
    for j, (p, lr) in enumerate(zip(probs, lrs, strict=True)):
        W = np.zeros((p.V, p.d))
        for _ in range(50):
            W = W - lr * ce(p, W)[1]
        assert np.allclose(r.W_traj[-1, j], W, rtol=1e-10, atol=1e-12)
        assert r.loss[-1, j] == pytest.approx(ce(p, W)[0], rel=1e-12)


def test_linear_ntp_fused_program_matches_the_explicit_loop():
    """The linear NTP model's fused program (plain GD in logit space, Model.run_fused) is what run_gd takes
    without a step hook, and the explicit loop (which every registered hook, hence every GD sabotage, forces)
    with one; both give the same iterates and losses up to rounding: per-instance and scalar step sizes, a
    nonzero start, a run long enough to re-centre and rebuild the logits many times (1e-12: a smooth convex
    descent, rounding does not grow; measured ~1e-14)."""
    from numerics import gd
    from numerics.ntp_linear import (
        LINEAR_NTP_MODEL,
        LinearNTPBatch,
        random_linear_ntp,
        run_linear_gd,
        smoothness,
    )

    probs = [random_linear_ntp(np.random.default_rng(s), 4, 8, 6) for s in range(3)]
    W0 = np.random.default_rng(9).standard_normal((3, 6, 8))
    cfg = gd.GDConfig(steps=1, lr=0.1, geometry="plain", param=LINEAR_NTP_MODEL)
    batch = LinearNTPBatch.of(probs)
    assert gd.code_path(cfg, batch, None) == "fused"
    assert gd.code_path(cfg.but(geometry="normalized"), batch, None) == "explicit"  # plain GD only
    assert gd.code_path(cfg.but(wd=0.1), batch, None) == "explicit"

    def identity():
        return lambda grads, lr: (grads, lr)

    for lr in ([1 / (2 * smoothness(p)) for p in probs], 0.3):
        fused = run_linear_gd(probs, steps=300, lr=lr, record_at=[0, 1, 37, 300], init=W0)
        with gd.step_hook(identity):
            assert gd.code_path(cfg, batch, None) == "explicit"
            explicit = run_linear_gd(probs, steps=300, lr=lr, record_at=[0, 1, 37, 300], init=W0)
        assert np.array_equal(fused.iterations, explicit.iterations)
        assert np.allclose(fused.W_traj, explicit.W_traj, rtol=1e-12, atol=1e-12)
        assert np.allclose(fused.loss, explicit.loss, rtol=1e-12, atol=0)
        assert not np.allclose(fused.W_traj[-1], W0)


def test_ntp_fused_program_matches_the_explicit_loop(monkeypatch):
    """NTP GD's fused program (logit space through the token Gram matrix, NTPModel.run_fused) against the
    explicit loop a step hook forces: same iterates and losses up to rounding, dense and factored Gram, a
    nonzero start, per-instance step sizes (1e-12: 1e-14 measured over 300 steps at ‖W‖ ≈ 5.6)."""
    from numerics import attention as att
    from numerics import gd
    from numerics.ntp import random_ntp
    from numerics.ntp_gd import NTP_MODEL

    datas = [random_ntp(np.random.default_rng(s), 6, 3, 5, 8, kind="cyclic")[0] for s in range(3)]
    lrs = [1 / smoothness_bound(x) for x in datas]
    W0 = 0.3 * np.random.default_rng(9).standard_normal((3, 8, 8))
    cfg = gd.GDConfig(steps=1, lr=0.1, geometry="plain", param=NTP_MODEL)
    assert gd.code_path(cfg, NTPBatch.of(datas), None) == "fused"

    def identity():
        return lambda grads, lr: (grads, lr)

    orig = att.TokenGram.__init__
    for dense in (True, False):
        with monkeypatch.context() as mp:  # the Gram matrix dense, or factored
            mp.setattr(att.TokenGram, "__init__",
                       lambda self, X, Z, dense=dense: orig(self, X, Z, dense=dense))
            fused = run_ntp_gd(datas, steps=300, lr=lrs, record_at=[0, 1, 37, 300], init=W0)
        with gd.step_hook(identity):
            explicit = run_ntp_gd(datas, steps=300, lr=lrs, record_at=[0, 1, 37, 300], init=W0)
        assert np.allclose(fused.W_traj, explicit.W_traj, rtol=1e-12, atol=1e-12)
        assert np.allclose(fused.loss, explicit.loss, rtol=1e-12, atol=0)
        assert not np.allclose(fused.W_traj[-1], W0)


def test_linear_ntp_programs():
    from numerics.ntp_linear import ce, ntp_svm, random_linear_ntp, w_star

    p = random_linear_ntp(np.random.default_rng(0), 4, 8, 6)
    Ws, res = w_star(p)
    assert res < 1e-12  # d > m, full rank: the log-ratio equations are solvable
    sv = ntp_svm(p)
    assert sv.feasible and sv.certificate.verified
    onehot = ntp_svm(p, equalities=False)
    assert onehot.status == "infeasible" and onehot.certificate.verified  # opposite strict rows inside S_j
    # CE's gradient against central differences (CE is smooth; h = 1e-6 gives ~1e-9 agreement)
    W = np.random.default_rng(1).standard_normal((p.V, p.d))
    G = ce(p, W)[1]
    E = np.zeros_like(W)
    E[2, 3] = 1e-6
    assert abs((ce(p, W + E)[0] - ce(p, W - E)[0]) / 2e-6 - G[2, 3]) < 1e-8


def test_linear_ntp_full_support_attains_entropy():
    from numerics.ntp_linear import ce, random_linear_ntp, w_star

    p = random_linear_ntp(np.random.default_rng(0), 4, 8, 6, full=True)
    Ws, _ = w_star(p)
    assert ce(p, Ws)[0] - p.entropy() < 1e-12


def test_hessians_match_gradient_differences():
    """The analytic Hessians the path's Newton steps use, against central differences of the gradients."""
    from numerics.ntp import hessian_np, loss_np
    from numerics.ntp_linear import ce, hessian_ce, random_linear_ntp

    data = cyclic()
    p = random_linear_ntp(np.random.default_rng(0), 4, 8, 6)
    rng = np.random.default_rng(2)
    for fg, hess, shape in ((lambda W: loss_np(data, W), lambda W: hessian_np(data, W), (8, 8)),
                            (lambda W: ce(p, W), lambda W: hessian_ce(p, W), (6, 8))):
        W = rng.standard_normal(shape)
        H = hess(W)
        E = np.zeros(shape)
        E[1, 2] = 1e-6
        col = ((fg(W + E)[1] - fg(W - E)[1]) / 2e-6).ravel()
        assert np.allclose(H[:, 1 * shape[1] + 2], col, atol=1e-7)  # O(h²) ~ 1e-12 differencing error
