"""The mechanism diagnostics as a part of the experiment (`part`): its hooks reach the diagnose step
(pdelra.steps.diagnose), its claims and summaries (pdelra.results.diagnostics) and its report section."""
