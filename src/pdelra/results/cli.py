"""`pdelra claims --tables DIR [--out FILE]`: the claims table from aggregated tables, without a notebook."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from pdelra.errors import UserError

log = logging.getLogger(__name__)


class ClaimsError(UserError, ValueError):
    """The claims could not be computed; the message names the missing table."""


def _run(args: argparse.Namespace) -> int:
    from pdelra.atomic import csv_text, write_csv_atomic
    from pdelra.results.build import claims_from_tables

    try:
        table = claims_from_tables(args.tables)
    except FileNotFoundError as exc:
        raise ClaimsError(str(exc)) from exc
    counts = ", ".join(f"{n} {v}" for v, n in table["verdict"].value_counts().items())
    if args.out is None:  # the workflow's own claims.csv is its output: never overwritten unasked
        sys.stdout.write(csv_text(table))
        log.info("%d claims (%s)", len(table), counts)
        return 0
    write_csv_atomic(table, args.out)
    log.info("%d claims (%s) → %s", len(table), counts, args.out)
    return 0


def register(subparsers: Any) -> None:
    from pdelra.results.claims import VERDICT_RULE

    parser = subparsers.add_parser(
        "claims",
        help="judge every claim from aggregated tables (claims.csv), in seconds",
        description=(
            "Recompute claims.csv from the CSV tables of `pdelra aggregate` (runs.csv, and lm_runs.csv, "
            "lm_dynamics.csv, diagnostics.csv, cta_official_runs.csv when present) with the same function "
            "the workflow uses; the result equals the workflow's claims.csv byte for byte. It is written to "
            "standard output unless --out names a file, so the workflow's versioned claims.csv is never "
            "changed unasked. " + VERDICT_RULE.replace("**", "").replace("*", "").replace("`", "")
        ),
    )
    parser.add_argument(
        "--tables", type=Path, required=True, help="the tables folder (results/EXPERIMENT/tables)"
    )
    parser.add_argument("--out", type=Path, help="write the claims CSV here (default: standard output)")
    parser.set_defaults(func=_run)
