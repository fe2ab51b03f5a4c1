"""`pdelra diagnose` on tiny trained models: the saved weights, the rows per variant, values recomputed by
hand from the model's own pieces, and the command line. The workflow test (editing the diagnostics code
reruns only diagnose jobs and what follows) is marked slow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO, copy_workspace, parse_job_counts, run_snakemake
from test_training import make_task, run_config, train_in_process

from pdelra.cli import main
from pdelra.data.store import load_split, read_manifest
from pdelra.nn import diagnostics as dg
from pdelra.nn.model import Padding
from pdelra.reporting.sections import Report
from pdelra.reporting.sections.diagnostics import render
from pdelra.results.diagnostics import SKIPPED, summarise
from pdelra.steps.diagnose import (
    AMPLIFICATION_EXAMPLES,
    COLUMNS,
    DIAGNOSTICS_NAME,
    STAMP_NAME,
    collect,
    diagnose_cached,
    diagnose_run,
    load_run,
    source_digest,
)
from pdelra.steps.diagnose_code import DIAGNOSTICS_SOURCES
from pdelra.steps.measure import LOGIT_QUANTITIES, NO_BLOCK, attention_sublayer, operator_place
from pdelra.training.batches import make_batch
from pdelra.training.runconfig import validate_run_config
from pdelra.training.runner import build_model
from pdelra.training.weights import WEIGHTS_NAME, load_weights, save_weights

N_LAYERS = 2
# variant → trained diffusion operators expected per model (n_layers = 2)
EXPECTED_TRAINED = {
    "none": 0,
    "after_embedding": 1,
    "between_layers": N_LAYERS - 1,
    "before_layernorm": 2 * N_LAYERS,
    "in_attention": N_LAYERS,
    "across_heads": N_LAYERS,
    "after_attention": N_LAYERS,
    "cta_diffusion": 0,  # related systems: residual and probe rows only
    "physqk_ad": 0,
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """variant → (run dir, data dir): one tiny trained model per variant (about 1 s each)."""
    root = tmp_path_factory.mktemp("diagnose")
    data = make_task(root / "processed")
    out = {}
    for variant in EXPECTED_TRAINED:
        config = run_config(variant=variant, max_epochs=2)
        config["model"]["n_layers"] = N_LAYERS
        status, _ = train_in_process(config, data, root / variant)
        assert status == 0
        out[variant] = (root / variant / "run", data)
    return out


def test_trainer_keeps_the_best_validation_weights_as_safetensors(runs) -> None:
    run_dir, data = runs["none"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    state, meta = load_weights(run_dir / WEIGHTS_NAME)
    assert meta["weights"] == "best_validation" and meta["best_epoch"] == str(metrics["best_epoch"])
    assert meta["config_hash"] == metrics["config_hash"]
    model = build_model(validate_run_config(metrics["run_config"]), read_manifest(data), two_tower=False)
    model.load_state_dict(state)  # strict: every parameter and buffer is there
    model.eval()
    test = load_split(data, "test")
    batch = make_batch(test, np.arange(len(test.labels)), lambda t: t)
    with torch.no_grad():
        accuracy = (model(*batch.inputs).argmax(-1) == batch.labels).double().mean().item()
    assert accuracy == pytest.approx(metrics["test_accuracy"])  # test accuracy is measured with these weights
    assert not list(run_dir.glob(".*.tmp"))  # nothing half-written left behind


@pytest.mark.parametrize("variant", list(EXPECTED_TRAINED))
def test_rows_per_variant_and_the_bound_holds(runs, variant: str) -> None:
    frame = diagnose_run(*runs[variant], examples=20, batch_size=8)
    assert list(frame.columns) == list(COLUMNS)
    assert (frame[["task", "variant", "scale", "setting", "seed"]].drop_duplicates().values.tolist()) == [
        ["listops", variant, "h1", "base", 0]
    ]
    kinds = frame["kind"].value_counts().to_dict()
    assert kinds.get("residual") == N_LAYERS and kinds.get("probe") == N_LAYERS
    assert kinds.get("trained", 0) == EXPECTED_TRAINED[variant]
    assert (frame["n_examples"] == 20).all()
    measured = frame[frame["kind"] != "residual"]
    assert (measured["perturbation"] <= measured["bound"] * (1 + 1e-4) + 1e-7).all()
    assert (measured["bound"] <= measured["bound_closed_form"] * (1 + 1e-4) + 1e-7).all()
    assert (measured["bound_ratio"] <= 1 + 1e-4).all()
    probe = frame[frame["kind"] == "probe"]
    assert (probe["alpha_mean"] == 0.1).all() and (probe["commutator"] > 0).all()
    assert np.isfinite(probe["commutator"]).all()
    # The insertion effect on the logits, on the first AMPLIFICATION_EXAMPLES examples, probe and trained.
    assert (measured["n_logit_examples"] == AMPLIFICATION_EXAMPLES).all()
    assert (measured["amplification"] > 0).all() and (measured["logit_change"] >= 0).all()
    assert (measured["logit_change"] > 0).any()  # 0 where D meets a constant sequence (uniform attention)
    assert (measured["amplified_perturbation"] <= measured["composed_bound"] * (1 + 1e-6)).all()
    assert measured["composed_held"].between(0, 1).all()
    assert frame.loc[frame["kind"] == "residual", list(LOGIT_QUANTITIES)].isna().all().all()
    trained = frame[frame["kind"] == "trained"]
    if variant == "across_heads":  # diffuses along heads: no sequence commutator
        assert trained[["commutator", "commutator_branch"]].isna().all().all()
    else:
        assert np.isfinite(trained["commutator"]).all() and (trained["commutator"] > 0).all()
        # Same numerator, smaller denominator: the branch is smaller than branch + residual stream here.
        assert (trained["commutator_branch"] > trained["commutator"]).all()


def test_values_match_a_computation_by_hand(runs) -> None:
    run_dir, data = runs["after_embedding"]
    frame = diagnose_run(run_dir, data, examples=12, batch_size=12)
    model, _, val = load_run(run_dir, data)
    # The eager operator (same function, same parameters): no torch.compile in a diagnose job.
    assert not any(getattr(m, "fused", False) for m in model.modules())
    batch = make_batch(val, np.arange(12), lambda t: t)
    tokens, lengths = batch.tokens, batch.lengths
    encoder = model.encoder
    with torch.no_grad():
        embedded = encoder.tok_emb(tokens) + encoder.pos_emb.weight[: tokens.shape[1]]
        x0 = encoder.embedding(embedded, lengths)  # the residual stream entering block 0
        block = encoder.blocks[0]
        mix = attention_sublayer(block)
        # M is the block's attention branch plus the residual, as the model computes it (valid positions).
        branch, _ = block.attn(block.ln_1(x0), Padding.from_lengths(lengths, tokens.shape[1]))
        torch.testing.assert_close(
            dg.zero_padding(mix(x0, lengths), lengths), dg.zero_padding(x0 + branch, lengths)
        )
        trained_step = dg.EulerStep.from_layer(encoder.embedding)
        expected = {
            ("residual", "roughness_in"): dg.dirichlet_energy(x0, lengths).mean(),
            ("probe", "commutator"): dg.commutator(
                dg.EulerStep(torch.tensor([0.1]), (1,)), mix, x0, lengths
            ).mean(),
            ("trained", "commutator"): dg.commutator(trained_step, mix, x0, lengths).mean(),
            ("trained", "commutator_branch"): dg.commutator(
                trained_step, lambda u, n: mix(u, n) - u, x0, lengths
            ).mean(),
            ("trained", "roughness_in"): dg.dirichlet_energy(embedded, lengths).mean(),
            ("trained", "rel_roughness_out"): dg.relative_roughness(x0, lengths).mean(),
            ("trained", "perturbation"): dg.perturbation(trained_step, embedded, lengths).norm.mean(),
        }
    block0 = frame[frame["block"] == 0].set_index("kind")
    for (kind, column), value in expected.items():
        assert block0.loc[kind, column] == pytest.approx(value.item(), rel=1e-5), (kind, column)
    assert block0.loc["trained", "operator"] == "encoder.embedding"
    assert block0.loc["trained", "alpha_mean"] == pytest.approx(trained_step.alphas.mean().item())


def _logits_from_embedding(model: torch.nn.Module, u: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The classifier's logits when the embedding layer's Euler step outputs u: its LayerNorm, the blocks,
    the final LayerNorm, masked mean pooling and the head, written out from the model's pieces."""
    encoder = model.encoder
    pad = Padding.from_lengths(lengths, u.shape[1])
    x = dg.zero_padding(encoder.embedding.norm(u), lengths)
    for block in encoder.blocks:
        x, _ = block(x, pad)
    mask = dg.valid_mask(x, lengths)
    return model.head((encoder.ln_f(x) * mask).sum(1) / lengths[:, None].to(x.dtype))


def test_insertion_effect_and_amplification_match_a_computation_by_hand(runs) -> None:
    run_dir, data = runs["after_embedding"]
    frame = diagnose_run(run_dir, data, examples=6, batch_size=6, amplification_examples=3)
    model, _, val = load_run(run_dir, data)
    batch = make_batch(val, np.arange(3), lambda t: t)
    tokens, lengths = batch.tokens, batch.lengths
    encoder = model.encoder
    step = dg.EulerStep.from_layer(encoder.embedding)
    embedded = (encoder.tok_emb(tokens) + encoder.pos_emb.weight[: tokens.shape[1]]).detach()
    diffused = step(embedded, lengths).detach()
    with torch.no_grad():
        with_d = _logits_from_embedding(model, diffused, lengths)
        torch.testing.assert_close(with_d, model(*batch.inputs))  # the hand-written forward is the model's
        change = (with_d - _logits_from_embedding(model, embedded, lengths)).norm(dim=1)
    sigmas = []
    for b in range(3):  # the Jacobian of example b's logits in its own Euler output, its largest σ
        n = int(lengths[b])
        jac = torch.autograd.functional.jacobian(
            lambda u, b=b, n=n: _logits_from_embedding(model, u[None], lengths[b : b + 1])[0],
            diffused[b, :n],
        )
        sigmas.append(torch.linalg.matrix_norm(jac.flatten(1).double(), ord=2))
    sigma = torch.stack(sigmas)
    p = dg.perturbation(step, embedded, lengths)
    row = frame[frame["kind"] == "trained"].iloc[0]
    assert row["n_logit_examples"] == 3 and row["n_examples"] == 6
    assert row["logit_change"] == pytest.approx(change.mean().item(), rel=1e-4)
    assert row["amplification"] == pytest.approx(sigma.mean().item(), rel=1e-4)
    assert row["composed_bound"] == pytest.approx((sigma * p.bound.double()).mean().item(), rel=1e-4)
    assert row["amplified_perturbation"] == pytest.approx((sigma * p.norm.double()).mean().item(), rel=1e-4)
    held = (change.double() <= sigma * p.bound.double()).double().mean().item()
    assert row["composed_held"] == pytest.approx(held)


def test_results_do_not_depend_on_how_examples_are_batched_and_padded(runs) -> None:
    run_dir, data = runs["before_layernorm"]
    one = diagnose_run(run_dir, data, examples=10, batch_size=1)  # no padding at all
    many = diagnose_run(run_dir, data, examples=10, batch_size=10)  # padded to the longest
    pd.testing.assert_frame_equal(one, many, rtol=1e-4)


def test_operator_places() -> None:
    assert operator_place("encoder.embedding") == (0, "embedding")
    assert operator_place("encoder.between_blocks.2") == (3, "between_blocks")
    assert operator_place("encoder.blocks.4.attn_output") == (4, "attn_output")
    assert operator_place("encoder.blocks.1.attn.attn_values") == (1, "attn_values")
    assert operator_place("encoder.blocks.0.attn.attn_heads.diffusion") == (0, "attn_heads")
    # A point outside every block (a new one, say) is placed in none: its row skips the commutator.
    assert operator_place("encoder.before_pool") == (NO_BLOCK, "before_pool")


def _copy_run(run_dir: Path, to: Path) -> Path:
    """A run folder of one's own: `diagnose run` caches its rows in the run's folder."""
    shutil.copytree(run_dir, to, ignore=shutil.ignore_patterns(DIAGNOSTICS_NAME, STAMP_NAME))
    return to


def test_command_line_run_and_table(runs, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = runs["after_attention"][1]
    run_dirs = [_copy_run(runs[v][0], tmp_path / "runs" / v) for v in ("after_attention", "none")]
    out = tmp_path / "a" / "part0.csv"
    argv = ["diagnose", "run", *map(str, run_dirs), "--data", str(data), "--out", str(out)]
    assert main([*argv, "--examples", "6", "--num-threads", "1"]) == 0
    part = pd.read_csv(out)
    assert set(part["variant"]) == {"after_attention", "none"}
    for run_dir in run_dirs:  # each run's own rows and the stamp they were measured under
        own = pd.read_csv(run_dir / DIAGNOSTICS_NAME)
        assert set(own["variant"]) == {run_dir.name} and len(own) == (part["variant"] == run_dir.name).sum()
        assert json.loads((run_dir / STAMP_NAME).read_text())["examples"] == 6
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    table = tmp_path / "tables" / "diagnostics.csv"
    assert main(["diagnose", "table", str(out), str(empty), "--out", str(table)]) == 0
    combined = pd.read_csv(table)
    pd.testing.assert_frame_equal(
        combined,
        part.sort_values(["task", "variant", "block", "kind", "operator"]).reset_index(drop=True),
        check_like=False,
    )
    assert main(["diagnose", "table", "--out", str(tmp_path / "none.csv")]) == 0
    assert list(pd.read_csv(tmp_path / "none.csv").columns) == list(COLUMNS)
    # A run without weights: one clear line naming the file, exit 1.
    bare = _copy_run(run_dirs[0], tmp_path / "bare")
    (bare / WEIGHTS_NAME).unlink()
    assert main(["diagnose", "run", str(bare), "--data", str(data), "--out", str(tmp_path / "x.csv")]) == 1
    assert f"{bare / WEIGHTS_NAME}: no weights file" in caplog.text
    assert main([*argv, "--amplification-examples", "-1"]) == 1
    assert "--amplification-examples must be ≥ 0" in caplog.text
    bad = tmp_path / "bad.csv"
    bad.write_text("task,variant\nlistops,none\n")
    with pytest.raises(Exception, match="missing column"):
        collect([bad])


def test_a_run_is_measured_again_only_when_its_weights_code_data_or_settings_change(
    runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pdelra.steps.diagnose as module

    run_dir = _copy_run(runs["after_embedding"][0], tmp_path / "run")
    data = runs["after_embedding"][1]
    first, measured = diagnose_cached(run_dir, data, examples=6)
    assert measured
    written = (run_dir / DIAGNOSTICS_NAME).stat().st_mtime_ns
    again, measured = diagnose_cached(run_dir, data, examples=6)
    assert not measured and (run_dir / DIAGNOSTICS_NAME).stat().st_mtime_ns == written
    pd.testing.assert_frame_equal(again, first)

    assert diagnose_cached(run_dir, data, examples=5)[1]  # other examples
    before, measured = diagnose_cached(run_dir, data, examples=5)
    assert not measured
    state, meta = load_weights(run_dir / WEIGHTS_NAME)  # retrained: other weights
    name = next(iter(state))
    noise = torch.randn(state[name].shape, generator=torch.Generator().manual_seed(0))
    save_weights(run_dir / WEIGHTS_NAME, {**state, name: state[name] + noise}, meta)
    retrained, measured = diagnose_cached(run_dir, data, examples=5)
    assert measured and not np.allclose(retrained["roughness_in"], before["roughness_in"])
    monkeypatch.setattr(module, "source_digest", lambda: "an edited version")  # the diagnostics code changed
    assert diagnose_cached(run_dir, data, examples=5)[1]
    (run_dir / STAMP_NAME).write_text("{not json")  # a damaged cache is measured again, not trusted
    assert diagnose_cached(run_dir, data, examples=5)[1]
    (run_dir / DIAGNOSTICS_NAME).unlink()  # a stamp without its table too
    assert diagnose_cached(run_dir, data, examples=5)[1]


def test_source_digest_covers_the_diagnostics_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pdelra.steps.diagnose as module

    copy = tmp_path / "pdelra"
    for name in DIAGNOSTICS_SOURCES:  # paths under the package root
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(module.__file__).parents[1] / name, copy / name)
    monkeypatch.setattr(module, "__file__", str(copy / "steps" / "diagnose.py"))
    before = source_digest()
    with open(copy / "nn" / "diagnostics.py", "a") as f:
        f.write("# an edit\n")
    assert source_digest() != before


# ----------------------------------------------------------------------------------------------------------
# Runs that cannot be measured: named with why, never a crash

NAN_OPERATOR = """
from torch import nn


class NanOut(nn.Module):
    def __init__(self, d_model):
        super().__init__()

    def forward(self, x, lengths=None):
        return x * float("nan")
"""


def test_a_diverged_own_variant_is_skipped_and_the_report_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: list[str]
) -> None:
    """The issue's case: an own operator returning NaN (`pdelra config check` refuses it, training here
    does not ask) diverges at step 1; diagnose names it with why, and the diagnostics section says so."""
    (tmp_path / "nanops.py").write_text(NAN_OPERATOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = make_task(tmp_path / "processed")
    config = run_config(variant="nan_op", max_epochs=1)
    config["model"]["operators"] = {"after_embedding": {"operator": "nanops:NanOut"}}
    status, metrics = train_in_process(config, data, tmp_path / "nan_op")
    assert status == 0 and metrics["status"] == "diverged" and metrics["diverged_at_step"] == 1
    out = tmp_path / "part0.csv"
    argv = ["diagnose", "run", str(tmp_path / "nan_op" / "run"), "--data", str(data), "--out", str(out)]
    assert main([*argv, "--examples", "4"]) == 0
    (row,) = pd.read_csv(out).to_dict("records")
    assert (row["variant"], row["kind"], row["reason"]) == ("nan_op", SKIPPED, "diverged at step 1")

    tables = tmp_path / "tables"
    tables.mkdir()
    for name, frame in summarise(collect([out]), None).items():
        frame.to_csv(tables / f"{name}.csv", index=False)
    render(Report.open(tables, tmp_path / "report", "unit"))
    assert said[0].startswith("*Diagnostics not run: every run diagnosed was skipped")
    assert "nan_op (h1, base, seed 0): diverged at step 1" in said[1]


def test_non_finite_weights_skip_the_run_and_non_finite_activations_their_rows(
    runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _copy_run(runs["after_attention"][0], tmp_path / "nan")
    data = runs["after_attention"][1]
    state, meta = load_weights(run_dir / WEIGHTS_NAME)
    name = next(n for n in state if n.endswith("qkv.weight"))
    save_weights(run_dir / WEIGHTS_NAME, {**state, name: state[name] * float("nan")}, meta)
    (row,) = diagnose_cached(run_dir, data, examples=4)[0].to_dict("records")
    assert row["kind"] == SKIPPED and row["reason"] == f"non-finite weights (NaN/Inf) in {name}"
    assert np.isnan(row["commutator"]) and row["n_examples"] == 0

    # Finite weights whose activations overflow: measured, each row saying what is NaN and where.
    run_dir = _copy_run(runs["after_attention"][0], tmp_path / "huge")
    huge = state["encoder.tok_emb.weight"].sign() * 3e38  # LayerNorm's variance overflows: inf − inf
    save_weights(run_dir / WEIGHTS_NAME, {**state, "encoder.tok_emb.weight": huge}, meta)
    frame = diagnose_run(run_dir, data, examples=4)
    assert SKIPPED not in set(frame["kind"])
    trained = frame[frame["kind"] == "trained"]
    assert trained["amplification"].isna().all()  # no eigendecomposition of a NaN Jacobian
    for operator, reason in zip(trained["operator"], trained["reason"], strict=True):
        assert f"no logit effects: non-finite activations (NaN/Inf) at {operator}" in reason
        assert "NaN from non-finite activations (NaN/Inf) in roughness_in" in reason

    # An eigendecomposition that fails on finite values: that point's logit effects, said why.
    def fails(*args: object) -> None:
        raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge\n(more detail)")

    monkeypatch.setattr(dg, "jacobian_spectral_norm", fails)
    frame = diagnose_run(runs["after_attention"][0], data, examples=2)
    trained = frame[frame["kind"] == "trained"]
    assert trained["logit_change"].isna().all() and np.isfinite(trained["roughness_in"]).all()
    expected = "no logit effects: no amplification at encoder.blocks.0.attn_output (linalg.eigh: The"
    assert trained["reason"].iloc[0].startswith(f"{expected} algorithm failed to converge)")


# ----------------------------------------------------------------------------------------------------------
# The workflow


@pytest.mark.slow
def test_editing_the_diagnostics_code_reruns_only_diagnose_and_what_follows(
    finished_tiny: Path, tmp_path: Path
) -> None:
    ws = copy_workspace(finished_tiny, tmp_path / "ws")
    target = "results/tiny/tables/diagnostics.csv"
    table = pd.read_csv(ws / target)
    assert set(table["variant"]) == {"none", "after_embedding"} and set(table["task"]) == {
        "listops",
        "retrieval",
    }

    def planned(*args: str, env: dict[str, str] | None = None) -> dict[str, int]:
        proc = run_snakemake(ws, "-n", *args, "--quiet", "rules", env=env, check=True)
        return parse_job_counts(proc.stdout + proc.stderr)

    assert planned() == {}
    # The same package with one edit in the diagnostics module, first on the path for Snakemake and its jobs.
    package = tmp_path / "pkg"
    shutil.copytree(REPO / "src" / "pdelra", package / "pdelra", ignore=shutil.ignore_patterns("__pycache__"))
    with open(package / "pdelra" / "nn" / "diagnostics.py", "a") as f:
        f.write("# an edit that changes nothing but the code\n")
    edited_env = {"PYTHONPATH": str(package)}
    assert planned(target, env=edited_env) == {"diagnose": 2, "diagnostics_table": 1}  # a part per task
    # aggregate reads diagnostics.csv (the mechanism test, the diagnostics' summaries and their claims), and
    # what follows aggregate follows; no training, no data.
    assert planned(env=edited_env) == {
        "diagnose": 2,
        "diagnostics_table": 1,
        "aggregate": 1,
        "report": 1,
        "version": 1,
        "all": 1,
    }
