"""The subcommands of the steps after training: `aggregate`, `diagnose run|table`, `report`, `version`.

Only argparse here: each subcommand names its handler as "module:function" (pdelra.cli.handler_of imports it
when the subcommand runs), so `pdelra --help` and every other subcommand pay nothing for pandas, torch,
papermill or DVC. The defaults the help shows live here and the implementations import them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pdelra import parts
from pdelra.parts import add_part_option

# `pdelra diagnose run`: the first N examples for the insertion effect on the logits (see
# pdelra.results.diagnostics.LOGIT_QUANTITIES: a backward pass per class and insertion point, per example).
AMPLIFICATION_EXAMPLES = 1
# `pdelra report`
DEFAULT_NOTEBOOK = Path("workflow/notebooks/report.ipynb")
DEFAULT_KERNEL = (
    "pdelra"  # registered by `make venv` (python -m ipykernel install --sys-prefix --name pdelra)
)
# `pdelra version add`: the finished artifacts of one experiment folder (results/{experiment}/...), in the
# order they are produced.
ARTIFACTS = ("runs", "tables", "report")

VERSION_DESCRIPTION = (
    "Version an experiment's finished artifacts with DVC, and restore them so Snakemake has nothing to redo."
)

DIAGNOSE_DESCRIPTION = """\
`pdelra diagnose`: the operator-theory diagnostics (pdelra.nn.diagnostics) measured on trained runs, and
their table over runs.

    pdelra diagnose run RUN_DIR [RUN_DIR ...] --data PROCESSED_TASK_DIR --out PART.csv
    pdelra diagnose table PART.csv ... --out results/{experiment}/tables/diagnostics.csv

`run` diagnoses each run (of one task) and writes their rows to PART.csv. Each run's own rows are kept in
RUN_DIR/diagnostics.csv beside a stamp, RUN_DIR/diagnostics.json (sha256 of the weights, digest of this code,
data manifest hash, examples, batch size): a run whose stamp still matches is read back, not measured again,
so a job over many runs redoes only those retrained since (or all of them when this code changes).

For each run, `run` loads its best-validation weights (RUN_DIR/model.safetensors) and config
(RUN_DIR/metrics.json), runs the encoder in eval mode on a fixed batch — the first `--examples` validation
examples in file order (retrieval: the first document of each pair) — and records one row per (block,
operator):

- kind `residual`, operator `residual`: the residual stream entering block b (`roughness_in`) and leaving it
  (`roughness_out`); with no diffusion in the model (variant `none`) this says where the representation is
  rough.
- kind `probe`, operator `probe`: a fixed probe diffusion D = I + 0.1·Δ_1 (the same in every run, so runs
  compare) applied to the residual stream x_b entering block b: roughness of x_b and D(x_b), the perturbation
  ‖D(x_b) − x_b‖ and its bound, and the commutator of D with the block's attention sub-layer.
- kind `trained`, operator = the module name (e.g. `encoder.blocks.0.attn_output`): every DiffusionLayer of
  the model, on the input it actually received: roughness entering and leaving the operator (its LayerNorm
  included), the perturbation of its Euler step (trained α, scales, stencil scaling) and the bound, and the
  commutator of that Euler step, applied to the residual stream x_b, with block b's attention sub-layer.
  Per-channel α are used where the operator's channels are the residual stream's; for `attn_values` (the
  value channels) the channel mean; `attn_heads` diffuses along heads (its roughness and bound are along the
  head axis, averaged over tokens) and has no sequence commutator (empty).

- kind `operator`: an operator of a variant declared in the config (`variants:`, a user's `module:attr` or a
  built-in that is not the paper's diffusion layer), on the input it received: roughness entering and leaving
  it, its effect ‖op(x) − x‖ (`perturbation`), its commutator with the block's attention sub-layer (op
  applied to x_b), and the insertion effect on the logits (the operator bypassed) with the amplification.
  What needs the paper's α (alpha_mean, bound, bound_closed_form, bound_ratio, composed_bound,
  composed_ratio, composed_held) is left empty, and the row's `reason` says so.

Every step meets every insertion point: an operator at a point in no block (e.g. a point after the last
block) has block −1 (NO_BLOCK) and no commutator, which needs a block's attention sub-layer; `reason` says
what was not measured and why (empty when everything applied).

- kind `skipped`, operator `run`: the one row of a run that is not measured, its `reason` saying why: it
  diverged (metrics.json status "diverged": "diverged at step n") or its weights hold NaN/Inf ("non-finite
  weights (NaN/Inf) in NAME, ..."). The report names these runs. A measured row whose activations are not
  finite keeps its NaN and says so in `reason`, and its logit effects are left empty with the reason.

The attention sub-layer as a map on the residual stream is M_b(x) = x + W_o·MHA(LN₁(x)) with block b's
trained weights and padded keys masked, without the inserted operators, so that M is the same kind of map in
every variant and D is what varies. Block of an operator: `encoder.embedding` → 0, `between_blocks.i` → i+1,
`blocks.i.*` → i. Every quantity is the mean over the examples of the per-sequence value
(pdelra.nn.diagnostics); `bound_ratio` is the mean of perturbation / bound (≤ 1 by the theory).

The insertion effect on the logits (LOGIT_QUANTITIES, probe and trained rows, on the first
`--amplification-examples` examples; see `measure_logit_effects`): `logit_change` = ‖logits with D − logits
without D‖ (a trained layer's Euler step set to the identity, its LayerNorm kept; the probe inserted at the
block's input), `amplification` = σ_max of the Jacobian of the logits in the point's input at the model as
trained (exact per example, one backward pass per class: pdelra.nn.diagnostics.jacobian_spectral_norm), and
the composed bound amplification × roughness bound that the revised paper's "compositional perturbation
bounds" state, with its ratio and the share of examples where it held. Both are measured through the model's
own modules, by hooks on the named insertion points: nothing of the forward pass is written out again.

`commutator` = ‖D(M(x)) − M(D(x))‖ / ‖M(x)‖ as the issue defines it. Its numerator only involves the
attention branch A = M − I (the identity commutes with D), but its denominator holds the residual stream:
where the stream is large next to the branch (e.g. right after a LayerNorm) it is small for that reason
alone. `commutator_branch` = ‖D(A(x)) − A(D(x))‖ / ‖A(x)‖ removes that scale.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    register_aggregate(subparsers)
    register_part(subparsers)
    register_diagnose(subparsers)
    register_report(subparsers)
    register_version(subparsers)


def register_part(subparsers: Any) -> None:
    """`pdelra part run|aggregate NAME`: a part's generic steps (pdelra.steps.part_jobs)."""
    parser = subparsers.add_parser(
        "part", help="run a part's job or write its tables (workflow/rules/parts.smk)"
    )
    sub = parser.add_subparsers(dest="part_command", metavar="STEP", required=True)
    run = sub.add_parser("run", help="one job of a part: its run config → its run folder's file")
    run.add_argument("name", help="the part's name (pdelra.parts)")
    run.add_argument("--run-config", required=True, help="the job's run config (JSON)")
    run.add_argument("--out", type=Path, required=True, help="the run folder")
    run.add_argument(
        "--device", default="cpu", help="cpu or cuda (the workflow: cuda when the job has a GPU)"
    )
    run.set_defaults(handler="pdelra.steps.part_jobs:run_command")
    table = sub.add_parser("aggregate", help="a part's tables from its runs' files")
    table.add_argument("name", help="the part's name (pdelra.parts)")
    table.add_argument("run_files", nargs="*", type=Path, help="its runs' files (metrics.json, ...)")
    table.add_argument("--out", type=Path, required=True, help="the tables folder")
    table.set_defaults(handler="pdelra.steps.part_jobs:aggregate_command")
    for step in (run, table):
        add_part_option(step)


def register_aggregate(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "aggregate",
        help="collect every run's metrics.json into the result tables (CSV)",
        description=(
            "Read the metrics.json of each run (given as paths and/or found under --runs) and write "
            "runs.csv (one row per run, diverged and failed runs included), main.csv (mean ± std test "
            "accuracy per task × variant at h1 plus the cross-task average, paper Tables 6/10), "
            "multiscale.csv (Table 12), cost.csv (time and memory overhead over the baseline, Table 14), "
            "alpha.csv (learned diffusion coefficients), settings.csv (every grid setting), the "
            "comparisons with the paper's tables the report shows (table6.csv, table11.csv, ...; "
            "docs/interfaces.md) and claims.csv."
        ),
    )
    parser.add_argument("metrics", nargs="*", type=Path, help="metrics.json files of the runs to include")
    parser.add_argument(
        "--runs",
        type=Path,
        help="also include every runs/T/V/S/SETTING/seedN/metrics.json under this folder",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the CSV tables (created if missing)"
    )
    for name in parts.reads(parts.builtin()):  # the built-in parts' tables it reads, in their order
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=Path,
            metavar="CSV",
            help=f"{name}.csv for the derived tables and claims (absent or empty: that part is not run)",
        )
    add_part_option(parser)  # a config's own part: its tables in --out (`pdelra part aggregate`), its claims
    parser.set_defaults(handler="pdelra.steps.aggregate:command")


def register_diagnose(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagnose",
        help="roughness, perturbation bounds and diffusion–attention commutators of trained runs",
        description=DIAGNOSE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="diagnose_command", metavar="ACTION", required=True)
    run = sub.add_parser(
        "run",
        help="diagnose trained runs of one task → one CSV (each run's rows also cached in its folder)",
    )
    run.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="run folders (metrics.json, model.safetensors)",
    )
    run.add_argument("--data", type=Path, required=True, help="the processed task folder the runs trained on")
    run.add_argument("--out", type=Path, required=True, help="CSV of all their rows (written atomically)")
    run.add_argument("--examples", type=int, default=32, help="first N validation examples (default 32)")
    run.add_argument("--batch-size", type=int, default=8, help="examples per forward pass (default 8)")
    run.add_argument(
        "--amplification-examples",
        type=int,
        default=AMPLIFICATION_EXAMPLES,
        help="the first N of those examples for the insertion effect on the logits and its amplification "
        f"(a backward pass per class and insertion point; default {AMPLIFICATION_EXAMPLES}, 0: none)",
    )
    run.add_argument("--num-threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    run.set_defaults(handler="pdelra.steps.diagnose:run_command")
    table = sub.add_parser("table", help="concatenate per-run diagnostics.csv files into one table")
    table.add_argument("tables", nargs="*", type=Path, help="per-run diagnostics.csv files")
    table.add_argument("--out", type=Path, required=True, help="the combined CSV (atomically)")
    table.set_defaults(handler="pdelra.steps.diagnose:table_command")


def register_report(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="execute the report notebook on the result tables and render it to HTML",
        description=(
            "Execute the report notebook with papermill (explicit kernel) on the tables of "
            "`pdelra aggregate`, then render it to HTML without code cells. OUT receives report.ipynb, "
            "report.html, figures/*.png|pdf, tables/*.csv|md|tex (claims.csv: a verdict per claim of the "
            "paper; the paper's tables beside ours) and index.html (verdicts first). OUT is replaced as a "
            "whole once everything succeeded. With --partial --runs DIR it reports on the runs finished "
            "so far (a grid still running), into DIR/../report-partial by default."
        ),
    )
    parser.add_argument("--tables", type=Path, help="folder of runs.csv, main.csv, ... (aggregate)")
    parser.add_argument(
        "--out",
        type=Path,
        help="report folder to (re)create (with --partial default: RUNS/../report-partial)",
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="report on the runs finished so far under --runs (aggregated into the report's own "
        "source-tables/), without touching the workflow's tables or report",
    )
    parser.add_argument("--runs", type=Path, help="with --partial: results/EXPERIMENT/runs")
    parser.add_argument(
        "--notebook",
        type=Path,
        default=DEFAULT_NOTEBOOK,
        help=f"notebook to execute (default: {DEFAULT_NOTEBOOK})",
    )
    parser.add_argument(
        "--kernel",
        default=DEFAULT_KERNEL,
        help=f"Jupyter kernel to execute it with (default: {DEFAULT_KERNEL})",
    )
    parser.add_argument(
        "--experiment", help="experiment name shown in the report (default: OUT's parent folder)"
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="seconds a single notebook cell may run (default: 600)"
    )
    add_part_option(parser)  # the config's own parts: their sections and tables too
    parser.set_defaults(handler="pdelra.steps.report:command")


def register_version(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "version",
        help="version finished artifacts with DVC (add + push) and restore them (pull + snakemake --touch)",
        description=VERSION_DESCRIPTION,
    )
    sub = parser.add_subparsers(dest="version_command", metavar="ACTION", required=True)

    add = sub.add_parser(
        "add",
        help="dvc add an experiment's runs/, tables/ and report/ folders and push them",
        description=(
            "Record the finished artifacts of one experiment folder with `dvc add` (one .dvc file per "
            "folder), push them to --remote or to the DVC project's default remote when one is set, and "
            "write a JSON record "
            "(paths, md5s, file counts, remote) to --out. Commit the .dvc files with git afterwards."
        ),
    )
    add.add_argument("experiment_dir", metavar="EXPERIMENT_DIR", help="results/{experiment}")
    add.add_argument(
        "--out", required=True, help="the JSON record to write (e.g. results/{experiment}/versioned.json)"
    )
    add.add_argument(
        "--remote", help="DVC remote name to push to (default: the project's default remote, if any)"
    )
    add.add_argument("--no-push", action="store_true", help="only record in the local DVC cache")
    add.add_argument(
        "--artifact",
        action="append",
        default=None,
        metavar="NAME",
        help=f"a sub-folder to version (repeatable; default: {', '.join(ARTIFACTS)})",
    )
    add.set_defaults(handler="pdelra.steps.versioning:add_command")

    rst = sub.add_parser(
        "restore",
        help="dvc pull, then snakemake --touch so the pulled results are not recomputed",
        description=(
            "Fetch versioned artifacts with `dvc pull` and then run `snakemake --touch` in the current "
            "directory, because DVC does not keep modification times and Snakemake would otherwise rerun "
            "jobs whose inputs "
            "look newer than their outputs. Inputs that are not versioned (processed data) must exist first: "
            "regenerate them, then run restore (or `snakemake --touch`) again. Example: "
            "`pdelra version restore --snakemake-args '--configfile config/demo.yaml'`."
        ),
    )
    rst.add_argument(
        "targets", nargs="*", metavar="TARGET", help=".dvc files or tracked paths (default: all)"
    )
    rst.add_argument("--remote", help="DVC remote name to pull from (default: the project's default remote)")
    rst.add_argument("--no-touch", action="store_true", help="only dvc pull; leave timestamps as they are")
    rst.add_argument(
        "--snakemake-args",
        default="",
        metavar="ARGS",
        help="extra arguments for `snakemake --touch`, as one shell-quoted string (e.g. '--configfile F')",
    )
    rst.set_defaults(handler="pdelra.steps.versioning:restore_command")
