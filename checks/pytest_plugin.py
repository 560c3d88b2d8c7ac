"""The attnsvm pytest plugin: a repository's own theorem files run under plain ``pytest``.

Installed with attnsvm (entry point ``pytest11``: ``attnsvm``; or load it with ``-p checks.pytest_plugin``).
It adds two options:

- ``--attnsvm-plugin FILE.py`` (repeatable): a theorem file (``@register``-ed theorems and their controls,
  as for ``attnsvm check --plugin``) whose theorems become test cases;
- ``--attnsvm-profile quick|full|paper`` (default quick): the instance budget they run on (seed 0).

The files listed in ``[tool.attnsvm] plugins`` of the pyproject.toml in pytest's rootdir count too, when
pytest's collection reaches them. Each theorem file collects one case per (theorem, prediction), named
``THEOREM::check_NAME`` (``pytest -k my-theorem::check_bound`` runs one prediction), judged by
:func:`checks.testing.assert_prediction_as_expected`: a prediction of a theorem must PASS, a documented
finding is a strict xfail on the prediction it concerns, a control must be refuted. Put the options in
the repository's pytest configuration (``addopts = "--attnsvm-plugin my_theorem.py"``) and ``pytest``
alone runs the theorem with its control."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PROFILES = ("quick", "full", "paper")  # checks.theorem.PROFILES, without importing the numerics at start-up

#: The theorem files of this session (named with --attnsvm-plugin, or listed in the rootdir's pyproject).
FILES = pytest.StashKey[set]()


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("attnsvm", "attnsvm theorem files")
    group.addoption("--attnsvm-plugin", action="append", default=[], metavar="FILE.py",
                    help="collect the theorems of FILE.py, one case per (theorem, prediction) (repeatable)")
    group.addoption("--attnsvm-profile", choices=PROFILES, default="quick",
                    help="instance budget of the attnsvm theorem cases (default quick)")


def _named(config: Any) -> list[Path]:
    """The --attnsvm-plugin files, relative to the directory pytest was started in; a missing one or one
    that is not a .py file is a usage error (one line, exit 4)."""
    out = []
    for p in config.getoption("attnsvm_plugin") or []:
        path = (Path(config.invocation_params.dir) / p).resolve()
        if not path.is_file() or path.suffix != ".py":
            raise pytest.UsageError(f"--attnsvm-plugin {p}: no such .py file")
        out.append(path)
    return out


def pytest_configure(config: Any) -> None:
    named = _named(config)
    listed: list[Path] = []
    try:
        from .catalogue import pyproject_plugins

        listed = [p.resolve() for p in pyproject_plugins(str(config.rootpath))]
    except Exception:  # noqa: BLE001 - a pyproject without (valid) [tool.attnsvm]: nothing listed
        listed = []
    config.stash[FILES] = set(named) | set(listed)
    # a named file outside every path pytest collects is added to them (pytest tests/ --attnsvm-plugin x.py)
    roots = [(Path(config.invocation_params.dir) / a.split("::")[0]).resolve() for a in config.args]
    for f in named:
        if not any(f == r or r in f.parents for r in roots):
            config.args.append(str(f))


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    if file_path.suffix == ".py" and file_path.resolve() in parent.config.stash.get(FILES, set()):
        return TheoremFile.from_parent(parent, path=file_path)
    return None


class TheoremFile(pytest.File):
    """A theorem file: loaded as ``attnsvm check --plugin`` loads it (the built-in catalogue is not: it
    is not what the file's tests are about, and takes seconds to import); one :class:`PredictionItem` per
    (theorem, prediction) it registers, in registration order."""

    def collect(self):
        from . import catalogue
        from .theorem import REGISTRY

        profile = self.config.getoption("attnsvm_profile")
        for tid in catalogue.load_plugin(self.path):
            cls = REGISTRY[tid]
            for name in cls.prediction_names():
                yield PredictionItem.from_parent(self, name=f"{cls.id}::check_{name}", theorem=cls,
                                                 prediction=name, profile=profile)


class PredictionItem(pytest.Item):
    """One prediction of one theorem (:func:`checks.testing.assert_prediction_as_expected`)."""

    def __init__(self, *, theorem: Any, prediction: str, profile: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.theorem, self.prediction, self.profile = theorem, prediction, profile

    def runtest(self) -> None:
        from .testing import assert_prediction_as_expected

        assert_prediction_as_expected(self.theorem, self.prediction, profile=self.profile)

    def reportinfo(self):
        return self.path, None, f"{self.name} ({self.profile} profile, seed 0)"
