"""Faults of the environment never end a check run (the supervised pool, checks/pool.py): a worker process
killed while it runs an instance is replaced and its block run again; an instance that kills its worker
twice is ERROR with the signal in its reason; an instance step past ``--instance-timeout`` is ERROR and its
worker replaced; the run reports every lost worker. Real processes, real signals."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checks.cli import main
from checks.runner import run_check

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"  # the plugin fixtures every tier shares
FAULTS = str(DATA / "fault_plugin.py")
SLOW = str(DATA / "slow_plugin.py")


def _lines(out: Path) -> dict:
    """Every instance result of a run without its wall-clock time, by (theorem, instance)."""
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("seconds")
    by_key = {(r["theorem"], r["instance"]): r for r in rows}
    assert len(by_key) == len(rows), "an instance was streamed twice"
    return by_key


def _verdicts(out: Path) -> dict:
    rep = json.loads((out / "report.json").read_text())
    return {t["id"]: (t["verdict"], t["counts"]) for t in rep["theorems"]}


def test_an_instance_that_kills_its_worker_is_error_and_the_run_goes_on(tmp_path, capsys):
    """SIGKILL in a prediction (crash-sum) and in a batch's prepare (crash-prepare), with 1 and 2 workers:
    the main process survives, the culprit is ERROR naming the signal, every other instance is as usual and
    the same for both pool sizes."""
    runs = {}
    for w in (1, 2):
        out = tmp_path / f"w{w}"
        rc = main(["check", "crash-sum", "crash-prepare", "--plugin", FAULTS, "--workers", str(w), "--out",
                   str(out), "--no-progress"])
        assert rc == 1  # an ERROR instance fails its theorem (the aggregation rule for any ERROR)
        printed = capsys.readouterr().out
        lines = _lines(out)
        for tid, phase in (("crash-sum", "evaluate"), ("crash-prepare", "prepare")):
            bad = lines[(tid, 4)]
            assert bad["outcome"] == "error"
            assert bad["reason"] == f"worker killed by SIGKILL while running instance 4 ({phase}), 2 times"
            assert all(lines[(tid, k)]["outcome"] == "confirmed" for k in range(6) if k != 4)
            assert _verdicts(out)[tid][0] == "ERROR"
        # crash-sum: two losses at instance 4; crash-prepare: two on the batch (3-5), then two on 4 alone
        run = json.loads((out / "report.json").read_text())["run"]
        assert run["workers"]["lost"] == 6
        assert all(f["what"] == "killed by SIGKILL" for f in run["workers"]["faults"])
        assert "workers: 6 lost and replaced (6 died)" in printed
        assert "killed by SIGKILL while running crash-sum instance 4 (evaluate)" in printed
        runs[w] = lines
    assert runs[1] == runs[2]


def test_an_instance_past_the_time_limit_is_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNSVM_TEST_HANG_S", "120")
    t0 = time.monotonic()
    rc = main(["check", "hang-sum", "--plugin", FAULTS, "--workers", "2", "--instance-timeout", "2",
               "--out", str(tmp_path), "--no-progress"])
    assert time.monotonic() - t0 < 60  # the hung instance (120 s) did not hold the run
    assert rc == 1
    lines = _lines(tmp_path)
    assert lines[("hang-sum", 1)]["outcome"] == "error"
    why = lines[("hang-sum", 1)]["reason"]
    assert why == "timed out after 2 s (evaluate of instance 1); its worker was replaced"
    assert [lines[("hang-sum", k)]["outcome"] for k in range(6) if k != 1] == ["confirmed"] * 5
    assert _verdicts(tmp_path)["hang-sum-control"][0] == "FAIL"  # the control ran on the replaced worker
    assert "workers: 1 lost and replaced (1 killed after --instance-timeout)" in capsys.readouterr().out


def test_resume_after_a_crash_gives_the_uninterrupted_report(tmp_path):
    whole = tmp_path / "whole"
    run_check(["crash-sum"], plugins=[FAULTS], out=whole, progress=False, workers=2)
    # the same run stopped just before instance 4's ERROR was written (the main process was killed there)
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    rows = (whole / "results.jsonl").read_text().splitlines()
    at = next(i for i, x in enumerate(rows) if json.loads(x)["outcome"] == "error")
    (cut / "results.jsonl").write_text("".join(x + "\n" for x in rows[:at]))
    (cut / "report.json").unlink()
    run_check(out=cut, resume=True, progress=False, workers=1)
    assert _lines(cut) == _lines(whole)
    assert _verdicts(cut) == _verdicts(whole)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes in /proc")
def test_killing_a_worker_of_a_running_check_does_not_stop_it(tmp_path):
    """What the OOM killer does: SIGKILL one worker of a running `attnsvm check --workers 2` from outside.
    The run finishes, exit 0, every instance as in an undisturbed run, and it reports the lost worker."""
    env = {**os.environ, "ATTNSVM_TEST_SLEEP": "0.15", "PYTHONPATH": str(ROOT)}
    out = tmp_path / "killed"
    argv = ["check", "slow-sum", "--plugin", SLOW, "--workers", "2", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", "checks", *argv], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the workers are busy with instances
        res = out / "results.jsonl"
        if res.exists() and len(res.read_text().splitlines()) >= 3 and _children(proc.pid):
            break
        time.sleep(0.05)
    victims = _children(proc.pid)
    assert victims, "no worker process found"
    os.kill(victims[0], signal.SIGKILL)
    printed, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, printed
    assert "workers: 1 lost and replaced (1 died)" in printed
    assert "killed by SIGKILL" in printed
    calm = tmp_path / "calm"
    run_check(["slow-sum"], plugins=[SLOW], out=calm, progress=False, workers=0)
    assert _lines(out) == _lines(calm)


@pytest.mark.parametrize("argv, needle", [
    (["--instance-timeout", "-1"], "--instance-timeout"),
    (["--instance-timeout", "soon"], "--instance-timeout"),
    (["--workers", "-1"], "--workers"),
])
def test_bad_fault_options_exit_2_with_one_line(argv, needle, tmp_path, capsys):
    try:  # argparse's own checks exit, ours return the code
        rc = main(["check", "softmax-simplex", "--out", str(tmp_path), "--no-progress", *argv])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


@pytest.mark.parametrize("exc, needle", [
    ("pool", "a worker process died"),
    ("memory", "out of memory"),
    ("disk", "No space left on device"),
])
def test_faults_of_the_environment_are_faults_not_internal_errors(exc, needle, monkeypatch, capsys):
    """A sweep whose process pool lost a worker, memory or disk exhausted: exit 1 with a one-line fault,
    never the 'internal error ... please report it' of a bug."""
    import errno
    from concurrent.futures.process import BrokenProcessPool

    from checks.experiments import reproduce

    raised = {"pool": BrokenProcessPool("A process in the process pool was terminated abruptly"),
              "memory": MemoryError(), "disk": OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "out/x.csv")}

    def boom(*a, **k):
        raise raised[exc]

    monkeypatch.setattr(reproduce, "reproduce", boom)
    assert main(["reproduce", "svm-rank", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnsvm reproduce: fault: ") and needle in err and "\n" not in err
    assert "internal error" not in err
