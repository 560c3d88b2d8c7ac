"""Interrupts, resume and determinism, through real subprocesses (SIGINT / SIGTERM)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = str(ROOT / "tests" / "data" / "slow_plugin.py")


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "checks", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, **kw)


def comparable(report_path: Path) -> list[dict]:
    rep = json.loads(report_path.read_text())
    out = []
    for t in rep["theorems"]:
        t = dict(t)
        t.pop("seconds")
        out.append(t)
    return out


# SIGTERM takes the same path as SIGINT (one handler): tox -e slow runs it
@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_interrupt_keeps_finished_instances_and_resume_completes(tmp_path, sig):
    full = tmp_path / "full"
    r = run_cli("check", "slow-sum", "--plugin", PLUGIN, "--out", str(full), "--no-progress")
    assert r.returncode == 0, r.stderr

    part = tmp_path / "part"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "checks",
            "check",
            "slow-sum",
            "--plugin",
            PLUGIN,
            "--out",
            str(part),
            "--no-progress",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, ATTNSVM_TEST_SLEEP="0.75"),  # ~10 s left after 6 results: no race under load
        # A test suite started in the background (`cmd &`) inherits an *ignored* SIGINT, and Python installs
        # no KeyboardInterrupt handler then: the run would ignore the signal (as a nohup'd job should). Give
        # the child the default disposition, as a terminal's foreground job has.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = part / "results.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    t0 = time.time()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert time.time() - t0 < 5, "the run must stop within seconds"
    assert proc.returncode == 130, err
    assert "--resume" in err
    done = results.read_text().splitlines()
    assert 6 <= len(done) < 32
    rep = json.loads((part / "report.json").read_text())
    assert rep["run"]["interrupted"] is True

    r = run_cli("check", "--resume", "--out", str(part), "--no-progress")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    keys = [(x["theorem"], x["instance"]) for x in lines]
    assert len(keys) == len(set(keys)) == 32, "finished instances are not redone"
    assert comparable(part / "report.json") == comparable(full / "report.json")


def test_same_seed_same_report(tmp_path, example_plugin):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, "3"), (b, "3"), (c, "4")):
        r = run_cli("check", "softmax-simplex", "--plugin", example_plugin, "--seed", seed, "--out", str(out),
                    "--no-progress")
        assert r.returncode == 0, r.stderr
    assert comparable(a / "report.json") == comparable(b / "report.json")
    assert comparable(a / "report.json") != comparable(c / "report.json")
