"""The experiment config: schema, friendly errors, defaults, and the run config each training job receives."""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import REPO, load_config, make_workspace, run_snakemake

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
CONFIGS = [
    REPO / "config" / "config.yaml",
    REPO / "config" / "demo.yaml",
    *sorted((REPO / "tests" / "configs").glob("*.yaml")),
]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_configs_are_valid(path: Path) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(yaml.safe_load(path.read_text()))


def test_schema_forbids_unknown_keys_everywhere() -> None:
    """additionalProperties: false on every object of the schema, so a typo can never be silently ignored."""

    def objects(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
        found = []
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                found.append((where, node))
            for key, value in node.items():
                found += objects(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                found += objects(value, f"{where}[{i}]")
        return found

    loose = [where for where, node in objects(SCHEMA) if node.get("additionalProperties") is not False]
    assert not loose, f"objects without additionalProperties: false: {loose}"


def _dry_run_error(tmp_path: Path, config: dict[str, Any]) -> str:
    workspace = make_workspace(tmp_path / "ws", config)
    proc = run_snakemake(workspace, "-n", timeout=60)
    assert proc.returncode != 0, "an invalid config must stop the workflow"
    return proc.stdout + proc.stderr


def test_unknown_key_is_named_with_the_allowed_keys(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["defaults"]["train"]["learning_rate"] = 0.1
    message = _dry_run_error(tmp_path, config)
    assert "unknown key(s) 'learning_rate' in 'defaults.train'" in message
    assert "allowed keys: batch_size, betas" in message


def test_bad_variant_is_named_with_the_allowed_values(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["grids"]["main"]["variants"] = ["none", "after_embed"]
    message = _dry_run_error(tmp_path, config)
    expected = "'grids.main.variants[1]' is 'after_embed'; allowed values: none, after_embedding, after_mlp"
    assert expected in message


def test_wrong_type_is_named(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["tasks"]["listops"]["max_length"] = "long"
    message = _dry_run_error(tmp_path, config)
    assert "'tasks.listops.max_length' must be of type integer, got 'long'" in message


def test_grid_task_without_settings_is_refused(tmp_path: Path) -> None:
    config = load_config("tiny")
    del config["tasks"]["retrieval"]
    assert "no entry under 'tasks'" in _dry_run_error(tmp_path, config)


def _train_commands(workspace: Path, *args: str) -> dict[tuple[str, str, str, str, int], dict[str, Any]]:
    """Run config of every training job a dry run would start, keyed by the run identity (pdelra.runs)."""
    proc = run_snakemake(workspace, "-n", "-p", "--forceall", *args, timeout=60, check=True)
    configs = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        if "pdelra train " in line:
            argv = shlex.split(line[line.index("pdelra train ") :])
            rc = json.loads(argv[argv.index("--run-config") + 1])
            configs[(rc["task"], rc["variant"], rc["scale"], rc["setting"], rc["seed"])] = rc
    return configs


def test_run_config_resolves_defaults_and_task_overrides(tmp_path: Path) -> None:
    config = load_config("tiny")
    del config["defaults"]["train"]["patience"]  # falls back to the schema default (paper: 10)
    config["tasks"]["retrieval"]["model"] = {"n_layers": 2}
    config["tasks"]["retrieval"]["train"] = {"lr": 0.0005}
    runs = _train_commands(make_workspace(tmp_path / "ws", config))
    assert len(runs) == 4
    listops = runs[("listops", "none", "h1", "base", 0)]
    retrieval = runs[("retrieval", "after_embedding", "h1", "base", 0)]
    assert listops["train"]["patience"] == 10
    assert (listops["model"]["n_layers"], retrieval["model"]["n_layers"]) == (1, 2)
    assert (listops["train"]["lr"], retrieval["train"]["lr"]) == (0.003, 0.0005)
    assert set(listops) == {"task", "variant", "scale", "setting", "seed", "model", "train"}


def test_grid_settings_override_the_task_config_and_name_the_run(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["tasks"]["listops"]["train"] = {"lr": 0.002}
    config["grids"]["cta"] = {
        "tasks": ["listops"],
        "variants": ["cta_wave"],
        "scales": ["h1"],
        "seeds": [0],
        "settings": {
            "steps1": {"model": {"cta_steps": 1}},
            "steps4": {"model": {"cta_steps": 4}, "train": {"lr": 0.001}},
        },
    }
    config["run_grids"] = ["main", "cta"]
    runs = _train_commands(make_workspace(tmp_path / "ws", config))
    assert len(runs) == 6  # 4 base runs + 2 settings
    one, four = (
        runs[("listops", "cta_wave", "h1", "steps1", 0)],
        runs[("listops", "cta_wave", "h1", "steps4", 0)],
    )
    assert (one["model"]["cta_steps"], four["model"]["cta_steps"]) == (1, 4)
    assert (one["train"]["lr"], four["train"]["lr"]) == (0.002, 0.001)  # task < setting
    assert "cta_steps" not in runs[("listops", "none", "h1", "base", 0)]["model"]
    proc = run_snakemake(make_workspace(tmp_path / "ws2", config), "-n", "--forceall", timeout=60, check=True)
    assert "runs/listops/cta_wave/h1/steps4/seed0/metrics.json" in proc.stdout + proc.stderr


def test_a_setting_with_an_unknown_key_or_bad_name_is_refused(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["grids"]["main"]["settings"] = {"seed2": {"model": {"d_model": 8}}}
    assert "seed2" in _dry_run_error(tmp_path / "a", config)
    config["grids"]["main"]["settings"] = {"s": {"model": {"nonsense": 1}}}
    assert "nonsense" in _dry_run_error(tmp_path / "b", config)


def test_run_config_is_accepted_by_the_trainer(tmp_path: Path) -> None:
    """Keys stay in sync with `pdelra train`'s own validation (src/pdelra/training/runconfig.py)."""
    runconfig = pytest.importorskip("pdelra.training.runconfig")
    for run in _train_commands(make_workspace(tmp_path / "ws", load_config("tiny"))).values():
        runconfig.validate_run_config(copy.deepcopy(run), "workflow run config")


def test_demo_and_paper_configs_resolve_to_trainer_configs(tmp_path: Path) -> None:
    runconfig = pytest.importorskip("pdelra.training.runconfig")
    for name in ("config", "demo"):
        cfg = yaml.safe_load((REPO / "config" / f"{name}.yaml").read_text())
        runs = _train_commands(make_workspace(tmp_path / name, cfg))
        assert runs, name
        for run in runs.values():
            runconfig.validate_run_config(copy.deepcopy(run), f"config/{name}.yaml run")
        # Paper Table 8 per task (the official CTA grid's own recipe: tests/test_cta_official_grid.py).
        if name == "config":
            lra = {key: r for key, r in runs.items() if r["model"].get("backbone") != "official_cta"}
            layers = {t: r["model"]["n_layers"] for (t, *_), r in lra.items()}
            batch = {t: r["train"]["batch_size"] for (t, *_), r in lra.items()}
            assert layers == {"listops": 6, "text": 6, "retrieval": 4, "pathfinder": 6, "image": 4}
            assert batch == {"listops": 256, "text": 128, "retrieval": 64, "pathfinder": 512, "image": 1024}


def test_config_readme_documents_every_schema_key() -> None:
    readme = (REPO / "config" / "README.md").read_text()
    keys: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            keys.update(node.get("properties", {}))
            for value in node.values():
                collect(value)

    collect(SCHEMA)
    missing = sorted(k for k in keys if not re.search(rf"`{re.escape(k)}`", readme))
    assert not missing, f"config/README.md does not document: {missing}"


# ---------------------------------------------------------------------------------------------------------
# Bad input a new user meets: each stops the dry run with one clear line, no traceback
# ---------------------------------------------------------------------------------------------------------
def _no_traceback(message: str) -> None:
    assert "Traceback" not in message and 'File "' not in message, message


def test_models_that_cannot_be_built_as_configured_are_refused_before_any_job(tmp_path: Path) -> None:
    """between_layers with one block would train the baseline; 16 % 3 heads would fail every job on Slurm."""
    config = load_config("tiny")  # n_layers: 1
    config["grids"]["main"]["variants"] = ["none", "between_layers"]
    config["tasks"]["retrieval"]["model"] = {"n_heads": 3, "n_layers": 2}
    message = _dry_run_error(tmp_path, config)
    layers = (
        "grids.main: task listops (defaults.model < tasks.listops.model): variant 'between_layers' puts its "
        "operator at between_blocks, which a model with n_layers=1 does not have: it needs n_layers ≥ 2"
    )
    heads = "tasks.retrieval.model.n_heads: 3 does not divide d_model 16 (defaults.model.d_model)"
    assert layers in message and heads in message
    _no_traceback(message)
    # `pdelra config check` makes the same checks through the same function: "valid" means accepted.
    from pdelra.planning.config_check import file_problems

    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    assert file_problems(path) == [f"{path}: {layers}", f"{path}: {heads}"]


def test_yaml_pitfalls_get_hints(tmp_path: Path) -> None:
    """3e-3 is text in YAML 1.1; a renamed key is shown beside the key it replaced."""
    config = load_config("tiny")
    config["defaults"]["train"]["lr"] = "3e-3"
    config["grids"]["main"]["seed"] = config["grids"]["main"].pop("seeds")
    message = _dry_run_error(tmp_path, config)
    assert (
        "'defaults.train.lr' must be of type number, got '3e-3' (YAML reads 3e-3 as text: write 3.0e-3"
        in (message)
    )
    assert "'grids.main' is missing a required key: 'seeds' (beside it is the unknown key 'seed'" in message
    _no_traceback(message)


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "ws", load_config("tiny"))
    path = workspace / "config" / "config.yaml"
    lines = path.read_text().splitlines()
    lines.insert(3, "  source generated: [")  # line 4
    path.write_text("\n".join(lines) + "\n")
    proc = run_snakemake(workspace, "-n", timeout=60)
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert re.search(r"Invalid config: config/config\.yaml:\d+:\d+: not valid YAML", message), message
    _no_traceback(message)


def test_config_check_names_the_line_of_a_configfile_syntax_error_and_every_schema_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Snakemake reads a --configfile names no line: `pdelra config check` does."""
    from pdelra.cli import main

    broken = tmp_path / "broken.yaml"
    broken.write_text("experiment: mine\ngrids:\n  main: {tasks: [listops, text\n")
    config = load_config("tiny")
    config["defaults"]["train"]["lr"] = "3e-3"
    config["grids"]["main"]["seed"] = config["grids"]["main"].pop("seeds")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(yaml.safe_dump(config))
    valid = tmp_path / "valid.yaml"
    valid.write_text(yaml.safe_dump(load_config("tiny")))

    assert main(["config", "check", str(valid)]) == 0
    assert "valid (the workflow accepts it" in capsys.readouterr().out
    assert main(["config", "check", str(broken), str(invalid), str(valid)]) == 1
    out = capsys.readouterr().out
    syntax = rf"{re.escape(str(broken))}:4:1: not valid YAML: .*\(while parsing a flow .* line 3, column"
    assert re.search(syntax, out), out
    assert "'defaults.train.lr' must be of type number, got '3e-3' (YAML reads 3e-3 as text" in out
    assert "'grids.main' is missing a required key: 'seeds' (beside it is the unknown key 'seed'" in out
    assert f"{valid}: valid" in out
    assert main(["config", "check", str(tmp_path / "missing.yaml")]) == 1
    assert "no such file" in capsys.readouterr().out


def test_grids_have_user_names_and_variants_come_from_the_model(tmp_path: Path) -> None:
    """A grid is any named set; the allowed variants are pdelra.nn.model.VARIANTS, not a schema's copy."""
    from pdelra.nn.model import VARIANTS

    config = load_config("tiny")
    config["grids"] = {"my-sweep": config["grids"]["main"]}
    config["run_grids"] = ["my-sweep"]
    runs = _train_commands(make_workspace(tmp_path / "ok", config))
    assert len(runs) == 4

    config["grids"]["my-sweep"]["variants"] = ["after_everything"]
    message = _dry_run_error(tmp_path / "bad", config)
    assert f"allowed values: {', '.join(VARIANTS)}" in message
    assert "enum" not in SCHEMA["definitions"]["variant"], "the variant names have one source: VARIANTS"


def test_real_data_without_downloads_is_refused_by_name(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["data"]["source"] = "real"
    message = _dry_run_error(tmp_path, config)
    assert (
        "data.source is real, so data.downloads.lra_release (url, md5) is needed "
        "for task(s) listops, retrieval" in message
    )
    _no_traceback(message)
