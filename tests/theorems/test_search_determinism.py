"""A Hypothesis search of the gradient checks depends on its seed alone, not on what else the process has
imported: Hypothesis draws some numbers from the literals of the local modules loaded in the process (and
caches them per process), so without checks.theorems._gradients._no_local_constants the same instance gave
another counterexample in a full catalogue run than alone (kq-chain-rule, gradient-closed-form)."""

import importlib
import sys

from checks.theorems._gradients import gradient_cases, gradient_discrepancy, hypothesis_search


def _search():
    found, metrics = hypothesis_search(gradient_cases(), gradient_discrepancy("no-outer"), seed=3,
                                       max_examples=30)
    return (None if found is None else found.W.tolist()), metrics


def test_search_does_not_depend_on_the_modules_the_process_imported(tmp_path, monkeypatch):
    before = _search()
    # a local module full of float and integer literals, as any other theorem module of the catalogue is
    (tmp_path / "lots_of_constants.py").write_text(
        "VALUES = [" + ", ".join(f"{0.37 * k + 1e-3:.6f}, {k * 7919}" for k in range(200)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("lots_of_constants")
    try:
        assert _search() == before
    finally:
        sys.modules.pop("lots_of_constants", None)
