"""The code of a config variant's own operator is part of its runs' identity (pdelra.operator_code): an edit
of it reruns exactly that variant's training jobs, and metrics.json and provenance record its hash."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, load_config, make_workspace, run_snakemake

from pdelra.operator_code import operator_code, operator_files
from pdelra.planning.experiment import operator_codes, run_config
from pdelra.results import provenance

EXAMPLE = REPO / "examples" / "myops.py"
OWN = "smooth_embed"
ROW = {"after_embedding": {"operator": "myops:MovingAverage", "args": {"width": 3}}}


@pytest.fixture
def user_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding the user's modules: myops.py importing a helper beside it, an unrelated
    file, and a package with a relative import."""
    tree = tmp_path / "tree"
    (tree / "ops").mkdir(parents=True)
    (tree / "myops.py").write_text(
        "import helper\nfrom torch import nn\n\nclass MovingAverage(nn.Module): ...\n"
    )
    (tree / "helper.py").write_text("SCALE = 0.02\n")
    (tree / "unrelated.py").write_text("X = 1\n")
    (tree / "ops" / "__init__.py").write_text("")
    (tree / "ops" / "conv.py").write_text("from .init import std\n\nclass Conv: ...\n")
    (tree / "ops" / "init.py").write_text("std = 0.02\n")
    monkeypatch.chdir(tree)
    # First on sys.path, as the working directory is for a user's run: another test of this worker may have
    # left a folder holding its own myops.py there (pdelra.importing appends the working directory).
    monkeypatch.syspath_prepend(str(tree))
    return tree


def test_the_hash_covers_the_module_and_the_users_modules_it_imports(user_tree: Path) -> None:
    assert sorted(operator_files(["myops:MovingAverage"])) == ["helper.py", "myops.py"]
    assert sorted(operator_files(["ops.conv:Conv"])) == ["ops/__init__.py", "ops/conv.py", "ops/init.py"]

    before = operator_code(ROW)
    assert before is not None and re.fullmatch(r"[0-9a-f]{64}", before)
    (user_tree / "unrelated.py").write_text("X = 2\n")
    assert operator_code(ROW) == before, "a file the operator does not import is not its code"
    (user_tree / "helper.py").write_text("SCALE = 0.2\n")
    after_helper = operator_code(ROW)
    assert after_helper != before, "a helper module it imports is its code"
    (user_tree / "myops.py").write_text((user_tree / "myops.py").read_text() + "# std=0.2\n")
    assert operator_code(ROW) not in (before, after_helper)

    package = {"x": {"operator": "ops.conv:Conv"}}
    first = operator_code(package)
    (user_tree / "ops" / "init.py").write_text("std = 0.2\n")
    assert operator_code(package) != first, "a relative import inside a package is followed"


def test_built_in_operators_have_no_code_of_their_own_and_a_missing_module_is_named(user_tree: Path) -> None:
    assert operator_code({"between_layers": {"operator": "diffusion"}}) is None
    assert operator_code(None) is None
    # An installed library counts with its named file only (its version is the package's).
    assert list(operator_files(["torch.nn:Flatten"])) == ["torch/nn/__init__.py"]
    with pytest.raises(ValueError, match=r"operator 'nowhere:Op': no source of module 'nowhere'"):
        operator_code({"x": {"operator": "nowhere:Op"}})


def test_only_own_variants_run_configs_carry_the_code(user_tree: Path) -> None:
    config = load_config("tiny")
    config["variants"] = {OWN: ROW, "built_in_only": {"after_mlp": {"operator": "diffusion"}}}
    codes = operator_codes(config)
    assert set(codes) == {OWN}
    settings = {"base": {"model": {}, "train": {}}}
    own = run_config(config, settings, "listops", OWN, "h1", "base", 0, codes)
    assert own["operator_code"] == operator_code(ROW)
    plain = run_config(config, settings, "listops", "none", "h1", "base", 0, codes)
    assert "operator_code" not in plain, "a built-in variant's run config (and its hash) is unchanged"


def test_provenance_shows_each_own_variants_operator_code_beside_the_commit() -> None:
    runs = pd.DataFrame(
        {
            "task": "listops", "variant": ["none", OWN, OWN], "scale": "h1", "setting": "base",
            "seed": [0, 0, 1], "status": "completed", "code_version": "abc123", "device": "cpu",
            "config_hash": ["a", "b", "c"], "operator_code": [None, "f" * 64, "f" * 64],
        }
    )  # fmt: skip
    summary = dict(provenance.provenance_summary(runs).itertuples(index=False))
    assert summary["code versions"] == "abc123"
    assert summary[f"operator code {OWN}"] == "f" * 16
    assert not any(item.startswith("operator code none") for item in summary)


def _train_jobs(output: str) -> list[str]:
    """The variant of each `rule train` job a `snakemake -n` lists."""
    variants, in_train = [], False
    for line in output.splitlines():
        if line.strip().startswith(("rule ", "localrule ")):
            in_train = line.strip().rstrip(":") == "rule train"
        elif in_train and line.strip().startswith("wildcards:"):
            variants.append(re.search(r"variant=([^,\s]+)", line).group(1))
    return variants


@pytest.mark.slow
def test_editing_the_operator_reruns_exactly_its_variants_training_jobs(tmp_path: Path) -> None:
    config = load_config("tiny")
    config["grids"]["main"] = {
        "tasks": ["listops"],
        "variants": ["none", OWN],
        "scales": ["h1"],
        "seeds": [0, 1],
    }
    config["variants"] = {OWN: ROW}
    config["defaults"]["train"].update(max_epochs=1, max_steps=2)
    workspace = make_workspace(tmp_path / "ws", config)
    shutil.copy2(EXAMPLE, workspace / "myops.py")  # the user's module, in the project's root
    runs = workspace / "results" / "tiny" / "runs" / "listops"
    targets = [
        f"{runs.relative_to(workspace)}/{v}/h1/base/seed{s}/metrics.json"
        for v in ("none", OWN)
        for s in (0, 1)
    ]
    run_snakemake(workspace, "--cores", "2", *targets, timeout=600, check=True)

    # metrics.json records the code each run ran: the own variant's hash, none for the built-in one.
    code = json.loads((runs / OWN / "h1/base/seed0/metrics.json").read_text())["operator_code"]
    assert re.fullmatch(r"[0-9a-f]{64}", code)
    assert json.loads((runs / "none/h1/base/seed0/metrics.json").read_text())["operator_code"] is None
    assert _train_jobs(run_snakemake(workspace, "-n", *targets, check=True).stdout) == []

    source = workspace / "myops.py"
    source.write_text(
        source.read_text().replace("torch.full((d_model,), -2.0)", "torch.full((d_model,), -1.0)")
    )
    dry = run_snakemake(workspace, "-n", *targets, check=True)
    assert sorted(_train_jobs(dry.stdout)) == [OWN, OWN], dry.stdout[-3000:]
    assert "Params have changed" in dry.stdout


def test_the_trainer_identity_changes_with_the_operator_code_so_no_old_checkpoint_resumes(
    user_tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Also for `pdelra train` by hand (no operator_code in the run config): the code it runs is hashed."""
    from pdelra.planning.config_check import with_defaults
    from pdelra.training.runconfig import validate_run_config
    from pdelra.training.runner import run_identity

    config = with_defaults({**load_config("tiny"), "variants": {OWN: ROW}})  # as the workflow fills it in
    settings = {"base": {"model": {}, "train": {}}}
    by_hand = validate_run_config(run_config(config, settings, "listops", OWN, "h1", "base", 0))
    first = run_identity(by_hand, "data")
    assert first["operator_code"] == operator_code(ROW)
    (user_tree / "helper.py").write_text("SCALE = 0.2\n")
    assert run_identity(by_hand, "data")["operator_code"] != first["operator_code"]
    assert "operator_code" not in run_identity(
        validate_run_config(run_config(config, settings, "listops", "none", "h1", "base", 0)), "data"
    ), "a built-in variant's identity (and its checkpoints) is unchanged"

    planned = validate_run_config(
        run_config(config, settings, "listops", OWN, "h1", "base", 0, {OWN: "0" * 64})
    )
    with caplog.at_level("WARNING", logger="pdelra.training"):
        assert run_identity(planned, "data")["operator_code"] == operator_code(ROW)
    assert "changed since the workflow planned this run" in caplog.text
