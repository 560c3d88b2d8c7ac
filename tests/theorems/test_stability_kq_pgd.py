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
    # quick seed 22 #5's recorded metrics (the shared p-svm-gd predicate: trapped example, GD at the certified
    # SVM of the untrapped one, the trapped optimal token losing under it, the loss fell)
    m = {"opt_mass_min": 1e-40, "q_norm_growth": 99.0, "trapped": 1, "untrapped_gap": 3.5e-4,
         "untrapped_gap_mid": 1.4e-3, "trapped_deficit": 1.13, "loss_fell": True}

    def matches(preds=preds, **change):
        return abandoned_opt_mechanism(InstanceResult("p-gd-equivalence", 5, "refuted", predictions=preds,
                                                      metrics={**m, **change}))

    assert matches()
    assert not matches(preds={**preds, "one_step": "failed"})
    assert not matches(trapped=0)
    assert not matches(q_norm_growth=0.0)
    assert not matches(untrapped_gap=0.02)  # not converged to the untrapped examples' SVM
    assert not matches(untrapped_gap=2e-3, untrapped_gap_mid=1e-3)  # moving away from it
    assert not matches(trapped_deficit=-0.1)  # that SVM would bring the optimal token back
    assert not matches(loss_fell=False)  # no descent: a broken optimiser
