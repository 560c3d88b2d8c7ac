"""New theory as regression tests (checks/testing.py, checks/pytest_plugin.py): one pytest case per
(theorem, prediction) named ``THEOREM::check_NAME``; a documented finding is a strict xfail on the case it
concerns; a researcher's repository with one theorem file, outside this repository, runs its theorem and
control under plain ``pytest`` through the plugin's ``--attnsvm-plugin`` / ``--attnsvm-profile``."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from checks.testing import prediction_cases

ROOT = Path(__file__).resolve().parents[2]
FINDING = ROOT / "tests" / "data" / "finding_plugin.py"


def _pytest(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``pytest`` in ``repo`` as a researcher runs it, with this checkout's attnsvm first on the path. The
    plugin comes from the installed entry point; an older installed attnsvm without it gets ``-p``."""
    installed = any(ep.name == "attnsvm" for ep in importlib.metadata.entry_points(group="pytest11"))
    load = [] if installed else ["-p", "checks.pytest_plugin"]
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-m", "pytest", *load, "-p", "no:cacheprovider", "-v", *args],
                          cwd=repo, env=environ, capture_output=True, text=True, timeout=300)


def test_the_entry_point_is_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"attnsvm": "checks.pytest_plugin"}


def test_one_case_per_prediction(example_plugin):
    ids = [p.id for p in prediction_cases(["softmax-simplex"], [example_plugin])]
    assert ids == ["softmax-simplex::check_simplex", "softmax-simplex-control::check_simplex"]


def test_a_researchers_repository_runs_its_theorem_under_plain_pytest(tmp_path):
    repo = tmp_path / "my-theory"
    repo.mkdir()
    shutil.copy(ROOT / "examples" / "plugin_theorem.py", repo / "my_theorem.py")
    shutil.copy(FINDING, repo / "finding_theorem.py")
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\n'
                                         'addopts = "--attnsvm-plugin my_theorem.py"\n')

    r = _pytest(repo)  # plain pytest: the theorem and its control, one case per prediction
    assert r.returncode == 0, r.stdout + r.stderr
    assert "my_theorem.py::softmax-simplex::check_simplex PASSED" in r.stdout
    assert "my_theorem.py::softmax-simplex-control::check_simplex PASSED" in r.stdout
    assert "my_theorem.py::grad-norm-bound::check_bound PASSED" in r.stdout
    assert "my_theorem.py::grad-norm-bound-control::check_bound PASSED" in r.stdout  # refutes the control
    # the integrity prediction holds on the control: not what the control breaks, so a skip with the reason
    assert "my_theorem.py::grad-norm-bound-control::check_gradient_is_derivative SKIPPED" in r.stdout
    assert "5 passed, 1 skipped" in r.stdout

    r = _pytest(repo, "--attnsvm-plugin", "finding_theorem.py", "-k", "finding-sum")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "finding-sum::check_range PASSED" in r.stdout
    assert "finding-sum::check_marked XFAIL" in r.stdout  # the documented finding, on the case it concerns
    assert "finding-sum-control::check_range PASSED" in r.stdout  # refutes the control
    assert "finding-sum-control::check_marked SKIPPED" in r.stdout  # holds there: not what the control breaks
    assert "6 deselected" in r.stdout  # -k kept finding-sum's cases, not my_theorem.py's

    # strict: once the finding is no longer seen, its case fails (the documentation must be updated)
    r = _pytest(repo, "--attnsvm-plugin", "finding_theorem.py", "-k", "finding-sum::check_marked",
                ATTNSVM_TEST_FINDING_AT="99")
    assert r.returncode == 1
    assert "finding-sum::check_marked FAILED" in r.stdout and "strict xfail" in r.stdout
    assert "1 failed, 9 deselected" in r.stdout  # -k selected that one prediction (of 10)

    r = _pytest(repo, "--attnsvm-plugin", "missing.py")
    assert r.returncode == 4 and "--attnsvm-plugin missing.py: no such .py file" in r.stderr
