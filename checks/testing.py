"""pytest integration, in the spirit of scikit-learn's ``parametrize_with_checks``.

    from checks.testing import parametrize_with_theorems

    @parametrize_with_theorems(profile="quick")
    def test_theorem(theorem_cls, profile):
        assert_verdict_as_expected(theorem_cls, profile=profile)

Each catalogue entry becomes one pytest case named by its id (``-k gd-global`` selects it).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from . import catalogue
from .harness import CULPRITS, TheoremResult, aggregate, run_instances
from .theorem import Theorem


def theorems(ids: Sequence[str] = (), plugins: Sequence[str] = ()) -> list[type[Theorem]]:
    catalogue.load_builtin()
    for p in plugins:
        catalogue.load_plugin(p)
    return catalogue.select(list(ids))


def parametrize_with_theorems(*, profile: str = "quick", ids: Sequence[str] = (), plugins: Sequence[str] = (),
                              slow_ids: Sequence[str] = ()):
    """Decorator: parametrize a test over (theorem class, profile) pairs; ids in ``slow_ids`` get the
    ``slow`` mark (run by ``tox -e slow``)."""
    params = []
    for cls in theorems(ids, plugins):
        marks = [pytest.mark.slow] if cls.id in slow_ids else []
        params.append(pytest.param(cls, profile, id=cls.id, marks=marks))
    return pytest.mark.parametrize("theorem_cls,profile", params)


def assert_verdict_as_expected(cls: type[Theorem], *, profile: str = "quick", seed: int = 0) -> TheoremResult:
    """Run one theorem in memory and assert its verdict is the catalogue's expectation, or a FAIL on its
    documented finding alone (KNOWN FINDING: every refutation recognised, the other instances PASS)."""
    n = cls.profile(profile).instances
    results = run_instances(cls, list(range(n)), profile=profile, seed=seed)
    res = aggregate(cls, results, profile=profile, seed=seed)
    if not (res.verdict == cls.expected or res.known_finding):
        kinds = CULPRITS.get(res.verdict, ("refuted", "error", "inconclusive", "vacuous"))
        lines = [f"  {res.reproduce} --instance {r.instance}  # {r.outcome}: {r.reason[:200]}"
                 for r in sorted(results, key=lambda r: r.instance) if r.outcome in kinds]
        pytest.fail(f"{cls.id}: expected {cls.expected}, got {res.verdict}; counts {res.counts}\n"
                    f"replay the run: {res.reproduce} (writes results.jsonl, the report and every "
                    f"counterexample .npz)\nthe instances behind the verdict:\n" + "\n".join(lines))
    return res
