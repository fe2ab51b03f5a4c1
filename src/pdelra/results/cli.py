"""`pdelra claims --tables DIR [--out FILE]`: the claims table from aggregated tables, without a notebook.

Only argparse here; the handler (pdelra.results.build.claims_command) is imported when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdelra.parts import add_part_option
from pdelra.results.verdict_rule import VERDICT_RULE


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "claims",
        help="judge every claim from aggregated tables (claims.csv), in seconds",
        description=(
            "Recompute claims.csv from the CSV tables of `pdelra aggregate` (runs.csv, and lm_runs.csv, "
            "lm_dynamics.csv, diagnostics.csv, cta_official_runs.csv and the config's own parts' tables when "
            "present; its parts are those parts.csv records unless --part names them) with the same function "
            "the workflow uses; the result equals the workflow's claims.csv byte for byte. It is written to "
            "standard output unless --out names a file, so the workflow's versioned claims.csv is never "
            "changed unasked. " + VERDICT_RULE.replace("**", "").replace("*", "").replace("`", "")
        ),
    )
    parser.add_argument(
        "--tables", type=Path, required=True, help="the tables folder (results/EXPERIMENT/tables)"
    )
    parser.add_argument("--out", type=Path, help="write the claims CSV here (default: standard output)")
    add_part_option(parser)
    parser.set_defaults(handler="pdelra.results.build:claims_command")
