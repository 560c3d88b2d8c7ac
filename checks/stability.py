"""``attnsvm stability``: the same selection of theorems over a range of root seeds, and how often each gets
its expected verdict.

A verdict that holds only at the committed seed is no regression test: any change to the random stream (a new
family, a refactor of instance generation, a new numpy) changes which instances are drawn. This command runs
``attnsvm check`` once per seed (each on the process pool, into ``OUT/seed-S/``, a complete report of its own)
and aggregates:

- per theorem, the share of seeds whose status is quiet (the expected verdict, or a FAIL on the documented
  finding alone: KNOWN FINDING), with a Wilson 95 % interval;
- the unexpected statuses and verdicts by kind, with the seeds they came from;
- the replay line of every instance that made a seed unexpected (``attnsvm check ID --profile P --seed S
  --instance K``);
- per documented finding, the instances recognised as it and the seeds it appeared on (its rate).

Files in ``OUT``: ``stability.csv`` (one row per theorem), ``stability.md``, ``stability.png`` (the share
per theorem with its interval), ``stability.json`` (everything, including the replay lines),
``stability-run.json`` (the configuration ``--resume`` continues). A seed already finished is never rerun;
an interrupted seed is resumed with ``attnsvm check --resume``. Exit code: 0 when every theorem is quiet on
every seed, 1 otherwise, 2 on bad usage, 130 when interrupted (``--resume`` continues).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numerics.errors import InvalidInputError
from numerics.fileio import write_bytes, write_text

from .experiments.sweep import wilson_interval

SCHEMA = 1
#: the statuses of one seed that count as "the expected verdict" (checks.report.QUIET without the given-data
#: ones, which a stability sweep never produces since it runs every theorem on its own random family)
EXPECTED_STATUSES = ("ok", "KNOWN FINDING", "UNDECIDABLE")


def parse_seeds(text: str) -> list[int]:
    """``A:B`` (A through B, both included), ``S`` or ``S1,S2,...``: non-negative integers.

    >>> parse_seeds("0:3"), parse_seeds("7"), parse_seeds("1,4,9")
    ([0, 1, 2, 3], [7], [1, 4, 9])
    """
    try:
        if ":" in text:
            a, b = (int(x) for x in text.split(":"))
            seeds = list(range(a, b + 1))
        else:
            seeds = [int(x) for x in text.split(",")]
    except ValueError:
        raise InvalidInputError(f"--seeds must be A:B (A through B) or S1,S2,...; got {text!r}") from None
    if not seeds:
        raise InvalidInputError(f"--seeds {text!r} is empty (A:B needs A <= B)")
    if min(seeds) < 0:
        raise InvalidInputError(f"--seeds must be non-negative integers, got {text!r}")
    if len(set(seeds)) != len(seeds):
        raise InvalidInputError(f"--seeds {text!r} repeats a seed")
    return seeds


@dataclass
class TheoremStability:
    """One theorem over the seeds of a sweep."""

    id: str
    expected: str
    control_of: str | None
    seeds: int = 0
    as_expected: int = 0  # status ok or KNOWN FINDING
    known_finding: int = 0  # of those, FAIL on the documented finding alone
    unexpected: dict[str, list[int]] = field(default_factory=dict)  # "STATUS (VERDICT)" -> seeds
    replays: list[str] = field(default_factory=list)
    finding_instances: int = 0  # instances recognised as the documented finding, over all seeds
    finding_seeds: list[int] = field(default_factory=list)
    instances: int = 0  # instances drawn over all seeds

    def share(self) -> tuple[float, float, float]:
        lo, hi = wilson_interval(self.as_expected, self.seeds)
        return (self.as_expected / self.seeds if self.seeds else float("nan")), lo, hi

    def to_json(self) -> dict[str, Any]:
        p, lo, hi = self.share()
        return {"id": self.id, "expected": self.expected, "control_of": self.control_of, "seeds": self.seeds,
                "as_expected": self.as_expected, "share": p, "wilson95": [lo, hi],
                "known_finding": self.known_finding, "unexpected": self.unexpected, "replays": self.replays,
                "finding_instances": self.finding_instances, "finding_seeds": self.finding_seeds,
                "instances": self.instances}


def _seed_dir(out: Path, seed: int) -> Path:
    return out / f"seed-{seed}"


def _finished(d: Path) -> bool:
    """A seed whose report.json is complete (written after the run, not interrupted)."""
    try:
        rep = json.loads((d / "report.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return not rep.get("run", {}).get("interrupted", True) and (d / "report.md").exists()


def _load_config(out: Path, given: dict[str, Any], resume: bool) -> dict[str, Any]:
    path = out / "stability-run.json"
    if not resume:
        return given
    if not path.exists():
        raise InvalidInputError(f"--resume: no stability sweep to resume in {out} (missing {path.name})")
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"--resume: {path} is not an attnsvm stability-run.json ({exc})") from None
    conflicts = [f"--{k} {given[k]!r} (the sweep in {out} used {stored.get(k)!r})"
                 for k in ("ids", "profile", "seeds", "plugins", "device")
                 if given.get(k) not in (None, [], ()) and given[k] != stored.get(k)]
    if conflicts:
        raise InvalidInputError("--resume continues the sweep as it was started; conflicting argument(s): "
                                + "; ".join(conflicts))
    return stored


def run_stability(ids: Sequence[str] = (), *, seeds: Sequence[int], profile: str | None = None,
                  device: str | None = None, plugins: Sequence[str] = (),
                  out: str | Path = "reports/stability",
                  resume: bool = False, workers: int | None = None, progress: bool = True,
                  instance_timeout: float | None = None
                  ) -> tuple[int, dict[str, Any]]:
    """Run the selection on every seed (skipping finished seeds, resuming an interrupted one) and write the
    sweep's files; returns (exit code, the stability.json content)."""
    from . import plan, runner

    out = Path(out)
    given = {"ids": sorted(ids), "profile": profile, "seeds": list(seeds), "plugins": list(plugins),
             "device": device}
    cfg = _load_config(out, given, resume)
    cfg["profile"] = cfg.get("profile") or "quick"
    cfg["device"] = cfg.get("device") or "cpu"
    plan.load_catalogue(cfg["plugins"])
    # unknown ids, a bad profile or device: exit 2 before any work
    plan.make_plan(plan.CheckConfig(ids=list(cfg["ids"]), profile=cfg["profile"]), None)
    plan.check_device(cfg["device"])
    out.mkdir(parents=True, exist_ok=True)
    if not resume:  # a new sweep: never reuse a seed finished by an earlier sweep with other arguments
        import shutil

        for s in cfg["seeds"]:
            shutil.rmtree(_seed_dir(out, s), ignore_errors=True)
    write_text(out / "stability-run.json", json.dumps(cfg, indent=1))
    todo = [s for s in cfg["seeds"] if not _finished(_seed_dir(out, s))]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cfg["seeds"]), initial=len(cfg["seeds"]) - len(todo), unit="seed",
                   file=sys.stderr, dynamic_ncols=True)
    try:
        for s in todo:
            d = _seed_dir(out, s)
            if bar is not None:
                bar.set_description(f"seed {s}")
            code, _, _ = runner.run_check(
                cfg["ids"], profile=cfg["profile"], seed=s, device=cfg["device"], plugins=cfg["plugins"],
                out=d, resume=(d / "run.json").exists(), progress=False, figures=False, workers=workers,
                instance_timeout=instance_timeout)
            if code == 130:
                raise KeyboardInterrupt
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        summary = summarise(out, cfg)
        write_outputs(out, summary)
        print(f"interrupted: `attnsvm stability --resume --out {out}` finishes the sweep", file=sys.stderr)
        return 130, summary
    if bar is not None:
        bar.close()
    summary = summarise(out, cfg)
    write_outputs(out, summary)
    return (0 if summary["all_expected"] else 1), summary


def _culprit_lines(d: Path, t: dict[str, Any], profile: str, seed: int, plugins: Sequence[str]) -> list[str]:
    """The replay line of each instance behind an unexpected verdict (the refuted ones of a FAIL, ...)."""
    from .harness import CULPRITS  # which instances explain an unexpected verdict, by verdict
    from .runner import read_results

    kinds = CULPRITS.get(t["verdict"], ())
    found = set(t.get("finding_instances", []))
    extra = "".join(f" --plugin {p}" for p in plugins)
    lines = []
    for r in sorted(read_results(d / "results.jsonl"), key=lambda r: r.instance):
        if r.theorem == t["id"] and r.outcome in kinds:
            tag = " [the known finding]" if r.instance in found else ""
            why = f"  # {r.outcome}{tag}: {r.reason}"[:240]
            lines.append(f"attnsvm check {t['id']} --profile {profile} --seed {seed} --instance {r.instance}"
                         f"{extra}{why}")
    return lines


def summarise(out: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """Aggregate the finished seeds' report.json files (a seed not finished is listed as missing)."""
    per: dict[str, TheoremStability] = {}
    done, missing = [], []
    for s in cfg["seeds"]:
        d = _seed_dir(out, s)
        if not _finished(d):
            missing.append(s)
            continue
        done.append(s)
        rep = json.loads((d / "report.json").read_text(encoding="utf-8"))
        for t in rep["theorems"]:
            st = per.setdefault(t["id"], TheoremStability(t["id"], t["expected"], t.get("control_of")))
            st.seeds += 1
            st.instances += int(t["counts"]["instances"])
            mine = t.get("finding_instances", [])
            if mine:
                st.finding_instances += len(mine)
                st.finding_seeds.append(s)
            if t["status"] in EXPECTED_STATUSES:
                st.as_expected += 1
                st.known_finding += int(t["status"] == "KNOWN FINDING")
                continue
            st.unexpected.setdefault(f"{t['status']} ({t['verdict']})", []).append(s)
            st.replays += _culprit_lines(d, t, cfg["profile"], s, cfg["plugins"])
    rows = list(per.values())
    return {"schema": SCHEMA, "config": cfg, "seeds_done": done, "seeds_missing": missing,
            "all_expected": bool(rows) and not missing and all(r.as_expected == r.seeds for r in rows),
            "theorems": [r.to_json() for r in rows]}


# -- output ------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("id", "expected", "seeds", "as_expected", "share", "wilson_low", "wilson_high",
               "known_finding", "unexpected", "finding_instances", "instances")


def _csv(summary: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for t in summary["theorems"]:
        unexp = "; ".join(f"{k}: seeds {','.join(map(str, v))}" for k, v in t["unexpected"].items())
        w.writerow([t["id"], t["expected"], t["seeds"], t["as_expected"], f"{t['share']:.4f}",
                    f"{t['wilson95'][0]:.4f}", f"{t['wilson95'][1]:.4f}", t["known_finding"], unexp,
                    t["finding_instances"], t["instances"]])
    return buf.getvalue()


def _markdown(summary: dict[str, Any]) -> str:
    cfg = summary["config"]
    done = summary["seeds_done"]
    lines = [f"# attnsvm stability: {cfg['profile']} profile, {len(done)} seed(s)", ""]
    if done:
        lines.append(f"Seeds {_ranges(done)}" + (f"; not finished: {_ranges(summary['seeds_missing'])}"
                                                  if summary["seeds_missing"] else "") + ".")
    lines += ["", "Share of seeds with the expected verdict (PASS for a theorem, FAIL for a control; a FAIL "
              "on the documented finding alone counts as expected and is listed), with its Wilson 95 % "
              "interval.",
              "", "| theorem | expected | as expected | share | Wilson 95 % | known finding | unexpected |",
              "|---|---|---|---|---|---|---|"]
    for t in summary["theorems"]:
        unexp = "; ".join(f"{k}: seeds {_ranges(v)}" for k, v in t["unexpected"].items()) or "—"
        kf = (f"{t['known_finding']} seed(s); {t['finding_instances']} of {t['instances']} instances"
              if t["finding_instances"] else "—")
        lines.append(f"| {t['id']} | {t['expected']} | {t['as_expected']}/{t['seeds']} | {t['share']:.3f} | "
                     f"[{t['wilson95'][0]:.3f}, {t['wilson95'][1]:.3f}] | {kf} | {unexp} |")
    replays = [(t["id"], r) for t in summary["theorems"] for r in t["replays"]]
    lines += ["", "## Instances behind the unexpected verdicts", ""]
    for _, r in replays:
        cmd, _, why = r.partition("  # ")
        lines.append(f"- `{cmd}` — {why}")
    if not replays:
        lines.append("None: every theorem had its expected verdict on every seed.")
    lines += ["", "Each seed's full report is in `seed-S/report.md` beside this file."]
    return "\n".join(lines) + "\n"


def _ranges(seeds: Sequence[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0–2, 5, 7–8'."""
    out, run = [], []
    for s in sorted(seeds):
        if run and s != run[-1] + 1:
            out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else f"{run[0]}")
            run = []
        run.append(s)
    if run:
        out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ", ".join(out)


def _figure(summary: dict[str, Any]) -> bytes | None:
    rows = summary["theorems"]
    if not rows:
        return None
    from .experiments.common import _plt, _png

    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.22 * len(rows) + 1.2))
    ys = list(range(len(rows)))[::-1]
    for y, t in zip(ys, rows, strict=True):
        p, (lo, hi) = t["share"], t["wilson95"]
        colour = "tab:green" if t["as_expected"] == t["seeds"] else "tab:red"
        ax.errorbar([p], [y], xerr=[[p - lo], [hi - p]], fmt="o", color=colour, ms=3, capsize=2, lw=1)
    labels = [f"{t['id']} ({t['as_expected']}/{t['seeds']}"
              + (f"; finding on {len(t['finding_seeds'])}" if t["finding_seeds"] else "") + ")" for t in rows]
    ax.set_yticks(ys, labels, fontsize=6)
    ax.set_ylim(-0.8, len(rows) - 0.2)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("share of seeds with the expected verdict (Wilson 95 %)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.axvline(1.0, color="0.7", lw=0.5)
    cfg = summary["config"]
    ax.set_title(f"stability over {len(summary['seeds_done'])} seeds, {cfg['profile']} profile", fontsize=9)
    return _png(fig)


def write_outputs(out: Path, summary: dict[str, Any]) -> None:
    write_text(out / "stability.json", json.dumps(summary, indent=1) + "\n")
    write_text(out / "stability.csv", _csv(summary))
    write_text(out / "stability.md", _markdown(summary))
    png = _figure(summary)
    if png is not None:
        write_bytes(out / "stability.png", png)


def text_table(summary: dict[str, Any]) -> str:
    rows = [("theorem", "expected", "as expected", "Wilson 95 %", "unexpected")]
    for t in summary["theorems"]:
        unexp = "; ".join(f"{k}: {_ranges(v)}" for k, v in t["unexpected"].items())
        if t["finding_instances"]:
            unexp = (unexp + "; " if unexp else "") + f"known finding on seeds {_ranges(t['finding_seeds'])}"
        rows.append((t["id"], t["expected"], f"{t['as_expected']}/{t['seeds']}",
                     f"[{t['wilson95'][0]:.2f}, {t['wilson95'][1]:.2f}]", unexp))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w[i]) if i < 4 else c for i, c in enumerate(r)).rstrip() for r in rows)


def cmd_stability(args) -> int:
    if args.workers is not None and args.workers < 0:
        raise InvalidInputError(f"--workers must be a non-negative integer (0: in this process), got "
                                f"{args.workers}")
    seeds = parse_seeds(args.seeds) if args.seeds else None
    if seeds is None and not args.resume:
        raise InvalidInputError("--seeds A:B is required (e.g. --seeds 0:49), unless --resume")
    code, summary = run_stability(
        args.ids, seeds=seeds or [], profile=args.profile, device=args.device, plugins=args.plugin,
        out=args.out, resume=args.resume, workers=args.workers, progress=not args.no_progress,
        instance_timeout=args.instance_timeout)
    print(text_table(summary))
    out = Path(args.out)
    print(f"\nstability report: {out / 'stability.md'}  (also stability.csv, stability.png, stability.json; "
          f"each seed's report in {out}/seed-S/)")
    bad = [t for t in summary["theorems"] if t["as_expected"] < t["seeds"]]
    for t in bad:
        for line in t["replays"][:5]:
            print(f"  {line}")
    return code
