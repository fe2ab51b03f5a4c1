"""pdelra.runs: the run identity (task, variant, scale, setting, seed) and its folder layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdelra.nn.model import SCALES, VARIANTS, ModelConfig
from pdelra.runs import (
    BASE_SETTING,
    BASELINE,
    MAIN_SCALE,
    MULTI_SCALE,
    RUN_KEYS,
    SCALE_ORDER,
    RunPathError,
    find_run_files,
    grid_settings,
    merge_settings,
    parse_run_dir,
    run_dir,
)


def test_run_dir_and_parse_run_dir_are_inverse() -> None:
    path = run_dir("results/x/runs", "listops", "cta_wave", "h1", "steps2", 3)
    assert path == Path("results/x/runs/listops/cta_wave/h1/steps2/seed3")
    expected = {"task": "listops", "variant": "cta_wave", "scale": "h1", "setting": "steps2", "seed": 3}
    assert parse_run_dir(path) == expected
    assert parse_run_dir(path / "metrics.json") == expected  # a file inside the folder
    assert tuple(parse_run_dir(path)) == RUN_KEYS


@pytest.mark.parametrize("bad", ["a/b/c/d/seedX", "a/b/c/d/seedX/metrics.json", "seed0", "b/c/d/seed0"])
def test_parse_run_dir_refuses_other_layouts(bad: str) -> None:
    with pytest.raises(RunPathError, match="not a run folder"):
        parse_run_dir(bad)


def test_find_run_files_sees_only_complete_run_folders(tmp_path: Path) -> None:
    good = run_dir(tmp_path, "text", "none", "h1", BASE_SETTING, 0) / "metrics.json"
    old = tmp_path / "text" / "none" / "h1" / "seed0" / "metrics.json"  # pre-setting layout: not found
    for p in (good, old):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    assert find_run_files(tmp_path) == [good]


def test_grid_settings_default_to_base_and_reject_bad_names() -> None:
    assert grid_settings({"tasks": ["text"]}) == {BASE_SETTING: {"model": {}, "train": {}}}
    steps = {"settings": {"steps1": {"model": {"cta_steps": 1}}, "short": {"train": {"max_epochs": 1}}}}
    assert grid_settings(steps) == {
        "steps1": {"model": {"cta_steps": 1}, "train": {}},
        "short": {"model": {}, "train": {"max_epochs": 1}},
    }
    for name in ("seed1", "a/b", "", "_x"):
        with pytest.raises(ValueError, match="not a valid setting name"):
            grid_settings({"settings": {name: {}}}, "grids.cta")
    with pytest.raises(ValueError, match=r"grids.cta.settings.s: unknown key\(s\) \['resources'\]"):
        grid_settings({"settings": {"s": {"resources": {}}}}, "grids.cta")


def test_one_setting_name_means_one_thing_across_grids() -> None:
    grids = {
        "a": {"settings": {"steps1": {"model": {"cta_steps": 1}}}},
        "b": {"settings": {"steps1": {"model": {"cta_steps": 1}}}},
        "c": {"settings": {"steps1": {"model": {"cta_steps": 2}}}},
        "main": {},
    }
    assert set(merge_settings(grids, ["a", "b", "main"])) == {"steps1", BASE_SETTING}
    with pytest.raises(ValueError, match=r"setting 'steps1' is declared by grids\.a and grids\.c"):
        merge_settings(grids, ["a", "c"])


def test_the_run_vocabulary_names_what_the_model_defines() -> None:
    # The steps read these names from pdelra.runs (no torch); the model defines what they mean.
    assert VARIANTS[BASELINE] == {}  # the baseline has no operator at any point
    assert tuple(SCALES) == SCALE_ORDER and {MAIN_SCALE, MULTI_SCALE} <= set(SCALES)
    assert SCALES[MAIN_SCALE] == (1,) and SCALES[MULTI_SCALE] == (1, 2, 4)
    config = ModelConfig(vocab_size=4, num_classes=2, max_length=8)
    assert (config.variant, config.scale) == (BASELINE, MAIN_SCALE)  # a config's defaults are the baseline
