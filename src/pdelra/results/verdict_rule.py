"""The verdict rule of the claims table in one statement (pdelra.results.claims): the report, the landing
page and `pdelra claims --help` show this text; a module of its own so the command line can show it without
importing the statistics."""

VERDICT_RULE = (
    "**reproduced**: our 95 % interval over seeds lies on the paper's side of 0 (for a no-difference claim: "
    "inside the paper's value ± 1 pp; for a 'best' claim: every pairwise comparison favours it); "
    "**contradicted**: it lies on the other side (outside the paper's value ± 1 pp; some other configuration "
    "is significantly better); **inconclusive**: "
    "neither, or fewer than 2 usable seeds; **not run**: a configuration the claim needs has no run. "
    "A failed run (diverged, or not distinguishable from chance) is a finding of its own, named in every "
    "claim it touches: it counts against its configuration (a claim that it helps is decided only where "
    "its runs that learned and its failures counted at chance agree; one at chance in every seed "
    "contradicts it), and a failure of the configuration compared with costs that seed only. "
    "Every claim is Holm-adjusted within its family, the abstract's three claims being one family "
    "(`verdict`; `verdict_unadjusted` beside it). **Size** is a separate word: *as claimed* when the "
    "paper's value lies inside our interval, else *smaller* or *larger than claimed*, or *opposite sign*. "
    "An undecided claim says what would decide it: the seeds for 80 % power at the paper's effect."
)
