"""The gradient checks' Hypothesis search (checks.theorems._gradients.hypothesis_search) stops shrinking
once SHRINK_BUDGET property calls are spent (issue 17: the shrinker used to go on drawing cases it could
no longer accept, most of a control's time) and still returns a verified counterexample."""

from __future__ import annotations

from checks.theorems import _gradients as g


def test_search_returns_a_verified_counterexample_within_the_budget():
    disc = g.gradient_discrepancy("no-outer")  # gradient-closed-form-control's wrong closed form
    calls = []

    def counted(case):
        calls.append(case)
        return disc(case)

    found, m = g.hypothesis_search(g.gradient_cases(), counted, seed=3, max_examples=100)
    assert found is not None
    err, tol = disc(found)
    assert err > tol  # a real counterexample, not the last case the shrinker drew
    assert m["counterexample_size"] == found.data.n * found.data.T * found.data.d
    first = next(k for k, c in enumerate(calls) if disc(c)[0] > disc(c)[1])
    assert len(calls) <= first + 1 + g.SHRINK_BUDGET  # no property call after the budget


def test_search_without_counterexample_reports_none():
    found, m = g.hypothesis_search(g.gradient_cases(), g.gradient_discrepancy("correct"), seed=3,
                                   max_examples=20)
    assert found is None and m["search_examples"] >= 1 and m["search_worst_err_over_tol"] <= 1.0
