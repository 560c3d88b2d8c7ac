"""gd-global / gd-global-normalized: the former false alarms (issue 29) and the decided refutations that
replaced the rate rules.

- gd-global, full seed 1, instance 21 (B.1 data, a 1e-4 near-tie of the optimal score): plain GD is still
  falling (1 − corr 0.179 → 0.149 over five doublings) — undecided (budget), never refuted.
- gd-global-normalized, full seed 1, instance 12 (B.2 data): a genuine trap, recognised as the documented
  finding by its mechanism (GD converges to the certified SVM of the other examples, under which the trapped
  example's optimal token stays behind).
- the controls are refuted by the decided attractor rule (GD approaches a certified locally optimal
  W^mm_α), and a no-op / ascent optimiser by the proved ⟨W(k), W^mm⟩ increase.
"""

from __future__ import annotations

import numpy as np
import pytest

from checks.harness import InstanceResult, run_instances, run_theorem
from checks.strategies import b1_data
from checks.theorem import REGISTRY
from checks.theorems import _global


def _one(tid: str, k: int, profile: str = "full", seed: int = 1) -> InstanceResult:
    (r,) = run_instances(REGISTRY[tid], [k], profile=profile, seed=seed)
    return r


def test_slow_plain_gd_is_undecided_not_refuted():
    r = _one("gd-global", 21)
    assert r.outcome == "inconclusive", (r.outcome, r.reason)
    m = r.metrics
    assert 0.05 <= m["corr_err"] < m["corr_err_curve"][0]  # still falling, above the budget threshold
    assert m["attracted"] is False and m["alpha_locally_optimal"] is False
    assert abs(m["trapped_deficit"]) <= _global.TRAP_TOL  # B.1 orthonormal data: no self-consistent trap


def test_normalized_trap_is_the_documented_finding():
    cls = REGISTRY["gd-global-normalized"]
    r = _one("gd-global-normalized", 12)
    assert r.outcome == "refuted" and r.predictions["direction"] == "failed", r.reason
    m = r.metrics
    assert m["B2"] is True and m["trapped"] == 1 and m["trapped_deficit"] > 1.0
    assert m["rest_corr_err"] < 1e-2 < m["corr_err"]
    assert cls.finding_mechanism(r) and _global.trapped_example_mechanism(r)
    assert not REGISTRY["gd-global-normalized-control"].finding  # controls never inherit a finding


def test_mechanism_predicate_is_specific():
    base = {"trapped": 1, "attracted": True, "trapped_deficit": 1.3,
            "alt_kind": "SVM of the untrapped examples (trapped optimal tokens behind)"}

    def res(**kw):
        return InstanceResult("gd-global-normalized", 0, "refuted", metrics={**base, **kw})

    assert _global.trapped_example_mechanism(res())
    assert not _global.trapped_example_mechanism(res(trapped_deficit=0.0))
    assert not _global.trapped_example_mechanism(res(attracted=False))
    assert not _global.trapped_example_mechanism(res(alt_kind="Att-SVM(α), α locally optimal"))
    assert not _global.trapped_example_mechanism(InstanceResult("x", 0, "refuted", metrics={}))


def test_decoupled_b1_data_have_no_attractor():
    """On b1_data (orthonormal tokens and queries) the examples decouple: a non-opt argmax is never locally
    optimal and the rest SVM leaves the trapped example's logits at 0 (deficit 0, not > TRAP_TOL)."""
    data = b1_data(3, 4, 12, rng=np.random.default_rng(5))
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens

    opt = optimal_tokens(data).index
    W = 3.0 * solve_att_svm(data).W
    # push example 0 onto a non-optimal token: add its logit direction x_{0t} z_0^T
    t = (opt[0] + 1) % data.T
    W = W + 6.0 * np.outer(data.X[0, t], data.Z[0])
    traj = np.stack([W * s for s in (0.5, 0.75, 1.0)])
    err = np.array([0.3, 0.3, 0.3])
    m = _global.attractor_metrics(data, traj, err)
    assert m["trapped"] == 1 and m["alpha_locally_optimal"] is False
    assert abs(m["trapped_deficit"]) <= _global.TRAP_TOL and m["attracted"] is False


@pytest.mark.parametrize("tid", ["gd-global-control", "gd-global-normalized-control"])
def test_controls_are_refuted_by_the_attractor_rule(tid):
    r = run_theorem(REGISTRY[tid], profile="quick", seed=0)
    assert r.verdict == "FAIL"
    assert any("converges to another direction" in why for why in r.reasons), r.reasons
