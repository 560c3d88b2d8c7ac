"""``attnsvm list`` and ``attnsvm check``: select theorems, run them with streaming results,
resume, interrupt handling, reports, baseline comparison and exit codes."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import platform
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerics.errors import InvalidInputError

from . import catalogue
from .baseline import BaselineMismatch, compare_baseline, load_baseline
from .executor import Executor, choose, require_dask
from .plan import (
    CheckConfig,
    check_device,
    default_workers,
    instance_blocks,
    load_catalogue,
    load_data_arg,
    make_plan,
    plugin_provenance,
    replay_args,
    resumed_config,
    with_counterexample,
)

if TYPE_CHECKING:
    from .harness import InstanceResult, TheoremResult

# The numerics (numpy, torch, ...) load only when a command needs them: `attnsvm list` reads the
# catalogue's metadata cache and imports none of them (checks.catalogue.cached_metadata).


# -- helpers ----------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "scipy", "torch", "cvxpy", "sympy", "hypothesis"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - an absent optional package is just not listed
            pass
    return out


def git_sha() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                           cwd=Path(__file__).resolve().parent)
        return r.stdout.strip() or None if r.returncode == 0 else None
    except Exception:  # noqa: BLE001
        return None


def catalogue_metadata(plugins: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``describe()`` of the whole catalogue (plugins included), in :func:`checks.catalogue.ordered` order.

    Read from the metadata cache when no source file changed since it was written (no numerics imported:
    ``attnsvm list`` starts in a fraction of a second); otherwise the catalogue is loaded and the cache
    rewritten. Either way the entries are those of the loaded classes."""
    files = catalogue.pyproject_plugins(".") + [Path(p) for p in plugins]
    for f in files:  # the same one-line errors as loading them
        if not f.is_file():
            raise InvalidInputError(f"plugin {f}: no such file")
        if f.suffix != ".py":
            raise InvalidInputError(f"plugin {f}: expected a .py file")
    entries = catalogue.cached_metadata(files)
    if entries is None:
        load_catalogue(plugins)
        entries = json.loads(json.dumps([c.describe() for c in catalogue.ordered()]))
        catalogue.store_metadata(files, entries)
    return entries


def cmd_list(args) -> int:
    cat = catalogue_metadata(args.plugin)
    if args.json:
        print(json.dumps(cat, indent=1))
        return 0
    from . import report  # DOCS_LINE (report loads numpy, still no torch/cvxpy/sympy)

    w = max(len(c["id"]) for c in cat)
    for c in cat:
        ctl = f"  (control of {c['control_of']})" if c["control_of"] else ""
        print(f"{c['id'].ljust(w)}  {c['expected']:4}  {c['title']}{ctl}")
        print(f"{'':{w}}        {c['reference']}")
    print(f"\n{report.DOCS_LINE}")
    return 0


# -- check -------------------------------------------------------------------------------------
class _Stream:
    """Append-only results.jsonl, one flushed line per finished instance."""

    def __init__(self, path: Path, fresh: bool):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(path, "w" if fresh else "a", encoding="utf-8")

    def write(self, r: InstanceResult) -> None:
        self.fh.write(json.dumps(r.to_json()) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def read_results(path: Path) -> list[InstanceResult]:
    from .harness import InstanceResult

    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(InstanceResult.from_json(json.loads(line)))
        except (json.JSONDecodeError, TypeError, KeyError):
            continue  # a line cut by an interrupt mid-write: that instance is simply redone
    return out


def _sigterm(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt


def _run_metadata(cfg: CheckConfig, plan, run_id: str | None) -> dict[str, Any]:
    from numerics import tolerances

    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return {
        "id": run_id or f"{started.replace(':', '').replace('+0000', 'Z')}-s{cfg.seed}",
        "started": started,
        "profile": cfg.profile,
        "seed": cfg.seed,
        "device": cfg.device,
        "versions": versions(),
        "git": git_sha(),
        "data": cfg.data,
        "plugins": plugin_provenance(cfg.plugins),
        **({"sabotage": cfg.sabotage} if cfg.sabotage else {}),
        "ids": [c.id for c, _, _ in plan],
        "interrupted": False,
        "tolerances": tolerances.as_dict(),
        **({"resumed": True} if run_id else {}),
    }


def _execute(cfg: CheckConfig, plan, data, out: Path, previous: dict, run: dict, progress: bool,
             workers: int = 1, figures: bool = False, timeout: float | None = None,
             executor: Executor | None = None):
    """Run the plan, streaming each finished instance to results.jsonl and the partial report.json;
    returns (theorem results, instance results per theorem, interrupted?, ids whose figure is drawn).

    With ``workers`` >= 1 the instance blocks run on a supervised pool of that many processes (see
    :func:`checks.pool._execute_pool`: a crashed worker is replaced, an instance step longer than
    ``timeout`` seconds is ERROR); the results are the same for any number, since every instance has its
    own seed and the blocks are the same. ``workers=0`` runs them in this process (no fault isolation).
    A Dask ``executor`` (:mod:`checks.executor`) runs the same blocks on a Dask cluster instead
    (:func:`checks.pool._execute_dask`), with the same results."""
    from . import report
    from .harness import aggregate, run_instances

    extra = replay_args(cfg)
    replay = cfg.instance is not None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=sum(len(ks) for _, ks, _ in plan), unit="inst", file=sys.stderr, dynamic_ncols=True,
                   mininterval=0.5)
    stream = _Stream(out / "results.jsonl", fresh=not previous and not run.get("resumed"))
    results: list[TheoremResult] = []
    per_thm: dict[str, list[InstanceResult]] = {}
    old_term = signal.signal(signal.SIGTERM, _sigterm)
    interrupted = False
    plotted: set[str] = set()

    def summary(cls, na=None):
        return aggregate(cls, per_thm.get(cls.id, []), profile=cfg.profile, seed=cfg.seed, extra_args=extra,
                         not_applicable=na, given_data=data is not None, replay=replay)

    for cls, ks, _ in plan:
        per_thm[cls.id] = [previous[(cls.id, k)] for k in ks if (cls.id, k) in previous]
        if bar is not None:
            bar.update(len(per_thm[cls.id]))
    n_blocks = sum(len(instance_blocks(cls, [k for k in ks if (cls.id, k) not in previous], cfg.profile))
                   for cls, ks, _ in plan)
    try:
        if executor is not None and executor.kind == "dask" and n_blocks >= 1:
            from .pool import _execute_dask

            results = _execute_dask(cfg, plan, data, out, previous, run, bar, stream, per_thm, summary,
                                    executor)
        elif workers >= 1 and n_blocks >= 1:
            from .pool import _execute_pool

            results = _execute_pool(cfg, plan, data, out, previous, run, bar, stream, per_thm, summary,
                                    min(workers, n_blocks), figures, plotted, timeout)
        else:
            for cls, ks, na in plan:
                collected = per_thm[cls.id]
                todo = [k for k in ks if (cls.id, k) not in previous]
                if bar is not None:
                    bar.set_description(cls.id)

                def on_result(r: InstanceResult, inst: Any, cls=cls, collected=collected) -> None:
                    r = with_counterexample(out, cfg, extra, cls.id, r, inst)
                    stream.write(r)
                    collected.append(r)
                    if bar is not None:
                        bar.update(1)

                if todo:
                    run_instances(cls, todo, profile=cfg.profile, seed=cfg.seed, device=cfg.device, data=data,
                                  on_result=on_result)
                results.append(summary(cls, na))
                report.write_json(out, run, results)  # keep a readable partial report after every theorem
    except KeyboardInterrupt:
        interrupted = True
        run["interrupted"] = True
        done_ids = {t.id for t in results}
        results = [t for t in results if t.id in done_ids]
        results += [summary(cls) for cls, _, _ in plan if cls.id not in done_ids and per_thm.get(cls.id)]
        order = {cls.id: i for i, (cls, _, _) in enumerate(plan)}
        results.sort(key=lambda t: order[t.id])
    finally:
        signal.signal(signal.SIGTERM, old_term)
        stream.close()
        if bar is not None:
            bar.close()
    if not interrupted:
        from .pool import _save_timings

        _save_timings(cfg.profile, results)
    return results, per_thm, interrupted, plotted


def _render(out: Path, run: dict, plan, results, per_thm, figures: bool,
            plotted: set[str] = frozenset()) -> dict[str, Any]:
    from . import report

    rep = report.write_json(out, run, results)
    if figures and not run.get("interrupted"):
        by_id = {c.id: c for c, _, _ in plan}
        for t in results:
            if not t.not_applicable and t.id not in plotted:
                report.plot_theorem(
                    out, by_id[t.id], t, sorted(per_thm.get(t.id, []), key=lambda r: r.instance)
                )
    report.write_markdown(out, rep, results)
    report.write_html(out, rep, results)
    report.write_junit(out, results)
    return rep


def run_check(
    ids: Sequence[str] = (),
    *,
    profile: str | None = None,
    seed: int | None = None,
    device: str | None = None,
    data_spec: str | None = None,
    plugins: Sequence[str] = (),
    out: str | Path = "reports",
    resume: bool = False,
    progress: bool = True,
    only_instance: int | None = None,
    figures: bool = True,
    workers: int | None = None,
    instance_timeout: float | None = None,
    sabotage: str | None = None,
    dask: Any = None,
) -> tuple[int, dict[str, Any], list[TheoremResult]]:
    """Run a check and write every report file; returns (exit code without baseline, report, results).

    Arguments left as None take their defaults (quick, 0, cpu), or with ``resume`` the stored run's values;
    an argument given with ``resume`` must match the stored run (else InvalidInputError).
    Exit code: 0 when every theorem's status is quiet (:func:`checks.report.fails_run`), 1 otherwise,
    130 when interrupted. ``workers``: size of the supervised process pool (default
    :func:`default_workers`; 0 runs in this process); the results do not depend on it, so it is not part of
    the stored run. ``instance_timeout``: seconds an instance step may take (default
    :data:`checks.cli.DEFAULT_INSTANCE_TIMEOUT_S`; 0: no limit; needs a pool). ``sabotage``: a power test
    (:mod:`checks.power.sabotage`): the named component is broken for the whole run, in every worker; the
    run records it, and its verdicts are a power test, not results. ``dask``: run the instance blocks on a
    Dask cluster instead of the pool (a scheduler address, ``local:N`` for a LocalCluster of N processes
    started for the run, or a ``distributed.Client``; :mod:`checks.executor`): the same results, no instance
    time limit, and like ``workers`` not part of the stored run. report.json's ``run.executor`` says which
    executor ran.
    """
    from . import report
    from .cli import DEFAULT_INSTANCE_TIMEOUT_S

    if workers is not None and (isinstance(workers, bool) or workers < 0):
        raise InvalidInputError(f"--workers must be a non-negative integer (0: in this process), got "
                                f"{workers}")
    if instance_timeout is None:
        instance_timeout = DEFAULT_INSTANCE_TIMEOUT_S
    if not 0 <= instance_timeout < float("inf"):
        raise InvalidInputError(f"--instance-timeout must be a finite number of seconds >= 0, got "
                                f"{instance_timeout}")
    out = Path(out)
    given = {"ids": list(ids), "profile": profile, "seed": seed, "device": device, "data": data_spec,
             "plugins": list(plugins), "instance": only_instance, "sabotage": sabotage}
    run_id = None
    if resume:
        cfg, run_id = resumed_config(out, given)
    else:
        cfg = CheckConfig(
            ids=list(ids),
            profile=profile or "quick",
            seed=0 if seed is None else int(seed),
            device=device or "cpu",
            data=data_spec,
            plugins=list(plugins),
            instance=only_instance,
            sabotage=sabotage,
        )
    load_catalogue(cfg.plugins)
    plan = make_plan(cfg, None)  # validate ids, seed, profile and --instance before loading data
    data = load_data_arg(cfg.data)
    if data is not None:
        plan = make_plan(cfg, data)
    check_device(cfg.device)
    nw = default_workers() if workers is None else int(workers)
    # check's pool is supervised (crashes, timeouts) from one worker up; 0 runs in this process
    executor = choose(None, dask, default=1) if dask is not None else (
        Executor("pool", nw) if nw >= 1 else Executor("inline"))
    if executor.kind == "dask":
        require_dask()  # not installed: exit 2 before any work
    broken = _sabotaged(cfg.sabotage)  # an unknown name: exit 2 before any work
    run = _run_metadata(cfg, plan, run_id)
    if data is not None and getattr(data, "notes", ()):
        run["data_notes"] = list(data.notes)
    previous: dict[tuple[str, int], InstanceResult] = {}
    if resume:
        previous = {(r.theorem, r.instance): r for r in read_results(out / "results.jsonl")}
    else:
        out.mkdir(parents=True, exist_ok=True)
        for stale in ("report.json", "report.md", "report.html", "junit.xml"):
            (out / stale).unlink(missing_ok=True)
        for stale_dir in ("counterexamples", "figures"):  # a new run's files only, never an older run's
            shutil.rmtree(out / stale_dir, ignore_errors=True)
    from numerics.fileio import write_text

    write_text(out / "run.json", json.dumps(cfg.to_json(run["id"]), indent=1))
    run["executor"] = {**executor.describe(),
                       "instance_timeout_s": (instance_timeout or None) if executor.kind == "pool" else None}
    with broken:  # forked workers inherit the broken component, spawned ones install it (checks.pool)
        results, per_thm, interrupted, plotted = _execute(
            cfg, plan, data, out, previous, run, progress, workers=nw, figures=figures,
            timeout=instance_timeout or None, executor=executor,
        )
    rep = _render(out, run, plan, results, per_thm, figures, plotted)
    if interrupted:
        return 130, rep, results
    return (1 if any(report.fails_run(t) for t in results) else 0), rep, results


def _sabotaged(name: str | None) -> contextlib.AbstractContextManager[Any]:
    """The power test ``--sabotage NAME`` as a context for the run (nothing when None); an unknown name is
    bad input. Says on stderr that the verdicts are a power test."""
    if not name:
        return contextlib.nullcontext()
    from .power import sabotage as sab

    sab.resolve([name])
    print(f"attnsvm check: numerics sabotaged (--sabotage {name}): verdicts are a power test, not results",
          file=sys.stderr)
    return sab.sabotage(name)


def _print_replay(out: Path, results: Sequence[TheoremResult]) -> None:
    """What each replayed instance did (--instance K): its outcome, reason and metrics."""
    wanted = {t.id for t in results}
    for r in read_results(out / "results.jsonl"):
        if r.theorem in wanted:
            why = f": {r.reason}" if r.reason else " (every hypothesis and prediction held)"
            print(f"  {r.theorem} instance {r.instance}: {r.outcome}{why}")
            if r.metrics:
                shown = {k: v for k, v in r.metrics.items() if not isinstance(v, (list, dict))}
                print(f"    metrics: {json.dumps(shown)[:2000]}")


def workers_line(run: dict[str, Any]) -> str:
    """The summary's line on lost workers: how many were lost and replaced, and what each was running
    ('' when none was lost)."""
    w = run.get("workers") or {}
    faults = w.get("faults") or []
    if not faults:
        return ""
    timed = sum(str(f.get("what", "")).startswith("timed out") for f in faults)
    parts = ([f"{len(faults) - timed} died"] if len(faults) > timed else []) + (
        [f"{timed} killed after --instance-timeout"] if timed else [])
    lines = [f"workers: {len(faults)} lost and replaced ({', '.join(parts)}):"]
    for f in faults:
        ks = f.get("instances") or []
        which = (f" instance {ks[0]}" if len(ks) == 1 else f" instances {ks[0]}–{ks[-1]}" if ks else "")
        where = (f" while running {f['theorem']}{which} ({f.get('phase', f['job'])})" if f.get("theorem")
                 else " while idle")
        lines.append(f"  {f['what']}{where}")
    lines += [f"  {n}" for n in w.get("notes", [])]
    return "\n".join(lines)


def cmd_check(args) -> int:
    from . import report

    base = load_baseline(args.baseline) if args.baseline else None
    code, rep, results = run_check(
        args.ids, profile=args.profile, seed=args.seed, device=args.device, data_spec=args.data,
        plugins=args.plugin, out=args.out, resume=args.resume, progress=not args.no_progress,
        only_instance=args.instance, workers=getattr(args, "workers", None),
        instance_timeout=getattr(args, "instance_timeout", None), sabotage=getattr(args, "sabotage", None),
        dask=getattr(args, "dask", None),
    )
    for note in rep["run"].get("data_notes", []):
        print(f"note: {note}", file=sys.stderr)
    print(report.text_table(results))
    lost = workers_line(rep["run"])
    if lost:
        print(f"\n{lost}")
    out = Path(args.out)
    print(f"\nreport: {out / 'report.html'}  (also report.md, report.json, junit.xml, results.jsonl)")
    for t in results:
        st = report.status_of(t)
        if st not in ("ok", "n/a", "hyp. unmet"):
            print(f"  {st}: {t.id} expected {t.expected}, got {t.verdict}; replay: {t.reproduce}")
            if st == "UNDECIDABLE":
                print(f"    (documented: {t.undecidable})")
    if rep["run"].get("ids") and any(t.replay for t in results):
        _print_replay(out, results)
    if code == 130:
        print("interrupted: finished instances are in results.jsonl; `attnsvm check --resume --out "
              f"{out}` finishes the run", file=sys.stderr)
        return 130
    if base is not None:
        try:
            changes = compare_baseline(results, base, rep["run"])
        except BaselineMismatch as exc:
            print(f"\n{exc}")
            return code
        if changes:
            print(f"\nverdicts changed against baseline {args.baseline}:")
            for c in changes:
                print(f"  {c}")
            return 1
        print(f"\nbaseline {args.baseline}: no verdict changed")
    return code
