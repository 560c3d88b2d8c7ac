"""`attnsvm check --workers N`: the process pool gives the same verdicts, metrics and instance results as one
worker (same seed), apart from wall-clock timings; bad values are refused with exit 2.

One executor for every sweep (checks/executor.py): `check`, `power` and the sweeps give the same results
on the supervised process pool and on a real multi-process Dask LocalCluster (processes=True, two worker
processes); report.json says which executor ran; --dask without Dask, or a bad local:N, is exit 2; a block
that keeps killing its Dask workers stops the run with the `fault:` line (exit 1)."""

import json
import sys
from pathlib import Path

import pytest

from checks import catalogue
from checks.cli import main
from checks.executor import Executor, choose, map_completed
from checks.power.matrix import run_power
from checks.runner import run_check
from checks.theorem import REGISTRY
from numerics.errors import InvalidInputError

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"  # the plugin fixtures every tier shares
SLOW = str(DATA / "slow_plugin.py")
FAULTS = str(DATA / "fault_plugin.py")
POWER = str(DATA / "power_plugin.py")


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


# -- the Dask executor -------------------------------------------------------------------------------
def _executor(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())["run"]["executor"]


def _square(x):
    return x * x


@pytest.fixture(scope="module")
def cluster():
    """A real LocalCluster of two worker processes (one thread each), shared by this module's tests."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cl, distributed.Client(cl) as client:
        yield cl, client


@pytest.mark.slow  # Dask (an optional extra): tox -e slow
def test_check_on_dask_gives_the_pool_results(tmp_path, example_plugin, monkeypatch, cluster):
    # slow-sum has 8 blocks per theorem (batch 2), interleaved on either executor; rp-w-frobenius batches
    # its regularisation paths in prepare, so the blocks must be the same on both; its control is refuted,
    # and the Dask workers write its counterexamples.
    monkeypatch.setenv("ATTNSVM_TEST_SLEEP", "0")
    cl, _ = cluster
    ids = ["slow-sum", "softmax-simplex", "rp-w-frobenius"]
    runs = {}
    for name, kw in (("pool", {"workers": 2}), ("dask", {"dask": cl.scheduler_address})):
        code, _, results = run_check(ids, plugins=[SLOW, example_plugin], out=tmp_path / name, progress=False,
                                     **kw)
        assert code == 0 and len(results) == 6
        runs[name] = (*_outputs(tmp_path / name), _executor(tmp_path / name))
    assert runs["pool"][0] == runs["dask"][0]  # verdicts, counts, metric summaries, reasons
    assert runs["pool"][1] == runs["dask"][1]  # every instance's outcome, hypotheses, predictions, metrics
    assert runs["pool"][2] == runs["dask"][2] and runs["pool"][2]  # the same figures drawn
    saved = [v["counterexample"] for v in runs["dask"][1].values() if v.get("counterexample")]
    assert saved and all((tmp_path / "dask" / c).is_file() for c in saved)
    assert runs["pool"][3] == {"kind": "pool", "processes": 2, "instance_timeout_s": 300.0}
    assert runs["dask"][3] == {"kind": "dask", "address": cl.scheduler_address, "instance_timeout_s": None}


def test_dask_resume_continues_a_pool_run(tmp_path, monkeypatch, cluster):
    """The executor is not part of the stored run: a run cut short on the pool is finished on Dask, each
    instance exactly once, with the results of an uninterrupted run."""
    monkeypatch.setenv("ATTNSVM_TEST_SLEEP", "0")
    cl, _ = cluster
    full = tmp_path / "full"
    assert run_check(["slow-sum"], plugins=[SLOW], out=full, progress=False, workers=1, figures=False)[0] == 0
    cut = tmp_path / "cut"
    lines = (full / "results.jsonl").read_text().splitlines()
    cut.mkdir()
    (cut / "run.json").write_text((full / "run.json").read_text())
    (cut / "results.jsonl").write_text("\n".join(lines[:5]) + "\n")
    code, _, _ = run_check(out=cut, resume=True, progress=False, figures=False, dask=cl.scheduler_address)
    assert code == 0
    assert _outputs(cut)[1] == _outputs(full)[1]


@pytest.fixture
def power_plugin():
    """The power fixture plugin, taken out of the registry again afterwards (its hollow check must not
    reach a test that selects the whole catalogue)."""
    ids = catalogue.load_plugin(POWER)
    yield ids
    for i in ids:
        sys.modules.pop(REGISTRY.pop(i).__module__, None)


def test_power_and_sweeps_on_dask_match(cluster, power_plugin):
    _, client = cluster
    kw = {"plugins": [POWER], "sabotages": ["noop-gd"]}
    inline = run_power(power_plugin, **kw)
    on_dask = run_power(power_plugin, dask=client, **kw)
    assert inline["run"]["executor"] == {"kind": "inline"}
    assert on_dask["run"]["executor"] == {"kind": "dask", "address": "client"}
    assert _timing_free(inline["theorems"]) == _timing_free(on_dask["theorems"])
    assert inline["survivors"] == on_dask["survivors"] == [["power-hollow-gd", "noop-gd"]]
    ex = choose(None, client, default=1)
    assert sorted(map_completed(ex, _square, range(5))) == [(k, k * k) for k in range(5)]


def test_choose_and_bad_dask_arguments(tmp_path, capsys):
    assert choose(None, None, default=1) == Executor("inline")
    assert choose(3, None, default=1) == Executor("pool", 3)
    assert choose(3, "local:2", default=1) == Executor("dask", 2, "local:2")
    assert choose(None, "tcp://h:1", default=1).describe() == {"kind": "dask", "address": "tcp://h:1"}
    for bad in ("local:0", "local:x", " "):
        with pytest.raises(InvalidInputError, match="--dask"):
            choose(None, bad, default=1)
    assert main(["check", "softmax-simplex", "--dask", "local:0", "--out", str(tmp_path),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "local:N" in err
    assert not (tmp_path / "results.jsonl").exists()


def test_check_dask_without_distributed_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    for mod in ("dask", "dask.distributed", "distributed"):
        monkeypatch.setitem(sys.modules, mod, None)  # import of these now raises ImportError
    assert main(["check", "softmax-simplex", "--dask", "local:2", "--out", str(tmp_path),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'attnsvm[dask]'" in err
    assert not (tmp_path / "results.jsonl").exists()  # refused before any work


@pytest.mark.slow
def test_a_block_that_kills_its_dask_workers_is_a_fault(tmp_path, monkeypatch, capsys):
    """crash-sum's instance 4 SIGKILLs the process that runs it: Dask replaces the worker and runs the block
    again, and after ``allowed-failures`` deaths gives up (KilledWorker); the run stops with the `fault:`
    line and exit 1, and the finished blocks are in results.jsonl. (On the supervised pool the same instance
    is ERROR and the run goes on: tests/harness/test_faults.py.)"""
    dask = pytest.importorskip("dask")
    monkeypatch.setenv("ATTNSVM_TEST_CRASH_AT", "4")
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):  # the scheduler runs in this process
        code = main(["check", "crash-sum", "--plugin", FAULTS, "--dask", "local:2", "--out", str(tmp_path),
                     "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "attnsvm check: fault:" in err and "KilledWorker" in err and "--resume" in err
    done = {json.loads(x)["instance"] for x in (tmp_path / "results.jsonl").read_text().splitlines()
            if json.loads(x)["theorem"] == "crash-sum"}
    assert 4 not in done
