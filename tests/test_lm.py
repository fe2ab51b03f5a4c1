"""PhysQK-AD's language-model experiment: data packing, the causal model, eff_Pe, the trainer, the tables."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from pdelra.data import store
from pdelra.lm.aggregate import aggregate_lm
from pdelra.lm.data import SEPARATOR, pack, prepare, split_documents
from pdelra.lm.model import CausalLM, LMConfig, causal_window_mask
from pdelra.lm.trainer import train_lm
from pdelra.runs import run_dir

# ------------------------------------------------------------------------------------------------ data


def test_pack_overlaps_windows_by_one_token_and_separates_documents() -> None:
    windows, starts, dropped = pack([b"abc", b"de"], window=2)
    # stream: a b c <0> d e <0>  (bytes + 1) → 7 tokens, windows of 3 stepping 2: 3 windows, 0 dropped
    a, b, c, d, e = (x + 1 for x in b"abcde")
    assert windows.tolist() == [[a, b, c], [c, SEPARATOR, d], [d, e, SEPARATOR]]
    assert starts.tolist() == [0, 0, 1] and dropped == 0
    assert windows.dtype == np.uint16


def test_split_is_by_document_and_seeded() -> None:
    parts = split_documents(100, 0.1, 0.2, seed=3)
    assert [len(parts[s]) for s in ("train", "val", "test")] == [70, 10, 20]
    every = np.concatenate(list(parts.values()))
    assert sorted(every.tolist()) == list(range(100))  # each document in exactly one split
    assert all(np.array_equal(parts[s], split_documents(100, 0.1, 0.2, seed=3)[s]) for s in parts)
    assert not np.array_equal(parts["val"], split_documents(100, 0.1, 0.2, seed=4)["val"])


def _write_reviews(raw: Path, texts: list[bytes]) -> None:
    for i, text in enumerate(texts):
        folder = raw / "aclImdb" / ("train" if i % 2 else "test") / ("pos" if i % 3 else "neg")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}_7.txt").write_bytes(text)
    for split in ("train", "test"):
        for label in ("pos", "neg"):
            (raw / "aclImdb" / split / label).mkdir(parents=True, exist_ok=True)


@pytest.fixture(scope="module")
def lm_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm")
    rng = np.random.default_rng(0)
    words = [b"good", b"film", b"plot", b"the", b"bad", b"actor"]
    texts = [b" ".join(words[j] for j in rng.integers(0, len(words), 40)) for _ in range(40)]
    _write_reviews(root / "raw", texts)
    prepare("text", root / "raw", root / "lm_text", window=16, val_fraction=0.15, test_fraction=0.15, seed=0)
    return root / "lm_text"


def test_prepare_writes_the_store_layout_with_every_byte_in_one_split(lm_data: Path) -> None:
    manifest = store.read_manifest(lm_data)
    assert manifest["task"] == "lm_text" and manifest["max_length"] == 17 and manifest["vocab_size"] == 257
    lm = manifest["lm"]
    assert sum(lm["documents"].values()) == 40
    for split in ("train", "val", "test"):
        data = store.load_split(lm_data, split)
        assert data.tokens.shape == (manifest["counts"][split], 17)
        # predicted tokens = stream length − 1 − dropped tail; bytes + separators = stream length
        predicted = data.tokens.shape[0] * 16
        assert predicted + 1 + lm["tail_tokens_dropped"][split] == lm["bytes"][split] + lm["documents"][split]


# ----------------------------------------------------------------------------------------------- model


def _lm(condition: str = "mha", **kw: object) -> CausalLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=257, window=16, condition=condition, d_model=16, n_layers=2, n_heads=2, d_mlp=32,
               dropout=0.0, attn_window=16)  # fmt: skip
    cfg.update(kw)
    return CausalLM(LMConfig(**cfg)).eval()  # type: ignore[arg-type]


def test_window_mask_is_causal_and_bounded() -> None:
    mask = causal_window_mask(5, 2)[0, 0]
    assert mask.tolist() == [
        [True, False, False, False, False],
        [True, True, False, False, False],
        [False, True, True, False, False],
        [False, False, True, True, False],
        [False, False, False, True, True],
    ]


@pytest.mark.parametrize("condition", ["mha", "physqk", "physqk_ad"])
def test_no_position_sees_the_future_or_past_its_window(condition: str) -> None:
    model = _lm(condition, attn_window=16)
    tokens = torch.randint(1, 257, (2, 16))
    changed = tokens.clone()
    changed[:, 10] = (changed[:, 10] % 200) + 3
    a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :10], b[:, :10], atol=1e-6)  # the future did not leak
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_attention_window_limits_what_mha_sees() -> None:
    model = _lm("mha", n_layers=1, attn_window=3)
    tokens = torch.randint(1, 257, (1, 16))
    changed = tokens.clone()
    changed[0, 2] += 1
    a, b = model(tokens), model(changed)
    assert not torch.allclose(a[0, 2:5], b[0, 2:5])
    assert torch.allclose(a[0, 5:], b[0, 5:], atol=1e-6)  # one layer, window 3: position ≥ 5 cannot see 2


def test_alpha_allocations_are_composition_of_one_flow() -> None:
    joint, shared = _lm("physqk_ad"), _lm("physqk_ad", alpha_allocation="shared")
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(joint) - n(shared) == 1  # two per-layer w_α → one tied
    assert shared.flows()[0].w_alpha is shared.flows()[1].w_alpha
    fixed = _lm("physqk_ad", alpha_allocation=[0.0, 0.44])
    assert n(joint) - n(fixed) == 2 and not any("w_alpha" in k for k, _ in fixed.named_parameters())
    assert [torch.sigmoid(f.w_alpha).item() for f in fixed.flows()] == pytest.approx([0.0, 0.44])
    with pytest.raises(ValueError, match="physqk_ad only"):
        _lm("mha", alpha_allocation="shared")
    with pytest.raises(ValueError, match="one α in"):
        _lm("physqk_ad", alpha_allocation=[0.5])


def test_eff_pe_is_the_ratio_of_convective_to_diffusive_magnitude() -> None:
    """In the first layer r and A·r do not depend on that layer's α: Pe must scale exactly as α / (1 − α)."""
    tokens = torch.randint(1, 257, (3, 16))
    pe = {
        a: _lm("physqk_ad", n_layers=1, alpha_allocation=[a]).coordinate_diagnostics(tokens)[0]
        for a in (0.2, 0.6)
    }
    assert pe[0.6]["eff_pe"] / pe[0.2]["eff_pe"] == pytest.approx((0.6 / 0.4) / (0.2 / 0.8), rel=1e-5)
    assert pe[0.2]["alpha"] == pytest.approx(0.2) and pe[0.2]["eta"] == pytest.approx(1.0)
    zero = _lm("physqk_ad", n_layers=1, alpha_allocation=[0.0]).coordinate_diagnostics(tokens)[0]
    assert zero["eff_pe"] == 0.0  # no convection
    assert _lm("physqk").coordinate_diagnostics(tokens) == []  # pure diffusion has no α, η, Pe


# --------------------------------------------------------------------------------------------- trainer


def _run_config(variant: str = "physqk_ad", setting: str = "base", **model: object) -> dict:
    return {
        "task": "lm_text", "variant": variant, "scale": "d16", "setting": setting, "seed": 0,
        "model": {"d_model": 16, "n_layers": 2, "n_heads": 2, "d_mlp": 32, "dropout": 0.0, "attn_window": 16,
                  **model},
        "train": {"batch_size": 16, "lr": 0.003, "betas": [0.9, 0.98], "weight_decay": 0.0, "warmup_steps": 2,
                  "max_epochs": 2, "max_steps": None, "grad_clip": 1.0, "eval_batch_size": 16,
                  "checkpoint_minutes": None, "num_threads": 1, "diagnostics_every_steps": 3},
    }  # fmt: skip


@pytest.fixture(scope="module")
def trained(lm_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    for variant, setting, extra in [
        ("mha", "base", {}),
        ("physqk_ad", "base", {}),
        ("physqk_ad", "shared", {"alpha_allocation": "shared"}),
    ]:
        out = run_dir(runs, "lm_text", variant, "d16", setting, 0)
        assert train_lm(_run_config(variant, setting, **extra), lm_data, out, out / "ckpt") == 0
    return runs


def test_metrics_report_nats_bits_per_byte_and_trajectories(trained: Path, lm_data: Path) -> None:
    m = json.loads((run_dir(trained, "lm_text", "physqk_ad", "d16", "base", 0) / "metrics.json").read_text())
    assert m["status"] == "completed" and m["epochs_run"] == 2
    test = store.load_split(lm_data, "test").tokens[:, 1:]
    ratio = test.size / np.count_nonzero(test != SEPARATOR)
    assert m["test_bits_per_byte"] == pytest.approx(m["test_loss_nats"] * ratio / math.log(2))
    assert m["test_loss_nats"] < math.log(257)  # it learned something over uniform guessing
    layers = {(d["step"], d["layer"]) for d in m["dynamics"]}
    assert (0, 0) in layers and (0, 1) in layers  # from the start, per layer
    assert sorted({s for s, _ in layers}) == list(range(0, m["steps_run"] + 1, 3))  # every 3 steps
    mha = json.loads((run_dir(trained, "lm_text", "mha", "d16", "base", 0) / "metrics.json").read_text())
    assert mha["dynamics"] == []


def test_same_seed_same_result(trained: Path, lm_data: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert train_lm(_run_config("mha"), lm_data, again, tmp_path / "ckpt") == 0
    first = json.loads((run_dir(trained, "lm_text", "mha", "d16", "base", 0) / "metrics.json").read_text())
    assert json.loads((again / "metrics.json").read_text())["test_loss_nats"] == first["test_loss_nats"]


def test_invalid_run_config_names_the_key(lm_data: Path, tmp_path: Path) -> None:
    from pdelra.training.runconfig import RunConfigError

    bad = _run_config()
    bad["train"]["patience"] = 3
    with pytest.raises(RunConfigError, match="patience"):
        train_lm(bad, lm_data, tmp_path, tmp_path)


def test_aggregate_tables(trained: Path, tmp_path: Path) -> None:
    tables = aggregate_lm(sorted(trained.rglob("metrics.json")), tmp_path)
    runs = tables["lm_runs"]
    assert list(runs.columns[:5]) == ["task", "variant", "scale", "setting", "seed"]
    assert set(zip(runs["variant"], runs["setting"], strict=True)) == {
        ("mha", "base"), ("physqk_ad", "base"), ("physqk_ad", "shared")
    }  # fmt: skip
    dyn = tables["lm_dynamics"]
    shared = dyn[dyn["setting"] == "shared"]
    # one tied α: both layers report the same value at every step
    assert (shared.groupby("step")["alpha"].nunique() == 1).all()
    assert (tmp_path / "lm_history.csv").is_file()


# ------------------------------------------------------------------------------------------ the grid


@pytest.mark.parametrize("name", ["config", "demo"])
def test_config_lm_sections_resolve_to_valid_run_configs(name: str) -> None:
    import yaml

    from pdelra.lm import grid
    from pdelra.lm.trainer import validate_lm_run_config

    lm = yaml.safe_load((Path(__file__).parents[1] / "config" / f"{name}.yaml").read_text())["lm"]
    runs = grid.runs(lm)
    ablation = set(lm.get("settings", {}))
    assert len(runs) == len(lm["seeds"]) * (len(lm["conditions"]) + len(ablation))
    assert {s for _, c, _, s, _ in runs if c != "physqk_ad"} == {"base"}  # only PhysQK-AD is ablated
    for run in runs:
        cfg = validate_lm_run_config(json.loads(grid.run_config(lm, *run)), f"config/{name}.yaml {run}")
        LMConfig(vocab_size=257, window=lm["window"], condition=cfg["variant"], **cfg["model"])
    assert grid.runs(None) == []
    with pytest.raises(ValueError, match="'base' is the method itself"):
        grid.runs({**lm, "settings": {"base": {}}})


def test_an_interrupted_run_resumes_to_the_same_result(trained: Path, lm_data: Path, tmp_path: Path) -> None:
    from pdelra.lm.trainer import _LMRun, validate_lm_run_config
    from pdelra.training.interrupts import EXIT_INTERRUPTED

    class StopAfter:
        """An interrupt flag that goes up after `n` checks (one check per optimizer step)."""

        def __init__(self, n: int) -> None:
            self.left = n

        def __bool__(self) -> bool:
            self.left -= 1
            return self.left < 0

    cfg = validate_lm_run_config(_run_config("physqk_ad"))
    out, ckpt = tmp_path / "run", tmp_path / "ckpt"
    assert _LMRun(cfg, lm_data, out, ckpt).run(StopAfter(5)) == EXIT_INTERRUPTED  # type: ignore[arg-type]
    assert (ckpt / "checkpoint.pt").is_file() and not (out / "metrics.json").exists()
    assert _LMRun(cfg, lm_data, out, ckpt).run(StopAfter(10**9)) == 0  # type: ignore[arg-type]
    resumed = json.loads((out / "metrics.json").read_text())
    whole = json.loads(
        (run_dir(trained, "lm_text", "physqk_ad", "d16", "base", 0) / "metrics.json").read_text()
    )
    assert resumed["resumed_count"] == 1
    for key in ("test_loss_nats", "best_val_loss_nats", "history", "dynamics", "steps_run"):
        assert resumed[key] == whole[key], key
