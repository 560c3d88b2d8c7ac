"""Former false alarms of kq-divergence (quick seed 15 #5) and p-gd-equivalence (quick seeds 16 #4, 22 #5)."""

from __future__ import annotations

from checks import catalogue
from checks.harness import InstanceResult, run_theorem
from checks.theorem import REGISTRY
from checks.theorems.p_gd_equivalence import abandoned_opt_mechanism

catalogue.load_builtin()


def test_kq_divergence_near_tie_transient_is_not_refuted():
    r = run_theorem(REGISTRY["kq-divergence"], profile="quick", seed=15)
    assert r.verdict == "PASS", r.reasons


def test_p_gd_equivalence_small_start_and_known_finding():
    assert run_theorem(REGISTRY["p-gd-equivalence"], profile="quick", seed=16).verdict == "PASS"
    r = run_theorem(REGISTRY["p-gd-equivalence"], profile="quick", seed=22)
    assert r.verdict == "FAIL" and r.known_finding and r.finding_instances == [5], r.reasons


def test_abandoned_opt_mechanism_needs_the_exact_part_and_an_abandoned_token():
    preds = {"svm_relation": "held", "one_step": "held", "trajectory": "held", "direction": "failed"}
    m = {"opt_mass_min": 1e-40, "q_norm_growth": 99.0}
    assert abandoned_opt_mechanism(InstanceResult("p-gd-equivalence", 5, "refuted", predictions=preds, metrics=m))
    assert not abandoned_opt_mechanism(InstanceResult("p-gd-equivalence", 5, "refuted",
                                                      predictions={**preds, "one_step": "failed"}, metrics=m))
    assert not abandoned_opt_mechanism(InstanceResult("p-gd-equivalence", 5, "refuted", predictions=preds,
                                                      metrics={**m, "opt_mass_min": 0.9}))
    assert not abandoned_opt_mechanism(InstanceResult("p-gd-equivalence", 5, "refuted", predictions=preds,
                                                      metrics={**m, "q_norm_growth": 0.0}))
