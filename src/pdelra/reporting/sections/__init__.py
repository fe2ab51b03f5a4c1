"""The report's sections, one module each, all with `render(report: Report) -> None`: each displays one
part of the report in the notebook and saves its tables and figures through `pdelra.reporting.io`
(captions → artifacts.json → index.html).

Display only: every number comes from a CSV that `pdelra aggregate` wrote (`pdelra.results`), read through
`report.table(name)`; a section formats, orders and draws, and computes nothing. The headings live in the
notebook's markdown, never in a section (of the contributed ones, `contributed`, the diagnostics section
prints its own and the notebook has none for it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


class UndeclaredTableError(KeyError):
    """A section asked for a table `pdelra aggregate` does not write."""


@dataclass
class Report:
    """What every section gets: the tables folder, the output folder, the experiment, whether the grid is
    still running, and `table(name)`, the only way a section reads anything."""

    tables_dir: Path
    out_dir: Path
    experiment: str
    partial: bool = False
    _cache: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls, tables_dir: str | Path, out_dir: str | Path, experiment: str, partial: bool = False
    ) -> Report:
        """The report on `tables_dir`, writing into `out_dir` (its figures/ and tables/ created)."""
        from pdelra.reporting.style import apply_theme

        out = Path(out_dir)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        (out / "tables").mkdir(parents=True, exist_ok=True)
        apply_theme()
        return cls(Path(tables_dir), out, experiment, partial)

    def table(self, name: str) -> pd.DataFrame:
        """`{tables_dir}/{name}.csv` (an empty frame when absent or empty: that part has not run); `name`
        must be one the report rule declares: a table `pdelra aggregate` writes
        (pdelra.steps.aggregate.AGGREGATE_TABLES) or `data` (`pdelra data-summary`, the data banner)."""
        from pdelra.data.summary import TABLE as DATA_TABLE
        from pdelra.results.build import read_table
        from pdelra.steps.aggregate import AGGREGATE_TABLES

        if name not in (*AGGREGATE_TABLES, DATA_TABLE):
            raise UndeclaredTableError(f"{name!r} is not a table the report rule declares")
        if name not in self._cache:
            self._cache[name] = read_table(self.tables_dir / f"{name}.csv")
        return self._cache[name].copy()


def say(markdown: str) -> None:
    """Show a paragraph of Markdown in the notebook."""
    from IPython.display import Markdown, display

    display(Markdown(markdown))
