"""Where to add PDE diffusion in Transformers: the LRA reproduction workflow.

    snakemake --profile profiles/slurm          # config/config.yaml, the full reproduction, on Slurm
    snakemake --workflow-profile workflow/profiles/default --configfile config/demo.yaml
                                                # the CPU demo on generated data (`make demo`)

The rules live in workflow/rules/; the logic they call is the `pdelra` command (src/pdelra/).
"""

# The config: config/config.yaml, or the --configfile given instead (see the top of workflow/rules/common.smk).
include: "workflow/rules/common.smk"
include: "workflow/rules/parts_inputs.smk"
include: "workflow/rules/resources.smk"
include: "workflow/rules/packs.smk"
include: "workflow/rules/hooks.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/smoke.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/lm.smk"
include: "workflow/rules/cta_official_inputs.smk"
include: "workflow/rules/cta_official.smk"
include: "workflow/rules/parts.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/version.smk"


rule all:
    """The report of the selected experiment and the DVC record of its artifacts."""
    default_target: True
    input:
        rules.report.output.index,
        rules.version.output,
