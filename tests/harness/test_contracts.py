"""The CLI and report contracts a user and CI rely on (README, "Exit codes" and "Verdicts"): exit codes
agree with the statuses in the summary table and with junit.xml; bad arguments exit 2 with one line
before any work is done; replays say what the replayed instance did; resume refuses to change the run."""

import ast
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from checks import Profile, Theorem, register
from checks.cli import main
from checks.harness import verdict_of

# A plugin with a toy theorem (x ~ U(0,1) drawn per instance; the claim "x < 0.97" fails on the few
# instances where the draw exceeds it) and controls whose behaviour the tests choose through the profile.
PLUGIN = '''
import numpy as np
from checks import Profile, Theorem, decide, register, undecided

class _Toy(Theorem):
    reference = "tests"
    profiles = {"quick": Profile(instances=12, min_confirmed=6)}

    def instance(self, rng, ctx):
        return float(rng.uniform())

@register
class Toy(_Toy):
    id = "toy-contract"
    title = "a uniform draw stays below 0.97"
    finding = "draws above 0.97 exist"
    finding_seen = FINDING_SEEN

    def check_below(self, x, state, ctx):
        return decide(x < 0.97, f"x = {x:.3f} >= 0.97", x=x)

@register
class ToyControl(_Toy):
    id = "toy-contract-control"
    title = "control: a uniform draw is non-negative (true, so the control is not refuted)"
    expected = "FAIL"
    control_of = "toy-contract"

    def check_nonneg(self, x, state, ctx):
        return decide(x >= 0, "negative", x=x)
'''


def _refuted_instances(seed=0):
    """Which toy instances draw x >= 0.97 (the harness's own seeding, replayed here)."""
    from checks.harness import instance_seed

    out = []
    for k in range(12):
        gen_ss, _ = instance_seed(seed, "toy-contract", k).spawn(2)
        if np.random.default_rng(gen_ss).uniform() >= 0.97:
            out.append(k)
    return tuple(out)


@pytest.fixture
def plugin(tmp_path):
    def make(finding_seen):
        path = tmp_path / f"toy_{abs(hash(repr(finding_seen)))}.py"
        path.write_text(PLUGIN.replace("FINDING_SEEN", repr(finding_seen)))
        return str(path)
    return make


def _seed_with_refutation():
    for seed in range(50):
        if _refuted_instances(seed):
            return seed
    raise AssertionError("no seed in 0..49 draws x >= 0.97")


def test_control_not_refuted_fails_the_run_and_junit_agrees(tmp_path, plugin, capsys):
    seed = _seed_with_refutation()
    path = plugin({("quick", seed): _refuted_instances(seed)})
    out = tmp_path / "r"
    rc = main(
        ["check", "toy-contract", "--plugin", path, "--seed", str(seed), "--out", str(out), "--no-progress"]
    )
    assert rc == 1
    text = capsys.readouterr().out
    assert "CONTROL NOT REFUTED: toy-contract-control" in text
    rep = json.loads((out / "report.json").read_text())
    status = {t["id"]: t["status"] for t in rep["theorems"]}
    assert status == {"toy-contract": "KNOWN FINDING", "toy-contract-control": "CONTROL NOT REFUTED"}
    suite = ET.parse(out / "junit.xml").getroot()
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "0", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["toy-contract"].find("skipped").get("message").startswith("known finding")
    assert cases["toy-contract-control"].find("failure") is not None


def test_known_finding_is_keyed_to_profile_seed_and_instances(tmp_path, plugin):
    seed = _seed_with_refutation()
    ks = _refuted_instances(seed)
    keyed = aggregate_for(plugin({("quick", seed): ks}), seed)
    assert keyed.verdict == "FAIL" and keyed.known_finding
    # the same refutation on a seed the finding was not seen on is a failure of the run
    other = aggregate_for(plugin({("quick", seed + 1000): ks}), seed)
    assert other.verdict == "FAIL" and not other.known_finding
    # a refuted instance beyond the documented ones is not "known" either
    if len(ks) > 0:
        partial = aggregate_for(plugin({("quick", seed): ks[:-1] or (99,)}), seed)
        assert not partial.known_finding


def aggregate_for(path, seed):
    from checks import catalogue
    from checks.harness import run_theorem
    from checks.theorem import REGISTRY

    REGISTRY.pop("toy-contract", None)
    REGISTRY.pop("toy-contract-control", None)
    catalogue.load_plugin(path)
    return run_theorem(REGISTRY["toy-contract"], profile="quick", seed=seed)


@pytest.mark.parametrize("argv,needle", [
    (["check", "--seed", "-3"], "--seed: must be a non-negative integer, got -3"),
    (["check", "--seed", "abc"], "--seed: must be a non-negative integer"),
    (["assumptions", "--seed", "-1"], "--seed: must be a non-negative integer"),
    (["reproduce", "svm-rank", "--seed", "-1"], "--seed: must be a non-negative integer"),
    (["check", "--profile", "huge"], "invalid choice: 'huge'"),
])
def test_bad_arguments_exit_2_with_one_line(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_bad_baseline_is_refused_before_the_run(tmp_path, capsys, example_plugin):
    bad = tmp_path / "base.json"
    bad.write_text("{not json")
    out = tmp_path / "r"
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress",
               "--baseline", str(bad)])
    assert rc == 2
    assert "not an attnsvm report.json" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists(), "the run must not start with an unusable baseline"


def test_instance_out_of_range_and_replay_reports_the_instance(tmp_path, capsys, example_plugin):
    out = tmp_path / "r"
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress",
               "--instance", "999"])
    assert rc == 2
    assert "--instance 999: softmax-simplex has instances 0..9" in capsys.readouterr().err
    rc = main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress",
               "--instance", "3"])
    text = capsys.readouterr().out
    assert rc == 0, text  # a replayed confirmed instance is PASS/ok (replay runs only the ids named)
    assert "softmax-simplex instance 3: confirmed" in text
    assert "UNEXPECTED" not in text and "VACUOUS" not in text
    rc = main(
        [
            "check",
            "softmax-simplex-control",
            "--plugin",
            example_plugin,
            "--out",
            str(out),
            "--no-progress",
            "--instance",
            "3",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0, text  # the control's counterexample replays as refuted: FAIL, as expected
    assert "softmax-simplex-control instance 3: refuted" in text


def test_resume_refuses_a_different_configuration(tmp_path, capsys, example_plugin):
    out = tmp_path / "r"
    assert (
        main(["check", "softmax-simplex", "--plugin", example_plugin, "--out", str(out), "--no-progress"])
        == 0
    )
    capsys.readouterr()
    rc = main(["check", "--resume", "--profile", "full", "--out", str(out), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--profile 'full' (the run in" in err and "used 'quick'" in err and err.count("\n") == 1
    rc = main(["check", "gd-local", "--resume", "--out", str(out), "--no-progress"])
    assert rc == 2 and "--ids" in capsys.readouterr().err
    # the same arguments, or none, continue the stored run
    assert main(["check", "--resume", "--out", str(out), "--no-progress"]) == 0
    assert main(["check", "--resume", "--seed", "0", "--out", str(out), "--no-progress"]) == 0


def test_narrow_dtypes_convert_exactly_with_a_note_and_lossy_ones_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 3, 4)).astype(np.float32)
    v = np.ones(4, dtype=np.int64)
    f = tmp_path / "f32.npz"
    np.savez(f, X=X, Y=np.array([1, -1] * 3), v=v)
    from numerics.data import AttentionData

    d = AttentionData.load(f)
    assert d.X.dtype == np.float64 and np.array_equal(d.X, X.astype(np.float64))
    assert any("X: float32 converted to float64 (exact)" in n for n in d.notes)
    assert any("v: int64 converted to float64 (exact)" in n for n in d.notes)
    rc = main(["check", "svm-feasibility", "--data", str(f), "--out", str(tmp_path / "r"), "--no-progress"])
    assert rc in (0, 1)
    assert "note: " in capsys.readouterr().err
    big = tmp_path / "big.npz"
    np.savez(big, X=np.full((2, 3, 4), 2**60, dtype=np.int64), Y=np.array([1, -1]))
    rc = main(["check", "--data", str(big), "--out", str(tmp_path / "r2"), "--no-progress"])
    assert rc == 2 and "beyond 2**53" in capsys.readouterr().err


def test_not_applicable_theorems_show_na_in_the_summary(tmp_path, capsys):
    from numerics.data import random_unit_sphere

    f = tmp_path / "d.npz"
    random_unit_sphere(6, 3, 8, rng=np.random.default_rng(1)).save(f)
    main(["check", "loss-assumptions", "--data", str(f), "--out", str(tmp_path / "r"), "--no-progress"])
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.startswith("loss-assumptions")]
    assert rows and all(r[2] == "n/a" and r[3] == "n/a" for r in rows), text


def test_inconclusive_share_bounds_pass():
    c = dict(instances=12, confirmed=7, refuted=0, vacuous=0, inconclusive=5, error=0)
    assert verdict_of(c, 5, 0.25) == "INCONCLUSIVE"  # kq-gd-nuclear's old quick result: 5 of 12 undecided
    assert verdict_of(c, 5, 0.5) == "PASS"
    c = dict(instances=12, confirmed=6, refuted=0, vacuous=8, inconclusive=0, error=0)
    assert verdict_of(c, 5, 0.25) == "VACUOUS"
    assert Profile(instances=8, min_confirmed=5).max_inconclusive is None  # filled in per profile name

    class P(Theorem):
        profiles = {"full": Profile(instances=60, min_confirmed=50)}

    assert P.profile("full").max_inconclusive == 0.2 and P.profile("quick").max_inconclusive == 0.25
    with pytest.raises(ValueError, match="max_inconclusive"):
        Profile(instances=8, min_confirmed=5, max_inconclusive=1.5)


def test_constant_hypotheses_and_predictions_are_refused():
    with pytest.raises(TypeError, match="assume_always always returns the same thing"):
        @register
        class Const(Theorem):
            id = "const-hyp"
            title = "x"

            def assume_always(self, inst, state, ctx):
                return True

            def check_x(self, inst, state, ctx):
                return bool(inst)
    from checks.theorem import _is_constant

    assert _is_constant(ast.parse("held()").body[0].value)
    assert _is_constant(ast.parse("False").body[0].value)
    assert _is_constant(ast.parse('decide(True, "")').body[0].value)
    assert not _is_constant(ast.parse('decide(ok, "why")').body[0].value)
    assert not _is_constant(ast.parse("held(x=x)").body[0].value)
    assert not _is_constant(ast.parse("x > 0").body[0].value)


def test_no_builtin_theorem_has_a_constant_hypothesis_or_prediction():
    from checks import catalogue
    from checks.theorem import REGISTRY, _constant_methods

    catalogue.load_builtin()
    bad = {c.id: _constant_methods(c) for c in REGISTRY.values() if _constant_methods(c)}
    assert not bad, bad


def test_gd_global_control_tests_its_no_b1_b2_hypothesis():
    """The control drops B.1/B.2 by testing that they fail, not by a hypothesis that returns True."""
    from checks import catalogue
    from checks.theorem import REGISTRY

    catalogue.load_builtin()
    ctl = REGISTRY["gd-global-control"]
    assert "B1_or_B2" not in ctl.hypothesis_names()
    assert "selects_opt" not in ctl.prediction_names()


def _toy_results(outcomes, metrics=None):
    from checks.harness import InstanceResult

    return [InstanceResult("toy-mech", k, o, metrics=(metrics or {}).get(k, {}))
            for k, o in enumerate(outcomes)]


def _toy_mechanism_class(mechanism):
    class ToyMech(Theorem):
        id = "toy-mech"
        title = "toy with a finding recognised by mechanism"
        finding = "draws marked 'trap' are a genuine counterexample"
        finding_seen = {("quick", 0): (0,)}
        finding_mechanism = mechanism
        profiles = {"quick": Profile(instances=8, min_confirmed=5)}

        def check_x(self, inst, state, ctx):
            return inst < 1

    return ToyMech


def test_finding_by_mechanism_is_known_on_any_seed_and_only_for_matching_refutations():
    from checks.harness import aggregate

    cls = _toy_mechanism_class(lambda r: r.metrics.get("trap") is True)
    trap = {3: {"trap": True}}
    res = _toy_results(["confirmed"] * 3 + ["refuted"] + ["confirmed"] * 4, trap)
    for seed in (0, 7, 12345):  # not keyed to finding_seen: the mechanism decides
        t = aggregate(cls, res, profile="quick", seed=seed)
        assert t.verdict == "FAIL" and t.known_finding and t.finding_instances == [3]
    # a refutation that is not the mechanism fails the run, even beside a matching one
    res2 = _toy_results(["refuted", "confirmed", "confirmed", "refuted"] + ["confirmed"] * 4, trap)
    t2 = aggregate(cls, res2, profile="quick", seed=0)
    assert not t2.known_finding and t2.finding_instances == [3]


def test_finding_never_hides_the_other_instances():
    from checks.harness import aggregate
    from checks.report import status_of

    cls = _toy_mechanism_class(lambda r: r.metrics.get("trap") is True)
    trap = {0: {"trap": True}}
    # 1 finding, 7 undecided: the rest would be INCONCLUSIVE, so the run fails
    undecided_rest = _toy_results(["refuted"] + ["inconclusive"] * 7, trap)
    t = aggregate(cls, undecided_rest, profile="quick", seed=0)
    assert t.verdict == "FAIL" and not t.known_finding and status_of(t) == "UNEXPECTED"
    # an ERROR beside the finding is not hidden either
    with_error = _toy_results(["refuted", "error"] + ["confirmed"] * 6, trap)
    assert not aggregate(cls, with_error, profile="quick", seed=0).known_finding
    # too few confirmed among the rest: not known
    few = _toy_results(["refuted"] + ["vacuous"] * 4 + ["confirmed"] * 3, trap)
    assert not aggregate(cls, few, profile="quick", seed=0).known_finding
    ok = _toy_results(["refuted"] + ["confirmed"] * 6 + ["inconclusive"], trap)
    assert aggregate(cls, ok, profile="quick", seed=0).known_finding


def test_finding_mechanism_needs_the_finding_text():
    with pytest.raises(TypeError, match="finding_mechanism"):
        @register
        class Bad(Theorem):
            id = "toy-bad-mech"
            title = "t"
            finding_mechanism = staticmethod(lambda r: True)

            def check_x(self, inst, state, ctx):
                return inst < 1
