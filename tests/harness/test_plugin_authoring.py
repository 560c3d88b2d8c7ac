"""What a researcher writing their own theorem as a plugin can rely on (README, "Writing a theorem and its
control"): a sabotage through the softmax reaches grad_W, a declared invariance is reported as such, a control
refuted only by integrity predictions fails the run, a pytest failure replays with --plugin and the instance
indices and writes the report and counterexamples, report.json carries the plugin's sha256, a control can
draw its theorem's instances, and the README's worked example (examples/plugin_theorem.py) runs.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest

from checks import catalogue
from checks.cli import main
from checks.power.matrix import INVARIANT, markdown, run_power
from checks.power.sabotage import sabotage
from checks.testing import assert_verdict_as_expected
from checks.theorem import REGISTRY
from numerics.data import random_unit_sphere
from numerics.objective import grad_W

ROOT = Path(__file__).resolve().parents[2]
AUTHOR = ROOT / "tests" / "data" / "author_plugin.py"


@pytest.fixture
def author_plugin():
    """The fixture plugin, taken out of the registry afterwards (its control deliberately lacks power)."""
    ids = catalogue.load_plugin(AUTHOR)
    yield str(AUTHOR)
    for i in ids:
        sys.modules.pop(REGISTRY.pop(i).__module__, None)


def test_softmax_sabotage_reaches_grad_W_and_a_declared_invariance_is_reported(example_plugin):
    data, W = random_unit_sphere(3, 4, 4, rng=np.random.default_rng(0)), np.eye(4)
    clean = grad_W(data, W)
    with sabotage("softmax-no-normaliser"):  # grad_W once called torch.softmax past the seam (issue 28)
        assert np.abs(grad_W(data, W) - clean).max() > 1e-3 * np.abs(clean).max()
    rep = run_power(["grad-norm-bound"], sabotages=["softmax-no-normaliser", "transposed-gradient"],
                    plugins=[example_plugin])
    row = next(r for r in rep["theorems"] if r["id"] == "grad-norm-bound")
    soft, trans = row["cells"]["softmax-no-normaliser"], row["cells"]["transposed-gradient"]
    assert row["clean"]["verdict"] == "PASS"
    assert soft["status"] == "detected" and soft["verdict"] == "FAIL"  # grad_W saw the broken softmax
    assert soft["refuted_by"]  # the matrix says which prediction caught it
    reason = REGISTRY["grad-norm-bound"].invariant_to["transposed-gradient"]
    assert trans == {"status": INVARIANT, "reason": reason}
    assert rep["survivors"] == []
    assert f"invariant ({trans['reason']})".replace("|", "\\|") in markdown(rep)  # escaped in a table cell


def test_declarations_are_validated_at_registration():
    from checks import Theorem, held, register

    def theorem(**attrs):
        def check_x(self, inst, state, ctx):
            return held(x=float(inst))

        return type("T", (Theorem,), {"id": "author-bad", "title": "t", "check_x": check_x, **attrs})

    with pytest.raises(TypeError, match="invariant_to names unknown sabotage"):
        register(theorem(invariant_to={"no-such-sabotage": "why"}))
    with pytest.raises(TypeError, match="invariant_to must map sabotage names to the reason"):
        register(theorem(invariant_to={"transposed-gradient": ""}))
    with pytest.raises(TypeError, match="plot_scales"):
        register(theorem(plot_scales={"x": "logarithmic"}))
    assert "author-bad" not in REGISTRY


def test_plot_scales_choose_a_panels_scale(tmp_path, example_plugin, monkeypatch):
    """The example's ratio panel is linear, although its values span [0.2, 1] where the automatic rule could
    pick another; a metric without an entry keeps the automatic choice."""
    import matplotlib.axes

    from checks.harness import run_instances
    from checks.report import plot_theorem

    catalogue.load_plugin(example_plugin)
    cls = REGISTRY["grad-norm-bound"]
    results = run_instances(cls, [0, 1], profile="quick", seed=0)
    set_to = []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_yscale", lambda ax, v, **kw: set_to.append(v))
    from checks.harness import aggregate

    plot_theorem(tmp_path, cls, aggregate(cls, results, profile="quick", seed=0), results)
    assert set_to == ["linear"]
    monkeypatch.setattr(cls, "plot_scales", {"ratio": "log"})
    set_to.clear()
    plot_theorem(tmp_path, cls, aggregate(cls, results, profile="quick", seed=0), results)
    assert set_to == ["log"]


def test_a_control_refuted_only_by_integrity_predictions_fails_the_run(tmp_path, author_plugin, capsys):
    out = tmp_path / "run"
    rc = main(["check", "author-integrity-only-control", "--plugin", author_plugin, "--out", str(out),
               "--no-progress", "--workers", "0"])
    (t,) = json.loads((out / "report.json").read_text())["theorems"]
    assert t["verdict"] == "FAIL" and t["status"] == "CONTROL LOST POWER" and rc == 1
    assert t["refuted_by"] == {"float32_reference_agrees": 3} and t["integrity_only"] == [0, 1, 2]
    assert t["refutations"] == {str(k): ["float32_reference_agrees"] for k in range(3)}
    assert "Control lost its power" in (out / "report.md").read_text()


def test_a_pytest_failure_replays_with_the_plugin_and_writes_the_run(tmp_path, author_plugin, capsys):
    with pytest.raises(pytest.fail.Exception) as err:
        assert_verdict_as_expected(REGISTRY["author-integrity-only-control"], out=tmp_path / "out")
    msg = str(err.value)
    assert "the control lost its power" in msg and f"--plugin {author_plugin}" in msg
    lines = [ln.strip() for ln in msg.splitlines() if "--instance" in ln]
    assert [int(shlex.split(ln)[shlex.split(ln).index("--instance") + 1]) for ln in lines] == [0, 1, 2]
    # written as `attnsvm check --out` writes it: the report, results and every counterexample
    out = tmp_path / "out"
    rep = json.loads((out / "report.json").read_text())
    (plugin,) = [p for p in rep["run"]["plugins"] if Path(p["path"]) == AUTHOR]  # pyproject's are listed too
    assert plugin["sha256"] == hashlib.sha256(AUTHOR.read_bytes()).hexdigest()
    assert sorted(p.name for p in (out / "counterexamples").glob("*.npz")) == [
        f"author-integrity-only-control-{k}.npz" for k in range(3)]
    assert (out / "report.md").exists() and len((out / "results.jsonl").read_text().splitlines()) == 3
    # the replay line runs (exit 1: the control still has no power), it does not answer "unknown theorem id"
    argv = shlex.split(lines[0].split("#")[0])[1:]
    assert main([*argv, "--out", str(tmp_path / "replay"), "--no-progress", "--workers", "0"]) == 1


def test_the_worked_example_and_its_sharp_control(tmp_path, example_plugin, capsys):
    """The README's example: the theorem PASSes, its control (0.95 B) is refuted exactly on the boundary
    instances, which it shares with the theorem (same_instances_as), by the claim and not by integrity; on
    given data the control does not apply and the run passes."""
    out = tmp_path / "run"
    rc = main(["check", "grad-norm-bound", "grad-norm-bound-control", "--plugin", example_plugin, "--out",
               str(out), "--no-progress", "--workers", "0"])
    by = {t["id"]: t for t in json.loads((out / "report.json").read_text())["theorems"]}
    thm, ctl = by["grad-norm-bound"], by["grad-norm-bound-control"]
    assert rc == 0 and thm["status"] == "ok" and ctl["status"] == "ok"
    assert ctl["refutations"] == {str(k): ["bound"] for k in (0, 2, 4, 6)} and ctl["integrity_only"] == []
    ratio = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        ratio.setdefault(r["instance"], []).append(r["metrics"]["ratio"])
    assert all(a == b for a, b in ratio.values())  # the same instances, to the last bit
    assert all(abs(ratio[k][0] - 1) < 1e-9 for k in (0, 2, 4, 6))  # the bound is attained at the boundary
    assert thm["source"] == f"{example_plugin}::GradNormBound"  # its mathematics: the plugin's docstring
    assert "Mathematics: the docstring of `GradNormBound`" in (out / "report.md").read_text()
    data = tmp_path / "data.npz"
    random_unit_sphere(5, 4, 3, rng=np.random.default_rng(0)).save(data)
    rc = main(["check", "grad-norm-bound", "grad-norm-bound-control", "--plugin", example_plugin, "--data",
               str(data), "--out", str(tmp_path / "data"), "--no-progress", "--workers", "0"])
    by = {t["id"]: t for t in json.loads((tmp_path / "data" / "report.json").read_text())["theorems"]}
    assert rc == 0 and by["grad-norm-bound"]["verdict"] == "PASS"
    assert by["grad-norm-bound-control"]["status"] == "n/a"


def test_reasons_are_grouped_by_template_with_the_numbers_in_the_metrics(author_plugin):
    from checks.harness import InstanceResult, aggregate

    cls = REGISTRY["author-loose-bound"]
    rs = [InstanceResult(cls.id, k, "refuted", {}, {"bound": "failed"}, {"grad_norm": g},
                         f"bound: the gradient norm {g:.3g} exceeds 1") for k, g in enumerate((1.234, 5.678))]
    res = aggregate(cls, rs, profile="quick", seed=0)
    assert res.reasons == {"refuted: bound: the gradient norm … exceeds 1": 2}
    assert res.metrics["grad_norm"]["max"] == 5.678
