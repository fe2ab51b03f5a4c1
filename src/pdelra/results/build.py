"""Every derived table from the aggregated inputs, in one call: what `pdelra aggregate` writes beside the
run tables, and what `pdelra claims` recomputes from a tables folder.

Inputs are the tables of one experiment, by name (`runs`, `cost`, … from `pdelra aggregate`; `lm_runs`,
`lm_dynamics` from `pdelra lm aggregate`; `diagnostics` from `pdelra diagnose table`; `cta_official_runs`
from `pdelra cta-official aggregate`); an absent input is
an empty frame, and the parts that need it come out empty (their report sections say "not run").
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pdelra import parts as parts_registry
from pdelra.atomic import csv_text, write_csv_atomic
from pdelra.errors import UserError
from pdelra.parts import Part
from pdelra.results import claims as claims_mod
from pdelra.results import diagnostics, related, tables
from pdelra.results.catalogue import all_claims, new_tasks, own
from pdelra.results.diagnostics import TABLES as DIAGNOSTICS_TABLES
from pdelra.results.failures import failures_table
from pdelra.results.related import TABLES as RELATED_TABLES
from pdelra.results.tables import COMPARISON_TABLES

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

# What `derived_tables` returns, by name (each written as NAME.csv): a fixed list, so the workflow can
# declare every file.
DERIVED_TABLES = (*COMPARISON_TABLES, *RELATED_TABLES, *DIAGNOSTICS_TABLES, "claims", "failures")
# The tables `pdelra aggregate` writes (as NAME.csv), all of which the report reads: the run tables
# (pdelra.results.tables.run_tables, and runs.csv), then what `derived_tables` derives from them (the paper
# comparisons, the related systems', the diagnostics' summaries and the claims).
RUN_TABLES = ("runs", "main", "multiscale", "cost", "alpha", "settings")
# The experiment's parts, with how its config names its own ones (`parts_table`): what `pdelra claims
# --tables` reads to judge the same parts' claims as the workflow did, with no `--part` given.
PARTS_TABLE = "parts"
AGGREGATE_TABLES = (*RUN_TABLES, PARTS_TABLE, *DERIVED_TABLES)


def read_table(path: Path) -> pd.DataFrame:
    """A CSV table, or an empty frame when the file is absent or empty (a part that did not run)."""
    import pandas as pd

    if not path.is_file() or path.stat().st_size == 0:
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def parts_table(parts: tuple[Part, ...]) -> pd.DataFrame:
    """parts.csv: each of the experiment's parts (pdelra.parts), the module its config names it by ("" for a
    built-in one) and the tables it writes."""
    import pandas as pd

    builtin = {part.module for part in parts_registry.builtin()}
    rows = [
        {"part": p.name, "spec": "" if p.module in builtin else p.module, "tables": " ".join(p.tables)}
        for p in parts
    ]
    return pd.DataFrame(rows, columns=["part", "spec", "tables"])


def own_part_specs(tables_dir: Path) -> list[str]:
    """The module of each of a config's own parts, as `pdelra aggregate` recorded them in the tables
    folder's parts.csv (none when it has no such file: tables written before it existed)."""
    table = read_table(Path(tables_dir) / f"{PARTS_TABLE}.csv")
    if table.empty:
        return []
    return [str(spec) for spec in table["spec"].dropna() if str(spec)]


def claims_table(inputs: Mapping[str, pd.DataFrame], parts: tuple[Part, ...] | None = None) -> pd.DataFrame:
    """claims.csv: every claim of the paper and the related systems, plus each part's own claims (its
    `claims`, pdelra.parts: PhysQK-AD's LM, the diagnostics' mechanism claims, CTA's own experiments, a
    user's part), adjusted within each family (`pdelra.results.claims`)."""
    import pandas as pd

    runs = inputs.get("runs", pd.DataFrame())
    parts = parts_registry.builtin() if parts is None else parts
    extra = [row for part in parts if part.claims for row in part.claims(inputs)]
    return claims_mod.evaluate(
        runs,
        claims=[*all_claims(), *own.own_variant_claims(runs), *new_tasks.new_task_claims(runs)],
        extra_rows=extra,
    )


def derived_tables(
    inputs: Mapping[str, pd.DataFrame], parts: tuple[Part, ...] | None = None
) -> dict[str, pd.DataFrame]:
    """Every table computed from the inputs: the paper comparisons, the related systems', the diagnostics'
    summaries, the claims (of the LRA runs and of `parts`) and the cells' failed runs, by name (each is
    written as NAME.csv)."""
    import pandas as pd

    empty = pd.DataFrame()
    runs = inputs.get("runs", empty)
    out: dict[str, pd.DataFrame] = {"claims": claims_table(inputs, parts)}
    out |= tables.summarise({**inputs, "claims": out["claims"]})  # Table 11 shows the claims' gains
    out |= related.summarise(
        inputs.get("lm_runs", empty), inputs.get("lm_dynamics", empty), runs, inputs.get("cost", empty)
    )
    out |= diagnostics.summarise(inputs.get("diagnostics", empty), runs)
    out["failures"] = failures_table(runs)  # whether each cell learns: a finding apart from the claims
    if set(out) != set(DERIVED_TABLES):
        raise AssertionError(f"derived tables {sorted(out)} differ from DERIVED_TABLES")
    return out


def read_inputs(tables_dir: Path, names: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """The named tables of a tables folder (absent ones empty)."""
    return {name: read_table(Path(tables_dir) / f"{name}.csv") for name in names}


def claims_from_tables(tables_dir: Path, parts: tuple[Part, ...] | None = None) -> pd.DataFrame:
    """`pdelra claims`: the claims table recomputed from a tables folder's CSVs (seconds, no notebook), with
    the claims of `parts` (the built-in ones and those `--part` names; default: the built-in ones)."""
    parts = parts_registry.builtin() if parts is None else parts
    runs_csv = Path(tables_dir) / "runs.csv"
    if not runs_csv.is_file():
        raise FileNotFoundError(f"{runs_csv}: no runs table; run `pdelra aggregate --out {tables_dir}` first")
    return claims_table(read_inputs(tables_dir, ("runs", *parts_registry.reads(parts))), parts)


class ClaimsError(UserError, ValueError):
    """The claims could not be computed; the message names the missing table."""


def claims_command(args: argparse.Namespace) -> int:
    """`pdelra claims --tables DIR [--out FILE]` (declared in pdelra.results.cli)."""
    # The parts the workflow judged, as its aggregate recorded them, unless the command line names them.
    specs = args.part or own_part_specs(args.tables)
    try:
        table = claims_from_tables(args.tables, parts_registry.registered({"parts": specs}))
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
