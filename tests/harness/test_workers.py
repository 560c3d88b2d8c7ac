"""`attnsvm check --workers N`: the process pool gives the same verdicts, metrics and instance results as one
worker (same seed), apart from wall-clock timings; bad values are refused with exit 2."""

import json
from pathlib import Path

import pytest

from checks.cli import main
from checks.runner import run_check

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"  # the plugin fixtures every tier shares
SLOW = str(DATA / "slow_plugin.py")


def _timing_free(x):
    """Drop wall-clock fields: ``seconds`` and metrics named ``*_seconds`` (they differ run to run)."""
    if isinstance(x, dict):
        return {
            k: _timing_free(v) for k, v in x.items() if k != "seconds" and not str(k).endswith("_seconds")
        }
    if isinstance(x, list):
        return [_timing_free(v) for v in x]
    return x


def _outputs(out: Path):
    rep = json.loads((out / "report.json").read_text())
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    by_key = {(x["theorem"], x["instance"]): _timing_free(x) for x in lines}
    assert len(by_key) == len(lines), "an instance was streamed twice"
    return _timing_free(rep["theorems"]), by_key, sorted(p.name for p in (out / "figures").glob("*.png"))


def test_workers_do_not_change_results(tmp_path, example_plugin, monkeypatch):
    # slow-sum has 8 blocks per theorem (batch 2): the pool interleaves them; rp-w-frobenius batches its
    # regularisation paths in prepare, so the blocks must be the same whatever the pool size.
    monkeypatch.setenv("ATTNSVM_TEST_SLEEP", "0")
    ids = ["slow-sum", "softmax-simplex", "rp-w-frobenius"]
    runs = {}
    for w in (1, 2):
        out = tmp_path / f"w{w}"
        code, _, results = run_check(ids, plugins=[SLOW, example_plugin], out=out, progress=False, workers=w)
        assert code == 0
        assert sorted(t.id for t in results) == [
            "rp-w-frobenius",
            "rp-w-frobenius-control",
            "slow-sum",
            "slow-sum-control",
            "softmax-simplex",
            "softmax-simplex-control",
        ]
        runs[w] = _outputs(out)
    assert runs[1][0] == runs[2][0]  # verdicts, counts, metric summaries, reasons
    assert runs[1][1] == runs[2][1]  # every instance's outcome, hypotheses, predictions, metrics
    assert runs[1][2] == runs[2][2] and runs[1][2]  # the same figures drawn


def test_workers_resume_with_another_pool_size(tmp_path, monkeypatch):
    """--workers is not part of the stored run: a run started with 2 workers resumes with 1."""
    monkeypatch.setenv("ATTNSVM_TEST_SLEEP", "0")
    out = tmp_path / "r"
    assert (
        main(["check", "slow-sum", "--plugin", SLOW, "--out", str(out), "--no-progress", "--workers", "2"])
        == 0
    )
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:5]) + "\n")  # as if interrupted after 5 instances
    assert main(["check", "--resume", "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    keys = [
        (x["theorem"], x["instance"])
        for x in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    ]
    assert len(keys) == len(set(keys)) == 32


@pytest.mark.parametrize("value", ["-1", "-3"])
def test_bad_workers(tmp_path, capsys, value):
    rc = main(
        ["check", "slow-sum", "--plugin", SLOW, "--out", str(tmp_path), "--no-progress", "--workers", value]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers must be a non-negative integer" in err[0]


def test_workers_0_runs_in_this_process_with_the_same_results(tmp_path, monkeypatch):
    """--workers 0 (no fault isolation: for a debugger) gives what the pool gives."""
    monkeypatch.setenv("ATTNSVM_TEST_SLEEP", "0")
    runs = {}
    for w in (0, 1):
        out = tmp_path / f"w{w}"
        run_check(["slow-sum", "softmax-simplex"], plugins=[SLOW], out=out, progress=False, workers=w)
        runs[w] = _outputs(out)
    assert runs[0] == runs[1]
