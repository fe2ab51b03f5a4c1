"""Where to add PDE diffusion in Transformers: the LRA reproduction workflow.

    snakemake                                   # config/config.yaml: the full paper grids (use a cluster)
    snakemake --configfile config/demo.yaml     # the CPU demo (`make demo`)
    snakemake --profile profiles/slurm          # the full reproduction on Slurm

The rules live in workflow/rules/; the logic they call is the `pdelra` command (src/pdelra/).
"""

from pathlib import Path


# A --configfile on the command line replaces the paper config instead of being merged into it: the demo and
# the test configs are complete experiments, not patches (a merge would leak the paper's grids and sizes).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"



include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


# DVC versioning of the finished artifacts (infra); optional so the DAG also works without it.
if Path(workflow.basedir, "workflow/rules/version.smk").exists():

    include: "workflow/rules/version.smk"


rule all:
    """The report of the selected experiment (and its DVC-versioned artifacts when versioning is set up)."""
    default_target: True
    input:
        rules.report.output.index,
        final_version_targets(rules),
