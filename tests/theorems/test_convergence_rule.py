"""The one convergence rule (checks/theorems/_trends.py, judge_convergence) and its stall test: the order
of the decisions and the float64 floor below which a stall is rounding, not a limit."""

import numpy as np

from checks.theorems._trends import SHRINK_MAX, corr_floor, judge_convergence, stalled_below


def test_the_rule_decides_in_its_order():
    def judge(**kw):
        return judge_convergence(**dict(dict(converged=False, stalled="stalled"), **kw)).status

    assert judge(no_progress="no-op", converged=True, unresolved="x") == "failed"  # not moving first
    assert judge(unresolved="regime not reached", converged=True) == "undecided"
    assert judge(converged=True, falling="still falling") == "held"
    assert judge(falling="still falling") == "undecided"
    assert judge(waits=((False, "a"), (True, "budget"))) == "undecided"
    assert judge(waits=((False, "a"),)) == "failed"
    out = judge_convergence(converged=False, stalled="stalled above", corr_err=0.5)
    assert out.reason == "stalled above" and out.metrics == {"corr_err": 0.5}


def test_a_stall_is_a_ratio_above_shrink_max_above_the_float64_floor():
    k = 2.0 ** np.arange(1, 6)
    assert not stalled_below(0.3 * (0.3 ** k), 64)  # shrinking ×0.3 per doubling: the true fall
    assert stalled_below(1e-3 + 1e-2 * 0.3 ** k, 64)  # levelling off at 1e-3 (a target tilted by ~2.6°)
    assert not stalled_below(np.full(5, corr_floor(64) / 2), 64)  # at the rounding floor: no decision
    assert SHRINK_MAX < 1
