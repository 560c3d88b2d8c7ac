"""The excess logistic loss of the local paths (numerics.excess_loss) and the rules built on it
(checks/theorems/_localpath.py, _paths.py): exact against a 150-digit evaluation within its own rounding
bound, deciding centre vs boundary where L itself is flat in float64, and never substituting the predicted
limit."""

from __future__ import annotations

import mpmath
import numpy as np
import torch

from checks.strategies import local_alpha_data
from checks.theorems._localpath import MU, candidates, path_excess
from checks.theorems._paths import polish_path
from numerics.attention import batch_from_data, loss
from numerics.excess_loss import decided_less
from numerics.svm import solve_att_svm


def _instance(seed=3):
    data, alpha = local_alpha_data(3, 4, 6, rng=np.random.default_rng(seed), locally_optimal=True)
    return data, alpha, solve_att_svm(data, alpha).W


def _boundary(Wa, R, seed=0, mu=MU):
    from checks.theorems._cone import boundary_start

    return boundary_start(Wa, R, np.random.default_rng(seed).standard_normal(Wa.shape), mu)


def _exact_excess(data, alpha, W):
    """L(W) − (1/n) Σ ℓ(γ_iα_i) in 150-digit arithmetic, from the same float64 inputs."""
    mpmath.mp.dps = 150  # the tails at M = 128 are ~1e-57 of the O(1) terms: 150 digits keep ~90 of them
    X, Z, Y, v = data.X, data.Z, data.Y, data.v
    tot = mpmath.mpf(0)
    for i in range(data.n):
        g = [Y[i] * sum(mpmath.mpf(float(X[i, t, k])) * float(v[k]) for k in range(data.d))
             for t in range(data.T)]
        Wz = [sum(mpmath.mpf(float(W[a, b])) * float(Z[i, b]) for b in range(data.d)) for a in range(data.d)]
        lg = [sum(mpmath.mpf(float(X[i, t, a])) * Wz[a] for a in range(data.d)) for t in range(data.T)]
        m = max(lg)
        e = [mpmath.exp(x - m) for x in lg]
        u = sum(ei * gi for ei, gi in zip(e, g, strict=True)) / sum(e)
        tot += mpmath.log1p(mpmath.exp(-u)) - mpmath.log1p(mpmath.exp(-g[alpha[i]]))
    return tot / data.n


def test_excess_matches_60_digits_within_its_bound():
    data, alpha, Wa = _instance()
    Rm = np.linalg.norm(Wa)
    Ws = np.array([M * Rm * Wa / Rm for M in (2.0, 16.0, 64.0, 128.0)]
                  + [_boundary(Wa, M * Rm) for M in (2.0, 16.0, 64.0, 128.0)])
    E, err = path_excess(data, Wa, Ws)
    for W, e, b in zip(Ws, E, err, strict=True):
        ex = _exact_excess(data, alpha, W)
        assert abs(float(ex) - e) <= b, (float(ex), e, b)
        assert b <= 1e-12 * abs(e) + 1e-300  # the bound is a few hundred ulps of E, not of L


def test_centre_vs_boundary_decided_where_L_is_flat():
    data, alpha, Wa = _instance()
    Rm = np.linalg.norm(Wa)
    R = 64 * Rm
    W = np.array([R * Wa / Rm, _boundary(Wa, R)])
    b = batch_from_data([data] * 2)
    L = loss(b.X, b.Y, b.Z, torch.as_tensor(W), b.linear_head()).numpy()
    assert abs(L[0] - L[1]) <= 4 * np.finfo(float).eps * abs(L[0])  # float64 L cannot tell them apart
    E, err = path_excess(data, Wa, W)
    assert decided_less(E[0], err[0], E[1], err[1])  # the centre is better (δ⁺ > 0: locally optimal α)


def test_candidates_never_substitute_the_centre_and_polish_only_certified():
    data, alpha, Wa = _instance()
    Rm = np.linalg.norm(Wa)
    radii = np.array([16.0, 32.0, 64.0]) * Rm
    Ws = np.array([_boundary(Wa, r, seed=k) for k, r in enumerate(radii)])
    c = candidates(data, Ws, radii, Wa, "fro")
    # boundary points only: the centre beats each of them (certified), and is never put in their place
    assert c["beaten"].all()
    for W in c["W"]:
        assert 1 - np.sum(W * Wa) / (np.linalg.norm(W) * np.linalg.norm(Wa)) > MU / 2
    # a path point beaten by another's rescale is replaced by it exactly where certified
    Ws2 = Ws.copy()
    Ws2[1] = 0.5 * Ws[1]  # inside the ball: its own rescale to R beats it
    c2 = candidates(data, Ws2, radii, Wa, "fro")
    assert c2["polished"][1] and np.isclose(np.linalg.norm(c2["W"][1]), radii[1])
    assert (c2["excess"][1] - c["excess"][1]) <= c2["excess_err"][1] + c["excess_err"][1]


def test_polish_path_never_uses_the_target():
    data, alpha, Wa = _instance()
    radii = np.array([1.0, 2.0, 4.0])
    rng = np.random.default_rng(1)
    Ms = rng.standard_normal((3, 6, 6))
    Ws = np.array([r * (M / np.linalg.norm(M)) for r, M in zip(radii, Ms, strict=True)])
    b = batch_from_data([data] * 3)
    L = loss(b.X, b.Y, b.Z, torch.as_tensor(Ws), b.linear_head()).numpy()
    W2, L2, pol = polish_path(data, Ws, radii, L, nuclear=False)
    assert np.all(L2 <= L)
    for j in np.flatnonzero(pol):  # a replaced point is another path point's direction, rescaled
        cos = [np.sum(W2[j] * Ws[k]) / (np.linalg.norm(W2[j]) * np.linalg.norm(Ws[k]))
               for k in range(3) if k != j]
        assert max(cos) > 1 - 1e-12


def test_interior_point_beaten_on_its_sphere_is_undecided_not_refuted():
    # quick seed 48, rp-kq-local 5: the optimiser's point inside the ball, beaten by its own radial rescale
    # (certified by the excess loss), is a missed minimiser: constraint_active undecided, never failed
    from dataclasses import replace

    from checks.theorems._localpath import LocalPathInstance, LocalPathRun, LocalPathState, global_alpha
    from checks.theorems.rp_w_local import RPWLocal

    data, alpha, Wa = _instance()
    Rm = np.linalg.norm(Wa)
    radii = np.array([16.0, 32.0, 64.0]) * Rm
    Ws = np.array([_boundary(Wa, r, seed=k) for k, r in enumerate(radii)])
    Ws[2] = 0.99 * Ws[2]
    c = candidates(data, Ws, radii, Wa, "fro")
    norms = np.linalg.norm(Ws, axis=(1, 2))
    run = LocalPathRun(radii=radii, norms=norms, active=norms >= (1 - 1e-8) * radii, delta_plus=10.0,
                       path_W=Ws, loss=np.full(len(radii), np.nan), **c)  # loss: unread by constraint_active
    st = LocalPathState(sol=solve_att_svm(data, alpha), glob=solve_att_svm(data, global_alpha(data, alpha)),
                        path=run)
    inst = LocalPathInstance(data=data, alpha=alpha, seed=0)
    thm = RPWLocal()
    thm.resolved = lambda st: 3
    out = thm.check_constraint_active(inst, st, None)
    assert out.status == "undecided" and "missed" in out.reason
    # the same point claimed to beat every sphere point by more than the bounds would be a decided refutation
    st2 = replace(st, path=replace(run, sphere_excess=run.raw_excess + 1.0))
    assert thm.check_constraint_active(inst, st2, None).status == "failed"
