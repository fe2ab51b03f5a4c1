"""`pdelra claims --tables DIR [--out FILE]`: the claims table from aggregated tables, without a notebook."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pdelra.errors import UserError

log = logging.getLogger(__name__)


class ClaimsError(UserError, ValueError):
    """The claims could not be computed; the message names the missing table."""


def _run(args: argparse.Namespace) -> int:
    from pdelra.aggregate import write_csv_atomic
    from pdelra.results.build import claims_from_tables

    try:
        table = claims_from_tables(args.tables)
    except FileNotFoundError as exc:
        raise ClaimsError(str(exc)) from exc
    out = args.out or args.tables / "claims.csv"
    write_csv_atomic(table, out)
    counts = table["verdict"].value_counts()
    log.info(
        "%d claims (%s) → %s",
        len(table),
        ", ".join(f"{n} {v}" for v, n in counts.items()),
        out,
    )
    return 0


def register(subparsers: Any) -> None:
    from pdelra.results.claims import VERDICT_RULE

    parser = subparsers.add_parser(
        "claims",
        help="judge every claim from aggregated tables (claims.csv), in seconds",
        description=(
            "Recompute claims.csv from the CSV tables of `pdelra aggregate` (runs.csv, and lm_runs.csv, "
            "lm_dynamics.csv, diagnostics.csv when present) with the same function the workflow uses. "
            + VERDICT_RULE.replace("**", "").replace("*", "").replace("`", "")
        ),
    )
    parser.add_argument(
        "--tables", type=Path, required=True, help="the tables folder (results/EXPERIMENT/tables)"
    )
    parser.add_argument("--out", type=Path, help="where to write the claims CSV (default: TABLES/claims.csv)")
    parser.set_defaults(func=_run)
