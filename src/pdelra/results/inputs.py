"""The names of the tables an experiment's tables folder holds beside the run tables, written by the steps of
its other parts (pdelra.parts): what `pdelra aggregate` takes as options and `pdelra claims` reads when
present, and what the report may read. Constants only, so that the workflow, the command line and the report
name them without importing the results layer or the parts' steps."""

LM_TABLES = ("lm_runs", "lm_dynamics", "lm_history")  # `pdelra lm aggregate` (PhysQK-AD's LM)
# `pdelra cta-official aggregate` (Continuous-Time Attention's own experiments)
CTA_OFFICIAL_TABLES = ("cta_official_runs", "cta_official_summary", "cta_official_lm")
DIAGNOSTICS_TABLE = "diagnostics"  # `pdelra diagnose table`

# Those read from a tables folder when present, in the order of aggregate's options (the parts' `reads`: a
# test holds them equal).
OPTIONAL_INPUTS = ("lm_runs", "lm_dynamics", DIAGNOSTICS_TABLE, "cta_official_runs")
