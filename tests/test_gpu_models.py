"""One smoke job per GPU model the jobs may land on; no model without bf16 (pdelra.planning.gpu_models)."""

from __future__ import annotations

import pytest
from conftest import load_config

from pdelra.planning import experiment, gpu_models


@pytest.mark.parametrize(
    ("resources", "models"),
    [
        ({}, ["any"]),
        ({"constraint": "a100"}, ["any"]),  # one feature: the job lands where it says
        ({"constraint": "a100|h100"}, ["a100", "h100"]),
        ({"constraint": "a100|h100|a100"}, ["a100", "h100"]),
        ({"constraint": "a100|h100", "gpu_model": "h100"}, ["h100"]),  # --gpus=h100:1 pins the model
        ({"constraint": "[a100|h100]&ib"}, ["any"]),  # not a plain list: one job where it lands
        ({"constraint": "gpu80g&a100"}, ["any"]),
    ],
)
def test_the_smoke_jobs_models_come_from_the_gpu_model_or_a_list_of_alternatives(resources, models):
    assert gpu_models.smoke_models(resources) == models
    for model in models:
        narrowed = gpu_models.smoke_constraint(model, resources)
        narrows = len(models) > 1 and "gpu_model" not in resources
        assert narrowed == (model if narrows else resources.get("constraint"))


def test_the_plan_counts_one_smoke_job_per_model():
    config = load_config("tiny")
    config["cluster"] = {"smoke": True}
    assert experiment.other_jobs(config)["smoke"] == 1
    config["defaults"]["resources"]["constraint"] = "a100|h100|h200"
    assert experiment.other_jobs(config)["smoke"] == 3
    config["cluster"] = {"smoke": False}
    assert "smoke" not in experiment.other_jobs(config)


def test_a_model_without_bf16_in_the_constraint_is_a_problem_and_no_constraint_a_warning():
    problems, warnings = gpu_models.bf16_findings(
        [
            ("train", {"gpu": 1, "constraint": "a100|V100-32GB|t4"}),
            ("lm_train", {"gpu": 1, "gpu_model": "v100"}),
            ("cta_lm_train", {"gpu": 1}),
            ("diagnose", {"gpu": 0}),  # a CPU job: no GPU model to keep it off
            ("smoke", {"gpu": 1, "constraint": "a100|h100"}),
        ]
    )
    assert problems == [
        "rule train's constraint 'a100|V100-32GB|t4' allows V100-32GB, t4, without bf16 (the jobs train in "
        "bf16): drop it from the constraint in the config's resources",
        "rule lm_train pins gpu_model v100, a GPU without bf16 (the jobs train in bf16): pin an Ampere or "
        "newer model (a100, h100, ...)",
    ]
    assert len(warnings) == 1 and warnings[0].startswith(
        "the GPU jobs of cta_lm_train have no constraint and no gpu_model: nothing keeps them off a GPU "
    )
    assert gpu_models.bf16_findings([("train", {"gpu": 1, "constraint": "a100|h100|l40s"})]) == ([], [])
