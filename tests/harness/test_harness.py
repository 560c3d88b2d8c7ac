"""The harness itself: verdict rules, seeding, reports, CLI exit codes, baseline, plugins."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checks import Profile, Theorem, decide, held, register, undecided
from checks.cli import main
from checks.harness import aggregate, instance_seed, run_instances, verdict_of

ROOT = Path(__file__).resolve().parents[2]


def counts(**kw):
    c = {"instances": 0, "confirmed": 0, "refuted": 0, "vacuous": 0, "inconclusive": 0, "error": 0}
    c.update(kw)
    c["instances"] = kw.get("instances", sum(v for k, v in kw.items() if k != "instances"))
    return c


@pytest.mark.parametrize("c,expected", [
    (counts(confirmed=8), "PASS"),
    (counts(confirmed=7, refuted=1), "FAIL"),
    (counts(confirmed=7, error=1), "ERROR"),
    (counts(confirmed=1, refuted=1, error=1), "FAIL"),
    (counts(confirmed=2, vacuous=6), "VACUOUS"),
    (counts(confirmed=2, inconclusive=6), "INCONCLUSIVE"),
    (counts(confirmed=5, inconclusive=3), "PASS"),
])
def test_verdict_rules(c, expected):
    assert verdict_of(c, min_confirmed=5) == expected


def test_instance_seeds_are_distinct_and_stable():
    a = instance_seed(0, "x", 3).generate_state(2).tolist()
    assert a == instance_seed(0, "x", 3).generate_state(2).tolist()
    assert a != instance_seed(0, "x", 4).generate_state(2).tolist()
    assert a != instance_seed(0, "y", 3).generate_state(2).tolist()
    assert a != instance_seed(1, "x", 3).generate_state(2).tolist()


class _Toy(Theorem):
    id = "toy-harness"
    title = "toy"
    profiles = {"quick": Profile(instances=6, min_confirmed=3, batch=4)}

    def instance(self, rng, ctx):
        return float(rng.uniform())

    def assume_big(self, x, state, ctx):
        return x > 0.2

    def check_small(self, x, state, ctx):
        if x > 0.9:
            return undecided("too close to call", x=x)
        if ctx.instance == 5:
            raise RuntimeError("boom")
        return decide(x < 2, "never", x=x)


def test_outcomes_errors_are_isolated_and_counted():
    res = run_instances(_Toy, list(range(6)), profile="quick", seed=0)
    assert len(res) == 6
    by_k = {r.instance: r for r in res}
    assert by_k[5].outcome in ("error", "vacuous")
    if by_k[5].outcome == "error":
        assert "RuntimeError: boom" in by_k[5].reason
    t = aggregate(_Toy, res, profile="quick", seed=0)
    assert sum(t.counts[o] for o in ("confirmed", "refuted", "vacuous", "inconclusive", "error")) == 6
    assert t.hypotheses["big"]["tested"] == 6


def test_registering_bad_theorems_fails_loudly():
    with pytest.raises(TypeError, match="no check_"):
        @register
        class NoChecks(Theorem):
            id = "no-checks"
            title = "x"

    with pytest.raises(TypeError, match="expected must be PASS or FAIL"):
        @register
        class BadExpected(Theorem):
            id = "bad-exp"
            title = "x"
            expected = "MAYBE"

            def check_x(self, *a):
                return held()


def test_cli_plugin_run_reports_and_exit_codes(tmp_path, example_plugin):
    out = tmp_path / "r"
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress"])
    assert rc == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["schema"] == 1
    ids = [t["id"] for t in rep["theorems"]]
    assert ids == ["softmax-simplex", "softmax-simplex-control"]  # a theorem brings its control
    thm, ctl = rep["theorems"]
    assert thm["verdict"] == "PASS" and ctl["verdict"] == "FAIL" and ctl["expected"] == "FAIL"
    for key in ("id", "title", "reference", "statement", "expected", "verdict", "counts", "hypotheses",
                "metrics", "counterexamples", "reproduce"):
        assert key in thm
    assert ctl["counterexamples"], "a refuted control saves its counterexamples"
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == thm["counts"]["instances"] + ctl["counts"]["instances"]
    assert {"theorem", "instance", "outcome"} <= set(json.loads(lines[0]))
    for f in ("report.md", "report.html", "junit.xml", "figures/softmax-simplex.png"):
        assert (out / f).exists(), f
    html = (out / "report.html").read_text()
    assert "data:image/png;base64" in html  # self-contained

    # baseline: same verdicts -> 0; a changed verdict -> 1 and named
    base = tmp_path / "baseline.json"
    rep["theorems"][0]["verdict"] = "FAIL"
    base.write_text(json.dumps(rep))
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress",
               "--baseline", str(base)])
    assert rc == 1
    # a baseline made with another seed (or profile, or data) is not comparable: said, not failed
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress",
               "--baseline", str(base), "--seed", "5"])
    assert rc == 0


def test_cli_bad_usage_exits_2(tmp_path, capsys):
    assert main(["check", "no-such-theorem", "--out", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown theorem id 'no-such-theorem'" in err and "\n" == err[-1] and err.count("\n") == 1
    assert main(["check", "--plugin", str(tmp_path / "missing.py"), "--out", str(tmp_path)]) == 2
    assert main(["check", "--data", str(tmp_path / "missing.npz"), "--out", str(tmp_path)]) == 2
    assert main(["check", "--resume", "--out", str(tmp_path / "nothing")]) == 2


def test_python_m_checks_list_json():
    r = subprocess.run(
        [sys.executable, "-m", "checks", "list", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)
    assert entries and {"id", "title", "reference", "expected", "control_of"} <= set(entries[0])
    # every theorem has a negative control, every control names an existing theorem
    ids = {e["id"] for e in entries}
    thms = {e["id"] for e in entries if not e["control_of"]}
    controlled = {e["control_of"] for e in entries if e["control_of"]}
    assert controlled <= ids
    assert thms <= controlled, f"theorems without a negative control: {sorted(thms - controlled)}"
    assert all(e["expected"] == "FAIL" for e in entries if e["control_of"])
