"""``attnsvm svm FILE.npz [--norm fro|nuc|lp [--p P]] [--alpha optimal|i0,i1,...] [--exact] [--json]``.

Solves one attention SVM (numerics.svm.solve_att_svm; ``--norm lp --p P``: the entrywise ℓp-AttSVM,
numerics.svm.solve_lp_att_svm) and prints status, objective, rank, support
tokens and the certificate summary. Infeasible is an outcome (exit 0); bad input raises
InvalidInputError, which checks.cli turns into one line on stderr and exit 2.

An NTP file (keys E, tokens, labels; numerics.ntp) is recognised by its keys and its graph-SVM is solved
instead (``--norm fro|nuc``; ``--alpha`` and ``--exact`` do not apply): the JSON has ``status``,
``objective``, ``W``, ``scc`` ({last token id: [component, ...]}, components sorted, in topological order of
G^(k)), ``norm``, ``certificate``, ``solver``, ``seconds``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

from numerics.data import AttentionData
from numerics.errors import InvalidInputError, SolverError
from numerics.ntp import GraphSVMResult, NTPData, graph_svm, is_ntp_file, scc_json
from numerics.svm import SVMSolution, solve_att_svm, solve_lp_att_svm
from numerics.tokens import check_alpha


def parse_alpha(text: str, data: AttentionData) -> np.ndarray | None:
    """'optimal' → None (needs the head v); 'i0,i1,...' → validated token indices, one per example."""
    text = "optimal" if text is None else str(text).strip()
    if text == "optimal":
        if data.v is None:
            raise InvalidInputError("--alpha optimal needs the linear head: the dataset has no key 'v'; "
                                    "add v (shape (d,)) or pass --alpha i0,i1,... explicitly")
        return None
    try:
        idx = [int(tok) for tok in text.split(",")]
    except ValueError:
        raise InvalidInputError(
            f"--alpha must be 'optimal' or comma-separated integers, got {text!r}"
        ) from None
    return check_alpha(data, np.array(idx, dtype=np.int64))


def solution_dict(sol: SVMSolution) -> dict[str, Any]:
    return {
        "status": sol.status,
        "norm": sol.norm,
        "objective": sol.objective if np.isfinite(sol.objective) else None,
        "rank": sol.rank,
        "support_tokens": [s.tolist() for s in sol.support],
        "certificate": sol.certificate.to_dict(),
        "W": None if sol.W is None else sol.W.tolist(),
        "lam": sol.lam.tolist(),
        "alpha": sol.alpha.tolist(),
        "singular_values": None if sol.singular_values is None else sol.singular_values.tolist(),
        "solver": sol.solver,
        "seconds": sol.seconds,
        "notes": list(sol.notes),
    }


def load_data(path: Any) -> AttentionData:
    """The dataset of ``path`` (AttentionData.load: one-line InvalidInputError on a bad file); its
    dtype notes go to stderr. Shared by ``attnsvm svm`` and ``attnsvm gd``."""
    data = AttentionData.load(path)
    for note in data.notes:
        print(f"note: {note}", file=sys.stderr)
    return data


def solve_certified(data: AttentionData, alpha: np.ndarray | None, norm: str, *, exact: bool = False,
                    m: int | None = None, p: float | None = None) -> tuple[SVMSolution | None, str | None]:
    """(solution, None) for a certified answer (optimal or infeasible), else (None, the failure line):
    solve_att_svm raises SolverError for a failed solve or an answer whose certificate does not verify,
    and that is reported as a failure, never as a solution. Shared by ``attnsvm svm`` and ``attnsvm gd``."""
    try:
        if norm == "lp":
            if p is None:
                raise InvalidInputError("--norm lp needs --p P (a number > 1)")
            if exact:
                raise InvalidInputError("--exact is available for --norm fro only")
            return solve_lp_att_svm(data, alpha, p=p), None
        if p is not None:
            raise InvalidInputError(f"--p is for --norm lp only (got --norm {norm})")
        return solve_att_svm(data, alpha, norm=norm, exact=exact, m=m), None
    except SolverError as exc:
        return None, f"solver failure ({exc.solver}, status {exc.status}): {exc}"


def ntp_solution_dict(sol: GraphSVMResult) -> dict[str, Any]:
    """The ``attnsvm svm --json`` object of an NTP file's graph-SVM."""
    return {
        "status": sol.status,
        "norm": sol.norm,
        "objective": sol.objective if np.isfinite(sol.objective) else None,
        "W": None if sol.W is None else sol.W.tolist(),
        "scc": scc_json(sol.graphs),
        "certificate": sol.certificate.to_dict(),
        "equalities": sol.n_equalities,
        "inequalities": sol.n_inequalities,
        "solver": sol.solver,
        "seconds": sol.seconds,
    }


def cmd_svm_ntp(args: Any) -> int:
    """``attnsvm svm FILE.npz`` on an NTP file: its graph-SVM, certified."""
    data = NTPData.load(args.file)
    for note in data.notes:
        print(f"note: {note}", file=sys.stderr)
    if getattr(args, "exact", False) or str(getattr(args, "alpha", "optimal")).strip() != "optimal":
        raise InvalidInputError("--alpha and --exact apply to attention datasets (X, Y), not to an NTP file")
    if args.norm == "lp" or getattr(args, "p", None) is not None:
        raise InvalidInputError("--norm lp / --p apply to attention datasets (X, Y); an NTP file's "
                                "graph-SVM is --norm fro or nuc")
    try:
        sol = graph_svm(data, norm=args.norm)
    except SolverError as exc:
        print(f"attnsvm svm: solver failure ({exc.solver}, status {exc.status}): {exc}")
        return 1
    if getattr(args, "json", False):
        print(json.dumps(ntp_solution_dict(sol)))
        return 0
    print(f"status:      {sol.status}  (graph-SVM, {sol.n_equalities} equality and {sol.n_inequalities} "
          "inequality rows)")
    print(f"norm:        {sol.norm}")
    if sol.feasible:
        print(f"objective:   {sol.objective:.12g}  ({'‖W‖_F' if sol.norm == 'fro' else '‖W‖_*'})")
    for k, comps in scc_json(sol.graphs).items():
        print(f"SCCs G^({k}): " + " ⇒ ".join("{" + ", ".join(map(str, c)) + "}" for c in comps))
    print(f"certificate: {sol.certificate.summary()}")
    print(f"solver:      {sol.solver}  ({sol.seconds * 1e3:.1f} ms)")
    return 0


def cmd_svm(args: Any) -> int:
    if is_ntp_file(args.file):
        return cmd_svm_ntp(args)
    data = load_data(args.file)
    alpha = parse_alpha(getattr(args, "alpha", "optimal"), data)
    sol, failure = solve_certified(data, alpha, args.norm, exact=bool(getattr(args, "exact", False)),
                                   p=getattr(args, "p", None))
    if sol is None:
        print(f"attnsvm svm: {failure}")
        return 1
    if getattr(args, "json", False):
        out = solution_dict(sol)
        if args.norm == "lp":
            out["p"] = args.p
        print(json.dumps(out))
        return 0
    print(f"status:      {sol.status}")
    print(f"norm:        {sol.norm}")
    print(f"alpha:       {sol.alpha.tolist()}")
    if sol.feasible:
        name = {"fro": "‖W‖_F", "nuc": "‖W‖_*"}.get(sol.norm, "‖W‖_p, entrywise")
        print(f"objective:   {sol.objective:.12g}  ({name})")
        print(f"rank:        {sol.rank}  (σ_j > RANK_RTOL σ_1)")
        print("support:     " + "  ".join(f"{i}:{s.tolist()}" for i, s in enumerate(sol.support)))
    print(f"certificate: {sol.certificate.summary()}")
    for note in sol.notes:
        print(f"note:        {note}")
    print(f"solver:      {sol.solver}  ({sol.seconds * 1e3:.1f} ms)")
    return 0
