"""The report's building blocks, display only (the numbers come from `pdelra.results` via the tables
folder): saving figures and tables with captions (`io`), labels, colours and number formats (`style`), the
paper's sections, one module each with `render(report)` (`sections`), and the per-topic section modules
other parts of the project contribute (`diagnostics_section`, `related_section`), each with
`render(tables_dir, out_dir) -> None`."""
