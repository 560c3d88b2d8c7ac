"""Honest aggregation (issue 23): a known finding is quiet only when the theorem's other instances decide it
on their own, a theorem mostly vacuous on its own random family does not PASS, and a family redraw is
counted and reported. Toy plugin theorems, so the rules are tested apart from any numerics."""

import json

import pytest

from checks.cli import main

PLUGIN = '''
from checks import Profile, Theorem, decide, failed, held, register, undecided

class _Toy(Theorem):
    reference = "tests"
    profiles = {"quick": Profile(instances=10, min_confirmed=5)}

    def instance(self, rng, ctx):
        return {"k": ctx.instance, "x": float(rng.uniform())}

    def check_ok(self, inst, st, ctx):
        return held(x=inst["x"])

@register
class Mostly(_Toy):
    id = "toy-mostly-vacuous"
    title = "true, but 3 of 10 instances miss a hypothesis"
    def assume_drawn_well(self, inst, st, ctx):
        return decide(inst["k"] >= 3, "a bad draw")

@register
class MostlyControl(_Toy):
    id = "toy-mostly-vacuous-control"
    title = "control"
    expected = "FAIL"
    control_of = "toy-mostly-vacuous"
    def check_ok(self, inst, st, ctx):
        return failed("false", x=inst["x"])

@register
class Redrawn(_Toy):
    id = "toy-redrawn"
    title = "true; a draw below 0.3 misses the family hypothesis and is drawn again"
    redraw_on = ("drawn_well",)
    def assume_drawn_well(self, inst, st, ctx):
        return decide(inst["x"] >= 0.3, f"x = {inst['x']:.2f} < 0.3")

@register
class RedrawnControl(MostlyControl):
    id = "toy-redrawn-control"
    control_of = "toy-redrawn"

def _mechanism(r):
    return r.metrics.get("trapped") is True

@register
class Finding(_Toy):
    id = "toy-finding"
    title = "true except a documented mechanism on instance 0; the rest undecided"
    finding = "instance 0 is trapped (a documented counterexample)"
    finding_seen = {("quick", 0): (0,)}
    finding_mechanism = staticmethod(_mechanism)
    def check_ok(self, inst, st, ctx):
        if inst["k"] == 0:
            return failed("trapped", trapped=True)
        return undecided("budget too small") if inst["k"] < 6 else held()

@register
class FindingControl(MostlyControl):
    id = "toy-finding-control"
    control_of = "toy-finding"

@register
class Undecidable(_Toy):
    id = "toy-undecidable"
    title = "true, but its algorithm cannot decide it (documented, measured)"
    undecidable = "the step is below the rounding of the iterate"
    def check_ok(self, inst, st, ctx):
        return undecided("cannot move in float64") if inst["k"] < 10 else held()  # 10 instances

@register
class UndecidableControl(MostlyControl):
    id = "toy-undecidable-control"
    control_of = "toy-undecidable"

@register
class UndecidableRefuted(Undecidable):
    id = "toy-undecidable-refuted"
    def check_ok(self, inst, st, ctx):
        return failed("refuted") if inst["k"] == 0 else undecided("cannot move in float64")

@register
class UndecidableRefutedControl(MostlyControl):
    id = "toy-undecidable-refuted-control"
    control_of = "toy-undecidable-refuted"
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """One plugin file for the module (a plugin path is loaded once per process)."""
    path = tmp_path_factory.mktemp("plugin") / "toy_aggregation.py"
    path.write_text(PLUGIN)
    return path


def _run(tmp_path, plugin, tid):
    out = tmp_path / tid
    rc = main(["check", tid, "--plugin", str(plugin), "--out", str(out), "--no-progress", "--workers", "1"])
    rep = json.loads((out / "report.json").read_text())
    return rc, {t["id"]: t for t in rep["theorems"]}, out


def test_a_theorem_30_percent_vacuous_on_its_own_family_fails_the_run(tmp_path, plugin, capsys):
    rc, by_id, _ = _run(tmp_path, plugin, "toy-mostly-vacuous")
    t = by_id["toy-mostly-vacuous"]
    assert t["counts"]["confirmed"] == 7 and t["counts"]["vacuous"] == 3  # 7 >= min_confirmed 5
    assert t["verdict"] == "INCONCLUSIVE" and rc == 1  # but 30 % > 25 % vacuous: not shown


def test_a_family_redraw_is_counted_and_decides(tmp_path, plugin, capsys):
    rc, by_id, out = _run(tmp_path, plugin, "toy-redrawn")
    t = by_id["toy-redrawn"]
    assert t["verdict"] == "PASS" and rc == 0
    draws = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["theorem"] == "toy-redrawn":
            draws[r["instance"]] = r["metrics"]["redraws"]
            assert r["outcome"] == "confirmed" and r["metrics"]["x"] >= 0.3  # the draw that stands
    assert set(draws) == set(range(10)) and max(draws.values()) >= 1  # some instance needed a redraw
    assert t["metrics"]["redraws"]["max"] == max(draws.values())  # the report shows the draws


def test_a_known_finding_with_the_rest_undecided_fails_the_run(tmp_path, plugin, capsys):
    rc, by_id, _ = _run(tmp_path, plugin, "toy-finding")
    t = by_id["toy-finding"]
    assert t["verdict"] == "FAIL" and t["finding_instances"] == [0]  # the mechanism recognises instance 0
    assert t["known_finding"] is False and t["status"] != "KNOWN FINDING" and rc == 1  # 5 undecided of 9


def test_a_documented_undecidable_theorem_is_quiet_but_never_hides_a_refutation(tmp_path, plugin, capsys):
    """Theorem.undecidable: INCONCLUSIVE is reported UNDECIDABLE with its reason and does not fail the run;
    one refuted instance still does (FAIL is never covered by it)."""
    rc, by_id, out = _run(tmp_path, plugin, "toy-undecidable")
    t = by_id["toy-undecidable"]
    assert t["verdict"] == "INCONCLUSIVE" and t["status"] == "UNDECIDABLE" and rc == 0
    assert "UNDECIDABLE" in capsys.readouterr().out
    assert "below the rounding" in (out / "report.md").read_text()
    rc, by_id, _ = _run(tmp_path, plugin, "toy-undecidable-refuted")
    assert by_id["toy-undecidable-refuted"]["verdict"] == "FAIL" and rc == 1


def test_a_pytest_failure_of_a_plugin_theorem_names_a_replay_that_loads_the_plugin(tmp_path, plugin, capsys):
    """checks.testing.assert_verdict_as_expected: the failure names the replay line with --plugin and one
    line per instance behind the verdict (--instance K), and that line runs (issue 28, item 4)."""
    import shlex

    from checks import catalogue
    from checks.testing import assert_verdict_as_expected
    from checks.theorem import REGISTRY

    catalogue.load_plugin(plugin)
    with pytest.raises(pytest.fail.Exception) as err:
        assert_verdict_as_expected(REGISTRY["toy-mostly-vacuous"])
    msg = str(err.value)
    assert f"--plugin {plugin}" in msg
    lines = [ln.strip() for ln in msg.splitlines() if "--instance" in ln]
    assert len(lines) == 3 and all("# vacuous" in ln for ln in lines)  # instances 0, 1, 2
    argv = shlex.split(lines[0].split("#")[0])[1:]  # drop the program name
    assert main([*argv, "--out", str(tmp_path / "replay"), "--no-progress", "--workers", "0"]) == 1
    assert "instance 0: vacuous" in capsys.readouterr().out  # a replay, not "unknown theorem id" (exit 2)
