"""Every built-in theorem and control states its decision rules (``criteria``), the report carries them, and
the GD curves are recorded against the GD iteration (or the regularisation path against the radius R)."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from checks import Criterion, catalogue
from checks.runner import run_check


def _builtin():
    catalogue.load_builtin()
    classes = [c for c in catalogue.ordered() if c.__module__.startswith("checks.theorems.")]
    assert len(classes) >= 40  # 20 theorems and their controls
    return classes


def _value_ok(v) -> bool:
    if isinstance(v, str):
        return bool(v.strip())
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def test_every_builtin_theorem_and_control_declares_criteria():
    classes = _builtin()
    controls = [c for c in classes if c.control_of]
    assert len(controls) >= 20
    for cls in classes:
        assert isinstance(cls.criteria, tuple) and cls.criteria, f"{cls.id}: no criteria"
        for c in cls.criteria:
            assert isinstance(c, Criterion), cls.id
            assert c.name.strip() and c.rule.strip(), cls.id
            assert _value_ok(c.value), f"{cls.id}: criterion {c.name!r} has value {c.value!r}"
            assert c.plot_metric is None or (isinstance(c.plot_metric, str) and c.plot_metric), cls.id
            json.dumps(c.to_json())  # report.json can hold it


def test_thresholds_come_from_the_module_constants():
    """The rules quote each module's own named constant (not a retyped copy): a module whose threshold
    differs from a sibling's shows its own value."""
    from checks.theorems import _global, _paths, gd_global_normalized, rp_kq_nuclear

    by_id = {c.id: c for c in _builtin()}

    def values(tid):
        return [c.value for c in by_id[tid].criteria]

    assert _global.CORR_ERR_MAX in values("gd-global")
    assert gd_global_normalized.CORR_ERR_MAX in values("gd-global-normalized")
    assert _paths.CORR_ERR_MAX in values("rp-w-frobenius")
    assert rp_kq_nuclear.CORR_ERR_MAX in values("rp-kq-nuclear")
    assert _paths.CORR_ERR_MAX not in values("rp-kq-nuclear")


def test_plot_metrics_name_recorded_metrics():
    """A criterion's plot_metric names a metric the module records (as a key of a metrics dict), so its
    threshold line lands on a figure panel."""
    import checks.theorems

    src = "".join(p.read_text() for p in Path(checks.theorems.__file__).parent.glob("*.py"))
    for cls in _builtin():
        for c in cls.criteria:
            if c.plot_metric:
                assert f"{c.plot_metric}=" in src or f'"{c.plot_metric}"' in src, (cls.id, c.plot_metric)


@pytest.fixture(scope="module")
def cheap_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("criteria") / "out"
    # one instance each (cheap): instance 1 of gd-global is B.1 data, plain GD with records at k = S/32..S
    run_check(
        ["svm-feasibility", "gd-global", "gd-global-control", "rp-w-frobenius"],
        profile="quick",
        out=out,
        progress=False,
        only_instance=1,
    )
    return Path(out)


def test_report_json_carries_the_criteria(cheap_run):
    rep = json.loads((cheap_run / "report.json").read_text())
    by_id = {c.id: c for c in _builtin()}
    seen = {t["id"]: t for t in rep["theorems"]}
    assert {"svm-feasibility", "gd-global", "rp-w-frobenius", "gd-global-control"} <= set(seen)
    for tid, t in seen.items():
        assert t["criteria"] == [c.to_json() for c in by_id[tid].criteria], tid
        assert all({"name", "rule", "value"} <= set(c) for c in t["criteria"])
    html = (cheap_run / "report.html").read_text()
    assert "criteria not declared" not in html
    from checks.theorems import _global

    assert f"{_global.CORR_ERR_MAX:g}" in html


def _rows(out: Path, tid: str) -> list[SimpleNamespace]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return [SimpleNamespace(instance=r["instance"], outcome=r["outcome"], metrics=r["metrics"])
            for r in rows if r["theorem"] == tid]


def test_curves_are_recorded_against_iterations_and_radii(cheap_run):
    from checks.report import curve_series
    from checks.theorems import _global, _paths

    (gd,) = curve_series(_rows(cheap_run, "gd-global"), "corr_err_curve")
    assert gd["iterations"] and gd["xlabel"] == "GD iteration"
    S = _global.STEPS
    assert gd["x"] == [S // 2 ** j for j in range(_global.DOUBLINGS, -1, -1)]  # k = S/32, ..., S
    (rp,) = curve_series(_rows(cheap_run, "rp-w-frobenius"), "corr_err_curve")
    assert rp["xlabel"] == "radius R" and rp["x"] == list(_paths.RADII[: len(rp["x"])])
    fig = cheap_run / "figures" / "gd-global.png"
    assert fig.is_file() and fig.stat().st_size > 0


def test_statements_render_without_raw_latex_commands():
    """Every built-in statement's MathML has no command the converter left as text (e.g. ``\\arg``)."""
    import re

    from checks.report import math_html

    for cls in _builtin():
        m = math_html(cls.statement)
        assert m.startswith("<math") and not re.search(r">\\[A-Za-z]+<", m), (cls.id, m[:200])


def test_sizes_are_recorded_beyond_attention_data():
    """The report's sizes: instances that carry token or key arrays (TLZO, sequences) or a gradient case
    record n, T, d too (issue 16: sizes were missing for those families)."""
    from checks.harness import run_instances
    from checks.theorem import REGISTRY

    catalogue.load_builtin()
    for tid in ("p-svm-gd", "joint-vp-path", "gradient-closed-form"):
        r = run_instances(REGISTRY[tid], [0], profile="quick", seed=0)[0]
        assert all(isinstance(r.metrics.get(k), int) and r.metrics[k] >= 1 for k in ("n", "T", "d")), tid
    # overparam-global measures a d-grid per instance: n and T are its sizes, d is plotted against the share
    r = run_instances(REGISTRY["overparam-global"], [0], profile="quick", seed=0)[0]
    assert (r.metrics.get("n"), r.metrics.get("T"), r.metrics.get("d")) == (4, 6, None)
    assert r.metrics["share_d"] == [2, 3, 4, 8, 16, 32] and len(r.metrics["share_curve"]) == 6
