"""Where to add PDE diffusion in Transformers: the LRA reproduction workflow.

    snakemake --profile profiles/slurm          # config/config.yaml, the full reproduction, on Slurm
    snakemake --workflow-profile workflow/profiles/default --configfile config/demo.yaml
                                                # the CPU demo on generated data (`make demo`)

The rules live in workflow/rules/; the logic they call is the `pdelra` command (src/pdelra/).
"""

def check_yaml_syntax(path):
    """Stop with FILE:LINE:COLUMN and the parser's complaint when `path` is not valid YAML."""
    import sys

    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            yaml.safe_load(f)
    except FileNotFoundError:
        return  # Snakemake reports a missing config file itself
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = " ".join(filter(None, [getattr(err, "context", None), getattr(err, "problem", None)]))
        print(f"Invalid config: {where}: not valid YAML: {problem or err}", file=sys.stderr)
        sys.exit(1)


# A --configfile on the command line replaces the paper config instead of being merged into it: the demo and
# the test configs are complete experiments, not patches (a merge would leak the paper's grids and sizes).
if not workflow.overwrite_configfiles:
    # Snakemake's own message for a YAML syntax error names neither the file nor the line: find them first.
    # (A --configfile is read by Snakemake before this file runs; README, Troubleshooting, shows how to find
    # the line in that case.)
    check_yaml_syntax("config/config.yaml")

    configfile: "config/config.yaml"



include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/lm.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/version.smk"


rule all:
    """The report of the selected experiment and the DVC record of its artifacts."""
    default_target: True
    input:
        rules.report.output.index,
        rules.version.output,
