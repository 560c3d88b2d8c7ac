"""Issue 29 (seed stability): gd-local was VACUOUS on quick seed 45, 7 of its 12 draws needing an initial
multiplier M > M_MAX (δ⁺ < 0.1, a quarter of the family's draws). Its family is now redrawn from the
instance's own rng until the hypotheses decided from the data and the SVMs alone hold (metric ``draws``);
the assume_* methods still decide every instance."""

from __future__ import annotations

import pytest

from checks import catalogue
from checks.harness import _contexts, run_instances
from checks.theorem import REGISTRY

#: Quick seed 45: the instances that needed M > 100 before the redraw (M = 413, 252, 248, 133, 1.71e3, 167,
#: 136) and one whose first draw qualified.
SEED = 45
FORMERLY_VACUOUS = (1, 2, 3, 4, 6, 7, 9)


@pytest.fixture(autouse=True, scope="module")
def _catalogue():
    catalogue.load_builtin()


def _instances(tid, ks, seed=SEED):
    cls = REGISTRY[tid]
    gens, ctxs = _contexts(cls, ks, profile="quick", seed=seed, device="cpu", data=None)
    th = cls()
    return th, [th.instance(g, c) for g, c in zip(gens, ctxs, strict=True)]


def test_seed_45_family_meets_the_data_hypotheses_by_construction():
    from checks.theorems.gd_local import FAMILY_TRIES

    th, insts = _instances("gd-local", range(12))
    for k, inst in enumerate(insts):
        assert 1 <= inst.draws <= FAMILY_TRIES
        assert (inst.draws > 1) == (k in FORMERLY_VACUOUS), (k, inst.draws)
        assert th.family_ok(inst.data, inst.alpha)


@pytest.mark.parametrize("k", [6, 0])
def test_seed_45_instances_are_decided_and_confirmed(k):
    """#6 needed M = 1.71e3 at its first draw (now redrawn); #0 qualified at once (unchanged). Confirmed by
    the normalised protocol (gd-local-normalized, same family and start; plain GD cannot move from there)."""
    (r,) = run_instances(REGISTRY["gd-local-normalized"], [k], profile="quick", seed=SEED)
    assert r.outcome == "confirmed", (r.outcome, r.reason)
    assert all(r.hypotheses.values())
    assert r.metrics["draws"] == (2 if k == 6 else 1)
    assert r.metrics["init_M"] <= 100


def test_without_the_redraw_the_hypothesis_is_still_decided(monkeypatch):
    """R_large is decided per instance, not assumed: with one draw #6 is vacuous for the reason it was."""
    import checks.theorems.gd_local as mod

    monkeypatch.setattr(mod, "FAMILY_TRIES", 1)
    (r,) = run_instances(REGISTRY["gd-local"], [6], profile="quick", seed=SEED)
    assert r.outcome == "vacuous"
    assert r.hypotheses["R_large"] is False
    # 1.71e3 under the shares-only rule 10/δ⁺; 1.87e3 with the score weights (_cone.init_multiplier)
    assert "needs M = 1.87e+03 > 100" in r.reason
    assert r.metrics["draws"] == 1


def test_control_stream_is_unchanged_and_still_refuted():
    """The control shares R_large but its tied family always qualifies at the first draw (seeds 0-49), so its
    instances are the ones it drew before; it stays refuted."""
    _, insts = _instances("gd-local-control", range(12))
    assert [inst.draws for inst in insts] == [1] * 12
    rs = run_instances(REGISTRY["gd-local-normalized-control"], range(4), profile="quick", seed=SEED)
    assert any(r.outcome == "refuted" for r in rs)
