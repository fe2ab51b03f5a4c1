"""The report's building blocks: saving figures and tables with captions (`io`), the claims section and
the paper's tables and figures (`sections`), and the per-topic section modules other parts of the project
contribute (`diagnostics_section`, `related_section`), each with `render(tables_dir, out_dir) -> None`."""
