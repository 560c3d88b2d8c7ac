"""What one ``attnsvm check`` run does, shared by the runner (checks.runner) and the pool (checks.pool):
its configuration (:class:`CheckConfig`, kept in run.json so --resume continues exactly that run), the
catalogue and data it loads, the theorems and instance indices it runs (:func:`make_plan`), the blocks
those instances are prepared in (:func:`instance_blocks`), and the replay line and counterexample file
of a refuted instance."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerics.errors import InvalidInputError

from . import catalogue

if TYPE_CHECKING:
    from .harness import InstanceResult
    from .theorem import Theorem


def load_catalogue(plugins: Sequence[str] = (), *, use_pyproject: bool = True) -> None:
    catalogue.load_builtin()
    files = [Path(p) for p in plugins]
    if use_pyproject:
        files = catalogue.pyproject_plugins(".") + files
    for f in files:
        catalogue.load_plugin(f)


def load_data_arg(spec: str | None):
    """--data FILE.npz | digits -> AttentionData or NTPData (by the file's keys), or None."""
    if spec is None:
        return None
    from numerics import data as nd
    from numerics.ntp import load_dataset

    if spec == "digits":
        return nd.load_digits_data()
    return load_dataset(spec)


@dataclass
class CheckConfig:
    """What one `attnsvm check` run does: the arguments that decide its results (run.json keeps them, so
    --resume continues exactly that run)."""

    ids: list[str] = field(default_factory=list)
    profile: str = "quick"
    seed: int = 0
    device: str = "cpu"
    data: str | None = None
    plugins: list[str] = field(default_factory=list)
    instance: int | None = None
    sabotage: str | None = None  # power analysis: a broken component for the whole run (checks.power)

    def to_json(self, run_id: str) -> dict[str, Any]:
        return {"ids": list(self.ids), "profile": self.profile, "seed": self.seed, "device": self.device,
                "data": self.data, "plugins": [str(p) for p in self.plugins], "instance": self.instance,
                "sabotage": self.sabotage,
                "run_id": run_id}


def resumed_config(out: Path, given: dict[str, Any]) -> tuple[CheckConfig, str | None]:
    """The configuration stored in ``out/run.json``; an explicitly given argument that differs from it is
    refused (resuming with another profile or other ids would silently re-run the old configuration)."""
    cfg_path = out / "run.json"
    if not cfg_path.exists():
        raise InvalidInputError(f"--resume: no run to resume in {out} (missing run.json)")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        stored = CheckConfig(ids=list(cfg["ids"]), profile=cfg["profile"], seed=int(cfg["seed"]),
                             device=cfg["device"], data=cfg.get("data"), plugins=list(cfg.get("plugins", [])),
                             instance=cfg.get("instance"), sabotage=cfg.get("sabotage"))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InvalidInputError(f"--resume: {cfg_path} is not an attnsvm run.json ({exc})") from None
    conflicts = []
    for key, value in given.items():
        if value in (None, [], ()):
            continue  # not given on the command line: the stored value applies
        have = getattr(stored, key)
        if (sorted(map(str, value)) if isinstance(value, list) else value) != (
                sorted(map(str, have)) if isinstance(have, list) else have):
            conflicts.append(f"--{key} {value!r} (the run in {out} used {have!r})")
    if conflicts:
        raise InvalidInputError("--resume continues the run as it was started; conflicting argument(s): "
                                + "; ".join(conflicts) + ". Drop them, or start a new run with another --out")
    return stored, cfg.get("run_id")


def check_device(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InvalidInputError(f"--device {device}: CUDA is not available on this machine")
    elif device != "cpu":
        raise InvalidInputError(f"--device must be cpu or cuda, got {device!r}")


def make_plan(cfg: CheckConfig, data: Any) -> list[tuple[type[Theorem], list[int], str | None]]:
    """(theorem, instance indices to run, reason it does not apply to the given data) per selected theorem."""
    from .theorem import PROFILES

    if cfg.seed < 0:
        raise InvalidInputError(f"--seed must be a non-negative integer, got {cfg.seed}")
    if cfg.profile not in PROFILES:
        raise InvalidInputError(f"--profile must be one of {', '.join(PROFILES)}, got {cfg.profile!r}")
    selected = catalogue.select(list(cfg.ids))
    if cfg.instance is not None:
        if not cfg.ids:
            raise InvalidInputError(
                "--instance K replays one instance of the theorem(s) named: give their ids "
                "(the counterexample's .replay.txt has the whole command)"
            )
        selected = [c for c in selected if c.id in cfg.ids]
        for c in selected:
            n = c.profile(cfg.profile).instances
            if not 0 <= cfg.instance < n:
                raise InvalidInputError(f"--instance {cfg.instance}: {c.id} has instances 0..{n - 1} on the "
                                        f"{cfg.profile} profile")
    plan = []
    for cls in selected:
        na = cls().applies_to(data) if data is not None else None
        ks = [cfg.instance] if cfg.instance is not None else list(range(cls.profile(cfg.profile).instances))
        plan.append((cls, [] if na else ks, na))
    return plan


def replay_args(cfg: CheckConfig) -> str:
    """The arguments besides id/profile/seed that a replay line needs."""
    extra = (f" --data {cfg.data}" if cfg.data else "") + (
        f" --device {cfg.device}" if cfg.device != "cpu" else ""
    )
    extra += "".join(f" --plugin {p}" for p in cfg.plugins)
    return extra + (f" --sabotage {cfg.sabotage}" if cfg.sabotage else "")


def plugin_provenance(plugins: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Where each plugin theorem file of a run came from, for report.json and run.json: its absolute path,
    sha256, whether it was named with --plugin or listed in pyproject.toml ([tool.attnsvm] plugins), and
    the git commit of the repository holding it (with ``dirty`` when the file differs from that commit; None
    outside a repository). A reviewer can tell exactly which theorem text a verdict belongs to."""
    import hashlib
    import subprocess

    def git(args: list[str], where: Path) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    given = [(Path(p), "--plugin") for p in plugins]
    listed = [(p, "pyproject.toml") for p in catalogue.pyproject_plugins(".")]
    out = []
    for path, source in listed + given:
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = None
        head = git(["rev-parse", "HEAD"], path.resolve().parent)
        dirty = git(["status", "--porcelain", "--", path.resolve().name], path.resolve().parent)
        out.append({"path": str(path.resolve()), "sha256": digest, "source": source, "git": head,
                    **({"dirty": bool(dirty)} if head else {})})
    return out


def default_workers() -> int:
    """The default size of the check process pool: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def with_counterexample(out: Path, cfg: CheckConfig, extra: str, tid: str, r: InstanceResult,
                         inst: Any) -> InstanceResult:
    """A refuted instance's data saved under counterexamples/ with its replay line (in the process that
    ran it, so the instance itself never travels between processes)."""
    from . import report

    if r.outcome == "refuted" and inst is not None:
        line = f"attnsvm check {tid} --profile {cfg.profile} --seed {cfg.seed} --instance {r.instance}{extra}"
        rel = report.save_counterexample(out, tid, r.instance, inst, line)
        if rel:
            r = replace(r, counterexample=rel)
    return r


def instance_blocks(cls: type[Theorem], todo: Sequence[int], profile: str) -> list[list[int]]:
    """The instance blocks that :func:`checks.harness.run_instances` prepares together. A worker runs exactly
    these blocks, so a batched ``prepare`` sees the same batches whatever the number of workers."""
    batch = max(1, cls.profile(profile).batch)
    return [list(todo[i:i + batch]) for i in range(0, len(todo), batch)]
