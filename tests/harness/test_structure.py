"""Structure rules: theorem modules do not import each other, no import circles (no module imports one
that imports it back, however long the way round), no shims (no import hooks, no private names in
``__all__``, no catalogue id defined in a private checks/theorems/_*.py module), the GD protocol, the loss
table and corr each have one definition, and the test tree's layout (tests/README.md): every test file in a
tier, none named after a ticket."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import numpy as np
import pytest
import torch

THEOREMS = Path(__file__).resolve().parents[2] / "checks" / "theorems"

#: Theorem modules that import another theorem module: none. A shared base or rule lives in a private module
#: (_global.py, _gradient_check.py, _paths.py, _localpath.py, ...) that both subclass or call.
KNOWN_SIBLING_IMPORTS: set[tuple[str, str]] = set()


def _sibling_imports(path: Path) -> set[str]:
    """Public theorem modules of checks.theorems that ``path`` imports (private _helpers do not count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                names = [mod] if mod else [a.name for a in node.names]
            elif mod.startswith("checks.theorems."):
                names = [mod.split(".")[2]]
            elif mod == "checks.theorems":
                names = [a.name for a in node.names]
            else:
                names = []
        elif isinstance(node, ast.Import):
            names = [a.name.split(".")[2] for a in node.names if a.name.startswith("checks.theorems.")]
        else:
            continue
        out |= {n for n in names if n and not n.startswith("_") and (THEOREMS / f"{n}.py").exists()}
    return out


def test_no_theorem_module_imports_another():
    found = set()
    for path in sorted(THEOREMS.glob("*.py")):
        if path.name.startswith("_"):
            continue
        found |= {(path.stem, other) for other in _sibling_imports(path) if other != path.stem}
    assert found <= KNOWN_SIBLING_IMPORTS, (
        f"theorem modules importing other theorem modules: {sorted(found - KNOWN_SIBLING_IMPORTS)}; "
        "put what they share in a private checks/theorems/_*.py module")


def test_sibling_import_detector_sees_relative_and_absolute_imports(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.THEOREMS", tmp_path)
    for name in ("a", "b", "c", "_helper"):
        (tmp_path / f"{name}.py").write_text("")
    p = tmp_path / "a.py"
    p.write_text("from .b import X\nfrom checks.theorems.c import Y\nfrom ._helper import Z\nimport numpy\n")
    assert _sibling_imports(p) == {"b", "c"}


def test_authors_protocol_has_one_home():
    from dataclasses import FrozenInstanceError

    from checks import catalogue
    from checks.theorem import REGISTRY
    from checks.theorems import gd_global_normalized, gen_svm, kq_gd_nuclear
    from numerics.gd import AUTHORS, AUTHORS_KQ, AUTHORS_WD, NORMALIZED, uniform_init

    assert (AUTHORS.lr, AUTHORS.steps, AUTHORS.geometry, AUTHORS.param, AUTHORS.wd) == (
        0.1, 2000, NORMALIZED, "W", 0.0)
    assert AUTHORS_KQ == AUTHORS.but(param="KQ", wd=AUTHORS_WD)
    assert AUTHORS_WD == float(np.finfo(np.float64).eps)
    with pytest.raises(FrozenInstanceError):
        AUTHORS.lr = 0.2  # type: ignore[misc]
    # the preset is passed to run_gd, not re-aliased: no module but numerics/gd.py writes the pair of numbers
    root = Path(__file__).resolve().parents[2]
    for path in [*root.joinpath("checks").rglob("*.py"), *root.joinpath("numerics").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        assert "GD_LR, GD_STEPS = AUTHORS" not in text, path
        # nor re-aliased to module constants (STEP, STEPS = AUTHORS.lr, AUTHORS.steps): the preset is used
        assert not re.search(r"^\w[\w, ]* = AUTHORS(_KQ)?\.(lr|steps)\b", text, flags=re.M), path
    for mod in (kq_gd_nuclear, gd_global_normalized, gen_svm):
        assert not hasattr(mod, "STEPS") and not hasattr(mod, "LR") and not hasattr(mod, "STEP"), mod
    catalogue.load_builtin()
    for tid in ("seq-svm-normalized", "causal-svm-normalized"):  # the preset itself, passed to run_seq_gd
        thm = REGISTRY[tid]()
        assert (thm.step_size(None), thm.steps(None)) == (AUTHORS.lr, AUTHORS.steps)
    u = uniform_init(np.random.default_rng(0), (1000,), 4)
    assert np.all(np.abs(u) <= 0.5) and u.max() > 0.45 and u.min() < -0.45  # uniform on ±1/√d


def test_numerics_knows_nothing_of_sabotage():
    """Power analysis lives in checks/power and enters GD through numerics.gd's step hook only."""
    root = Path(__file__).resolve().parents[2] / "numerics"
    hits = [str(p) for p in root.rglob("*.py") if "sabotage" in p.read_text(encoding="utf-8").lower()]
    assert hits == []


@pytest.mark.parametrize("loss", ["logistic", "exponential", "linear"])
def test_one_loss_table_and_its_derivative_is_the_derivative(loss):
    from numerics import attention as att
    from numerics import prompt

    assert prompt.LOSSES is att.LOSS_FNS
    u = torch.tensor([-30.0, -3.0, -0.5, 0.0, 0.7, 4.0, 50.0], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(att.loss_value(u, loss).sum(), u)
    d = att.loss_derivative(u.detach(), loss)
    assert torch.allclose(d, g, rtol=1e-12, atol=0.0)
    if loss == "logistic":  # no cancellation for large margins: l'(50) = -e^{-50}/(1 + e^{-50}), not 0
        assert d[-1] < 0 and abs(float(d[-1]) / -np.exp(-50.0) - 1) < 1e-12


def test_one_corr_for_matrices_and_vectors():
    from numerics.tokens import corr

    a, b = np.array([1.0, 2.0, 2.0]), np.array([2.0, 0.0, 0.0])
    assert corr(a, b, axis=-1) == pytest.approx(2.0 / (3.0 * 2.0))
    assert np.isnan(corr(a, np.zeros(3), axis=-1))
    A = np.arange(6.0).reshape(3, 2)
    assert corr(np.stack([A, -A]), A) == pytest.approx([1.0, -1.0])


ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("theory", "numerics", "checks")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules that ``path`` imports, at module level or inside a function (a lazy import
    closes a circle as well): ``from X import name`` counts X.name when that is a module, else X."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in modules and t != me}
    return out


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {_module_name(p) for p in files}
    # a package's __init__ re-exporting its submodules is not a circle with them: edges into a package
    # itself are left out (importing checks.x runs checks/__init__ first, which is no dependency of x's)
    packages = {_module_name(p) for p in files if p.name == "__init__.py"}
    return {_module_name(p): _imports(p, modules) - packages for p in files}


def test_no_import_circles():
    """Two modules that import each other (directly or around a longer circle, lazily or not) are one
    module split in two: move what both need into a third that both import."""
    assert _circles(_graph()) == []


def test_circle_detector_finds_a_lazy_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_stated_python_minimum_parses_every_module():
    """pyproject's requires-python is the oldest Python the code is written for: every module parses with
    that grammar (ast's feature_version), and 3.10 is not claimed (checks.catalogue needs tomllib, 3.11)."""
    import re
    import tomllib

    spec = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    major, minor = map(int, re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip()).groups())
    assert (major, minor) >= (3, 11)
    for pkg in (*PACKAGES, "tests", "examples", "tools"):
        for path in (ROOT / pkg).rglob("*.py"):
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(major, minor))


TESTS = ROOT / "tests"
TIERS = ("theory", "numerics", "harness", "theorems")


def _test_files() -> list[Path]:
    """Every pytest file under tests/, the plugin fixtures in tests/data left out."""
    return [p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts[:-1]]


def test_no_test_file_sits_directly_in_tests():
    """tests/ holds only the shared conftest.py, the plugin fixtures (data/) and the tiers (tests/README.md):
    a test file lives in the tier of the layer it tests."""
    loose = sorted(p.name for p in TESTS.glob("*.py") if p.name != "conftest.py")
    assert loose == [], f"test files directly in tests/ (move each into tests/<tier>/): {loose}"
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"} <= {*TIERS, "data"}
    assert all(p.relative_to(TESTS).parts[0] in TIERS for p in _test_files())


def test_test_files_are_named_after_what_they_test():
    """No test file is named after a ticket (the issue lives in the docstring and the history), basenames are
    unique across tiers (the tiers are not packages: pytest imports each file by its basename), and each file
    opens with a docstring saying what it guarantees."""
    names = [p.name for p in _test_files()]
    assert [n for n in names if "issue" in n.lower()] == []
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    undocumented = [p.name for p in _test_files()
                    if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert undocumented == [], f"test files without a docstring saying what they guarantee: {undocumented}"


# -- no shims ------------------------------------------------------------------------------------------
def _package_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _import_hooks(tree: ast.AST) -> list[str]:
    """What in ``tree`` touches the import system's hooks: ``sys.meta_path`` / ``sys.path_hooks``, or a
    class built on importlib's finder and loader bases."""
    bases = {"MetaPathFinder", "PathEntryFinder", "Finder", "Loader", "SourceLoader", "FileLoader"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("meta_path", "path_hooks"):
            found.append(f"line {node.lineno}: sys.{node.attr}")
        elif isinstance(node, ast.ClassDef):
            names = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            if names & bases:
                found.append(f"line {node.lineno}: class {node.name}({', '.join(sorted(names & bases))})")
    return found


def test_no_module_installs_an_import_hook():
    """An import path exists because the module is there: no meta-path finder or loader maps old paths to
    new modules (the shim checks/_moved.py was removed: import from the defining module)."""
    found = {str(p.relative_to(ROOT)): h for p in _package_files()
             if (h := _import_hooks(ast.parse(p.read_text(encoding="utf-8"))))}
    assert found == {}
    for old in ("checks.sweep", "checks.assumptions", "checks.reproduce", "checks.svm_cli", "checks._moved"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_import_hook_detector_sees_finders_and_meta_path():
    tree = ast.parse("import sys, importlib.abc\nclass F(importlib.abc.MetaPathFinder): pass\n"
                     "sys.meta_path.insert(0, F())\n")
    assert len(_import_hooks(tree)) == 2
    assert _import_hooks(ast.parse("import sys\nsys.path.insert(0, '.')\n")) == []


def _all_names(tree: ast.Module) -> list[str]:
    """The string entries of every ``__all__ = [...]`` / ``__all__ += [...]`` at module level."""
    out = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            out += [e.value for e in ast.walk(node.value)
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out


def test_no_private_name_in_all():
    """``__all__`` lists a module's public names: a private helper is imported from the module that defines
    it, never re-exported."""
    names = {str(p.relative_to(ROOT)): _all_names(ast.parse(p.read_text(encoding="utf-8")))
             for p in _package_files()}
    private = {f: bad for f, ns in names.items() if (bad := [n for n in ns if n.startswith("_")])}
    assert private == {}


def test_no_catalogue_id_in_a_private_theorem_module():
    """Each catalogue entry (theorem and control) is defined in its own public module of checks/theorems: a
    private _*.py module holds shared bases and rules only, and sets no class attribute ``id``."""
    from checks import catalogue
    from checks.theorem import REGISTRY

    for path in sorted(THEOREMS.glob("_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                ids = [t.id for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                       for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
                       if isinstance(t, ast.Name) and t.id == "id"]
                assert not ids, f"{path.name}: class {node.name} sets id (a catalogue entry: its own module)"
    catalogue.load_builtin()
    for cls in REGISTRY.values():
        if not cls.__module__.startswith("checks.theorems."):
            continue  # plugins
        owner = next(k for k in cls.__mro__ if "id" in vars(k))
        assert owner is cls and not cls.__module__.rpartition(".")[2].startswith("_"), (cls.id, owner)


def test_no_prose_paragraph_is_broken_mid_sentence():
    """Comments and docstrings read as paragraphs: none has a short tail line in its middle, the mark of the
    old per-line wrap pass (tools/reflow.py finds and re-fills them; run it on a file this test names)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("reflow", ROOT / "tools" / "reflow.py")
    assert spec and spec.loader
    reflow = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reflow)
    broken = {}
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in ("theory", "numerics", "checks", "tests", "examples", "tools"):
            continue
        _, where = reflow.reflow_source(path.read_text(encoding="utf-8"))
        if where:
            broken[str(rel)] = where
    assert not broken, f"paragraphs broken mid-sentence (python tools/reflow.py FILE): {broken}"
