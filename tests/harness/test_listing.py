"""`attnsvm list` from the catalogue's metadata cache: the same output as the loaded catalogue, no numerics
imported when the cache is valid, and a changed source file (here a plugin) rebuilds it."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
from checks import Theorem, decide, register


@register
class Tiny(Theorem):
    id = "tiny-listing"
    title = "TITLE"
    reference = "test fixture"

    def instance(self, rng, ctx):
        return rng.uniform()

    def check_range(self, x, state, ctx):
        return decide(0 <= x < 1, "out of range")
'''

PROBE = (
    "import io, contextlib, json, sys\n"
    "from checks.cli import main\n"
    "buf = io.StringIO()\n"
    "with contextlib.redirect_stdout(buf):\n"
    "    rc = main(sys.argv[1:])\n"
    "heavy = sorted(m for m in ('numpy', 'torch', 'cvxpy', 'sympy', 'scipy', 'numba') if m in sys.modules)\n"
    "print(json.dumps({'rc': rc, 'out': buf.getvalue(), 'heavy': heavy}))\n"
)


def _list(cache: Path, *args: str) -> dict:
    env = dict(os.environ, ATTNSVM_CACHE=str(cache))
    r = subprocess.run([sys.executable, "-c", PROBE, "list", *args], capture_output=True, text=True, cwd=ROOT,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_list_from_cache_matches_the_loaded_catalogue(tmp_path):
    plugin = tmp_path / "tiny.py"
    plugin.write_text(PLUGIN)
    cache = tmp_path / "cache"
    cold = _list(cache, "--json", "--plugin", str(plugin))
    assert cold["rc"] == 0 and "torch" in cold["heavy"]  # nothing cached yet: the catalogue was loaded
    warm = _list(cache, "--json", "--plugin", str(plugin))
    assert warm["rc"] == 0 and warm["heavy"] == [], "a valid cache must not import the numerics"
    assert warm["out"] == cold["out"]
    entries = json.loads(warm["out"])
    ids = [e["id"] for e in entries]
    assert "tiny-listing" in ids and "gd-local" in ids and "gd-local-control" in ids
    assert next(e for e in entries if e["id"] == "tiny-listing")["title"] == "TITLE"

    text_cold = _list(cache, "--plugin", str(plugin))
    assert (
        text_cold["heavy"] in ([], ["numpy"]) and "tiny-listing" in text_cold["out"]
    )  # numpy: report's line

    plugin.write_text(PLUGIN.replace('"TITLE"', '"NEW TITLE"'))  # a changed source file: the cache is stale
    changed = _list(cache, "--json", "--plugin", str(plugin))
    assert "torch" in changed["heavy"]
    assert next(e for e in json.loads(changed["out"]) if e["id"] == "tiny-listing")["title"] == "NEW TITLE"
    assert _list(cache, "--json", "--plugin", str(plugin))["heavy"] == []


def test_list_without_the_plugin_uses_its_own_cache(tmp_path):
    cache = tmp_path / "cache"
    first = _list(cache, "--json")
    second = _list(cache, "--json")
    assert second["heavy"] == [] and second["out"] == first["out"]
    assert "tiny-listing" not in first["out"]


def test_help_imports_no_numerics():
    r = subprocess.run(
        [sys.executable, "-c", PROBE.replace("main(sys.argv[1:])", "0"), "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["heavy"] == []
