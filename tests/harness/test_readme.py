"""The README's code is the code: its plugin example is examples/plugin_theorem.py, its pytest
regression snippet runs from any working directory, and its commands are the ones CI runs."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(after: str) -> list[str]:
    section = README[README.index(after):]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_plugin_example_is_the_example_file():
    example = (ROOT / "examples" / "plugin_theorem.py").read_text(encoding="utf-8")
    lines = {ln.split("  #")[0].strip() for ln in example.splitlines()}
    snippet = _blocks("## Adding a theorem")[0]
    for raw in snippet.splitlines():
        code = raw.split("  #")[0].strip()
        if not code or "..." in code:
            continue
        assert code in lines, f"README line not in examples/plugin_theorem.py: {code!r}"


def test_readme_writing_a_theorem_example_is_the_example_file():
    """The walk-through's code is grad-norm-bound in examples/plugin_theorem.py (which
    tests/harness/test_plugin_authoring.py runs: theorem, sharp control, --data)."""
    example = (ROOT / "examples" / "plugin_theorem.py").read_text(encoding="utf-8")
    lines = {ln.split("  #")[0].strip() for ln in example.splitlines()}
    snippet = _blocks("## Writing a theorem and its control")[0]
    assert "class GradNormBoundControl(GradNormBound):" in snippet
    for raw in snippet.splitlines():
        code = raw.split("  #")[0].strip()
        if code:
            assert code in lines, f"README line not in examples/plugin_theorem.py: {code!r}"


def test_readme_pytest_snippet_runs_from_another_directory(tmp_path):
    snippet = _blocks("Make it a regression test")[0]
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(ROOT / "examples" / "plugin_theorem.py", proj / "my_theorem.py")
    (proj / "test_mine.py").write_text(snippet.replace('"my-theorem"', '"softmax-simplex"'))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(proj / "test_mine.py")],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout  # the theorem and its control


def test_ci_runs_the_readme_test_command():
    assert "tox -e py" in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "tox -e py" in ci
