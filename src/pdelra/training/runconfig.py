"""The run config: the resolved slice of the workflow config for exactly one training run.

A run config is small JSON or YAML (docs/interfaces.md, "Run config"). It is validated against a JSON schema
so that a typo in a key stops the run before any work, with a message naming the key, instead of being
silently ignored. The validated config is normalised (optional keys filled with their defaults) and hashed:
the hash identifies the run in metrics.json and decides whether a checkpoint may be resumed.

This module imports no torch: the CLI validates the config before paying for the model stack.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pdelra.errors import UserError
from pdelra.nn.config import run_config_keys
from pdelra.runs import BASE_SETTING, SETTING_NAME

# Model keys every run config must give, and their schema: the ModelConfig fields marked so (pdelra.nn.config,
# torch-free). ModelConfig accepts more (checked when the model is built, in runner.build_model).
MODEL_KEY_SCHEMAS = run_config_keys()
REQUIRED_MODEL_KEYS = tuple(MODEL_KEY_SCHEMAS)

# Train keys documented in docs/interfaces.md: required, so that a workflow that forgets one fails loudly.
REQUIRED_TRAIN_KEYS = (
    "batch_size",
    "lr",
    "betas",
    "weight_decay",
    "warmup_steps",
    "max_epochs",
    "max_steps",
    "patience",
    "grad_clip",
    "eval_batch_size",
    "checkpoint_minutes",
    "compile",
    "num_threads",
)

# Optional train keys and their defaults. None of them changes the recipe; they exist for tests and debugging.
OPTIONAL_TRAIN_DEFAULTS: dict[str, Any] = {
    # Also checkpoint every N optimizer steps (kill-and-resume tests use 1); null: by time and epoch only.
    "checkpoint_every_steps": None,
    # Replace the loss of this (1-based) optimizer step with NaN, to exercise the divergence path.
    "debug_nan_at_step": None,
}

_POS_INT = {"type": "integer", "minimum": 1}
_NULL_OR_POS_INT = {"type": ["integer", "null"], "minimum": 1}
_NONNEG_NUMBER = {"type": "number", "minimum": 0}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["task", "variant", "scale", "seed", "model", "train"],
    "properties": {
        "task": {"type": "string", "minLength": 1},
        "variant": {"type": "string", "minLength": 1},
        "scale": {"type": "string", "minLength": 1},
        # Optional (default "base"): the grid setting whose overrides are already merged into model/train.
        "setting": {"type": "string", "pattern": SETTING_NAME.pattern, "not": {"pattern": "^seed"}},
        "seed": {"type": "integer", "minimum": 0},
        # Optional: sha256 of the source of the variant's own operators (pdelra.operator_code), which the
        # workflow adds so that an edit of that code changes the config and its hash.
        "operator_code": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "model": {
            "type": "object",
            "required": list(REQUIRED_MODEL_KEYS),
            "properties": MODEL_KEY_SCHEMAS,
        },
        "train": {
            "type": "object",
            "additionalProperties": False,
            "required": list(REQUIRED_TRAIN_KEYS),
            "properties": {
                "batch_size": _POS_INT,
                "lr": {"type": "number", "exclusiveMinimum": 0},
                "betas": {
                    "type": "array",
                    "items": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "weight_decay": _NONNEG_NUMBER,
                "warmup_steps": {"type": "integer", "minimum": 0},
                "max_epochs": _POS_INT,
                "max_steps": _NULL_OR_POS_INT,
                "patience": _POS_INT,
                "grad_clip": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "eval_batch_size": _POS_INT,
                "checkpoint_minutes": {"type": ["number", "null"], "exclusiveMinimum": 0},
                "compile": {"type": "boolean"},
                "num_threads": _NULL_OR_POS_INT,
                "checkpoint_every_steps": _NULL_OR_POS_INT,
                "debug_nan_at_step": _NULL_OR_POS_INT,
                "micro_batch_size": _NULL_OR_POS_INT,
                "length_buckets": {"type": ["integer", "null"], "minimum": 2},
            },
        },
    },
}


class RunConfigError(UserError, ValueError):
    """A run config that cannot be used; the message names the source and the offending key."""


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int
    lr: float
    betas: tuple[float, float]
    weight_decay: float
    warmup_steps: int
    max_epochs: int
    max_steps: int | None
    patience: int
    grad_clip: float | None
    eval_batch_size: int
    checkpoint_minutes: float | None
    compile: bool
    num_threads: int | None
    checkpoint_every_steps: int | None = None
    debug_nan_at_step: int | None = None
    # Rows per forward/backward pass; gradients of a batch's micro-batches are accumulated into one optimizer
    # step with the same effective batch (same loss and update up to float rounding). None: the whole batch.
    # Optional and not filled in by default, so configs without it keep their hash.
    micro_batch_size: int | None = None
    # Draw each batch from one of this many buckets of similar length (pdelra.training.batches): less padding,
    # the same examples per epoch. None: the plain seeded shuffle. Optional and not filled in, like the above.
    length_buckets: int | None = None


@dataclass(frozen=True)
class RunConfig:
    task: str
    variant: str
    scale: str
    setting: str
    seed: int
    model: Mapping[str, Any]
    train: TrainConfig
    # The normalised mapping the hash is computed from; kept so metrics.json can echo the exact config.
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def hash(self) -> str:
        return config_hash(self.raw)


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON (sorted keys, no whitespace) of a normalised run config."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_run_config(file_or_json: str) -> tuple[dict[str, Any], str]:
    """Parse a run config given inline (a JSON object, starting with '{') or as a file (.json, else YAML).

    Returns the parsed mapping and a description of its source for error messages.
    """
    if file_or_json.lstrip().startswith("{"):
        try:
            return json.loads(file_or_json), "--run-config (inline JSON)"
        except json.JSONDecodeError as exc:
            raise RunConfigError(
                f"--run-config (inline JSON): line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from exc

    path = Path(file_or_json)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise RunConfigError(f"run config file not found: {path}") from exc
    if path.suffix == ".json":
        try:
            return json.loads(text), str(path)
        except json.JSONDecodeError as exc:
            raise RunConfigError(f"{path}: line {exc.lineno} column {exc.colno}: {exc.msg}") from exc

    import yaml

    try:
        parsed = yaml.load(text, Loader=_yaml12_float_loader())  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        raise RunConfigError(f"{path}: {where}not valid YAML: {exc}") from exc
    return parsed, str(path)


@cache
def _yaml12_float_loader() -> type:
    """A SafeLoader that also reads `1e-5` as a float, as YAML 1.2 and JSON do (PyYAML 1.1: a string)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    float_pattern = re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    )
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", float_pattern, list("-+0123456789."))
    return Loader


def validate_run_config(config: Any, source: str = "run config") -> RunConfig:
    """Validate a parsed run config and return it normalised; RunConfigError names the first bad key."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(SCHEMA)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        raise RunConfigError(f"{source}: {_describe(errors[0])}")

    train = {**OPTIONAL_TRAIN_DEFAULTS, **config["train"]}
    setting = config.get("setting", BASE_SETTING)
    normalised = {**config, "setting": setting, "train": train, "model": dict(config["model"])}
    return RunConfig(
        task=config["task"],
        variant=config["variant"],
        scale=config["scale"],
        setting=setting,
        seed=config["seed"],
        model=normalised["model"],
        train=TrainConfig(**{**train, "betas": tuple(train["betas"])}),
        raw=normalised,
    )


def load_run_config(file_or_json: str) -> RunConfig:
    config, source = read_run_config(file_or_json)
    return validate_run_config(config, source)


def _describe(error: Any) -> str:
    """Turn a jsonschema error into 'key path: what is wrong', naming unknown or missing keys explicitly."""
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - known)
        where = f"{path}." if path else ""
        return f"unknown key {', '.join(where + k for k in unknown)} (allowed: {', '.join(sorted(known))})"
    if error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        where = f"{path}." if path else ""
        return f"missing key {', '.join(where + k for k in missing)}"
    return f"{path or '(top level)'}: {error.message}"
