"""The config check's kept answers (pdelra.planning.check_cache): bounded, ignored when unreadable, keyed by
the package's code, and never used by a process that had torch before the checks (whose model tables a test
may have changed in memory). That a repeated dry run imports no torch is tests/test_job_startup.py's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import load_config

from pdelra.planning import check_cache, config_check


def test_the_kept_answers_are_the_newest_and_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(check_cache, "KEPT_ANSWERS", 3)
    check_cache.write("answers.json", {str(i): i for i in range(5)})
    assert check_cache.read("answers.json") == {"2": 2, "3": 3, "4": 4}
    check_cache.cache_file("answers.json").write_text("{not json")
    assert check_cache.read("answers.json") == {}


def test_an_edit_of_the_package_changes_every_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(check_cache.PACKAGE_DIR, tmp_path / "pdelra"))
    monkeypatch.setattr(check_cache, "PACKAGE_DIR", copy)
    check_cache.package_digest.cache_clear()
    try:
        before = check_cache.answer_key("built checks", {"experiment": "x"})
        with (copy / "nn" / "model.py").open("a") as f:
            f.write("\n# edited\n")
        check_cache.package_digest.cache_clear()
        assert check_cache.answer_key("built checks", {"experiment": "x"}) != before
        assert check_cache.answer_key("built checks", {"experiment": "y"}) != before
    finally:
        check_cache.package_digest.cache_clear()


def test_a_process_that_had_torch_checks_afresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A wrong answer planted under the config's key is not read here (pytest imported torch first)."""
    import torch  # noqa: F401  (this process has torch before the checks, as every test process does)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = config_check.with_defaults(load_config("tiny"))
    monkeypatch.setattr(check_cache, "_imported_here", True)  # as if the checks had imported it
    key = config_check._built_key(config)
    assert key is not None
    check_cache.write(check_cache.BUILT_CHECKS, {key: {"variants": ["planted"], "models": [], "parts": []}})
    assert config_check.config_problems(load_config("tiny")) == ["planted"]
    monkeypatch.setattr(check_cache, "_imported_here", False)  # torch came before the checks
    assert config_check._built_key(config) is None
    assert config_check.config_problems(load_config("tiny")) == []
