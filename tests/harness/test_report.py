"""The rendered report: maths as MathML, decision criteria, sizes, counts table, summary/TOC/details,
per-counterexample replay lines, whole reasons, and figures against the GD iteration."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from checks import Criterion, Profile, Theorem, catalogue, held, register
from checks.harness import InstanceResult, aggregate, run_instances
from checks.report import curve_series, inconclusive_text, math_html, plot_theorem, sizes_text
from checks.report.plots import _set_yscale
from checks.runner import run_check
from checks.theorem import REGISTRY, find_data
from numerics.data import random_unit_sphere

LONG_TAIL = " ".join(f"detail{i}" for i in range(80))  # a reason far longer than any old cut (~200 chars)

PLUGIN = f'''
from checks import Criterion, Profile, Theorem, failed, held, register
from numerics.data import random_unit_sphere

ITS = [0, 10, 100, 1000]


@register
class ReportToy(Theorem):
    id = "report-toy"
    title = "toy theorem for the report tests"
    reference = "TLTO §9 (toy)"
    theorem_number = "TLTO Thm 99"
    statement = r"\\frac{{W(k)}}{{\\|W(k)\\|_F}} \\to \\frac{{W^{{mm}}}}{{\\|W^{{mm}}\\|_F}}"
    profiles = {{"quick": Profile(instances=4, min_confirmed=2)}}
    plot_metric = "err"
    criteria = (Criterion("1 - corr(W(k), W^mm) at the last iterate", "<", 1e-2, plot_metric="err_curve"),)

    def instance(self, rng, ctx):
        return {{"data": random_unit_sphere(3, 4, 5, rng=rng), "k": ctx.instance}}

    def check_converges(self, inst, state, ctx):
        curve = [1.0, 0.1, 0.01, 1e-3 if inst["k"] != 3 else 0.5]
        m = dict(err=curve[-1], err_curve=curve, err_iterations=ITS)
        if inst["k"] == 3:
            return failed("1 - corr = 0.5 at the last iterate {LONG_TAIL} END-OF-REASON", **m)
        return held(**m)


@register
class ReportToyControl(ReportToy):
    id = "report-toy-control"
    title = "toy control without criteria"
    expected = "FAIL"
    control_of = "report-toy"
    criteria = ()
'''


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    plugin = root / "toy_plugin.py"
    plugin.write_text(PLUGIN)
    out = root / "out"
    code, rep, _ = run_check(["report-toy"], plugins=[str(plugin)], out=out, progress=False)
    return code, out, plugin


def test_statement_renders_as_mathml_with_a_fallback(monkeypatch):
    m = math_html(r"\frac{a}{b} \le \|W\|_F")
    assert "<math" in m and "<mfrac>" in m
    import latex2mathml.converter

    def boom(*a, **k):
        raise ValueError("unsupported")

    monkeypatch.setattr(latex2mathml.converter, "convert", boom)
    fb = math_html(r"a < b \weird")
    assert fb.startswith("<code") and "a &lt; b \\weird" in fb  # escaped source, never a crash


def test_every_builtin_statement_converts_to_mathml():
    catalogue.load_builtin()
    from latex2mathml.converter import convert

    classes = catalogue.ordered()
    assert len(classes) > 10
    for cls in classes:
        if cls.statement:
            assert "<math" in convert(cls.statement), cls.id  # the converter itself, not the fallback


def test_report_json_has_criteria_number_and_sizes(toy_run):
    code, out, _ = toy_run
    assert code == 1  # report-toy is refuted on instance 3: UNEXPECTED fails the run
    rep = json.loads((out / "report.json").read_text())
    thm = {t["id"]: t for t in rep["theorems"]}
    toy, ctl = thm["report-toy"], thm["report-toy-control"]
    assert toy["criteria"] == [
        {
            "name": "1 - corr(W(k), W^mm) at the last iterate",
            "rule": "<",
            "value": 1e-2,
            "plot_metric": "err_curve",
        }
    ]
    assert toy["theorem_number"] == "TLTO Thm 99" and ctl["criteria"] == []
    for k, v in (("n", 3), ("T", 4), ("d", 5)):  # recorded by the default sizes hook from inst["data"]
        assert toy["metrics"][k]["min"] == toy["metrics"][k]["max"] == v


def test_html_summary_toc_details_counts_criteria(toy_run):
    _, out, _ = toy_run
    page = (out / "report.html").read_text()
    assert page.index("id='summary'") < page.index("<nav id='toc'>") < page.index("<details class='thm'")
    assert "Failed the run: why" in page and "<a href='#report-toy'>report-toy</a>" in page
    # the failing theorem is open, the passing control (FAIL as expected) collapsed
    assert "<details class='thm' id='report-toy' open>" in page
    assert "<details class='thm' id='report-toy-control'>" in page
    assert "<table class='counts'><tr><th>instances</th><th>confirmed</th>" in page
    assert "<td>1 - corr(W(k), W^mm) at the last iterate</td><td>&lt;</td><td>0.01</td>" in page
    assert "criteria not declared" in page  # the control declares none
    assert "TLTO Thm 99 — TLTO §9 (toy)" in page
    assert "Instance sizes: n 3, T 4, d 5" in page
    assert page.count("<math") >= 2 and "Statement (LaTeX)" not in page
    assert "inconclusive share 0% (0 of 4 non-vacuous instances); PASS needs at most 25% inconclusive" in page
    assert "id='run-settings'" in page and "tolerances." in page and "versions.numpy" in page
    assert 'Counts: {"instances"' not in page  # no raw JSON dict


def test_replay_lines_per_counterexample_and_whole_reasons(toy_run):
    _, out, plugin = toy_run
    page = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    line = f"attnsvm check report-toy --profile quick --seed 0 --instance 3 --plugin {plugin}"
    assert (out / "counterexamples" / "report-toy-3.replay.txt").read_text().strip() == line
    assert f"<code>{line}</code>" in page and f"`{line}`" in md
    for text in (page, md):
        assert LONG_TAIL + " END-OF-REASON" in text  # whole, not cut
    assert "$\\frac{W(k)}" in md  # report.md keeps $...$ for GitHub
    assert "- 1 - corr(W(k), W^mm) at the last iterate < 0.01" in md and "criteria not declared" in md


def test_figure_series_use_the_recorded_iterations(toy_run):
    _, out, _ = toy_run
    results = [
        InstanceResult("t", 0, "confirmed", metrics={"err_curve": [1, 0.1], "err_iterations": [0, 50]}),
        InstanceResult("t", 1, "refuted", metrics={"err_curve": [1, 0.5, 0.4], "iterations": [0, 5, 9]}),
        InstanceResult("t", 2, "confirmed", metrics={"err_curve": [1, 0.2], "err_iterations": [0]}),
        InstanceResult("t", 3, "confirmed", metrics={"other": 1.0}),
    ]
    s = curve_series(results, "err_curve")
    assert [x["instance"] for x in s] == [0, 1, 2]
    assert s[0]["x"] == [0, 50] and s[0]["iterations"] and s[0]["outcome"] == "confirmed"
    assert s[1]["x"] == [0, 5, 9] and s[1]["iterations"]  # the generic `iterations` list
    assert s[2]["x"] == [0, 1] and not s[2]["iterations"]  # wrong length: record index, said so
    assert (out / "figures" / "report-toy.png").stat().st_size > 1000


def test_yscale_log_for_errors_and_wide_spans():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        assert _set_yscale(ax, [1.0, 2.0, 3.0], error_like=False) == "linear"
        assert _set_yscale(ax, [0.5, 0.1], error_like=True) == "log"  # 1 - corr: log even over one decade
        assert _set_yscale(ax, [1.0, 3.5e20], error_like=False) == "log"
        assert _set_yscale(ax, [-0.5, 0.0, 2.0, 3.5e20], error_like=False) == "symlog"  # the loss outlier
        ticks = [float(y) for y in ax.yaxis.get_major_locator()()]
        assert 0.0 in ticks and len(ticks) <= 10  # at most ~8 labelled decades (3.5e20 spans 21)
        assert min(abs(y) for y in ticks if y) >= 0.5  # no label squeezed into the linear part beside 0
    finally:
        plt.close(fig)


def test_criteria_declaration_is_validated():
    with pytest.raises(ValueError):
        Criterion("", "<", 1.0)

    class Bad(Theorem):
        id = "report-bad-criteria"
        title = "bad"
        criteria = [("x", "<", 1)]

        def instance(self, rng, ctx):
            return float(rng.uniform())

        def check_x(self, x, state, ctx):
            return held() if x < 2 else held(x=x)

    with pytest.raises(TypeError, match="criteria must be a tuple of checks.Criterion"):
        register(Bad)
    assert "report-bad-criteria" not in REGISTRY


def test_sizes_hook_default_and_override():
    data = random_unit_sphere(2, 3, 4, rng=np.random.default_rng(0))
    assert find_data(data) is data and find_data((1.0, data)) is data and find_data({"data": data}) is data
    assert find_data({"x": 1}) is None

    class Sized(Theorem):
        id = "report-sized"
        title = "sized"
        profiles = {"quick": Profile(instances=2, min_confirmed=1)}

        def instance(self, rng, ctx):
            return (data, ctx.instance)

        def check_x(self, inst, state, ctx):
            return held(k=inst[1])

    r = run_instances(Sized, [0], profile="quick", seed=0)[0]
    assert {k: r.metrics[k] for k in ("n", "T", "d")} == {"n": 2, "T": 3, "d": 4}

    class SizedM(Sized):
        id = "report-sized-m"

        def sizes(self, inst):
            return {**super().sizes(inst), "m": 7}

    r = run_instances(SizedM, [0], profile="quick", seed=0)[0]
    assert r.metrics["m"] == 7 and r.metrics["d"] == 4 and r.outcome == "confirmed"


def test_sizes_shown_for_vacuous_instances_and_no_empty_figure(tmp_path):
    """On given data that miss the hypotheses every instance is vacuous: the sizes still show, and a
    figure with nothing to plot is not drawn (nor a stale one kept)."""
    data = random_unit_sphere(2, 3, 4, rng=np.random.default_rng(0))

    class Unmet(Theorem):
        id = "report-unmet"
        title = "unmet"
        profiles = {"quick": Profile(instances=3, min_confirmed=1)}

        def instance(self, rng, ctx):
            return (data, ctx.instance)

        def assume_big(self, inst, state, ctx):
            return inst[1] > 10

        def check_x(self, inst, state, ctx):
            return held(k=inst[1])

    res = run_instances(Unmet, [0, 1, 2], profile="quick", seed=0)
    t = aggregate(Unmet, res, profile="quick", seed=0)
    assert t.verdict == "VACUOUS" and sizes_text(t) == "n 2, T 3, d 4" and "k" not in t.metrics
    stale = tmp_path / "figures" / "report-unmet.png"
    stale.parent.mkdir()
    stale.write_bytes(b"old")
    assert plot_theorem(tmp_path, Unmet, t, res) is None and not stale.exists()
    assert "no instance met the hypotheses, so none was decided" in inconclusive_text(t)


def test_markdown_summary_first(toy_run):
    _, out, _ = toy_run
    md = (out / "report.md").read_text()
    assert md.index("## Summary") < md.index("## Contents") < md.index("## report-toy —")
    assert re.search(
        r"- \[report-toy\]\(#report-toy\): UNEXPECTED, FAIL \(expected PASS\)\n  - refuted: ", md
    )
    assert Path(out / "report.md").exists()


def test_curve_series_against_radius_and_dimension():
    results = [
        InstanceResult("t", 0, "confirmed", metrics={"gap_curve": [0.3, 0.1], "gap_radii": [1.0, 2.0]}),
        InstanceResult("t", 1, "confirmed", metrics={"share_curve": [0.6, 0.9], "share_d": [3, 16]}),
    ]
    r, d = curve_series(results[:1], "gap_curve")[0], curve_series(results[1:], "share_curve")[0]
    assert r["x"] == [1.0, 2.0] and r["xlabel"] == "radius R"
    assert d["x"] == [3.0, 16.0] and d["xlabel"] == "d"  # overparam-global: the share against d


def test_plugin_provenance_is_recorded(tmp_path):
    """report.json's run names every plugin file with its path, sha256, how it was loaded and its git state
    (issue 28: plugins loaded from pyproject showed as "plugins": [])."""
    import hashlib
    import json

    from checks.runner import run_check

    plugin = tmp_path / "own_theorem.py"
    plugin.write_text(PLUGIN.replace("report-toy", "prov-toy"))
    run_check(["prov-toy"], plugins=[str(plugin)], out=tmp_path / "out", progress=False, workers=0,
              figures=False)
    run = json.loads((tmp_path / "out" / "report.json").read_text())["run"]
    mine = [p for p in run["plugins"] if p["source"] == "--plugin"]
    assert mine == [{"path": str(plugin.resolve()), "sha256": hashlib.sha256(plugin.read_bytes()).hexdigest(),
                     "source": "--plugin", "git": None}]  # tmp_path is in no git repository
    assert any(p["source"] == "pyproject.toml" and p["git"] for p in run["plugins"])  # the example plugin
