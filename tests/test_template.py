"""The study as a template (docs/interfaces.md, "Your own operator at the seven positions"): a variant of
one's own is data in the config, an operator is a built-in name or a `module:attr`, and every step meets it,
or a new insertion point, safely.

The end-to-end test (marked slow) adds a variant to a copy of the finished tiny workspace, so only its runs
train; the others run in-process on tiny models."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, copy_workspace, dry_run_jobs, load_config, make_workspace, run_snakemake, tool_env
from test_training import make_task, run_config, train_in_process
from torch import Tensor

from pdelra.nn import model as model_module
from pdelra.nn.model import Encoder, LRAClassifier, ModelConfig, Padding
from pdelra.nn.operator_check import check_operators
from pdelra.planning.config_check import config_problems
from pdelra.planning.experiment import diagnosed_runs, lra_runs, other_jobs
from pdelra.planning.experiment import run_config as experiment_run_config
from pdelra.steps.diagnose import diagnose_run
from pdelra.steps.measure import NO_ALPHA, NO_BLOCK

EXAMPLE = REPO / "examples" / "myops.py"
OWN = "smooth_embed"  # the variant of one's own, under its config name
OPERATOR = {"operator": "myops:MovingAverage", "args": {"width": 3}}


def _with_own_variant(config: dict) -> dict:
    config["variants"] = {OWN: {"after_embedding": dict(OPERATOR)}}
    config["grids"]["main"]["variants"].append(OWN)
    return config


# ---------------------------------------------------------------------------------------------------------
# The config: a variant is data, the check builds its operators


def test_a_config_variant_travels_with_its_runs_and_built_ins_keep_their_config(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    config = _with_own_variant(load_config("tiny"))
    assert config_problems(config) == []
    runs = [run for run in lra_runs(config) if run[1] == OWN]
    assert [run[0] for run in runs] == ["listops", "retrieval"]
    own = experiment_run_config(config, {"base": {"model": {}, "train": {}}}, *runs[0])
    assert own["model"]["operators"] == {"after_embedding": OPERATOR}
    plain = experiment_run_config(
        config, {"base": {"model": {}, "train": {}}}, "listops", "none", "h1", "base", 0
    )
    assert "operators" not in plain["model"], "a built-in variant's run config (and hash) is unchanged"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"operator": "nomodule_here:X"}, "cannot import 'nomodule_here': ModuleNotFoundError"),
        ({"operator": "myops:Nothing"}, "module 'myops' has no attribute 'Nothing'"),
        ({"operator": "myops:MovingAverage", "args": {"width": 2}}, "width must be an odd number"),
        (
            {"operator": "myops:MovingAverage", "args": {"size": 3}},
            "TypeError: MovingAverage.__init__() got an",
        ),
        ({"operator": "torch.nn:Flatten", "args": {"start_dim": 0}}, "TypeError"),
        ({"operator": "myops:Shrink"}, "maps (batch, length, d_model) = (2, 5, 16) to (2, 4, 16)"),
        ({"operator": "diffusions"}, "unknown operator 'diffusions': a built-in one (diffusion, "),
    ],
)
def test_the_config_check_builds_each_operator_and_names_its_problem_in_one_line(
    tmp_path: Path, monkeypatch, spec: dict, problem: str
) -> None:
    (tmp_path / "myops.py").write_text(
        EXAMPLE.read_text()
        + "\n\nclass Shrink(nn.Module):\n    def __init__(self, d_model):\n        super().__init__()\n\n"
        "    def forward(self, x, lengths=None):\n        return x[:, 1:]\n"
    )
    monkeypatch.chdir(tmp_path)  # a module file in the working directory is found, as the workflow's jobs do
    monkeypatch.delitem(sys.modules, "myops", raising=False)
    config = load_config("tiny")
    config["variants"] = {OWN: {"after_embedding": spec}}
    config["grids"]["main"]["variants"].append(OWN)
    problems = config_problems(config)
    assert len(problems) == 1, problems
    where = f"variants.{OWN} (grids.main, tasks listops, retrieval, d_model 16, max_length 64): operator "
    assert problems[0].startswith(where)
    assert problem in problems[0] and "\n" not in problems[0]


def test_the_config_check_names_an_unknown_variant_a_clash_and_a_bad_point() -> None:
    config = _with_own_variant(load_config("tiny"))
    config["grids"]["main"]["variants"].append("smooth_embd")
    (problem,) = config_problems(config)
    assert problem.startswith("'grids.main.variants[3]' is 'smooth_embd'; allowed values: none, ")
    assert problem.endswith(f"{OWN} (or declare your own under `variants`)")

    config = load_config("tiny")
    config["variants"] = {
        "after_mlp": {"after_mlp": dict(OPERATOR)},
        "heads": {"across_heads": dict(OPERATOR)},
        "nowhere": {"after_everything": dict(OPERATOR)},
    }
    problems = config_problems(config)
    assert problems[0].startswith("variants.after_mlp: 'after_mlp' is a built-in variant")
    assert problems[1].startswith(
        "variants.heads.across_heads: 'across_heads' puts an operator at 'attn_heads'"
    )
    assert problems[2].startswith(
        "variants.nowhere.after_everything: 'after_everything' is neither an insertion"
    )


def test_every_built_in_variant_has_a_label_so_only_a_configs_own_show_under_their_name() -> None:
    from pdelra import paper

    assert paper.own_variants(model_module.VARIANTS) == []
    assert paper.positions_of(["none", "after_mlp", OWN, "physqk"]) == (*paper.POSITIONS, OWN)
    assert paper.variant_label(OWN) == OWN


def test_diagnostics_can_be_turned_off(tmp_path: Path, monkeypatch) -> None:
    config = load_config("tiny")
    runs = lra_runs(config)
    assert diagnosed_runs(config, runs) == runs and other_jobs(config)["diagnose"] == 2
    config["diagnostics"] = {"enabled": False}
    assert config_problems(config) == []
    assert diagnosed_runs(config, runs) == [] and "diagnose" not in other_jobs(config)
    jobs = dry_run_jobs(make_workspace(tmp_path / "ws", config))
    assert "diagnose" not in jobs and jobs["diagnostics_table"] == 1 and jobs["report"] == 1

    # The report then says so: the diagnostics table (`pdelra diagnose table` of no part) has no rows.
    import IPython.display

    from pdelra.reporting.sections import Report
    from pdelra.reporting.sections import diagnostics as diagnostics_section
    from pdelra.results.diagnostics import summarise
    from pdelra.steps.diagnose import collect

    tables = tmp_path / "tables"
    tables.mkdir()
    for name, frame in summarise(collect([]), None).items():
        frame.to_csv(tables / f"{name}.csv", index=False)
    said: list[str] = []
    monkeypatch.setattr(IPython.display, "display", lambda item: said.append(getattr(item, "data", "")))
    diagnostics_section.render(Report.open(tables, tmp_path / "report", "unit"))
    assert any(text.startswith("*Diagnostics not run") for text in said), said


# ---------------------------------------------------------------------------------------------------------
# The model: built-in and user operators at the positions, padding-blind


@pytest.mark.parametrize(
    "position",
    ["after_embedding", "after_mlp", "between_layers", "before_layernorm", "in_attention", "after_attention"],
)
@pytest.mark.parametrize("operator", ["examples.myops:MovingAverage", "diffusion", "cta_wave"])
def test_an_operator_at_each_position_runs_and_ignores_padding(
    monkeypatch, position: str, operator: str
) -> None:
    monkeypatch.syspath_prepend(str(REPO))
    cfg = ModelConfig(
        vocab_size=11, num_classes=3, max_length=12, d_model=16, n_layers=2, n_heads=2, dropout=0.0,
        variant="mine", operators={position: {"operator": operator}}, fused_diffusion=False,
    )  # fmt: skip
    check_operators(cfg)
    model = LRAClassifier(cfg).eval()
    kind = {"examples.myops:MovingAverage": "MovingAverage", "diffusion": "DiffusionLayer"}.get(
        operator, "PseudoTimeWave"
    )
    placed = sum(type(m).__name__ == kind for m in model.modules())
    assert placed == sum(model_module.point_count(p, 2) for p in model_module.VARIANTS[position])
    tokens = torch.randint(0, 11, (3, 12))
    lengths = torch.tensor([12, 7, 3])
    noisy = tokens.clone()
    noisy[1, 7:], noisy[2, 3:] = 4, 9
    with torch.no_grad():
        assert torch.allclose(model(tokens, lengths), model(noisy, lengths), atol=1e-6)
        assert torch.allclose(model(tokens[1:2, :7], lengths[1:2]), model(tokens, lengths)[1:2], atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# A new insertion point: named once in the model code (a test-only encoder), met safely by every step


class PoolEncoder(Encoder):
    """The pipeline's encoder with one more insertion point, `before_pool`: after the final LayerNorm, before
    pooling. Its one place: POINTS names it, __init__ fills it from the variant's row, forward calls it."""

    POINTS = (*Encoder.POINTS, "before_pool")

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.before_pool = model_module._point(cfg, "before_pool")

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        n = tokens.shape[1]
        pad = Padding.from_lengths(lengths, n)
        x = self.embedding(self.dropout(self.tok_emb(tokens) + self.pos_emb.weight[:n]), pad.lengths)
        for i, block in enumerate(self.blocks):
            if i > 0:
                x = self.between_blocks[i - 1](x, pad.lengths)
            x, _ = block(x, pad)
        x = self.before_pool(self.ln_f(x), pad.lengths)
        if pad.key_mask is not None:
            x = x * pad.key_mask[:, 0, 0, :, None].to(x.dtype)
        return x.sum(1) / lengths[:, None].to(x.dtype)


def test_a_new_point_is_met_safely_by_every_step(tmp_path: Path, monkeypatch) -> None:
    """A diffusion layer and a user's operator at `before_pool` (in no block): the model trains, diagnose
    measures what applies and says in `reason` what it skipped, aggregate and the report's tables show the
    variants under their config names."""
    from pdelra.cli import main

    monkeypatch.setitem(model_module.ENCODERS, "pool", PoolEncoder)
    monkeypatch.syspath_prepend(str(REPO))
    data = make_task(tmp_path / "processed")
    runs_dir = tmp_path / "runs"
    trained = {}
    for variant, spec in {
        "pool_diffusion": {"operator": "diffusion"},
        "pool_average": {"operator": "examples.myops:MovingAverage", "args": {"width": 3}},
        "none": None,
    }.items():
        config = run_config(variant=variant, max_epochs=1)
        config["model"].update(backbone="pool", fused_diffusion=False)
        if spec is not None:
            config["model"]["operators"] = {"before_pool": spec}
        status, _ = train_in_process(config, data, tmp_path / variant)
        assert status == 0
        trained[variant] = tmp_path / variant / "run"
        shutil.copytree(trained[variant], runs_dir / variant)

    frames = {variant: diagnose_run(run, data, examples=8, batch_size=4) for variant, run in trained.items()}
    diffusion = frames["pool_diffusion"].set_index("operator").loc["encoder.before_pool"]
    assert diffusion["kind"] == "trained" and diffusion["block"] == NO_BLOCK
    assert diffusion["bound_ratio"] <= 1 + 1e-9 and pd.isna(diffusion["commutator"])
    assert (
        diffusion["reason"]
        == "encoder.before_pool is in no block: no commutator (it needs a block's attention sub-layer)"
    )
    assert diffusion["logit_change"] >= 0 and diffusion["composed_held"] == 1
    own = frames["pool_average"].set_index("operator").loc["encoder.before_pool"]
    assert own["kind"] == "operator" and own["perturbation"] > 0 and own["amplification"] > 0
    assert pd.isna(own["alpha_mean"]) and pd.isna(own["bound"]) and pd.isna(own["composed_bound"])
    assert own["reason"].startswith(NO_ALPHA) and "in no block" in own["reason"]
    assert (frames["none"]["kind"] != "operator").all()

    diagnostics = tmp_path / "diagnostics.csv"
    pd.concat(frames.values()).to_csv(diagnostics, index=False)
    metrics = [str(path) for path in sorted(runs_dir.glob("*/metrics.json"))]
    out = tmp_path / "tables"
    assert main(["aggregate", *metrics, "--out", str(out), "--diagnostics", str(diagnostics)]) == 0
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["variant"]) == {"none", "pool_diffusion", "pool_average"}
    comparison = pd.read_csv(out / "table10_comparison.csv")
    shown = comparison[comparison["variant"].isin(["pool_diffusion", "pool_average"])]
    assert len(shown) == 2 * 6 and shown["mean"].notna().sum() == 2 and shown["paper"].isna().all()
    assert "pool_diffusion" in set(pd.read_csv(out / "diagnostics_per_position.csv")["variant"])

    # The report's position table and the diagnostics section draw them without failing.
    from pdelra.reporting.sections import Report, table10
    from pdelra.reporting.sections import diagnostics as diagnostics_section

    report = Report.open(out, tmp_path / "report", "pool")
    figures = _captured(monkeypatch, table10)
    table10.render(report)
    assert "pool_average" in (tmp_path / "report" / "tables" / "table10.csv").read_text()
    assert figures and all("pool_average" in _labels(f) for f in figures), "Figures 6 and 7 show it"
    diagnostics_section.render(report)


def _captured(monkeypatch, module) -> list:
    """The figures a report section shows (its module's show_figure, replaced), closed after reading."""
    figures: list = []
    monkeypatch.setattr(module, "show_figure", lambda fig, *args, **kwargs: figures.append(fig))
    return figures


def _labels(fig) -> set[str]:
    """Every tick label and text of a figure's axes."""
    texts = set()
    for ax in fig.axes:
        texts |= {t.get_text() for t in (*ax.get_xticklabels(), *ax.get_yticklabels(), *ax.texts)}
    return texts


# ---------------------------------------------------------------------------------------------------------
# End to end: the tiny DAG to the report, with a variant declared in the config only


@pytest.mark.slow
def test_a_variant_declared_in_the_config_runs_through_the_dag_to_the_report(
    finished_tiny, tmp_path, monkeypatch
) -> None:
    workspace = copy_workspace(finished_tiny, tmp_path / "ws")
    shutil.copy2(EXAMPLE, workspace / "myops.py")  # the user's module, in the project's root
    config = _with_own_variant(yaml.safe_load((workspace / "config" / "config.yaml").read_text()))
    (workspace / "config" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    check = subprocess.run(
        ["pdelra", "config", "check", "config/config.yaml"], cwd=workspace, env=tool_env(),
        capture_output=True, text=True,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    jobs = dry_run_jobs(workspace)
    assert jobs["train"] == 2, jobs  # only the new variant's runs train

    run_snakemake(workspace, "--cores", "2", timeout=600, check=True)
    results = workspace / "results" / "tiny"
    runs = pd.read_csv(results / "tables" / "runs.csv")
    own = runs[runs["variant"] == OWN]
    assert len(own) == 2 and (own["status"] == "completed").all()

    # The position tables: our own variant beside the paper's, under its config name.
    for name in ("table10_comparison", "table6", "table11"):
        table = pd.read_csv(results / "tables" / f"{name}.csv")
        assert OWN in set(table["variant"]), name
    t6 = pd.read_csv(results / "tables" / "table6.csv").set_index("variant")
    assert pd.isna(t6.loc[OWN, "paper"]) and pd.isna(t6.loc[OWN, "predicted_rank"])  # the paper has none
    t11 = pd.read_csv(results / "tables" / "table11.csv")
    assert set(t11.loc[t11["variant"] == OWN, "task"]) == {
        "listops",
        "text",
        "retrieval",
        "pathfinder",
        "image",
    }
    # The claims that concern positions: our own variant against the baseline, in its own family.
    claims = pd.read_csv(results / "tables" / "claims.csv").set_index("claim_id")
    own_claims = claims[claims["family"] == "own"]  # the tiny grid's two tasks: no LRA-average claim
    assert list(own_claims.index) == [  # per task: against the baseline, then the paper's After Embedding
        f"{prefix}_{task}"
        for task in ("listops", "retrieval")
        for prefix in (f"table11_sign_{OWN}", f"own_{OWN}_vs_after_embedding")
    ]
    assert (own_claims["verdict"] != "not run").all()
    report_tables = results / "report" / "tables"
    for name in ("table10", "table6", "table4_ranking", "table11", "table14", "table15"):
        assert OWN in (report_tables / f"{name}.csv").read_text(), name

    # Provenance counts the variants the tables show.
    summary = pd.read_csv(results / "tables" / "provenance_summary.csv").set_index("item")["value"]
    assert int(summary["variants"]) == 3
    assert OWN in (report_tables / "runs_per_cell.csv").read_text()

    # Diagnostics: what applies to a user's operator is measured; the rest is skipped with its reason.
    diagnostics = pd.read_csv(results / "tables" / "diagnostics.csv")
    rows = diagnostics[(diagnostics["variant"] == OWN) & (diagnostics["kind"] == "operator")]
    assert len(rows) == 2 and (rows["position"] == "embedding").all()
    assert rows["commutator"].notna().all() and rows["logit_change"].notna().all()
    assert rows["bound"].isna().all() and (rows["reason"] == NO_ALPHA).all()
    assert OWN in set(pd.read_csv(results / "tables" / "diagnostics_per_position.csv")["variant"])

    # Both pages name it; the position figures draw it (drawn again here from the same tables).
    report = results / "report"
    index = (report / "index.html").read_text()
    assert (
        index.index("<h2>Your variants</h2>") < index.index('id="own-claims"') < index.index("Verdicts</h2>")
    )
    assert f"own_{OWN}_vs_after_embedding_listops" in index
    assert (report / "report.html").read_text().count(OWN) >= 5
    artifacts = {a["name"] for a in json.loads((report / "artifacts.json").read_text())["artifacts"]}
    assert {"figure6_per_task", "figure7_heatmap"} <= artifacts  # Figure 3 needs all five tasks
    from pdelra.reporting.sections import Report, table10

    figures = _captured(monkeypatch, table10)
    table10.render(Report.open(results / "tables", tmp_path / "again", "tiny"))
    assert len(figures) == 2 and all(OWN in _labels(fig) for fig in figures)
