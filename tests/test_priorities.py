"""Which work the cluster gets first (`pdelra.planning.priorities`) and the preflight's line about CPU jobs on
the GPU partition (`slurm_site.cpu_partition_warning`), without Snakemake: constructed plans with known
answers. The submissions themselves are tests/test_slurm_submit.py's."""

from __future__ import annotations

import pytest
import torch
import yaml
from conftest import REPO

from pdelra.planning import experiment, priorities
from pdelra.planning.plan import make_plan
from pdelra.planning.slurm_site import cpu_partition_warning, shared_site_options


@pytest.mark.parametrize(
    ("variant", "backbone", "expected"),
    [
        ("none", "pdelra", "paper"),
        ("after_embedding", "pdelra", "paper"),
        ("smooth_embed", "pdelra", "paper"),  # a config's own variant answers the config's question
        ("cta_diffusion", "pdelra", "related"),
        ("physqk_ad", "pdelra", "related"),
        ("none", "official_cta", "related"),  # the CTA authors' encoder
    ],
)
def test_each_lra_run_has_its_class(variant: str, backbone: str, expected: str) -> None:
    assert experiment.DIAGNOSED_BACKBONE == "pdelra"  # the pipeline's own pre-LN encoder
    assert priorities.run_class(variant, backbone) == expected


def test_the_first_class_named_gets_the_highest_priority_and_every_class_is_above_the_rest() -> None:
    assert priorities.rule_priorities(["paper", "diagnose", "related"]) == {
        "paper": 3,
        "diagnose": 2,
        "related": 1,
    }
    assert priorities.rule_priorities(["related", "paper", "diagnose"])["related"] == 3
    assert priorities.order_of({}) == list(priorities.CLASSES)
    assert priorities.order_of({"cluster": {"priority": ["related", "diagnose", "paper"]}})[0] == "related"


def test_within_a_class_the_longest_runs_start_first_and_the_classes_keep_their_order() -> None:
    """The demo: its 1,024-token Image and PathFinder cells above its ListOps ones in the paper class; every
    paper cell above every related one, whatever their lengths; ties only between cells of equal work."""
    from pdelra.planning.config_check import with_defaults

    config = with_defaults(yaml.safe_load((REPO / "config" / "demo.yaml").read_text()))
    cell = priorities.cell_priorities(config)
    paper = {c: p for c, p in cell.items() if priorities.cell_classes(config)[c] == "paper"}
    related = {c: p for c, p in cell.items() if priorities.cell_classes(config)[c] == "related"}
    assert min(paper.values()) > max(related.values())
    assert max(cell.values()) == pytest.approx(3 + priorities.LONGEST_FIRST)
    long, short = ("image", "none", "h1", "base"), ("listops", "none", "h1", "base")
    assert cell[long] > cell[("text", "none", "h1", "base")] > cell[short] > 3
    assert cell[("pathfinder", "none", "h1", "base")] > cell[short]


def test_a_manifest_that_cannot_say_its_counts_gives_no_head_start_and_no_error(tmp_path) -> None:
    from pdelra.planning.config_check import with_defaults

    config = with_defaults(yaml.safe_load((REPO / "config" / "demo.yaml").read_text()))
    config["data"]["processed_dir"] = str(tmp_path)
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "manifest.json").write_text('{"task": "image"}')
    cell = priorities.cell_priorities(config)
    assert cell[("image", "none", "h1", "base")] == 3
    assert cell[("pathfinder", "none", "h1", "base")] == pytest.approx(3 + priorities.LONGEST_FIRST)


def test_the_plan_says_in_which_order_the_hours_are_spent() -> None:
    """The paper config without calibration: the paper's 245 jobs and 3,900 requested hours first, diagnose's
    CPU jobs, then the related systems' 138 jobs; reversed when the config says so."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = make_plan(config, torch.device("cpu"), calibrate_tasks=False, progress=lambda _: None)
    order = priorities.spending_order(plan)
    assert [o["class"] for o in order] == ["paper", "diagnose", "related"]
    assert order[0]["jobs"] == 245 and order[0]["device_hours"] == pytest.approx(3900)
    assert order[1] == {"class": "diagnose", "rules": ["diagnose"], "jobs": 25, "device_hours": None}
    assert order[2]["jobs"] == 138 and set(order[2]["rules"]) == {
        "lm_train",
        "cta_official_train",
        "cta_lm_train",
    }
    assert sum(o["device_hours"] or 0 for o in order) == pytest.approx(plan["total"]["device_hours"])
    line = priorities.spending_line(plan)
    assert (
        line.index("1. paper: 245 jobs") < line.index("2. diagnose: 25 CPU jobs") < line.index("3. related")
    )
    config["cluster"] = {**(config.get("cluster") or {}), "priority": ["related", "diagnose", "paper"]}
    plan = make_plan(config, torch.device("cpu"), calibrate_tasks=False, progress=lambda _: None)
    assert [o["class"] for o in priorities.spending_order(plan)] == ["related", "diagnose", "paper"]


def test_cpu_jobs_on_the_gpu_partition_are_named_once_and_only_without_a_cpu_partition() -> None:
    jobs = [("train", 1, "gpu"), ("diagnose", 0, "gpu"), ("aggregate", 0, None), ("lm_train", 1, "gpu")]
    line = cpu_partition_warning(jobs, None)
    assert line == (
        "the CPU-only jobs of diagnose go to the GPU jobs' partition gpu: name a CPU partition as "
        "cluster.cpu_partition in the config"
    )
    assert cpu_partition_warning(jobs, "cpu") is None
    assert cpu_partition_warning([("train", 1, "gpu"), ("diagnose", 0, "cpu")], None) is None


def test_site_options_are_the_defaults_resources_site_keys_only() -> None:
    config = {"defaults": {"resources": {"slurm_partition": "gpu", "gpu_model": "h100", "qos": "long",
                                         "mem_mb": 4000, "constraint": None}}}  # fmt: skip
    assert shared_site_options(config) == {"slurm_partition": "gpu", "gpu_model": "h100", "qos": "long"}
    assert shared_site_options({}) == {}
