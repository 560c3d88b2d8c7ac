"""Every class of bad input, wherever data enters (attnsvm svm, attnsvm check --data, the Python API):
a one-line error naming the problem and exit code 2; never a traceback, never an answer."""

import io

import numpy as np
import pytest

from checks.cli import main
from numerics.data import AttentionData
from numerics.errors import InvalidInputError

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4, 5))
Y = np.array([1.0, -1.0, 1.0])
Z = rng.standard_normal((3, 5))
v = rng.standard_normal(5)


def npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _nan():
    a = X.copy()
    a[0, 0, 0] = np.nan
    return a


def _inf():
    a = Z.copy()
    a[1, 2] = np.inf
    return a


BAD_ARRAYS = {
    "nan": (dict(X=_nan(), Y=Y, Z=Z, v=v), "non-finite"),
    "inf": (dict(X=X, Y=Y, Z=_inf(), v=v), "non-finite"),
    "wrong-ndim": (dict(X=X[0], Y=Y, v=v), "shape (n, T, d)"),
    "Y-size": (dict(X=X, Y=Y[:2], Z=Z, v=v), "Y must have shape"),
    "Z-size": (dict(X=X, Y=Y, Z=Z[:, :4], v=v), "Z must have shape"),
    "v-size": (dict(X=X, Y=Y, Z=Z, v=v[:3]), "v must have shape"),
    "labels": (dict(X=X, Y=np.array([1.0, 0.0, 2.0]), Z=Z, v=v), "only -1 and +1"),
    "T<2": (dict(X=X[:, :1], Y=Y, Z=Z, v=v), "at least T=2"),
    "empty": (dict(X=np.zeros((0, 4, 5)), Y=np.zeros(0), v=v), "empty"),
    "strings": (dict(X=np.array(["a", "b"]), Y=Y), "numeric"),
    "missing-Y": (dict(X=X, Z=Z, v=v), "missing required key 'Y'"),
    "unknown-key": (dict(X=X, Y=Y, Z=Z, v=v, W=np.eye(5)), "unexpected key"),
}


def bad_files(tmp_path):
    files = {}
    for name, (arrays, msg) in BAD_ARRAYS.items():
        files[name] = (npz(tmp_path / f"{name}.npz", **arrays), msg)
    obj = tmp_path / "object.npz"
    np.savez(obj, X=np.array([{"a": 1}, None], dtype=object), Y=Y)
    files["object"] = (obj, "object (pickled)")
    txt = tmp_path / "text.npz"
    txt.write_text("this is not a numpy archive\n")
    files["not-npz"] = (txt, "not an .npz")
    good = io.BytesIO()
    np.savez(good, X=X, Y=Y, Z=Z, v=v)
    trunc = tmp_path / "truncated.npz"
    trunc.write_bytes(good.getvalue()[: len(good.getvalue()) // 2])
    files["truncated"] = (trunc, ".npz")
    npy = tmp_path / "array.npy"
    np.save(npy, X)
    files["npy"] = (npy, "not an .npz")
    files["missing"] = (tmp_path / "nope.npz", "no such file")
    files["directory"] = (tmp_path, "is a directory")
    return files


@pytest.fixture
def files(tmp_path):
    return bad_files(tmp_path)


CASES = list(BAD_ARRAYS) + ["object", "not-npz", "truncated", "npy", "missing", "directory"]


@pytest.mark.parametrize("case", CASES)
def test_loader_rejects_with_clear_message(files, case):
    path, msg = files[case]
    with pytest.raises(InvalidInputError, match=None) as err:
        AttentionData.load(path)
    assert msg.lower() in str(err.value).lower(), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("case", CASES)
def test_svm_cli_exits_2_with_one_line(files, case, capsys):
    path, msg = files[case]
    assert main(["svm", str(path)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err and msg.lower() in cap.err.lower()


@pytest.mark.parametrize("case", ["nan", "labels", "object", "truncated", "not-npz"])
def test_check_data_exits_2_with_one_line(files, case, capsys, tmp_path):
    path, msg = files[case]
    assert main(["check", "--data", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err and msg.lower() in cap.err.lower()


def test_python_api_rejects_bad_arrays():
    for name, (arrays, msg) in BAD_ARRAYS.items():
        if name in ("missing-Y", "unknown-key"):
            continue
        with pytest.raises(InvalidInputError, match=None) as err:
            AttentionData(arrays["X"], arrays["Y"], arrays.get("Z"), arrays.get("v"))
        assert msg.lower() in str(err.value).lower(), (name, str(err.value))


def test_solver_error_becomes_error_instance_with_status():
    from checks import Profile, Theorem, held
    from checks.harness import aggregate, run_instances
    from numerics.errors import SolverError

    class Flaky(Theorem):
        id = "flaky-solver"
        title = "raises solver trouble on odd instances"
        profiles = {"quick": Profile(instances=4, min_confirmed=2)}

        def instance(self, rng, ctx):
            return ctx.instance

        def check_solve(self, k, state, ctx):
            if k % 2:
                raise SolverError("solver stalled", status="optimal_inaccurate", solver="SCS")
            return held()

    res = run_instances(Flaky, [0, 1, 2, 3], profile="quick", seed=0)
    errs = [r for r in res if r.outcome == "error"]
    assert len(errs) == 2 and all(r.solver_status == "optimal_inaccurate" for r in errs)
    assert aggregate(Flaky, res, profile="quick", seed=0).verdict == "ERROR"
