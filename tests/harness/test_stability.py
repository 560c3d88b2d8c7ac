"""``attnsvm stability``: the sweep over seeds (files, resume, replay lines, exit codes) and, as a regression
test, the expected verdict on a few seeds other than the committed baseline's seed 0 for a fast subset of the
catalogue (`tox -e stability` runs the README's 50-seed quick sweep of everything)."""

import json

import pytest

from checks.cli import main
from checks.stability import parse_seeds

#: A fast subset, one per family that once raised a false alarm on some seed other than 0 (issue 29): the
#: sequence SVM with its finding recognised by mechanism, the regularisation paths, GD, Gen-SVM, the
#: over-parameterisation checks; plus the SVM basics. About 1 s per theorem and seed.
FAST_SUBSET = ["seq-svm", "svm-feasibility", "gd-global-normalized", "rp-w-frobenius", "overparam-support",
               "gd-local-normalized", "kq-divergence"]
#: Seeds other than the baseline's 0 (the sweep in the README covers 0–49).
SEEDS = "1:3"

TOY = '''
from checks import Profile, Theorem, decide, register

class _Toy(Theorem):
    reference = "tests"
    profiles = {"quick": Profile(instances=6, min_confirmed=3)}

    def instance(self, rng, ctx):
        return float(rng.uniform())

@register
class ToyStab(_Toy):
    id = "toy-stab"
    title = "a uniform draw stays below 0.9 (false on some seeds)"

    def check_below(self, x, state, ctx):
        return decide(x < 0.9, f"x = {x:.3f} >= 0.9", x=x)

@register
class ToyStabControl(_Toy):
    id = "toy-stab-control"
    title = "control: a uniform draw is below 0.5 (false)"
    expected = "FAIL"
    control_of = "toy-stab"

    def check_half(self, x, state, ctx):
        return decide(x < 0.5, f"x = {x:.3f} >= 0.5", x=x)
'''


def test_parse_seeds():
    assert parse_seeds("0:4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3") == [3] and parse_seeds("2,5") == [2, 5]


@pytest.mark.parametrize("argv,needle", [
    (["stability", "--seeds", "5:2"], "is empty"),
    (["stability", "--seeds", "a:b"], "--seeds must be A:B"),
    (["stability", "--seeds=-1:2"], "--seeds must be"),
    (["stability"], "--seeds A:B is required"),
    (["stability", "no-such-theorem", "--seeds", "0:1"], "no-such-theorem"),
    (["stability", "--seeds", "0:1", "--workers", "-1"], "--workers must be a non-negative integer"),
])
def test_bad_arguments_exit_2_with_one_line(argv, needle, tmp_path, capsys):
    try:
        rc = main([*argv, "--out", str(tmp_path / "s"), "--no-progress"])
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_sweep_counts_seeds_names_replays_and_resumes(tmp_path, capsys):
    plugin = tmp_path / "toy.py"
    plugin.write_text(TOY)
    out = tmp_path / "stab"
    argv = ["stability", "toy-stab", "--plugin", str(plugin), "--seeds", "0:9", "--out", str(out),
            "--workers", "1", "--no-progress"]
    rc = main(argv)
    summary = json.loads((out / "stability.json").read_text())
    by_id = {t["id"]: t for t in summary["theorems"]}
    toy, ctl = by_id["toy-stab"], by_id["toy-stab-control"]
    # the harness's own per-seed reports decide, the sweep only counts them
    bad_seeds = sorted(s for v in toy["unexpected"].values() for s in v)
    for s in range(10):
        rep = json.loads((out / f"seed-{s}" / "report.json").read_text())
        verdict = {t["id"]: t["verdict"] for t in rep["theorems"]}
        assert (verdict["toy-stab"] == "PASS") == (s not in bad_seeds)
    assert toy["seeds"] == 10 and 0 < toy["as_expected"] < 10  # 6 draws above 0.9 on some seeds, not all
    assert ctl["as_expected"] == 10
    assert rc == 1  # some seed is unexpected
    # every unexpected seed names the instance(s) behind it, with a replay line that runs
    assert len(toy["replays"]) >= len(bad_seeds)
    assert all(line.startswith("attnsvm check toy-stab --profile quick --seed ") and "--instance" in line
               and f"--plugin {plugin}" in line for line in toy["replays"])
    lo, hi = toy["wilson95"]
    assert lo < toy["share"] < hi
    for name in ("stability.md", "stability.csv", "stability.png", "stability-run.json"):
        assert (out / name).exists()
    assert "toy-stab" in (out / "stability.csv").read_text()
    # --resume keeps the finished seeds (their reports are not rewritten) and refuses another configuration
    stamp = (out / "seed-3" / "report.json").stat().st_mtime_ns
    assert main(["stability", "--resume", "--out", str(out), "--no-progress", "--workers", "1"]) == rc
    assert (out / "seed-3" / "report.json").stat().st_mtime_ns == stamp
    capsys.readouterr()
    assert main(["stability", "--resume", "--out", str(out), "--profile", "full", "--no-progress"]) == 2
    assert "conflicting" in capsys.readouterr().err


def test_fast_subset_has_its_expected_verdict_on_seeds_other_than_0(tmp_path):
    """A regression test on seeds the committed baseline never sees: every theorem PASSes (or FAILs on its
    documented finding alone, recognised by mechanism) and every control FAILs, on each seed."""
    out = tmp_path / "stab"
    rc = main(["stability", *FAST_SUBSET, "--seeds", SEEDS, "--out", str(out), "--workers", "1",
               "--no-progress"])
    summary = json.loads((out / "stability.json").read_text())
    bad = {t["id"]: (t["unexpected"], t["replays"][:3]) for t in summary["theorems"]
           if t["as_expected"] < t["seeds"]}
    assert rc == 0 and not bad, bad
    assert {t["id"] for t in summary["theorems"]} >= set(FAST_SUBSET)
