"""Which GPU models the jobs may land on: one smoke job per model, and no model without bf16.

A site names its GPU models as node features (`sinfo -o %f`), and a job picks among them with its
`constraint` (sbatch -C 'a100|h100': any one of them) or pins one with `gpu_model` (--gpus=h100:1). The smoke
test (cluster.smoke, workflow/rules/smoke.smk) checks one node, so with a constraint of several models it runs
once per model: a job that passed on an H100 says nothing about the A100 nodes the campaign also lands on.

The jobs train under bf16 autocast (pdelra.training.device). GPUs before Ampere have no bf16 kernels: a job on
one fails, or on a few torch builds emulates bf16 many times slower. The constraint is what keeps jobs off
them, so the preflight names a model without bf16 in it, and says so when GPU jobs have no constraint at all.

No torch here: the workflow imports this module to submit jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

ANY_MODEL = "any"  # the smoke job's name for "wherever the configured constraint lands"
# Feature or model names of NVIDIA GPUs without bf16 (compute capability below 8.0), as sites name them.
NO_BF16 = frozenset(
    {"k20", "k40", "k80", "m40", "m60", "p4", "p40", "p100", "v100", "v100s", "t4"}
    | {"gtx1080", "gtx1080ti", "rtx2080", "rtx2080ti", "titanv", "titanrtx"}
)
_ALTERNATIVES = re.compile(r"[\w.-]+(?:\|[\w.-]+)+")  # 'a100|h100': any one feature of the list
_FEATURE = re.compile(r"[A-Za-z][\w.-]*")


def _normal(name: str) -> str:
    """'V100-32GB' -> 'v100', 'nvidia_t4' -> 't4': the model part of a feature name."""
    name = name.lower().removeprefix("nvidia").strip("-_ ")
    return re.split(r"[-_:]", name, maxsplit=1)[0]


def smoke_models(resources: Mapping[str, Any]) -> list[str]:
    """The GPU models one smoke job each tests, from a GPU job's resources: the pinned `gpu_model`; else each
    model of a constraint that is a plain list of alternatives ('a100|h100'); else [ANY_MODEL] (no constraint,
    or one with '&', counts or brackets, which names no single model: one job where it lands)."""
    if resources.get("gpu_model"):
        return [str(resources["gpu_model"])]
    constraint = str(resources.get("constraint") or "").strip()
    if _ALTERNATIVES.fullmatch(constraint):
        return list(dict.fromkeys(constraint.split("|")))
    return [ANY_MODEL]


def smoke_constraint(model: str, resources: Mapping[str, Any]) -> str | None:
    """The constraint of the smoke job for `model`: that model, where it came from a list of alternatives;
    the configured constraint otherwise (a pinned gpu_model, or ANY_MODEL)."""
    configured = resources.get("constraint")
    listed = _ALTERNATIVES.fullmatch(str(configured or ""))
    if model != ANY_MODEL and not resources.get("gpu_model") and listed:
        return model
    return configured


def bf16_findings(jobs: Iterable[tuple[str, Mapping[str, Any]]]) -> tuple[list[str], list[str]]:
    """(problems, warnings) about the GPU models of `jobs` (rule, resources), GPU jobs only: a model without
    bf16 named by a gpu_model or allowed by a constraint is a problem (every job there fails or crawls); GPU
    jobs with neither a constraint nor a gpu_model are one warning (nothing keeps them off such a model)."""
    problems: dict[str, None] = {}
    unconstrained: dict[str, None] = {}
    for rule, resources in jobs:
        if not int(resources.get("gpu") or 0):
            continue
        model, constraint = resources.get("gpu_model"), resources.get("constraint")
        if not model and not constraint:
            unconstrained[rule] = None
            continue
        if model and _normal(str(model)) in NO_BF16:
            problems[
                f"rule {rule} pins gpu_model {model}, a GPU without bf16 (the jobs train in bf16): pin an "
                "Ampere or newer model (a100, h100, ...)"
            ] = None
        named = [] if model else _FEATURE.findall(str(constraint))
        if bad := [name for name in named if _normal(name) in NO_BF16]:
            problems[
                f"rule {rule}'s constraint {constraint!r} allows {', '.join(bad)}, without bf16 (the jobs "
                "train in bf16): drop it from the constraint in the config's resources"
            ] = None
    warnings = []
    if unconstrained:
        warnings.append(
            f"the GPU jobs of {', '.join(unconstrained)} have no constraint and no gpu_model: nothing keeps "
            "them off a GPU without bf16 (V100, T4, ...), where they fail; set defaults.resources.constraint "
            "to your site's features of bf16 GPUs (e.g. 'a100|h100', `sinfo -o %f` lists them)"
        )
    return list(problems), warnings
