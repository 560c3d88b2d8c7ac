"""pytest integration, in the spirit of scikit-learn's ``parametrize_with_checks``.

    from checks.testing import parametrize_with_theorems

    @parametrize_with_theorems(profile="quick")
    def test_theorem(theorem_cls, profile):
        assert_verdict_as_expected(theorem_cls, profile=profile)

Each catalogue entry becomes one pytest case named by its id (``-k gd-global`` selects it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

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

    undecidable = bool(cls.undecidable) and res.verdict == "INCONCLUSIVE"  # documented, measured
    if not (res.verdict == cls.expected or res.known_finding or undecidable) or lost_power(res):
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


# -- one pytest case per (theorem, prediction) -----------------------------------------------------------
#: A theorem's instance results, run once per pytest session and shared by its prediction cases.
_RUNS: dict[tuple[str, str, int], list[InstanceResult]] = {}

#: An instance's status of one prediction -> the outcome that prediction alone gives the instance.
_STATUS_OUTCOME = {"held": "confirmed", "failed": "refuted", "undecided": "inconclusive"}


def prediction_cases(ids: Sequence[str] = (), plugins: Sequence[str] = (), *, profile: str = "quick",
                     slow_ids: Sequence[str] = ()) -> list[Any]:
    """One ``pytest.param(theorem class, prediction, profile)`` per ``check_*`` method of every selected
    theorem (controls included), with the id ``THEOREM::check_NAME`` (so ``-k gd-local::check_direction``
    selects one prediction); ids in ``slow_ids`` get the ``slow`` mark."""
    params = []
    for cls in theorems(ids, plugins):
        marks = [pytest.mark.slow] if cls.id in slow_ids else []
        for name in cls.prediction_names():
            params.append(pytest.param(cls, name, profile, id=f"{cls.id}::check_{name}", marks=marks))
    return params


def parametrize_with_predictions(*, profile: str = "quick", ids: Sequence[str] = (),
                                 plugins: Sequence[str] = (), slow_ids: Sequence[str] = ()):
    """Decorator: parametrize a test over (theorem class, prediction, profile), one case per prediction
    (:func:`prediction_cases`)::

        @parametrize_with_predictions(ids=["gd-local"])
        def test_prediction(theorem_cls, prediction, profile):
            assert_prediction_as_expected(theorem_cls, prediction, profile=profile)
    """
    return pytest.mark.parametrize("theorem_cls,prediction,profile",
                                   prediction_cases(ids, plugins, profile=profile, slow_ids=slow_ids))


def theorem_run(cls: type[Theorem], *, profile: str = "quick", seed: int = 0) -> list[InstanceResult]:
    """Every instance result of one theorem on (profile, seed), computed once per process (the prediction
    cases of a theorem share one run)."""
    key = (cls.id, profile, seed)
    if key not in _RUNS:
        n = cls.profile(profile).instances
        _RUNS[key] = run_instances(cls, list(range(n)), profile=profile, seed=seed)
    return _RUNS[key]


def prediction_results(results: Sequence[InstanceResult], prediction: str) -> list[InstanceResult]:
    """The instance results as if ``prediction`` were the theorem's only one: an instance where it held is
    confirmed, failed refuted, undecided inconclusive; where it did not run (hypotheses unmet: vacuous; an
    error) the instance keeps that outcome. Everything else (hypotheses, metrics, reason) is kept, so a
    finding recognised by its mechanism is recognised here too."""
    out = []
    for r in results:
        status = r.predictions.get(prediction)
        if status is None:
            outcome = "error" if r.outcome == "error" else "vacuous"
        else:
            outcome = _STATUS_OUTCOME.get(status, "inconclusive")
        out.append(replace(r, outcome=outcome))
    return out


def _own_reason(r: InstanceResult, prediction: str) -> str:
    """The part of an instance's reason that concerns ``prediction`` (its ``name: why`` entry)."""
    parts = [p for p in r.reason.split("; ") if p == prediction or p.startswith(f"{prediction}:")]
    return "; ".join(parts) or r.reason


def _documented(cls: type[Theorem], results: Sequence[InstanceResult], prediction: str, profile: str,
                seed: int) -> bool:
    """Does the theorem's documented finding, seen on (profile, seed) (``finding_seen``), concern this
    prediction: it fails on one of the instances listed, or no prediction fails on any of them (the
    finding is no longer seen at all, which every case of the theorem must then report)?"""
    seen = set(cls.finding_seen.get((profile, seed), ()))
    if not cls.finding or not seen:
        return False
    failing = {name for r in results if r.instance in seen for name, st in r.predictions.items()
               if st == "failed"}
    return prediction in failing or not failing


def assert_prediction_as_expected(cls: type[Theorem], prediction: str, *, profile: str = "quick",
                                  seed: int = 0) -> TheoremResult:
    """One prediction of one theorem (the theorem is run once per process, :func:`theorem_run`), judged by
    the harness's own rules (:func:`checks.harness.aggregate` on :func:`prediction_results`):

    - a theorem expected to PASS: the prediction must PASS. Refuted on its documented finding alone (the
      theorem's ``finding``, recognised as the harness recognises it) it is a strict xfail: XFAIL while the
      finding is seen, and a failure once the prediction passes on the (profile, seed) that
      ``finding_seen`` documents (update the finding);
    - a control (or any theorem expected to FAIL): the theorem as a whole must come out as expected; the
      prediction that refutes it passes, and a prediction that holds on it is skipped, with the reason (it
      is not the one the control breaks).

    Anything else fails with the replay line of the run and one ``--instance K`` line per instance behind
    the prediction's verdict."""
    results = theorem_run(cls, profile=profile, seed=seed)
    res = aggregate(cls, prediction_results(results, prediction), profile=profile, seed=seed)
    case = f"{cls.id}::check_{prediction}"
    if cls.expected != "PASS":
        whole = aggregate(cls, results, profile=profile, seed=seed)
        if whole.verdict == cls.expected or whole.known_finding:
            if res.verdict != cls.expected:
                pytest.skip(f"{case}: {res.verdict} on the control, which other predictions refute "
                            f"({whole.counts.get('refuted', 0)} refuted instances)")
            return res
        _fail_prediction(case, cls.expected, whole, results, prediction)
    if res.known_finding:
        pytest.xfail(f"{case}: documented finding: {(cls.finding or '').strip()[:300]}")
    if res.verdict == cls.expected:
        if _documented(cls, results, prediction, profile, seed):
            pytest.fail(f"{case}: strict xfail: the documented finding ({profile}, seed {seed}, instances "
                        f"{sorted(cls.finding_seen[(profile, seed)])}) is no longer seen and the prediction "
                        f"passes; update the theorem's finding / finding_seen", pytrace=False)
        return res
    _fail_prediction(case, cls.expected, res, prediction_results(results, prediction), prediction)


def _fail_prediction(case: str, expected: str, res: TheoremResult, results: Sequence[InstanceResult],
                     prediction: str) -> NoReturn:
    kinds = CULPRITS.get(res.verdict, ("refuted", "error", "inconclusive", "vacuous"))
    lines = [f"  {res.reproduce} --instance {r.instance}  # {r.outcome}: {_own_reason(r, prediction)[:200]}"
             for r in sorted(results, key=lambda r: r.instance) if r.outcome in kinds]
    pytest.fail(f"{case}: expected {expected}, got {res.verdict}; counts {res.counts}\n"
                f"replay the run: {res.reproduce}\nthe instances behind the verdict:\n" + "\n".join(lines),
                pytrace=False)
