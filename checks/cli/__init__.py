"""The ``attnsvm`` command line (also ``python -m checks``).

Each subcommand's work lives in its own module; this file only parses arguments and turns
user-facing errors into one line on stderr and exit code 2 (ARCHITECTURE.md, "CLI").
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from numerics.errors import EnvironmentFault, InvalidInputError

# subcommand -> "module:function"; the function takes the parsed args and returns an exit code.
HANDLERS = {
    "list": "checks.runner:cmd_list",
    "check": "checks.runner:cmd_check",
    "svm": "checks.cli.svm:cmd_svm",
    "gd": "checks.cli.gd:cmd_gd",
    "assumptions": "checks.experiments.assumptions:cmd_assumptions",
    "reproduce": "checks.experiments.reproduce:cmd_reproduce",
    "bench": "checks.bench:cmd_bench",
    "power": "checks.power.matrix:cmd_power",
    "warmup": "checks.warmup:cmd_warmup",
    "stability": "checks.stability:cmd_stability",
}


class _Parser(argparse.ArgumentParser):
    """argparse with the project's error contract: one line on stderr naming the problem, exit 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def seed_arg(text: str) -> int:
    """A root seed: a non-negative integer (numpy's SeedSequence takes no negative entropy)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {value}")
    return value


#: The default of ``--instance-timeout``: seconds one instance step (its generation, its share of a batch's
#: prepare, its evaluation) may take before it is ERROR and its worker replaced. See the README ("Faults")
#: for how it was chosen from the paper profile's slowest instance.
DEFAULT_INSTANCE_TIMEOUT_S = 300.0
DEFAULT_TIMEOUT_TEXT = f"{DEFAULT_INSTANCE_TIMEOUT_S:g} s"


#: The help of every command's ``--dask`` (checks.executor).
DASK_HELP = ("run on a Dask cluster: a scheduler address (tcp://HOST:PORT), or local:N to start a "
             "LocalCluster of N worker processes (needs the dask extra)")


def timeout_arg(text: str) -> float:
    """--instance-timeout: seconds, a non-negative number (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0 (0: no limit), got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="attnsvm",
        description="Check the theorems of 'Transformers as Support Vector Machines' numerically and "
            "symbolically.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("list", help="list the theorem catalogue")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="also load theorems from FILE.py (repeat the option for several files)")

    s = sub.add_parser("check", help="run theorem checks and write reports")
    s.add_argument(
        "ids", nargs="*", metavar="ID", help="theorem ids (default: all); a theorem's control runs with it"
    )
    s.add_argument(
        "--profile", choices=["quick", "full", "paper"], default=None, help="instance budget (default quick)"
    )
    s.add_argument(
        "--seed", type=seed_arg, default=None, help="root seed, a non-negative integer (default 0)"
    )
    s.add_argument("--device", default=None, help="torch device: cpu or cuda (default cpu)")
    s.add_argument("--data", metavar="FILE.npz|digits", help="run theorems that apply to given data on it")
    s.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="load extra theorems from FILE.py (repeat the option for several files)")
    s.add_argument("--out", default="reports", metavar="DIR", help="report directory (default reports/)")
    s.add_argument(
        "--baseline", metavar="FILE", help="compare verdicts with a baseline report; exit 1 on change"
    )
    s.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--instance", type=int, metavar="K", help="replay only instance K (from a counterexample)")
    s.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes running instance blocks (default: the cores available; results do not depend "
             "on it); 0 runs them in this process, without protection against a crashing instance",
    )
    s.add_argument(
        "--instance-timeout", type=timeout_arg, default=None, metavar="SECONDS",
        help="an instance step running longer is ERROR and its worker replaced "
             f"(default {DEFAULT_TIMEOUT_TEXT}; 0: no limit)",
    )
    s.add_argument("--sabotage", metavar="NAME", default=None,
                   help="power test: run with this numeric component broken (see `attnsvm power "
                        "--list-sabotages`); recorded in run.json, and the verdicts are not results")
    s.add_argument("--dask", metavar="ADDRESS|local:N", default=None, help=DASK_HELP
                   + "; results do not depend on it, and --instance-timeout does not apply")

    s = sub.add_parser("svm", help="solve one attention SVM (or an NTP file's graph-SVM) from an .npz file")
    s.add_argument("file", metavar="FILE.npz")
    s.add_argument("--norm", choices=["fro", "nuc", "lp"], default="fro",
                   help="Frobenius, nuclear (Att-SVM⋆) or entrywise ℓp (ℓp-AttSVM; give --p)")
    s.add_argument("--p", type=float, default=None, metavar="P", help="the p of --norm lp (p > 1)")
    s.add_argument(
        "--alpha", default="optimal", help="'optimal' or comma-separated token indices, one per example"
    )
    s.add_argument(
        "--exact", action="store_true", help="prove optimality in exact rational arithmetic (small problems)"
    )
    s.add_argument("--json", action="store_true", help="machine-readable output")

    s = sub.add_parser("gd", help="run GD on one .npz dataset and compare it with its attention SVM")
    s.add_argument("file", metavar="FILE.npz")
    s.add_argument("--param", choices=["W", "KQ"], default="W", help="train W, or (K, Q) with W = K Qᵀ")
    s.add_argument("--m", type=int, default=None, metavar="M", help="width of K, Q (default d; --param KQ)")
    s.add_argument("--steps", type=int, default=1000, metavar="N", help="GD steps (default 1000)")
    s.add_argument("--lr", type=float, default=0.1, metavar="ETA", help="step size (default 0.1)")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--normalized", dest="normalized", action="store_true", default=True,
                      help="normalised GD: each parameter moves by lr ∇/‖∇‖ (default)")
    mode.add_argument("--plain", dest="normalized", action="store_false", help="plain GD: lr ∇")
    s.add_argument("--loss", default="logistic", help="logistic (default), exponential or linear")
    s.add_argument("--init", metavar="INIT.npz", help="start: key W (d, d), or keys K, Q (d, m)")
    s.add_argument("--seed", type=seed_arg, default=None,
                   help="seed of the random start without --init (default 0; as run_gd draws it)")
    s.add_argument("--init-scale", type=float, default=0.01, help="scale of the random start (default 0.01)")
    s.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="torch device, float64")
    s.add_argument("--backend", choices=["auto", "torch", "numba"], default="auto",
                   help="run_gd's code path (default auto)")
    s.add_argument("--record-every", type=int, default=None, metavar="K",
                   help="record every K steps (default: about 100 records)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--out", metavar="DIR", help="write trajectory.csv, trajectory.png and gd.json to DIR")

    s = sub.add_parser("assumptions", help="how often each hypothesis holds over a grid of (n,T,d)")
    s.add_argument("--grid", default=None, help="e.g. n=5,T=5,d=2:4:6:8 (colon-separated values)")
    s.add_argument("--trials", type=int, default=50)
    s.add_argument("--seed", type=seed_arg, default=0)
    s.add_argument("--out", default="reports/assumptions", metavar="DIR")
    s.add_argument("--dask", metavar="ADDRESS|local:N", help=DASK_HELP)
    s.add_argument("--workers", type=int, default=None, help="local process pool size")
    s.add_argument("--no-progress", action="store_true")

    s = sub.add_parser("reproduce", help="regenerate one of the paper's experiments")
    s.add_argument(
        "name", metavar="NAME",
        help="gd-paths | local-convergence | svm-rank | global-vs-d | multi-token | mirror-descent | "
             "ntp-cyclic"
    )
    s.add_argument("--trials", type=int, default=None)
    s.add_argument("--seed", type=seed_arg, default=0)
    s.add_argument("--out", default="reports/reproduce", metavar="DIR")
    s.add_argument("--dask", metavar="ADDRESS|local:N", help=DASK_HELP)
    s.add_argument("--workers", type=int, default=None, help="local process pool size")
    s.add_argument("--no-progress", action="store_true")

    s = sub.add_parser("bench", help="performance suite against the naive per-instance baseline")
    s.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    s.add_argument("--device", default="cpu")
    s.add_argument("--out", default="reports/bench", metavar="DIR")
    s.add_argument("--only", action="append", default=[], help="run only these benchmark groups")

    s = sub.add_parser(
        "warmup", help="compile the GD kernels for the catalogue's shapes and cache the catalogue"
    )
    s.add_argument(
        "--plugin", action="append", default=[], metavar="FILE.py", help="also cache these plugins' metadata"
    )

    s = sub.add_parser(
        "stability",
        help="run the selection over a range of seeds: the share of seeds with the expected verdict",
    )
    s.add_argument(
        "ids", nargs="*", metavar="ID", help="theorem ids (default: all); a theorem's control runs with it"
    )
    s.add_argument("--seeds", metavar="A:B", help="seeds A through B (e.g. 0:49), or S1,S2,...")
    s.add_argument(
        "--profile", choices=["quick", "full", "paper"], default=None, help="instance budget (default quick)"
    )
    s.add_argument("--device", default=None, help="torch device: cpu or cuda (default cpu)")
    s.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                   help="load extra theorems from FILE.py (repeat the option for several files)")
    s.add_argument("--out", default="reports/stability", metavar="DIR",
                   help="sweep directory (default reports/stability/): one seed-S/ report per seed")
    s.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out (finished seeds are kept)")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes running instance blocks (default: the cores available)")
    s.add_argument("--instance-timeout", type=timeout_arg, default=None, metavar="SECONDS",
                   help=f"as for check (default {DEFAULT_TIMEOUT_TEXT}; 0: no limit)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")

    s = sub.add_parser(
        "power", help="power matrix: run theorems under sabotaged numerics, report which survive"
    )
    s.add_argument(
        "ids", nargs="*", metavar="ID", help="theorem ids (default: every theorem; controls only if named)"
    )
    s.add_argument("--profile", choices=["quick", "full", "paper"], default="quick")
    s.add_argument("--sabotage", action="extend", nargs="+", default=[], metavar="NAME",
                   help="sabotages to run (default: every single-bug sabotage; 'a+b' combines)")
    s.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    s.add_argument(
        "--plugin", action="append", default=[], metavar="FILE.py", help="load extra theorems from FILE.py"
    )
    s.add_argument("--out", default="reports/power", metavar="DIR", help="where power.json and power.md go")
    s.add_argument(
        "--list-sabotages", action="store_true", help="list the sabotages and components, then exit"
    )
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes running the theorems' rows (default 1: in this process)")
    s.add_argument("--dask", metavar="ADDRESS|local:N", default=None, help=DASK_HELP)
    s.add_argument("--resume", action="store_true",
                   help="continue an interrupted matrix in --out: the rows of power-rows.jsonl (same "
                        "profile, seed, sabotages and plugins) are kept, the other theorems run")
    s.add_argument("--resolution", action="store_true",
                   help="instead of sabotages: perturb each predicted object by ε = 1 … 0.01 and report the "
                        "smallest ε whose verdict is FAIL (resolution.json, resolution.md in --out)")
    s.add_argument("--write", action="store_true",
                   help="with --resolution: merge the measured rows into checks/power/resolution.json, the "
                        "committed figures `attnsvm list --json` and report.json read")
    s.add_argument("--no-progress", action="store_true", help="no per-cell progress lines on stderr")
    return p


def _broken_pool(exc: BaseException) -> bool:
    """A sweep's worker died: a concurrent.futures pool broken, or a Dask task that killed its workers
    ``allowed-failures`` times (checked only if those modules were imported: --help stays fast)."""
    from ..executor import lost_worker

    pool = sys.modules.get("concurrent.futures.process")
    return (pool is not None and isinstance(exc, pool.BrokenProcessPool)) or lost_worker(exc)


def _fault_text(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "out of memory (MemoryError); run fewer --workers, or a smaller --profile"
    if _broken_pool(exc):
        return ("a worker process died (killed by the system, e.g. out of memory, or a crashing library): "
                f"{type(exc).__name__}: {exc}")
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    mod_name, fn_name = HANDLERS[args.command].split(":")
    try:
        handler = getattr(importlib.import_module(mod_name), fn_name)
        return int(handler(args) or 0)
    except InvalidInputError as exc:
        print(f"attnsvm {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attnsvm {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly, like any Unix tool
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (EnvironmentFault, MemoryError) as exc:  # the environment, not a bug
        print(f"attnsvm {args.command}: fault: {_fault_text(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:  # disk full, permissions, a vanished directory: the environment, not a bug
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"attnsvm {args.command}: fault: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if _broken_pool(exc):  # a sweep's process pool lost a worker: the environment, not a bug
            print(f"attnsvm {args.command}: fault: {_fault_text(exc)}", file=sys.stderr)
            return 1
        if os.environ.get("ATTNSVM_DEBUG"):
            raise
        print(f"attnsvm {args.command}: internal error: {type(exc).__name__}: {exc} "
              "(set ATTNSVM_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
