"""Tests of ``attnsvm svm`` (checks.cli.svm through checks.cli.main)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from checks.cli import main
from numerics.data import AttentionData, random_unit_sphere

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def feasible(tmp_path):
    path = tmp_path / "feasible.npz"
    random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0)).save(path)
    return path


@pytest.fixture
def infeasible(tmp_path):
    path = tmp_path / "infeasible.npz"
    AttentionData([[[1.0], [0.0]], [[0.0], [1.0]]], [1.0, 1.0], [[1.0], [1.0]], v=[1.0]).save(path)
    return path


def run_json(capsys, *argv):
    rc = main(["svm", *map(str, argv), "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_json_fields(capsys, feasible, norm):
    rc, out = run_json(capsys, feasible, "--norm", norm)
    assert rc == 0
    for key in (
        "status",
        "objective",
        "rank",
        "support_tokens",
        "certificate",
        "W",
        "alpha",
        "solver",
        "seconds",
    ):
        assert key in out
    assert out["status"] == "optimal" and out["certificate"]["verified"] is True
    W = np.array(out["W"])
    assert W.shape == (5, 5)
    s = np.linalg.svd(W, compute_uv=False)
    assert out["rank"] == int(np.sum(s > 1e-6 * s[0]))
    assert len(out["support_tokens"]) == 3 and len(out["alpha"]) == 3


def test_explicit_alpha_and_exact(capsys, feasible):
    rc, out = run_json(capsys, feasible, "--alpha", "0,1,2", "--exact")
    assert rc == 0 and out["alpha"] == [0, 1, 2]
    assert out["certificate"]["exact"] in (True, False)


def test_infeasible_is_exit_0(capsys, infeasible):
    rc, out = run_json(capsys, infeasible, "--alpha", "0,0")
    assert rc == 0 and out["status"] == "infeasible" and out["W"] is None
    assert out["certificate"]["kind"] == "farkas" and out["certificate"]["verified"]


def test_text_output(capsys, feasible):
    assert main(["svm", str(feasible)]) == 0
    out = capsys.readouterr().out
    for word in ("status:", "objective:", "rank:", "support:", "certificate:"):
        assert word in out


@pytest.mark.parametrize("alpha", ["0,1", "0,1,9", "a,b,c", "0,-1,2", ""])
def test_bad_alpha_exit_2(capsys, feasible, alpha):
    assert main(["svm", str(feasible), "--alpha", alpha]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def test_bad_file_exit_2(capsys, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert main(["svm", str(bad)]) == 2
    assert main(["svm", str(tmp_path / "missing.npz")]) == 2


def test_no_head_with_optimal_alpha_exit_2(capsys, tmp_path):
    path = tmp_path / "nohead.npz"
    d = random_unit_sphere(2, 3, 4, rng=np.random.default_rng(1))
    AttentionData(d.X, d.Y, d.Z).save(path)
    assert main(["svm", str(path)]) == 2
    assert "head" in capsys.readouterr().err
    assert main(["svm", str(path), "--alpha", "0,1"]) == 0


def test_subprocess_entry_point(feasible):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "checks", "svm", str(feasible), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "optimal"
    proc = subprocess.run(
        [sys.executable, "-m", "checks", "svm", str(feasible), "--alpha", "x"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0


def test_lp_norm_json(capsys, feasible):
    rc, out = run_json(capsys, feasible, "--norm", "lp", "--p", "3")
    assert rc == 0 and out["norm"] == "lp" and out["p"] == 3.0
    cert = out["certificate"]
    assert out["status"] == "optimal" and cert["kind"] == "lp" and cert["verified"]
    W = np.array(out["W"])
    assert out["objective"] == pytest.approx(float(np.sum(np.abs(W) ** 3) ** (1 / 3)), rel=1e-9)


@pytest.mark.parametrize(("argv", "msg"), [
    (["--norm", "lp"], "--norm lp needs --p"),
    (["--norm", "lp", "--p", "1"], "p must be a finite number > 1"),
    (["--norm", "fro", "--p", "2"], "--p is for --norm lp only"),
    (["--norm", "lp", "--p", "2", "--exact"], "--exact is available for --norm fro only"),
])
def test_lp_bad_arguments(capsys, feasible, argv, msg):
    assert main(["svm", str(feasible), *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


# -- NTP files (keys E, tokens, labels): the graph-SVM --------------------------------------------------
NTP_TOKENS = np.array([[0, 1, 4], [1, 0, 4], [0, 1, 4], [2, 0, 4], [3, 2, 4]])
NTP_LABELS = np.array([0, 1, 0, 2, 3])


@pytest.fixture
def ntp_file(tmp_path):
    path = tmp_path / "ntp.npz"
    E = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 5)))[0].T
    np.savez(path, E=E, tokens=NTP_TOKENS, labels=NTP_LABELS)
    return path


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_ntp_json(capsys, ntp_file, norm):
    rc, out = run_json(capsys, ntp_file, "--norm", norm)
    assert rc == 0 and out["status"] == "optimal" and out["certificate"]["verified"]
    assert out["scc"] == {"4": [[3], [2], [0, 1], [4]]}
    W = np.array(out["W"])
    assert W.shape == (8, 8) and out["objective"] == pytest.approx(
        np.linalg.norm(W) if norm == "fro" else np.linalg.svd(W, compute_uv=False).sum(), rel=1e-9)


@pytest.mark.parametrize("tokens, labels, match", [
    (np.array([[0, 1, 9]]), np.array([0]), "out of range"),
    (np.array([[0, 1, 4]]), np.array([2]), "does not occur"),
    (np.array([[0.0, 1.5, 4.0]]), np.array([0]), "not an integer id"),
    (np.array([[0, 1, 4], [0, 1]], dtype=object), np.array([0, 0]), "object"),
])
def test_ntp_bad_files(tmp_path, capsys, tokens, labels, match):
    path = tmp_path / "bad.npz"
    np.savez(path, E=np.eye(5), tokens=tokens, labels=labels)
    assert main(["svm", str(path)]) == 2
    err = capsys.readouterr().err
    assert match in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_ntp_file_as_check_data(ntp_file):
    """--data picks the format by the keys; attention theorems are n/a on it, NTP theorems run."""
    from checks import catalogue
    from checks.plan import load_data_arg
    from checks.theorem import REGISTRY
    from numerics.ntp import NTPData

    catalogue.load_builtin()
    data = load_data_arg(str(ntp_file))
    assert isinstance(data, NTPData)
    assert "NTP dataset" in REGISTRY["svm-feasibility"]().applies_to(data)
    assert REGISTRY["ntp-gd"]().applies_to(data) is None


def test_ntp_counterexample_saved_in_ntp_format(tmp_path, ntp_file):
    from checks.report.model import save_counterexample
    from checks.theorems._ntp import NTPInstance
    from numerics.ntp import NTPData

    data = NTPData.load(ntp_file)
    rel = save_counterexample(tmp_path, "ntp-gd-control", 3, NTPInstance(data=data, family_draws=1), "replay")
    back = NTPData.load(tmp_path / rel)
    assert np.array_equal(back.tokens, data.tokens) and np.array_equal(back.E, data.E)


def test_a_counterexample_keeps_its_dataset_loadable_and_its_fields_beside_it(tmp_path):
    """A typed instance with a dataset: the .npz is the dataset (loadable by --data), the instance's other
    numeric fields (here α and W(0)) go to .instance.npz; a fieldless dataset instance writes no sidecar."""
    from dataclasses import dataclass

    from checks.report.model import save_counterexample
    from numerics.data import AttentionData, random_unit_sphere

    @dataclass(frozen=True, eq=False)
    class Inst:
        data: AttentionData
        alpha: np.ndarray
        W0: np.ndarray
        label: str = "not numeric"

    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
    inst = Inst(data, np.array([0, 1, 2]), np.eye(5))
    rel = save_counterexample(tmp_path, "gd-local", 2, inst, "replay")
    back = AttentionData.load(tmp_path / rel)
    np.testing.assert_array_equal(back.X, data.X)
    with np.load(tmp_path / "counterexamples" / "gd-local-2.instance.npz", allow_pickle=False) as f:
        assert sorted(f.files) == ["W0", "alpha"]
        np.testing.assert_array_equal(f["alpha"], [0, 1, 2])
    save_counterexample(tmp_path, "svm-feasibility", 0, data, "replay")
    assert not (tmp_path / "counterexamples" / "svm-feasibility-0.instance.npz").exists()
