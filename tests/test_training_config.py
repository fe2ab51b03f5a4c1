"""Run-config validation of `pdelra train`: a bad config stops before any work, naming the key at fault."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pdelra.nn.model import ModelConfig
from pdelra.training.runconfig import (
    OPTIONAL_TRAIN_DEFAULTS,
    REQUIRED_MODEL_KEYS,
    RunConfigError,
    config_hash,
    load_run_config,
    validate_run_config,
)

VALID: dict[str, Any] = {
    "task": "listops",
    "variant": "after_embedding",
    "scale": "h1",
    "seed": 0,
    "model": {
        "d_model": 128,
        "n_layers": 6,
        "n_heads": 8,
        "d_mlp": 512,
        "dropout": 0.1,
        "attn_dropout": 0.0,
        "alpha_init": 0.1,
    },
    "train": {
        "batch_size": 256,
        "lr": 0.001,
        "betas": [0.9, 0.98],
        "weight_decay": 1.0e-5,
        "warmup_steps": 10000,
        "max_epochs": 50,
        "max_steps": None,
        "patience": 10,
        "grad_clip": 1.0,
        "eval_batch_size": 256,
        "checkpoint_minutes": 10,
        "compile": False,
        "num_threads": None,
    },
}


def edited(**changes: Any) -> dict[str, Any]:
    """A copy of VALID with dotted keys set (value ...) or removed (value Ellipsis)."""
    config = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = config
        for parent in parents:
            node = node[parent]
        if value is ...:
            del node[leaf]
        else:
            node[leaf] = value
    return config


def test_the_documented_example_is_valid_and_gains_the_optional_defaults() -> None:
    cfg = validate_run_config(VALID)
    assert cfg.train.betas == (0.9, 0.98)
    assert cfg.train.max_steps is None
    for key, default in OPTIONAL_TRAIN_DEFAULTS.items():
        assert getattr(cfg.train, key) == default
        assert cfg.raw["train"][key] == default


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (edited(epochs=3), "unknown key epochs"),
        (edited(train__learning_rate=0.1), "unknown key train.learning_rate"),
        (edited(train__patience=...), "missing key train.patience"),
        (edited(model__d_model=...), "missing key model.d_model"),
        (edited(seed=...), "missing key seed"),
        (edited(train__lr="1e-3"), "train.lr"),  # PyYAML reads 1e-3 (no dot) as a string
        (edited(train__betas=[0.9]), "train.betas"),
        (edited(train__compile="yes"), "train.compile"),
        (edited(train__batch_size=0), "train.batch_size"),
        (edited(train__debug_nan_at_step=0), "train.debug_nan_at_step"),
    ],
)
def test_an_invalid_config_is_refused_with_the_key_named(config: dict[str, Any], named: str) -> None:
    with pytest.raises(RunConfigError, match=named.replace(".", r"\.")):
        validate_run_config(config, "cfg.yaml")


# The ModelConfig fields a run config must state: marked once, on the field (pdelra.nn.config).
STATED_MODEL_FIELDS = [f.name for f in dataclasses.fields(ModelConfig) if "run_config" in f.metadata]


def test_the_required_model_keys_are_the_model_config_fields_marked_so() -> None:
    assert STATED_MODEL_FIELDS and tuple(STATED_MODEL_FIELDS) == REQUIRED_MODEL_KEYS
    assert sorted(VALID["model"]) == sorted(STATED_MODEL_FIELDS)  # the documented example states each


@pytest.mark.parametrize("key", STATED_MODEL_FIELDS)
def test_a_run_config_without_a_stated_model_field_is_refused_naming_it(key: str) -> None:
    with pytest.raises(RunConfigError, match=rf"missing key model\.{key}\b"):
        validate_run_config(edited(**{f"model__{key}": ...}), "cfg.yaml")


def test_each_stated_model_field_default_passes_its_schema_and_other_fields_are_optional() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig) if f.name in STATED_MODEL_FIELDS}
    cfg = validate_run_config(edited(model=defaults))  # the schema of each key accepts the field's default
    assert cfg.model == defaults
    assert "cta_steps" not in STATED_MODEL_FIELDS
    assert validate_run_config(edited(model__cta_steps=2)).model["cta_steps"] == 2


def test_error_names_the_source_file(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(edited(train__warmup=5)))
    with pytest.raises(RunConfigError, match=rf"^{path}: unknown key train\.warmup"):
        load_run_config(str(path))


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("task: listops\nmodel: {d_model: 128\n")
    with pytest.raises(RunConfigError, match=rf"{path}: line \d+"):
        load_run_config(str(path))


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(RunConfigError, match=r"not found: .*nope\.yaml"):
        load_run_config(str(tmp_path / "nope.yaml"))


def test_inline_json_and_file_give_the_same_config_and_hash(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(VALID))
    from_file = load_run_config(str(path))
    inline = load_run_config(json.dumps(VALID))
    assert from_file.raw == inline.raw
    assert from_file.hash == inline.hash


def test_hash_is_sha256_of_canonical_json_and_tracks_every_value() -> None:
    cfg = validate_run_config(VALID)
    canonical = json.dumps(cfg.raw, sort_keys=True, separators=(",", ":"))
    assert cfg.hash == hashlib.sha256(canonical.encode()).hexdigest()
    # Key order does not matter; values do.
    reordered = dict(reversed(list(VALID.items())))
    assert validate_run_config(reordered).hash == cfg.hash
    assert validate_run_config(edited(train__lr=0.002)).hash != cfg.hash
    assert validate_run_config(edited(seed=1)).hash != cfg.hash
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_yaml_file_reads_exponents_without_a_dot_as_numbers(tmp_path: Path) -> None:
    """PyYAML alone reads `1e-5` as a string; a hand-written run config must not trip over that."""
    import yaml

    text = yaml.safe_dump(VALID).replace("1.0e-05", "1e-5")
    assert "weight_decay: 1e-5" in text
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert load_run_config(str(path)).train.weight_decay == 1e-5


def test_setting_is_optional_named_and_part_of_the_identity() -> None:
    cfg = validate_run_config(VALID)
    assert cfg.setting == "base" and cfg.raw["setting"] == "base"  # the grid without settings
    steps = validate_run_config(edited(setting="steps2"))
    assert steps.setting == "steps2" and steps.hash != cfg.hash
    for bad in ("seed2", "a/b", ""):
        with pytest.raises(RunConfigError, match="setting"):
            validate_run_config(edited(setting=bad))
