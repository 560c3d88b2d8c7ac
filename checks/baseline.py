"""``attnsvm check --baseline FILE``: load a committed report.json and name every verdict that changed
(validated before the run starts, compared after it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerics.errors import InvalidInputError

if TYPE_CHECKING:
    from .harness import TheoremResult


class BaselineMismatch(Exception):
    """The baseline was made with another profile, seed or dataset: its verdicts are not comparable."""


def load_baseline(baseline: str | Path) -> dict[str, Any]:
    """Read and validate a baseline report.json (done before a run, so a bad file costs no run time)."""
    path = Path(baseline)
    if not path.is_file():
        raise InvalidInputError(f"--baseline {path}: no such file")
    try:
        base = json.loads(path.read_text(encoding="utf-8"))
        verdicts = {t["id"]: t["verdict"] for t in base["theorems"]}
        brun = base.get("run", {})
        if not isinstance(brun, dict):
            raise TypeError("'run' is not an object")
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"--baseline {path}: not an attnsvm report.json ({exc})") from None
    return {"path": str(path), "verdicts": verdicts, "run": brun}


def compare_baseline(results: Sequence[TheoremResult], baseline: str | Path | dict[str, Any],
                     run: dict[str, Any] | None = None) -> list[str]:
    """Lines naming every theorem whose verdict differs from the baseline report. With ``run`` (this
    run's metadata), raises :class:`BaselineMismatch` when profile, seed or data differ."""
    base = baseline if isinstance(baseline, dict) else load_baseline(baseline)
    if run is not None:
        for key in ("profile", "seed", "data"):
            if base["run"].get(key) != run.get(key):
                raise BaselineMismatch(
                    f"baseline {base['path']} is for {key} {base['run'].get(key)!r}, this run "
                    f"has {run.get(key)!r}: verdicts are not comparable, comparison skipped"
                )
    verdicts = base["verdicts"]
    return [f"{t.id}: {verdicts[t.id]} -> {t.verdict}" for t in results
            if t.id in verdicts and verdicts[t.id] != t.verdict]
