"""Loading the catalogue: built-in theorem modules, plugin files, selection by id."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path

import tomllib

from numerics.errors import InvalidInputError

from .theorem import REGISTRY, Theorem

_loaded_builtin = False


def load_builtin() -> None:
    """Import every module of checks/theorems (each registers its theorems and controls)."""
    global _loaded_builtin
    if _loaded_builtin:
        return
    from . import theorems

    for mod in sorted(pkgutil.iter_modules(theorems.__path__), key=lambda m: m.name):
        if not mod.name.startswith("_"):
            importlib.import_module(f"{theorems.__name__}.{mod.name}")
    _loaded_builtin = True


def load_plugin(path: str | Path) -> list[str]:
    """Execute a plugin file; returns the ids it registered. Bad files get a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"plugin {path}: no such file")
    if path.suffix != ".py":
        raise InvalidInputError(f"plugin {path}: expected a .py file")
    name = f"attnsvm_plugin_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    if name in sys.modules:
        return [k for k, c in REGISTRY.items() if c.__module__ == name]
    before = set(REGISTRY)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise InvalidInputError(f"plugin {path}: failed to load ({type(exc).__name__}: {exc})") from None
    added = sorted(set(REGISTRY) - before)
    if not added:
        raise InvalidInputError(f"plugin {path}: defines no theorem (decorate a checks.Theorem subclass with @register)")
    return added


def pyproject_plugins(start: str | Path = ".") -> list[Path]:
    """Plugin files listed in ``[tool.attnsvm] plugins`` of the pyproject.toml in ``start``."""
    pp = Path(start) / "pyproject.toml"
    if not pp.is_file():
        return []
    try:
        cfg = tomllib.loads(pp.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{pp}: invalid TOML ({exc})") from None
    plugins = cfg.get("tool", {}).get("attnsvm", {}).get("plugins", [])
    if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
        raise InvalidInputError(f"{pp}: [tool.attnsvm] plugins must be a list of file paths")
    return [pp.parent / p for p in plugins]


#: THEORY.md §4 order; plugin theorems follow in registration order.
CANONICAL_ORDER = (
    "loss-assumptions", "gradient-closed-form", "kq-chain-rule", "covariance-identity", "svm-rank-bound",
    "svm-feasibility", "no-stationary-points", "overparam-landscape", "rp-w-frobenius", "rp-kq-nuclear",
    "gd-global", "gd-local", "kq-gd-nuclear", "overparam-global", "gen-svm", "seq-svm", "causal-svm",
    "p-svm-gd", "joint-vp-path",
    "gd-global-normalized",
)


def ordered() -> list[type[Theorem]]:
    """The catalogue in THEORY.md order (plugins after), each theorem followed by its controls."""
    rank = {tid: i for i, tid in enumerate(CANONICAL_ORDER)}
    theorems = [c for c in REGISTRY.values() if not c.control_of]
    theorems.sort(key=lambda c: rank.get(c.id, len(rank)))  # stable: plugins keep registration order
    out: list[type[Theorem]] = []
    for thm in theorems:
        out.append(thm)
        out.extend(c for c in REGISTRY.values() if c.control_of == thm.id)
    out.extend(c for c in REGISTRY.values() if c.control_of and c not in out)  # orphan controls
    return out


def select(ids: list[str] | None) -> list[type[Theorem]]:
    """Theorems by id (a theorem brings its controls along); all when ``ids`` is empty."""
    cat = ordered()
    if not ids:
        return cat
    wanted: set[str] = set()
    for i in ids:
        if i not in REGISTRY:
            close = difflib.get_close_matches(i, list(REGISTRY), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; `attnsvm list` shows the catalogue"
            raise InvalidInputError(f"unknown theorem id {i!r}{hint}")
        wanted.add(i)
        wanted.update(c.id for c in REGISTRY.values() if c.control_of == i)
    return [c for c in cat if c.id in wanted]
