"""The built-in parts of an experiment, the one place they are listed: PhysQK-AD's LM
(workflow/rules/lm.smk), the mechanism diagnostics (diagnose.smk) and Continuous-Time Attention's own
experiments (cta_official.smk), each a module in its system's own folder (pdelra.parts.PartModule), imported
here by plain imports and handed to the registry below (pdelra.parts.declare_builtin) on import.

Above the systems it imports, so every entry imports it first: the CLI (pdelra.cli), the fork server
(pdelra.forkserver), the workflow (workflow/rules/common.smk) and the report notebook. A config's own part is
loaded by its module's name (`parts` list) through pdelra.parts. Cheap to import: the parts' hooks import
torch or pandas when they run.
"""

from __future__ import annotations

from pdelra import parts
from pdelra.cta_official import part as cta_official
from pdelra.diagnostics import part as diagnostics
from pdelra.lm import part as lm

# In the order `pdelra aggregate`'s options are given on its command line (a different order would be a
# changed parameter, which reruns the aggregate job of a finished experiment).
MODULES = (lm, diagnostics, cta_official)
BUILTIN = parts.declare_builtin(*MODULES)
