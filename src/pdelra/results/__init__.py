"""The results layer: pure functions from the aggregated tables (pandas in, pandas out) to every number the
report shows — the paper's tables beside ours, per-seed comparisons, the claims with their verdicts, the
diagnostics summary — and the statistics behind them (`pdelra.results.stats`). `pdelra aggregate` writes all
of it as CSV; the report only reads and displays."""
