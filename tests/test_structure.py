"""Structure rules of issue 13: theorem modules do not import each other, moved modules keep their old
import paths, and the GD protocol, the loss table and corr each have one definition."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np
import pytest
import torch

THEOREMS = Path(__file__).resolve().parents[1] / "checks" / "theorems"

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


@pytest.mark.parametrize("old, new", [
    ("checks.sweep", "checks.experiments.sweep"),
    ("checks.assumptions", "checks.experiments.assumptions"),
    ("checks.reproduce", "checks.experiments.reproduce"),
    ("checks.svm_cli", "checks.cli.svm"),
])
def test_moved_modules_keep_their_old_import_path(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


def test_public_names_survive_the_split():
    from checks import reproduce as R
    from checks.report import fails_run, write_html, write_markdown
    from checks.sweep import wilson_interval
    from numerics.gd import GDResult, regularization_path, run_gd

    assert callable(R.lc_chunk) and R.GD_STEPS == 2000 and R.AUTHORS_WD > 0
    assert all(callable(f) for f in (fails_run, write_html, write_markdown, wilson_interval, run_gd,
                                      regularization_path))
    assert GDResult.__module__ == "numerics.gd_common"


def test_authors_protocol_has_one_home():
    from dataclasses import FrozenInstanceError

    from checks.experiments import assumptions, common
    from checks.theorems import gd_global_normalized, gen_svm, kq_gd_nuclear, seq_svm
    from numerics.gd_config import AUTHORS, AUTHORS_WD, uniform_init

    assert (AUTHORS.lr, AUTHORS.steps, AUTHORS.normalized) == (0.1, 2000, True)
    assert AUTHORS.kq_weight_decay == AUTHORS_WD == float(np.finfo(np.float64).eps)
    assert AUTHORS.run_kwargs("W")["weight_decay"] == 0.0
    assert AUTHORS.run_kwargs("KQ")["weight_decay"] == AUTHORS_WD
    with pytest.raises(FrozenInstanceError):
        AUTHORS.lr = 0.2  # type: ignore[misc]
    for mod in (common, assumptions):
        assert (mod.GD_LR, mod.GD_STEPS) == (AUTHORS.lr, AUTHORS.steps)
    assert (kq_gd_nuclear.STEP, kq_gd_nuclear.STEPS) == (AUTHORS.lr, AUTHORS.steps)
    assert (gd_global_normalized.STEP, gd_global_normalized.STEPS) == (AUTHORS.lr, AUTHORS.steps)
    assert (gen_svm.LR, gen_svm.STEPS) == (seq_svm.LR, seq_svm.STEPS) == (AUTHORS.lr, AUTHORS.steps)
    u = uniform_init(np.random.default_rng(0), (1000,), 4)
    assert np.all(np.abs(u) <= 0.5) and u.max() > 0.45 and u.min() < -0.45  # uniform on ±1/√d


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
