"""Loading the catalogue: built-in theorem modules, plugin files, selection by id."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import json
import os
import pkgutil
import sys
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerics.errors import InvalidInputError

if TYPE_CHECKING:
    from .theorem import Theorem

# checks.theorem (and numpy with it) loads on first use, so that reading the metadata cache imports nothing
# heavy (`attnsvm list`).

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
    from .theorem import REGISTRY

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
        raise InvalidInputError(
            f"plugin {path}: defines no theorem (decorate a checks.Theorem subclass with @register)"
        )
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
    "gd-global-normalized", "gd-local-normalized", "p-svm-gd-normalized",
    "gd-local-normalized-self-attention", "seq-svm-normalized", "causal-svm-normalized",
    # issue 15: the rest of both papers
    "smoothness-step", "cone-no-stationary", "kq-divergence", "nuclear-factorisation", "rp-kq-rank",
    "rp-w-local", "rp-kq-local", "overparam-support",
    "p-rp-path", "p-gd-equivalence", "p-nonlinear-head", "joint-vp-path-equal-radii",
    # issue 25: mirror descent (arXiv 2410.14581)
    "md-global", "md-global-normalized", "md-local",
    # issue 24 §4: self-attention variants (z_i = x_i1) on the shared families
    "rp-w-frobenius-self", "rp-kq-nuclear-self",
)


def ordered() -> list[type[Theorem]]:
    """The catalogue in THEORY.md order (plugins after), each theorem followed by its controls."""
    from .theorem import REGISTRY

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
    from .theorem import REGISTRY

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


# -- the catalogue's metadata without importing the numerics (``attnsvm list``) ------------------------
#: Top-level packages of this project: a change in any of their loaded files may change the catalogue.
_OWN_PACKAGES = ("checks", "numerics", "theory")


def cache_root() -> Path:
    """attnsvm's cache folder: ``$ATTNSVM_CACHE``, else ``$XDG_CACHE_HOME/attnsvm``, else
    ``~/.cache/attnsvm``."""
    env = os.environ.get("ATTNSVM_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "attnsvm"


def _digest(path: str | Path) -> str | None:
    try:
        return hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return None


def _theorem_files() -> list[str]:
    folder = Path(__file__).resolve().parent / "theorems"
    return sorted(f.name for f in folder.glob("*.py"))


def _metadata_path(plugin_files: list[Path]) -> Path:
    key = json.dumps(
        [str(Path(__file__).resolve()), sys.version, *[str(Path(p).resolve()) for p in plugin_files]]
    )
    return cache_root() / f"catalogue-{hashlib.blake2b(key.encode(), digest_size=8).hexdigest()}.json"


def _source_files(plugin_files: list[Path]) -> dict[str, str | None]:
    """Every loaded source file the catalogue may depend on: the project's own modules, the plugin files
    and modules loaded from a plugin's folder; with their content digests."""
    plugin_dirs = {str(Path(p).resolve().parent) for p in plugin_files}
    files: dict[str, str | None] = {str(Path(p).resolve()): None for p in plugin_files}
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        top = name.split(".", 1)[0]
        if (
            top in _OWN_PACKAGES
            or top.startswith("attnsvm_plugin_")
            or str(Path(f).resolve().parent) in plugin_dirs
        ):
            files[str(Path(f).resolve())] = None
    # the committed resolution figures are part of describe() (Theorem.resolution)
    files[str(Path(__file__).resolve().parent / "power" / "resolution.json")] = None
    return {f: _digest(f) for f in sorted(files)}


def cached_metadata(plugin_files: list[Path]) -> list[dict[str, Any]] | None:
    """``describe()`` of every theorem in :func:`ordered` order, from the cache written by
    :func:`store_metadata`, or None when there is none or any source file it was built from changed
    (content digest), a theorem module was added or removed, or the plugin files differ."""
    try:
        cached = json.loads(_metadata_path(plugin_files).read_text(encoding="utf-8"))
        if cached["theorem_files"] != _theorem_files():
            return None
        for f, dig in cached["files"].items():
            if dig is None or _digest(f) != dig:
                return None
        entries = cached["entries"]
        return entries if isinstance(entries, list) else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def store_metadata(plugin_files: list[Path], entries: list[dict[str, Any]]) -> None:
    """Write the metadata cache of the loaded catalogue (best effort: an unwritable cache is skipped)."""
    payload = {"theorem_files": _theorem_files(), "files": _source_files(plugin_files), "entries": entries}
    try:
        path = _metadata_path(plugin_files)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
