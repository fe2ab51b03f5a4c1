"""The report's sections, one module each, all with `render(report: Report) -> None`: each displays one
part of the report in the notebook and saves its tables and figures through `pdelra.reporting.io`
(captions → artifacts.json → index.html). What several sections use to show things (`say`, CI cells,
claims of a family) is in `pdelra.reporting.display`; a section imports nothing from another section.

Display only: every number comes from a CSV of the tables folder, read through `report.table(name)`, the
one reader, for a name the report rule declares (`DECLARED_TABLES`); a section formats, orders and draws,
and computes nothing. The headings live in the notebook's markdown, or for a part's section in its record
(pdelra.parts: `heading`, shown by pdelra.reporting.part_sections), never in a section; the one section with
several parts, `related`, titles its parts (### and ####) itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pdelra import parts as registry
from pdelra.data.summary import TABLE as DATA_TABLE
from pdelra.reporting.style import apply_theme
from pdelra.results.build import AGGREGATE_TABLES, read_table

if TYPE_CHECKING:
    import pandas as pd


# The tables the report rule declares as its inputs (workflow/rules/report.smk): what `pdelra aggregate`
# writes, the data banner's `data` (`pdelra data-summary`) and the tables of every part with a report section
# (pdelra.parts; absent, so empty, when the config does not run it). A config's own parts add theirs
# (`Report.parts`).
DECLARED_TABLES = (
    *AGGREGATE_TABLES,
    DATA_TABLE,
    *(t for p in registry.builtin() if p.report for t in p.tables),
)


class UndeclaredTableError(KeyError):
    """A section asked for a table the report rule does not declare (not in `DECLARED_TABLES`)."""


@dataclass
class Report:
    """What every section gets: the tables folder, the output folder, the experiment, whether the grid is
    still running, and `table(name)`, the only way a section reads anything."""

    tables_dir: Path
    out_dir: Path
    experiment: str
    partial: bool = False
    parts: tuple[str, ...] = ()  # the config's own parts (their modules: its `parts` list)
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls,
        tables_dir: str | Path,
        out_dir: str | Path,
        experiment: str,
        partial: bool = False,
        parts: tuple[str, ...] | list[str] = (),
    ) -> Report:
        """The report on `tables_dir`, writing into `out_dir` (its figures/ and tables/ created)."""
        out = Path(out_dir)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        (out / "tables").mkdir(parents=True, exist_ok=True)
        apply_theme()
        return cls(Path(tables_dir), out, experiment, partial, tuple(parts))

    def registered(self) -> tuple[registry.Part, ...]:
        """Every part of the experiment: the built-in ones and the config's own."""
        return registry.registered({"parts": list(self.parts)})

    def table(self, name: str) -> pd.DataFrame:
        """`{tables_dir}/{name}.csv` (an empty frame when absent or empty: that part has not run); `name`
        must be one the report rule declares (`DECLARED_TABLES`)."""
        own = (table for part in registry.plugins({"parts": list(self.parts)}) for table in part.tables)
        if name not in DECLARED_TABLES and name not in own:
            raise UndeclaredTableError(f"{name!r} is not a table the report rule declares")
        if name not in self._cache:
            self._cache[name] = read_table(self.tables_dir / f"{name}.csv")
        return self._cache[name].copy()
