"""Tests of ``attnsvm gd`` (checks.cli.gd through checks.cli.main): same iterates as run_gd, the JSON
schema of docs/architecture.md, one-line errors before any work, --out files, interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import checks.cli.gd as gdcli
from checks.cli import main
from numerics import kernels
from numerics.data import AttentionData, random_unit_sphere
from numerics.gd import GDConfig, RandomInit, run_gd
from numerics.tokens import scores

ROOT = Path(__file__).resolve().parents[2]

#: The CLI makes the very run_gd call a script makes (same data, start, options, code path), so on one
#: machine its iterate is bitwise the script's. The tolerance, relative to max |W|, only admits a BLAS whose
#: summation order depends on memory alignment: a last-bit difference per product, carried at rounding level
#: through these 200 steps (tests/numerics/test_gd_numpy.py measured <= 5e-16 up to 200 steps on data of this
#: size, before a saturating token switch could amplify it), far below any real difference of two runs.
ITERATE_RTOL = 1e-12

STEPS = 200

#: Keys of ``attnsvm gd --json`` (docs/architecture.md, "attnsvm gd --json").
JSON_KEYS = {
    "file", "n", "T", "d", "param", "m", "normalized", "loss", "steps", "lr", "device", "init", "seed",
    "init_scale", "record_every", "interrupted", "backend", "final", "initial", "selected", "optimal",
    "optimal_tied", "selected_optimal", "svm", "corr", "step_fidelity", "records",
}
RECORD_KEYS = {"iteration", "loss", "W_norm", "corr", "max_prob"}

BACKENDS = ["torch", pytest.param("numba", marks=pytest.mark.skipif(
    not kernels.available(), reason="numba not installed / switched off"))]


@pytest.fixture
def data_path(tmp_path):
    path = tmp_path / "data.npz"
    random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0)).save(path)
    return path


def run_json(capsys, *argv):
    rc = main(["gd", *map(str, argv), "--json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out)


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_final_iterate_equals_run_gd(capsys, data_path, param, backend):
    data = AttentionData.load(data_path)
    rc, out = run_json(capsys, data_path, "--param", param, "--steps", STEPS, "--lr", 0.1, "--seed", 3,
                       "--backend", backend)
    assert rc == 0 and out["backend"] == backend
    ref = run_gd([data], GDConfig(param=param, steps=STEPS, lr=0.1, backend=backend), init=RandomInit(3))
    assert _rel(out["final"]["W"], ref.W[0]) <= ITERATE_RTOL
    if param == "KQ":
        assert _rel(out["final"]["K"], ref.K[0]) <= ITERATE_RTOL
        assert _rel(out["final"]["Q"], ref.Q[0]) <= ITERATE_RTOL
    assert out["final"]["loss"] == pytest.approx(float(ref.loss[0]), rel=ITERATE_RTOL)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_init_file_gives_run_gds_iterate(capsys, tmp_path, data_path, param, backend):
    data = AttentionData.load(data_path)
    rng = np.random.default_rng(7)
    init_path = tmp_path / "init.npz"
    if param == "W":
        init = (0.1 * rng.standard_normal((5, 5)),)
        np.savez(init_path, W=init[0])
    else:
        init = (0.1 * rng.standard_normal((5, 3)), 0.1 * rng.standard_normal((5, 3)))
        np.savez(init_path, K=init[0], Q=init[1])
    rc, out = run_json(capsys, data_path, "--param", param, "--steps", STEPS, "--init", init_path,
                       "--backend", backend)
    assert rc == 0
    given = init[0][None] if param == "W" else tuple(a[None] for a in init)
    ref = run_gd([data], GDConfig(param=param, steps=STEPS, lr=0.1, backend=backend,
                                  m=3 if param == "KQ" else None), init=given)
    assert _rel(out["final"]["W"], ref.W[0]) <= ITERATE_RTOL
    if param == "KQ":
        assert out["m"] == 3 and np.asarray(out["final"]["K"]).shape == (5, 3)
        assert _rel(out["final"]["Q"], ref.Q[0]) <= ITERATE_RTOL


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_json_schema_and_independent_corr(capsys, data_path, param):
    data = AttentionData.load(data_path)
    rc, out = run_json(capsys, data_path, "--param", param, "--steps", STEPS, "--record-every", 50)
    assert rc == 0
    assert set(out) == JSON_KEYS
    rec = out["records"]
    assert set(rec) == RECORD_KEYS
    assert rec["iteration"] == [0, 50, 100, 150, 200]
    assert all(len(rec[k]) == 5 for k in RECORD_KEYS)
    assert all(len(p) == data.n for p in rec["max_prob"])
    svm = out["svm"]
    assert svm["status"] == "optimal" and svm["certificate"]["verified"] is True
    assert svm["norm"] == ("fro" if param == "W" else "nuc") and svm["rank"] >= 1
    assert svm["alpha"] == out["selected"]
    # corr recomputed here from the reported W and W^mm, by the definition <A, B> / (|A| |B|)
    W, Wmm = np.array(out["final"]["W"]), np.array(svm["W"])
    want = float(np.sum(W * Wmm) / np.sqrt(np.sum(W * W) * np.sum(Wmm * Wmm)))
    assert out["corr"] == pytest.approx(want, abs=1e-14)
    assert rec["corr"][-1] == pytest.approx(want, abs=1e-14)
    assert out["corr"] > 0.9  # GD heads for W^mm of the tokens it selects
    # the selected tokens are the arg max of the final softmax; optimal ones from the scores
    lg = np.einsum("itd,de,ie->it", data.X, W, data.Z)
    assert out["selected"] == lg.argmax(1).tolist()
    assert out["optimal"] == scores(data).argmax(1).tolist()
    assert out["selected_optimal"] == [a == b for a, b in zip(out["selected"], out["optimal"], strict=True)]
    assert rec["W_norm"][-1] == pytest.approx(np.linalg.norm(W), rel=1e-14)
    fid = out["step_fidelity"]
    for k in ("initial", "final"):
        assert set(fid[k]) == {"rel_diff", "direction_diff", "step_norm", "engine_step_norm", "grad_max"}
        assert fid[k]["rel_diff"] <= gdcli.STEP_RTOL
        assert fid[k]["step_norm"] == pytest.approx(0.1 * (1 if param == "W" else np.sqrt(2)))  # lr a factor


def test_default_start_is_run_gds(capsys, data_path):
    """The start the CLI reports (and takes its fidelity step from) is the one run_gd draws from the seed."""
    data = AttentionData.load(data_path)
    for param in ("W", "KQ"):
        rc, out = run_json(capsys, data_path, "--param", param, "--steps", 1, "--seed", 5,
                           "--init-scale", 0.3)
        # steps=0: the start
        ref = run_gd([data], GDConfig(param=param, steps=0, lr=0.1), init=RandomInit(5, 0.3))
        assert rc == 0
        for key in ("W",) if param == "W" else ("K", "Q"):
            assert np.array_equal(np.array(out["initial"][key]), getattr(ref, key)[0])


def test_text_output(capsys, data_path):
    assert main(["gd", str(data_path), "--steps", "100"]) == 0
    out = capsys.readouterr().out
    for label in ("final loss:", "‖W‖_F:", "selected:", "svm:", "certificate:", "corr:", "step:"):
        assert label in out
    assert "status optimal" in out and "kkt verified" in out and "DIFFER" not in out


def test_fidelity_where_the_gradient_underflows(tmp_path, capsys):
    """20 000 normalised steps saturate the softmax (logit gaps ~725): the float64 gradient is at underflow,
    and the engine shortens its step (its norm floor); the direction still agrees with autograd's, and the
    text says so rather than DIFFER or a vacuous agree."""
    path = tmp_path / "demo.npz"
    random_unit_sphere(4, 5, 6, rng=np.random.default_rng(0)).save(path)
    rc, out = run_json(capsys, path, "--steps", 20000, "--record-every", 20000)
    fin = out["step_fidelity"]["final"]
    assert rc == 0 and fin["rel_diff"] > gdcli.STEP_RTOL
    assert fin["direction_diff"] <= gdcli.STEP_RTOL and fin["engine_step_norm"] < fin["step_norm"]
    assert out["step_fidelity"]["initial"]["rel_diff"] <= gdcli.STEP_RTOL
    assert main(["gd", str(path), "--steps", "20000", "--record-every", "20000"]) == 0
    text = capsys.readouterr().out
    assert "DIFFER" not in text and "norm floor" in text


def test_failed_svm_is_reported_as_failure(capsys, data_path, monkeypatch):
    from numerics.errors import SolverError

    def boom(*a, **k):
        raise SolverError("the certificate did not verify", status="uncertified", solver="nnls")

    monkeypatch.setattr("checks.cli.svm.solve_att_svm", boom)
    assert main(["gd", str(data_path), "--steps", "20"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "status optimal" not in out and "corr:        n/a" in out
    rc, doc = run_json(capsys, data_path, "--steps", 20)
    assert rc == 1 and doc["svm"]["status"] == "failed" and doc["corr"] is None


def _bad_cases(tmp_path: Path, data_path: Path) -> dict[str, tuple[list[str], str]]:
    np.savez(tmp_path / "w4.npz", W=np.zeros((4, 4)))
    np.savez(tmp_path / "kq.npz", K=np.zeros((5, 3)), Q=np.zeros((5, 2)))
    np.savez(tmp_path / "wrongkeys.npz", A=np.zeros((5, 5)))
    np.savez(tmp_path / "nan.npz", W=np.full((5, 5), np.nan))
    np.savez(tmp_path / "baddata.npz", X=np.zeros((3, 4, 5)), Q=np.ones(3))
    (tmp_path / "text.npz").write_text("not an archive")
    AttentionData(random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0)).X, [1.0, -1.0, 1.0]).save(
        tmp_path / "nohead.npz")
    d = str(data_path)
    return {
        "init-shape": ([d, "--init", str(tmp_path / "w4.npz")], "shape"),
        "init-kq-shapes": ([d, "--param", "KQ", "--init", str(tmp_path / "kq.npz")], "shape"),
        "init-keys": ([d, "--init", str(tmp_path / "wrongkeys.npz")], "key"),
        "init-kq-keys": ([d, "--param", "KQ", "--init", str(tmp_path / "w4.npz")], "key"),
        "init-nan": ([d, "--init", str(tmp_path / "nan.npz")], "NaN"),
        "init-missing": ([d, "--init", str(tmp_path / "nope.npz")], "no such file"),
        "init-unreadable": ([d, "--init", str(tmp_path / "text.npz")], "npz"),
        "steps-zero": ([d, "--steps", "0"], "--steps"),
        "steps-negative": ([d, "--steps", "-5"], "--steps"),
        "lr-zero": ([d, "--lr", "0"], "--lr"),
        "lr-negative": ([d, "--lr", "-0.1"], "--lr"),
        "lr-nan": ([d, "--lr", "nan"], "--lr"),
        "plain-overflow": ([d, "--plain", "--lr", "1e6"], "logit gap"),
        "plain-overflow-kq": ([d, "--plain", "--param", "KQ", "--init-scale", "1", "--lr", "1e4"],
                              "logit gap"),
        "data-missing": ([str(tmp_path / "absent.npz")], "no such file"),
        "data-keys": ([str(tmp_path / "baddata.npz")], "key"),
        "data-unreadable": ([str(tmp_path / "text.npz")], "npz"),
        "data-no-head": ([str(tmp_path / "nohead.npz")], "'v'"),
        "loss": ([d, "--loss", "hinge"], "loss"),
        "m-without-kq": ([d, "--m", "2"], "--m"),
        "record-every": ([d, "--record-every", "0"], "--record-every"),
        "numba-plain": ([d, "--backend", "numba", "--plain"], "numba"),
    }


BAD = [
    "init-shape", "init-kq-shapes", "init-keys", "init-kq-keys", "init-nan", "init-missing",
    "init-unreadable",
    "steps-zero", "steps-negative", "lr-zero", "lr-negative", "lr-nan", "plain-overflow", "plain-overflow-kq",
    "data-missing", "data-keys", "data-unreadable", "data-no-head", "loss", "m-without-kq", "record-every",
    "numba-plain",
]


@pytest.mark.parametrize("case", BAD)
def test_bad_input_one_line_exit_2_before_any_work(capsys, tmp_path, data_path, monkeypatch, case):
    def no_work(*a, **k):
        raise AssertionError("GD ran before the input was checked")

    monkeypatch.setattr(gdcli, "run_gd", no_work)
    argv, needle = _bad_cases(tmp_path, data_path)[case]
    assert main(["gd", *argv]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("attnsvm gd: error: ") and needle in lines[0], lines[0]


def test_cuda_without_gpu_is_refused(capsys, data_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["gd", str(data_path), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cuda" in err[0] and "no CUDA GPU" in err[0]


def test_plain_bound_is_sound_and_lets_ordinary_runs_through():
    """The bound dominates the gap change of real plain steps (at random W, also near-saturated ones), and
    refuses no ordinary lr on unit data (lr 10: bound <= 40 ≪ 700)."""
    import torch

    from numerics.attention import batch_from_data, grad_W

    data = random_unit_sphere(3, 4, 5, rng=np.random.default_rng(0))
    for loss in ("logistic", "exponential", "linear"):
        assert gdcli.plain_step_gap_bound(data, loss, 10.0, (np.zeros((5, 5)),)) <= 60
    b = batch_from_data(data)
    rng = np.random.default_rng(1)
    lr = 1.0
    for scale in (0.1, 1.0, 10.0):
        for _ in range(20):
            W = scale * rng.standard_normal((5, 5))
            for loss in ("logistic", "exponential", "linear"):
                G = grad_W(b.X, b.Y, b.Z, torch.as_tensor(W[None]), b.linear_head(), loss)[0].numpy()
                lg = np.einsum("itd,de,ie->it", data.X, -lr * G, data.Z)
                moved = float(np.max(lg.max(1) - lg.min(1)))
                assert moved <= gdcli.plain_step_gap_bound(data, loss, lr, (W,)) * (1 + 1e-12)


def test_out_writes_trajectory_and_figure(tmp_path, data_path, capsys):
    out = tmp_path / "run"
    assert main(["gd", str(data_path), "--steps", "100", "--record-every", "10", "--out", str(out)]) == 0
    capsys.readouterr()
    csv = (out / "trajectory.csv").read_text().splitlines()
    assert csv[0].split(",") == ["iteration", "loss", "W_norm", "corr", *[f"max_prob_{i}" for i in range(3)]]
    assert len(csv) == 1 + 11 and csv[-1].startswith("100,")
    assert (out / "trajectory.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "gd.json").read_text())
    assert doc["records"]["iteration"][-1] == 100
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # atomic writes leave no temporaries


def test_progress_bar_only_on_a_terminal(capsys, data_path, monkeypatch):
    seen = []
    real = gdcli.run_gd

    def spy(data, cfg, **k):
        if cfg.steps > 1:  # not the one-step runs of the fidelity check
            seen.append(cfg.progress)
        return real(data, cfg, **k)

    monkeypatch.setattr(gdcli, "run_gd", spy)
    assert main(["gd", str(data_path), "--steps", "5"]) == 0
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert main(["gd", str(data_path), "--steps", "5"]) == 0
    capsys.readouterr()
    assert seen[0] is False and seen[1] is True


def test_interrupt_writes_the_records_so_far(tmp_path, data_path, capsys, monkeypatch):
    """Ctrl-C inside run_gd (here: at the 4th record, from the loss evaluation there): exit 130, and the three
    records made before it are written to --out and printed with --json."""
    import numerics.attention as att

    real, calls = att.loss, []

    def interrupting(*a, **k):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(att, "loss", interrupting)
    out = tmp_path / "run"
    rc = main(["gd", str(data_path), "--steps", "100", "--record-every", "10", "--out", str(out), "--json",
               "--backend", "torch"])
    cap = capsys.readouterr()
    assert rc == 130
    doc = json.loads(cap.out)
    assert doc["interrupted"] is True and doc["records"]["iteration"] == [0, 10, 20]
    assert len((out / "trajectory.csv").read_text().splitlines()) == 1 + 3
    assert (out / "trajectory.png").exists()
    assert "interrupted" in cap.err.strip().splitlines()[-1]


def test_sigint_of_a_real_run(tmp_path, data_path):
    """A real Ctrl-C (SIGINT) of a long run in a fresh process: exit 130, the records so far on disk."""
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "checks", "gd", str(data_path), "--steps", "100000000",
         "--record-every", "200", "--backend", "torch", "--out", str(out)],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        # a suite started in the background (`cmd &` without job control) hands its children an *ignored*
        # SIGINT, and Python then installs no KeyboardInterrupt handler: restore the default (as test_resume)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        first = proc.stderr.readline()  # the start line: GD is about to run
        assert "steps of normalised GD" in first, first
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        try:
            # writing the records (CSV, JSON, the figure) takes ~1 s; 120 s leaves room for a loaded machine
            rest = proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:
            proc.kill()
            err = proc.communicate()[1]
            pytest.fail(f"no exit within 120 s of SIGINT; stderr so far:\n{err[-3000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert "interrupted" in rest and "Traceback" not in rest
    rows = (out / "trajectory.csv").read_text().splitlines()
    assert rows[0].startswith("iteration,") and len(rows) >= 2


def test_parser_stays_light():
    """`attnsvm --help` and the parser never import numpy or torch; the gd handler loads only when gd runs."""
    probe = ("import sys\nfrom checks.cli import build_parser\nbuild_parser().parse_args(['gd', 'x.npz'])\n"
             "print(sorted(m for m in ('numpy', 'torch', 'checks.cli.gd') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
