import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402

# tests/data holds plugin files for `--plugin` (they register theorems when executed): pytest's
# --doctest-modules must not import them as modules, or their ids are taken before a test loads them.
collect_ignore = ["data"]
from hypothesis import settings  # noqa: E402

# Deterministic property tests in CI: no example database, derandomized.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=40)
settings.register_profile("dev", deadline=None, max_examples=40)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def example_plugin():
    from pathlib import Path

    return str(Path(__file__).resolve().parents[1] / "examples" / "plugin_theorem.py")
