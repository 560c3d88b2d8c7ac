"""The ℓp-AttSVM (numerics.svm.lp): its certificate, its p = 2 case, infeasibility, and what it refutes."""

from __future__ import annotations

import numpy as np
import pytest

from numerics.data import AttentionData, random_unit_sphere
from numerics.errors import InvalidInputError
from numerics.svm import solve_att_svm, solve_lp_att_svm
from numerics.svm.att import _att_rows
from numerics.svm.lp import certify_lp, dual_exponent, lp_norm
from numerics.tokens import resolve_alpha


def _data(seed: int) -> AttentionData:
    return random_unit_sphere(4, 4, 6, rng=np.random.default_rng(seed))


def test_lp_norm_matches_numpy_and_does_not_overflow():
    W = np.random.default_rng(0).normal(size=(4, 4))
    for p in (1.25, 2.0, 3.0, 7.5):
        assert lp_norm(W, p) == pytest.approx(np.sum(np.abs(W) ** p) ** (1 / p), rel=1e-13)
    assert lp_norm(np.full((2, 2), 1e200), 6.0) == pytest.approx(1e200 * 4 ** (1 / 6), rel=1e-13)
    assert dual_exponent(3.0) == pytest.approx(1.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_p2_is_the_frobenius_svm(seed):
    data = _data(seed)
    lp, fro = solve_lp_att_svm(data, p=2.0), solve_att_svm(data, norm="fro")
    assert lp.status == fro.status == "optimal" and lp.certificate.verified
    # both are certified to GAP_TOL/KKT_TOL = 1e-6 relative; a strictly convex problem's minimiser then agrees
    # to about sqrt(1e-6) in the worst case, and to ~1e-6 in practice
    assert np.linalg.norm(lp.W - fro.W) <= 1e-4 * np.linalg.norm(fro.W)
    assert lp.objective == pytest.approx(fro.objective, rel=1e-6)


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_certificate_holds_and_refutes_near_misses(p):
    data = _data(2)
    sol = solve_lp_att_svm(data, p=p)
    assert sol.status == "optimal" and sol.certificate.kind == "lp" and sol.certificate.verified
    rows, mask = _att_rows(data, resolve_alpha(data, None))
    lam = sol.lam[mask]
    assert certify_lp(rows, sol.W, lam, p).verified
    assert not certify_lp(rows, 1.05 * sol.W, lam, p).verified  # feasible, 5 % too long: the gap sees it
    assert not certify_lp(rows, 0.999 * sol.W, lam, p).verified  # margins violated by 1e-3
    other = solve_lp_att_svm(data, p=2.0 if p != 2.0 else 3.0)
    assert not certify_lp(rows, other.W, lam, p).verified  # the other norm's solution is not this one's


def test_solutions_differ_across_p():
    data = _data(3)
    W = {p: solve_lp_att_svm(data, p=p).W for p in (1.5, 2.0, 3.0)}
    corr = lambda a, b: float(np.sum(a * b) / np.linalg.norm(a) / np.linalg.norm(b))  # noqa: E731
    assert corr(W[1.5], W[3.0]) < 0.999  # the cross pairing the mirror-descent control relies on


def test_infeasible_gets_a_farkas_certificate():
    data = AttentionData([[[1.0], [0.0]], [[0.0], [1.0]]], [1.0, 1.0], [[1.0], [1.0]], v=[1.0])
    sol = solve_lp_att_svm(data, alpha=[0, 0], p=3.0)  # token 0 of example 2 scores 0 < 1: W·1 ≥ 1 and ≤ −1
    assert sol.status == "infeasible" and sol.certificate.kind == "farkas" and sol.certificate.verified
    assert sol.norm == "lp" and sol.W is None


@pytest.mark.parametrize("p", [1.0, 0.5, float("inf"), "x"])
def test_bad_p(p):
    with pytest.raises(InvalidInputError, match="p must be"):
        solve_lp_att_svm(_data(0), p=p)
