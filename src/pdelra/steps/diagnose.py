"""`pdelra diagnose`: the operator-theory diagnostics (pdelra.nn.diagnostics) measured on trained runs, and
their table over runs.

What each row measures, and how (the kinds `residual`, `probe`, `trained`, `operator`; the attention
sub-layer as a map; the insertion effect on the logits; the commutators), is the subcommand's description,
`pdelra diagnose --help`: DIAGNOSE_DESCRIPTION in pdelra.steps.cli, where the command is declared.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdelra.atomic import write_json_atomic, write_text_atomic
from pdelra.data.hashing import file_digest
from pdelra.data.store import load_split, manifest_hash, read_manifest
from pdelra.errors import UserError
from pdelra.nn.model import ModelConfig
from pdelra.results.diagnostics import COLUMNS, SKIPPED
from pdelra.runs import BASE_SETTING, DIVERGED, RUN_KEYS
from pdelra.steps import diagnose_code
from pdelra.steps.cli import AMPLIFICATION_EXAMPLES
from pdelra.steps.measure import NO_BLOCK, Recorder, measure_batch, measure_logit_effects
from pdelra.training.batches import is_pair_split, make_batch
from pdelra.training.runconfig import validate_run_config
from pdelra.training.runner import build_model
from pdelra.training.weights import WEIGHTS_NAME, load_weights

if TYPE_CHECKING:
    import pandas as pd
    import torch

log = logging.getLogger(__name__)

DIAGNOSTICS_NAME = "diagnostics.csv"
STAMP_NAME = "diagnostics.json"
# Parameters named in a skipped run's reason; the rest are counted (a NaN spreads to every later update).
NAMED_WEIGHTS = 3


def source_digest() -> str:
    """sha256 (16 hex digits) over the diagnostics source files of the pdelra package in use
    (pdelra.steps.diagnose_code, which the workflow reads without importing this module)."""
    return diagnose_code.source_digest(Path(__file__).parents[1])


class DiagnoseError(UserError):
    """A run or table that cannot be diagnosed; the message names the file."""


# ----------------------------------------------------------------------------------------------------------
# One run


def read_metrics(run_dir: Path) -> dict[str, Any]:
    """RUN_DIR/metrics.json; DiagnoseError naming the file when it is missing or not JSON."""
    metrics_path = run_dir / "metrics.json"
    try:
        return json.loads(metrics_path.read_text())
    except FileNotFoundError as exc:
        raise DiagnoseError(f"{metrics_path}: no metrics.json (train the run first)") from exc
    except json.JSONDecodeError as exc:
        raise DiagnoseError(f"{metrics_path}: line {exc.lineno}: not JSON ({exc.msg})") from exc


def load_run(run_dir: Path, data_dir: Path) -> tuple[torch.nn.Module, dict[str, Any], Any]:
    """(model with the run's best-validation weights, in eval mode; metrics.json; the val split)."""
    import dataclasses

    metrics_path = run_dir / "metrics.json"
    metrics = read_metrics(run_dir)
    if "run_config" not in metrics:
        raise DiagnoseError(f"{metrics_path}: no 'run_config' key (written by an older trainer?)")
    raw = dict(metrics["run_config"])
    if "fused_diffusion" in {f.name for f in dataclasses.fields(ModelConfig)}:
        # The eager operator computes the same function with the same parameters, without compiling one
        # (torch.compile costs seconds to tens of seconds a process; a diagnose job is a few forward passes).
        raw["model"] = {**raw.get("model", {}), "fused_diffusion": False}
    cfg = validate_run_config(raw, f"{metrics_path}: run_config")
    manifest = read_manifest(data_dir)
    if manifest["task"] != cfg.task:
        raise DiagnoseError(f"{run_dir} is a {cfg.task!r} run but {data_dir} holds task {manifest['task']!r}")
    expected = metrics.get("data_manifest_hash")
    if expected is not None and manifest_hash(data_dir) != expected:
        raise DiagnoseError(
            f"{data_dir}: data manifest hash differs from the one {metrics_path} was trained on "
            f"({expected[:12]}…): diagnose with the data the run was trained on"
        )
    val = load_split(data_dir, "val")
    model = build_model(cfg, manifest, is_pair_split(val))
    state, meta = load_weights(run_dir / WEIGHTS_NAME)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise DiagnoseError(f"{run_dir / WEIGHTS_NAME}: weights do not fit the run's model: {exc}") from exc
    if meta.get("weights") != "best_validation":
        log.warning(
            "%s holds the %s weights, not best-validation ones", run_dir / WEIGHTS_NAME, meta.get("weights")
        )
    return model.eval(), metrics, val


def diagnose_run(
    run_dir: Path,
    data_dir: Path,
    examples: int = 32,
    batch_size: int = 8,
    amplification_examples: int = AMPLIFICATION_EXAMPLES,
) -> pd.DataFrame:
    """The diagnostics table of one run (COLUMNS), on its first `examples` validation examples; the
    insertion effects on the logits (LOGIT_QUANTITIES) on the first `amplification_examples` of them. A run
    that diverged or holds non-finite weights is not measured: its table is one SKIPPED row saying why."""
    import numpy as np
    import pandas as pd
    import torch

    metrics = read_metrics(run_dir)
    reason = diverged_reason(metrics)  # before building the model, which may be what diverged
    if reason is not None:
        return skipped_run(metrics, reason)
    model, metrics, val = load_run(run_dir, data_dir)
    reason = non_finite_reason(model)
    if reason is not None:
        return skipped_run(metrics, reason)
    count = min(examples, len(val.labels))
    if count < 1:
        raise DiagnoseError(f"{data_dir}: the validation split is empty")
    recorder = Recorder()
    model.requires_grad_(False)  # the amplification differentiates in the activations only
    for start in range(0, count, batch_size):
        batch = make_batch(val, np.arange(start, min(start + batch_size, count)), lambda t: t)
        with torch.no_grad():
            measure_batch(model, batch.tokens, batch.lengths, recorder)
        if start < amplification_examples:
            end = min(start + batch_size, count, amplification_examples)
            measure_logit_effects(model, make_batch(val, np.arange(start, end), lambda t: t).inputs, recorder)
    frame = pd.DataFrame(recorder.rows())
    for key, value in reversed(_run_keys(metrics).items()):
        frame.insert(0, key, value)
    return _with_reasons(frame[list(COLUMNS)])


def _run_keys(metrics: dict[str, Any]) -> dict[str, Any]:
    """The run's identity (RUN_KEYS) from its metrics.json; an older run without `setting` is a base one."""
    return {key: metrics.get(key, BASE_SETTING if key == "setting" else None) for key in RUN_KEYS}


def diverged_reason(metrics: dict[str, Any]) -> str | None:
    """Why a diverged run is not measured: a failed run is named, not mixed into the values (as the claims
    treat it, pdelra.results.claims), and its weights may be the last ones before the non-finite loss (when
    it diverged before any validation), whose activations are often non-finite too."""
    if metrics.get("status") != DIVERGED:
        return None
    step = metrics.get("diverged_at_step")
    return "diverged" if step is None else f"diverged at step {step}"


def non_finite_reason(model: torch.nn.Module) -> str | None:
    """Why a run with NaN/Inf parameters is not measured (every activation after them is non-finite, and the
    amplification's eigendecomposition fails on them), naming the first NAMED_WEIGHTS of them."""
    import torch

    bad = [name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    if not bad:
        return None
    more = f" and {len(bad) - NAMED_WEIGHTS} more" if len(bad) > NAMED_WEIGHTS else ""
    return f"non-finite weights (NaN/Inf) in {', '.join(bad[:NAMED_WEIGHTS])}{more}"


def skipped_run(metrics: dict[str, Any], reason: str) -> pd.DataFrame:
    """A run's table when it is not measured: one row of kind SKIPPED (block NO_BLOCK, no quantity) whose
    `reason` says why, so the run is named in diagnostics.csv and the report rather than missing."""
    import pandas as pd

    row = {**_run_keys(metrics), "block": NO_BLOCK, "operator": "run", "kind": SKIPPED, "position": "run"}
    row |= {"n_examples": 0, "n_logit_examples": 0, "reason": reason}
    return _with_reasons(pd.DataFrame([row]).reindex(columns=list(COLUMNS)))


def _with_reasons(frame: pd.DataFrame) -> pd.DataFrame:
    """`reason` as text, "" where nothing was skipped (a CSV reads an empty cell back as missing)."""
    return frame.assign(reason=frame["reason"].astype(object).fillna("").astype("str"))  # all-NaN: float


def _stamp(
    run_dir: Path, data_dir: Path, examples: int, batch_size: int, amplification_examples: int
) -> dict[str, Any]:
    """What a run's cached diagnostics were measured from: when any of it changes, they are measured again."""
    weights = run_dir / WEIGHTS_NAME
    if not weights.is_file():
        raise DiagnoseError(f"{weights}: no weights file (train the run first)")
    return {
        "weights_sha256": file_digest(weights),
        "code": source_digest(),
        "data_manifest_hash": manifest_hash(data_dir),
        "examples": examples,
        "batch_size": batch_size,
        "amplification_examples": amplification_examples,
    }


def diagnose_cached(
    run_dir: Path,
    data_dir: Path,
    examples: int = 32,
    batch_size: int = 8,
    amplification_examples: int = AMPLIFICATION_EXAMPLES,
) -> tuple[pd.DataFrame, bool]:
    """(the run's diagnostics, whether they were measured now): read back from RUN_DIR/diagnostics.csv
    when RUN_DIR/diagnostics.json matches this run's stamp, measured and stored (table first, stamp last)
    otherwise."""
    import pandas as pd

    table, stamp_path = run_dir / DIAGNOSTICS_NAME, run_dir / STAMP_NAME
    stamp = _stamp(run_dir, data_dir, examples, batch_size, amplification_examples)
    try:
        if json.loads(stamp_path.read_text()) == stamp:
            return _with_reasons(pd.read_csv(table)[list(COLUMNS)]), False
    except (OSError, ValueError, KeyError):  # no or unreadable cache: measure
        pass
    frame = diagnose_run(run_dir, data_dir, examples, batch_size, amplification_examples)
    stamp_path.unlink(missing_ok=True)  # never a valid stamp beside a table being replaced
    write_text_atomic(table, frame.to_csv(index=False))
    write_json_atomic(stamp_path, stamp)
    return frame, True


def collect(paths: list[Path]) -> pd.DataFrame:
    """Concatenate per-run diagnostics tables; a file without rows (nothing measured) contributes none."""
    import pandas as pd

    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(path)
        except FileNotFoundError as exc:
            raise DiagnoseError(f"{path}: no such diagnostics table") from exc
        except pd.errors.EmptyDataError:
            continue
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            raise DiagnoseError(f"{path}: missing column(s) {missing}; rerun `pdelra diagnose run`")
        frames.append(frame[list(COLUMNS)])
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS))
    return pd.concat(frames, ignore_index=True).sort_values([*RUN_KEYS, "block", "kind", "operator"])


def write_table(paths: list[Path], out: Path) -> pd.DataFrame:
    """`pdelra diagnose table`: the per-run tables `collect`ed into the CSV `out` (atomically); the partial
    report builds its diagnostics with it too (pdelra.parts)."""
    frame = collect(paths)
    write_text_atomic(out, frame.to_csv(index=False))
    log.info("%d rows from %d run(s) written to %s", len(frame), len(paths), out)
    return frame


def write_tables(paths: list[Path], tables: Path) -> None:
    """`write_table` into the tables folder, as the rule `diagnostics_table` does (pdelra.parts)."""
    write_table(paths, tables / "diagnostics.csv")


# ----------------------------------------------------------------------------------------------------------
# Command line


def run_command(args: argparse.Namespace) -> int:
    """`pdelra diagnose run` (declared in pdelra.steps.cli)."""
    if args.examples < 1 or args.batch_size < 1:
        raise DiagnoseError("--examples and --batch-size must be ≥ 1")
    if args.amplification_examples < 0:
        raise DiagnoseError("--amplification-examples must be ≥ 0")
    if args.num_threads:
        import torch

        torch.set_num_threads(args.num_threads)
    import pandas as pd

    frames, measured = [], 0
    for number, run_dir in enumerate(args.run_dirs, 1):
        frame, fresh = diagnose_cached(
            run_dir, args.data, args.examples, args.batch_size, args.amplification_examples
        )
        frames.append(frame)
        measured += fresh
        log.info("%d/%d %s: %s", number, len(args.run_dirs), run_dir, "measured" if fresh else "unchanged")
        if (frame["kind"] == SKIPPED).any():
            log.warning("%s: not diagnosed: %s", run_dir, frame["reason"].iloc[0])
    table = pd.concat(frames, ignore_index=True)
    write_text_atomic(args.out, table.to_csv(index=False))
    log.info(
        "%d diagnostics rows of %d run(s) (%d measured, %d unchanged) written to %s",
        len(table), len(frames), measured, len(frames) - measured, args.out,
    )  # fmt: skip
    return 0


def table_command(args: argparse.Namespace) -> int:
    """`pdelra diagnose table`."""
    write_table(args.tables, args.out)
    return 0
