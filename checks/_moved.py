"""Old import paths of modules that moved into subpackages (issue 13), kept working for tests, plugins and
code written against them: ``checks.sweep`` is ``checks.experiments.sweep`` (the same module object, loaded
on first import of either name), likewise the others in :data:`MOVED`. New code imports the new paths.

Importing this module only installs a meta-path finder (no numerics are imported).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED = {
    "checks.sweep": "checks.experiments.sweep",
    "checks.assumptions": "checks.experiments.assumptions",
    "checks.reproduce": "checks.experiments.reproduce",
    "checks.svm_cli": "checks.cli.svm",
}


class _MovedLoader(importlib.abc.Loader):
    """Loads an old module path as the module now living at MOVED[name] (one module object, two names)."""

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:  # already executed under its new name
        return None


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader())


# First on the path: an installed copy of the project elsewhere must not answer for the old names.
if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
