"""attnsvm's harness: theorem catalogue, instance strategies, verdicts, reports, CLI."""

import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.util as _importlib_util
import sys as _sys

from .theorem import (
    DEFAULT_PROFILES,
    REGISTRY,
    Context,
    Criterion,
    Outcome,
    Profile,
    Theorem,
    decide,
    failed,
    held,
    register,
    undecided,
)

__all__ = [
    "DEFAULT_PROFILES", "REGISTRY", "Context", "Criterion", "Outcome", "Profile", "Theorem",
    "decide", "failed", "held", "register", "undecided",
]

# Modules that moved into subpackages (issue 13) keep their old import paths, resolved lazily to the same
# module object (tests, plugins and other branches still import them as checks.sweep etc.):
#   checks.sweep -> checks.experiments.sweep, checks.assumptions -> checks.experiments.assumptions,
#   checks.reproduce -> checks.experiments.reproduce, checks.svm_cli -> checks.cli.svm.
# New code imports the new paths.
MOVED = {
    "checks.sweep": "checks.experiments.sweep",
    "checks.assumptions": "checks.experiments.assumptions",
    "checks.reproduce": "checks.experiments.reproduce",
    "checks.svm_cli": "checks.cli.svm",
}


class _MovedLoader(_importlib_abc.Loader):
    """Loads an old module path as the module now living at MOVED[name] (one module object, two names)."""

    def create_module(self, spec):
        return _importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):  # already executed under its new name
        return None


class _MovedFinder(_importlib_abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return _importlib_util.spec_from_loader(fullname, _MovedLoader())


if not any(isinstance(f, _MovedFinder) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedFinder())

# Power analysis (README, "Power analysis"): ATTNSVM_SABOTAGE=name installs a sabotaged component for
# the whole process (and, through the environment, its subprocesses). Unset in every normal run.
if __import__("os").environ.get("ATTNSVM_SABOTAGE"):
    from numerics.sabotage import install_from_env as _install_sabotage

    _install_sabotage()
