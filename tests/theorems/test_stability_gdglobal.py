"""gd-global / gd-global-normalized: the former false alarms (issue 29) and the decided refutations that
replaced the rate rules.

- gd-global, full seed 0, instance 41 (interacting B.1 data): plain GD is still falling (1 − corr 0.38 → 0.07
  over five doublings) — undecided (budget), never refuted. (The former case, full seed 1 instance 21, a 1e-4
  near-tie on the decoupled B.1 family, is gone with that family: issue 24.)
- gd-global, quick seed 0, instance 7 (interacting B.1 data): a genuine trap on the shared token, recognised
  as the documented finding by its mechanism.
- gd-global-normalized, full seed 1, instance 12 (B.2 data): a genuine trap, recognised as the documented
  finding by its mechanism (GD converges to the certified SVM of the other examples, under which the trapped
  example's optimal token stays behind).
- the controls are refuted by the decided attractor rule (GD approaches a certified locally optimal
  W^mm_α), and a no-op / ascent optimiser by the proved ⟨W(k), W^mm⟩ increase.
"""

from __future__ import annotations

import numpy as np
import pytest

from checks import catalogue
from checks.harness import InstanceResult, run_instances, run_theorem
from checks.strategies import b1_data
from checks.theorem import REGISTRY
from checks.theorems import _global

catalogue.load_builtin()  # the ids below (the file alone used to fail with a KeyError)


def _one(tid: str, k: int, profile: str = "full", seed: int = 1) -> InstanceResult:
    (r,) = run_instances(REGISTRY[tid], [k], profile=profile, seed=seed)
    return r


def test_slow_plain_gd_is_undecided_not_refuted():
    r = _one("gd-global", 41, seed=0)
    assert r.outcome == "inconclusive", (r.outcome, r.reason)
    m = r.metrics
    assert m["B1"] is True
    assert 0.05 <= m["corr_err"] < m["corr_err_curve"][0]  # still falling, above the budget threshold
    assert m["attracted"] is False and m["trapped"] == 0  # GD selects opt: no other direction attracts it


def test_shared_token_trap_is_the_documented_finding():
    cls = REGISTRY["gd-global"]
    r = _one("gd-global", 7, profile="quick", seed=0)
    assert r.outcome == "refuted" and r.predictions["direction"] == "failed", r.reason
    m = r.metrics
    assert m["B1"] is True and m["trapped"] == 1 and m["trapped_opt_shared"] is True
    assert m["attracted"] is True
    assert m["alpha_locally_optimal"] is True and m["alpha_corr_err"] < m["corr_err"]
    assert cls.finding_mechanism(r) and _global.b1_trap_mechanism(r)
    assert _global.certified_trap_mechanism(r)  # the normalised variant's finding: the same certified trap
    assert not REGISTRY["gd-global-control"].finding


def test_shared_token_mechanism_is_specific():
    base = {"B1": True, "trapped": 1, "attracted": True, "trapped_opt_shared": True,
            "alt_kind": "Att-SVM(α), α locally optimal"}

    def res(**kw):
        return InstanceResult("gd-global", 0, "refuted", metrics={**base, **kw})

    assert _global.b1_trap_mechanism(res())
    assert _global.b1_trap_mechanism(res(trapped_opt_shared=False))  # paper seed 0 #119, #143: not shared
    assert not _global.b1_trap_mechanism(res(trapped=0))
    assert not _global.b1_trap_mechanism(res(alt_kind=""))  # no certified alternative approached
    assert not _global.b1_trap_mechanism(res(B1=False))
    assert not _global.b1_trap_mechanism(res(attracted=False))
    assert not _global.b1_trap_mechanism(InstanceResult("x", 0, "refuted", metrics={}))


def test_interacting_b1_family_is_coupled_and_certified():
    """The B.1 instances of gd-global: one token shared by every example and queries correlated 0.5 (the SVM
    Gram matrix has off-diagonal blocks), B.1 certified on the Att-SVM(opt) support."""
    from checks import hypotheses as hyp
    from checks.harness import _contexts
    from numerics.svm import solve_att_svm
    from numerics.tokens import optimal_tokens, scores

    cls = REGISTRY["gd-global"]
    gens, ctxs = _contexts(cls, [1, 3], profile="quick", seed=0, device="cpu", data=None)
    for g, c in zip(gens, ctxs, strict=True):
        inst = cls().instance(g, c)
        data = inst.data
        assert inst.family == "B.1 (interacting)"
        assert np.allclose(data.X[:, -1], data.X[0, -1])  # the shared token
        G = data.Z @ data.Z.T
        assert np.allclose(G[~np.eye(data.n, dtype=bool)], 0.5)
        sol = solve_att_svm(data)
        assert hyp.b1_or_b2(sol, scores(data), optimal_tokens(data).index)[0]


def test_normalized_trap_is_the_documented_finding():
    cls = REGISTRY["gd-global-normalized"]
    r = _one("gd-global-normalized", 12)
    assert r.outcome == "refuted" and r.predictions["direction"] == "failed", r.reason
    m = r.metrics
    assert m["B2"] is True and m["trapped"] == 1 and m["trapped_deficit"] > 1.0
    assert m["rest_corr_err"] < 1e-2 < m["corr_err"]
    assert cls.finding_mechanism(r) and _global.certified_trap_mechanism(r)
    assert not REGISTRY["gd-global-normalized-control"].finding  # controls never inherit a finding


def test_mechanism_predicate_is_specific():
    base = {"trapped": 1, "attracted": True, "trapped_deficit": 1.3,
            "alt_kind": "SVM of the untrapped examples (trapped optimal tokens behind)"}

    def res(**kw):
        return InstanceResult("gd-global-normalized", 0, "refuted", metrics={**base, **kw})

    assert _global.certified_trap_mechanism(res())
    assert not _global.certified_trap_mechanism(res(trapped_deficit=0.0))
    assert not _global.certified_trap_mechanism(res(attracted=False))
    assert _global.certified_trap_mechanism(res(alt_kind="Att-SVM(α), α locally optimal"))  # paper 0 #125
    assert not _global.certified_trap_mechanism(res(alt_kind="something else"))
    assert not _global.certified_trap_mechanism(InstanceResult("x", 0, "refuted", metrics={}))


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


def test_self_attention_variant_draws_self_attention_families():
    """gd-global-self-attention: z_i = x_i1 on both families; on B.1 the shared token is every query."""
    from checks.harness import _contexts

    cls = REGISTRY["gd-global-self-attention"]
    gens, ctxs = _contexts(cls, [0, 1], profile="quick", seed=0, device="cpu", data=None)
    for g, c in zip(gens, ctxs, strict=True):
        data = cls().instance(g, c).data
        assert data.self_attention and np.array_equal(data.Z, data.X[:, 0])
    assert np.allclose(data.Z, data.Z[0])  # instance 1 (B.1): one shared query
    assert REGISTRY["gd-global-self-attention-control"].control_of == "gd-global-self-attention"
