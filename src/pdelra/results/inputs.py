"""The tables an experiment's tables folder may hold beside the run tables, by name: what `pdelra aggregate`
takes as options and `pdelra claims` reads when present (a constant the command line shows, kept apart from
pdelra.results.build so that declaring the commands imports nothing of the results layer)."""

# Inputs read from a tables folder when present (beside the run tables).
OPTIONAL_INPUTS = ("lm_runs", "lm_dynamics", "diagnostics", "cta_official_runs")
