"""pytest integration, in the spirit of scikit-learn's ``parametrize_with_checks``.

    from checks.testing import parametrize_with_theorems

    @parametrize_with_theorems(profile="quick")
    def test_theorem(theorem_cls, profile):
        assert_verdict_as_expected(theorem_cls, profile=profile)

Each catalogue entry becomes one pytest case named by its id (``-k gd-global`` selects it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from . import catalogue
from .harness import CULPRITS, InstanceResult, TheoremResult, aggregate, plugin_source, run_instances
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


def assert_verdict_as_expected(cls: type[Theorem], *, profile: str = "quick", seed: int = 0,
                               out: str | Path | None = None) -> TheoremResult:
    """Run one theorem in memory and assert its verdict is the catalogue's expectation, or a FAIL on its
    documented finding alone (KNOWN FINDING: every refutation recognised, the other instances PASS).
    With ``out`` (e.g. pytest's ``tmp_path``), the run is also written there as `attnsvm check` writes it:
    results.jsonl, report.json / .md / .html, junit.xml, the figure and every counterexample .npz."""
    n = cls.profile(profile).instances
    refuted: dict[int, Any] = {}

    def keep(r: InstanceResult, inst: Any) -> None:
        if r.outcome == "refuted":
            refuted[r.instance] = inst

    results = run_instances(cls, list(range(n)), profile=profile, seed=seed, on_result=keep if out else None)
    res = aggregate(cls, results, profile=profile, seed=seed)
    if out is not None:
        res = write_run(Path(out), cls, results, refuted, profile=profile, seed=seed)
    from .report import lost_power

    if not (res.verdict == cls.expected or res.known_finding) or lost_power(res):
        kinds = CULPRITS.get(res.verdict, ("refuted", "error", "inconclusive", "vacuous"))
        lines = [f"  {res.reproduce} --instance {r.instance}  # {r.outcome}: {r.reason[:200]}"
                 for r in sorted(results, key=lambda r: r.instance) if r.outcome in kinds]
        why = (" (refuted by integrity predictions alone: the control lost its power)" if lost_power(res)
               else "")
        pytest.fail(f"{cls.id}: expected {cls.expected}, got {res.verdict}{why}; counts {res.counts}\n"
                    f"replay the run: {res.reproduce} (writes results.jsonl, the report and every "
                    f"counterexample .npz)\nthe instances behind the verdict:\n" + "\n".join(lines))
    return res


def write_run(out: Path, cls: type[Theorem], results: Sequence[InstanceResult], refuted: dict[int, Any], *,
              profile: str, seed: int) -> TheoremResult:
    """Write one in-memory run of ``cls`` to ``out`` as `attnsvm check --out` does (results.jsonl, the
    reports, junit.xml, the figure, counterexamples/ with their replay lines); ``refuted`` maps each refuted
    instance to its instance object. Returns the theorem's result with its counterexample files."""
    import dataclasses
    import datetime as _dt
    import json

    from numerics.fileio import write_text

    from . import report
    from .plan import plugin_provenance
    from .runner import git_sha, versions

    out.mkdir(parents=True, exist_ok=True)
    src = plugin_source(cls)
    extra = f" --plugin {src}" if src else ""
    saved = []
    for r in sorted(results, key=lambda r: r.instance):
        if r.instance in refuted:
            line = f"attnsvm check {cls.id} --profile {profile} --seed {seed} --instance {r.instance}{extra}"
            rel = report.save_counterexample(out, cls.id, r.instance, refuted[r.instance], line)
            r = dataclasses.replace(r, counterexample=rel) if rel else r
        saved.append(r)
    write_text(out / "results.jsonl", "".join(json.dumps(r.to_json()) + "\n" for r in saved))
    res = aggregate(cls, saved, profile=profile, seed=seed)
    run = {"id": f"pytest-{cls.id}-s{seed}",
           "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "profile": profile,
           "seed": seed, "device": "cpu", "versions": versions(), "git": git_sha(), "data": None,
           "plugins": plugin_provenance([src] if src else []), "ids": [cls.id], "interrupted": False}
    rep = report.write_json(out, run, [res])
    report.plot_theorem(out, cls, res, saved)
    report.write_markdown(out, rep, [res])
    report.write_html(out, rep, [res])
    report.write_junit(out, [res])
    return res
