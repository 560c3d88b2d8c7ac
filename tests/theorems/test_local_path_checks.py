"""The local regularisation-path checks rp-w-local / rp-kq-local and overparam-support (issue 15).

For each theorem: PASS on quick/seed 0, its boundary control FAILs, and the relevant sabotages of the
numerics it depends on (checks.power.sabotage.sabotage) change its verdict. Also the cone projection used by
numerics.regpath.regularization_path(cone=...), checked against its defining properties.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from checks import catalogue
from checks.harness import run_theorem
from checks.power.sabotage import sabotage
from checks.theorem import REGISTRY
from numerics.data import random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.regpath import project_cone, regularization_path
from numerics.tokens import corr

catalogue.load_builtin()


# -- the cone projection -------------------------------------------------------------------------------
def test_project_cone_is_the_euclidean_projection():
    """P(W) lies in the cone, is idempotent, W − P(W) is orthogonal to P(W) and P(W) is nearer to W than
    sampled cone points (the variational characterisation of a projection onto a closed convex cone)."""
    rng = np.random.default_rng(3)
    d, mu = 4, 0.05
    A = rng.standard_normal((d, d))
    A /= np.linalg.norm(A)
    W = torch.as_tensor(rng.standard_normal((64, d, d)))
    c = torch.as_tensor(np.broadcast_to(A, (64, d, d)).copy())
    m = torch.full((64,), mu, dtype=torch.float64)
    P = project_cone(W, c, m)
    Pn = P.numpy()
    nz = np.linalg.norm(Pn, axis=(1, 2)) > 0
    assert np.all(np.asarray(corr(Pn[nz], A[None])) >= 1 - mu - 1e-12)
    assert torch.allclose(project_cone(P, c, m), P, atol=1e-12)
    assert np.allclose(np.einsum("bij,bij->b", W.numpy() - Pn, Pn), 0, atol=1e-10)
    # random cone points are never nearer to W than P(W)
    for b in range(8):
        for _ in range(50):
            U = rng.standard_normal((d, d))
            U -= np.sum(U * A) * A
            U /= np.linalg.norm(U)
            th = np.arccos(1 - mu) * rng.uniform()
            Q = rng.uniform(0, 3) * (np.cos(th) * A + np.sin(th) * U)
            assert np.linalg.norm(W[b].numpy() - Q) >= np.linalg.norm(W[b].numpy() - Pn[b]) - 1e-12


def test_cone_path_stays_in_the_cone_and_rejects_bad_cones():
    data = random_unit_sphere(3, 4, 6, rng=np.random.default_rng(0))
    A = np.random.default_rng(1).standard_normal((6, 6))
    for param in ("W", "KQ"):
        rp = regularization_path([data], [1.0, 4.0], param=param, steps=30, restarts=2, cone=(A, 0.02))
        assert np.all(np.asarray(corr(rp.W[:, 0], A[None])) >= 1 - 0.02 - 1e-9)
    with pytest.raises(InvalidInputError):
        regularization_path([data], [1.0], cone=(A, 1.5))
    with pytest.raises(InvalidInputError):
        regularization_path([data], [1.0], cone=(np.zeros((6, 6)), 0.1))
    with pytest.raises(InvalidInputError):
        regularization_path([data], [1.0], cone=A)


# -- rp-w-local / rp-kq-local --------------------------------------------------------------------------
@pytest.mark.parametrize("tid", ["rp-w-local", "rp-kq-local"])
def test_local_path_passes(tid):
    r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict == "PASS", r.reasons
    assert (
        r.metrics["corr_err"]["max"] < REGISTRY[tid]().threshold()
    )  # min(1e-2, μ/4): 2.5e-3 (W), 3.75e-3 (K, Q)


@pytest.mark.parametrize("tid", ["rp-w-local-control", "rp-kq-local-control"])
def test_local_path_control_fails_on_the_cone_boundary(tid):
    r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict == "FAIL"
    assert r.counts["refuted"] >= 2
    assert any("stalled" in why for why in r.reasons), r.reasons


@pytest.mark.parametrize("tid", ["rp-w-local", "rp-kq-local"])
@pytest.mark.parametrize("name", ["noop-gd", "ascent-gd", "transposed-gradient", "softmax-no-normaliser",
                                  "scaled-svm"])
def test_local_path_detects_sabotage(tid, name):
    with sabotage(name):
        r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict != "PASS", (name, r.reasons)


# -- overparam-support ---------------------------------------------------------------------------------
def test_overparam_support_radius_bound_and_closed_form():
    from checks.theorems.overparam_support import beta, closed_form, d_reg, g0, radius

    # G0 = blockdiag(I + J) has λ_min = 1; the proven radius lies strictly inside it (theory.md)
    assert np.linalg.eigvalsh(g0(2, 3))[0] == pytest.approx(1.0)
    assert 0 < radius(2, 3) < 1.0
    # β(d) is the smallest d with the proven failure bound ≤ 1/2, and it decreases in d
    d = d_reg(2, 3)
    assert beta(2, 3, d) <= 0.5 < beta(2, 3, d - 1) and beta(2, 3, 2 * d) < beta(2, 3, d)
    from numerics.svm import solve_att_svm

    data = random_unit_sphere(2, 3, 45, rng=np.random.default_rng(5))
    lam, Wcf, gap = closed_form(data)
    sol = solve_att_svm(data)
    assert gap > 1e-3 and lam.min() > 0
    assert np.linalg.norm(sol.W - Wcf) / np.linalg.norm(Wcf) < 1e-6  # W^mm = A^T (A A^T)^{-1} 1 under B.1


def test_overparam_support_passes_with_every_prediction_decided():
    r = run_theorem(REGISTRY["overparam-support"], profile="quick", seed=0)
    assert r.verdict == "PASS", r.reasons
    assert r.metrics["draws_inside"]["min"] >= 1  # the radius statement was exercised on every instance
    # (d): the B.1 share over the d-grid grows significantly and does not dip
    assert r.metrics["share_z"]["min"] > 1.96 and r.metrics["share_dip_d"]["max"] == 0


def test_b1_share_trend_refutes_a_falling_curve():
    from checks.theorems._trends import adversarial_trend, first_dip

    falling = [{"runs": 32, "reached": k, "undecided": 0} for k in (30, 29, 12, 10, 6, 2)]
    z_lo, z_hi = adversarial_trend(falling, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert z_hi < -1.96
    k, his, _ = first_dip(falling)
    assert k == 1 and his[1] < 0 and his[0] > 0  # 29 → 12 at the third grid point: the first significant dip


def test_overparam_support_control_fails_just_past_the_sharp_radius():
    from checks.theorems.overparam_support import SHARP_EPS, radius, sharp_stats

    r = run_theorem(REGISTRY["overparam-support-control"], profile="quick", seed=0)
    assert r.verdict == "FAIL"
    assert any("negative multiplier" in why for why in r.reasons), r.reasons
    for n, T in ((2, 3), (3, 3), (2, 4)):  # the construction pins the radius from both sides
        (e_in,), (l_in,) = sharp_stats(n, T, 1 - SHARP_EPS)
        (e_out,), (l_out,) = sharp_stats(n, T, 1 + SHARP_EPS)
        assert e_in < radius(n, T) < e_out < radius(n, T) * (1 + 2 * SHARP_EPS)
        assert l_in > 1e-3 and l_out < -1e-3


@pytest.mark.parametrize("name", ["scaled-svm-uncertified", "dropped-constraint-svm-uncertified",
                                  "argmin-optimal-token"])
def test_overparam_support_detects_sabotage_even_with_certificates_silenced(name):
    """The independent closed form refutes a wrong solver answer that the (silenced) certificate let
    through."""
    with sabotage(name):
        r = run_theorem(REGISTRY["overparam-support"], profile="quick", seed=0)
    assert r.verdict == "FAIL", (name, r.reasons)
