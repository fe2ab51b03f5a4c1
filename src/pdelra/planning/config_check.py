"""`pdelra config check FILE ...`: every check the workflow makes of a config, in plain words, up front.

`config_problems` is the one check: the workflow (workflow/rules/common.smk) calls it on the config it is
given and refuses to start on any problem, and `pdelra config check` calls it on each FILE. What it covers,
and what the command adds (the line of a YAML syntax error), is the command's description, `pdelra config
--help` (CONFIG_DESCRIPTION in pdelra.planning.cli).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
from collections.abc import Mapping
from itertools import product
from pathlib import Path
from typing import Any

from pdelra import parts
from pdelra import runs as run_layout
from pdelra.data.generate import resolve_params
from pdelra.errors import UserError
from pdelra.model_layers import heads_problem, layered
from pdelra.operator_code import operator_code
from pdelra.planning import check_cache, estimate, flops
from pdelra.planning.experiment import part_data_tasks
from pdelra.planning.slurm_site import runtime_warnings
from pdelra.tasks import TASKS, load_modules, tasks_of_source

SCHEMA = Path(__file__).resolve().parents[3] / "workflow" / "schemas" / "config.schema.yaml"
# YAML 1.1 (PyYAML, Snakemake) reads 3e-3 as text; 3.0e-3 is a number.
_YAML11_FLOAT_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml_problem(path: str | Path) -> str | None:
    """'FILE:LINE:COLUMN: not valid YAML: ...' when `path` does not parse; None when it does or is missing."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            yaml.safe_load(f)
    except FileNotFoundError:
        return None
    except yaml.YAMLError as err:
        mark, context = getattr(err, "problem_mark", None), getattr(err, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        message = f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}"
        if getattr(err, "context", None) and context:  # where the unfinished construct began
            message += f" ({err.context} at line {context.line + 1}, column {context.column + 1})"
        return message
    return None


def load_schema(path: str | Path = SCHEMA, variant_names: bool = True) -> dict[str, Any]:
    """The config schema, with the variant names taken from pdelra.nn.model.VARIANTS and the task names from
    pdelra.tasks (their one sources). `variant_names=False` leaves the file's variant enum: enough to fill in
    defaults (`with_defaults`), and it spares importing the model, hence torch (3 s and 150 MB of a Slurm
    job's own Snakemake, which stays resident while the job trains)."""
    import yaml

    schema = yaml.safe_load(Path(path).read_text())
    if variant_names:
        schema["definitions"]["variant"]["enum"] = built_variant_names()
    return with_tasks(schema)


def built_variant_names() -> list[str]:
    """The built-in variants' names (pdelra.nn.model.VARIANTS), kept by the code's digest
    (pdelra.planning.check_cache): the model's module imports torch."""
    if not check_cache.keeps_answers():
        return list(check_cache.model_module().VARIANTS)
    key = check_cache.answer_key("variant names")
    kept = check_cache.read(check_cache.BUILT_CHECKS)
    if not isinstance(kept.get(key), list):
        kept[key] = list(check_cache.model_module().VARIANTS)  # torch: once per version of the code
        check_cache.write(check_cache.BUILT_CHECKS, kept)
    return list(kept[key])


def with_tasks(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` whose task names are the registered tasks (pdelra.tasks.TASKS, read now: a config's
    task_modules may have added some since it was loaded), and whose `data.generate` checks each task's
    settings by its `gen_{task}` definition where the schema has one (`resolve_params` checks any other)."""
    schema = copy.deepcopy(schema)
    definitions = schema["definitions"]
    definitions["task"]["enum"] = list(TASKS)
    generate = schema["properties"]["data"]["properties"]["generate"]
    generate["properties"] = {
        name: {"$ref": f"#/definitions/gen_{name}"} for name in TASKS if f"gen_{name}" in definitions
    }
    return schema


# The schema's name patterns in words: a regex alone tells a user nothing (what is wrong with `conv2`?).
_LETTERS = "lower-case letters and _ only, starting with a letter (no digits, capitals, - or spaces)"
_WORD = "letters, digits, _, . or -, starting with a letter or digit (no spaces: it names folders)"
_NOT_SEED = "not starting with 'seed' (run folders are seed{n})"
PATTERN_RULES = {
    "^[a-z][a-z_]*$": _LETTERS,
    "^[a-z][a-z0-9_]*$": "lower-case letters, digits and _ only, starting with a letter (no capitals, - or "
    "spaces)",
    "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*$": "a module's name (a dotted path, no colon: the "
    "module is the part)",
    "^[A-Za-z][A-Za-z0-9_-]*$": "letters, digits, _ or -, starting with a letter",
    "^[A-Za-z0-9][A-Za-z0-9_.-]*$": _WORD,
    "^(?!seed)[A-Za-z0-9][A-Za-z0-9_.-]*$": f"{_WORD}, and {_NOT_SEED}",
    "^(?!seed|base$)[A-Za-z0-9][A-Za-z0-9_.-]*$": f"{_WORD}, {_NOT_SEED} and not 'base' (the method's own)",
    "^[0-9a-f]{32}$": "32 lower-case hexadecimal digits (an md5 sum)",
    "^[A-Za-z0-9_.]+$": "letters, digits, _ and . only",
    "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$": "module:name (a dotted module path, a colon, a name)",
}
# What a name at a key path is, and why its rule, for the message ("a variant's name must be ...").
_NAME_OF = [
    (r"variants", "a variant's name", "; the workflow's {variant} wildcard takes no other"),
    (r"variants\.[^.]+", "a key of a variant (an insertion point or a built-in position)", ""),
    (r"grids", "a grid's name", ""),
    (r"grids\.[^.]+\.settings", "a setting's name", ""),
]


def _pattern_in_words(error: Any, where: str) -> str | None:
    """ "'variants': the name 'conv2' is not allowed: a variant's name must be lower-case letters and _ ..."
    for a schema pattern PATTERN_RULES knows; None for another."""
    rule = PATTERN_RULES.get(error.validator_value)
    if rule is None:
        return None
    if "propertyNames" in error.absolute_schema_path:  # the key itself is the name
        noun, why = next(
            ((n, w) for path, n, w in _NAME_OF if re.fullmatch(path, where)), ("a name here", "")
        )
        return f"{where!r}: the name {error.instance!r} is not allowed: {noun} must be {rule}{why}"
    return f"{where!r} is {error.instance!r}, which is not allowed: it must be {rule}"


def _key_path(error: Any) -> str:
    """'grids.main.variants[2]' for an error at that place in the config."""
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _unknown_keys(error: Any) -> list[str]:
    return sorted(set(error.instance) - set(error.schema.get("properties", {})))


def _explain(error: Any, unknown_beside: dict[str, list[str]]) -> str:
    where = _key_path(error)
    schema = error.schema
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        unknown = ", ".join(map(repr, _unknown_keys(error)))
        return f"unknown key(s) {unknown} in {where!r}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        message = f"{where!r} is {error.instance!r}; allowed values: {', '.join(map(str, schema['enum']))}"
        if re.fullmatch(r"grids\.[^.]+\.variants\[\d+\]", where):  # a variant of one's own is declared first
            message += " (or declare your own under `variants`)"
        if re.fullmatch(r"tasks|grids\.[^.]+\.tasks\[\d+\]", where):  # one's own task: registered first
            message += (
                " (a task of your own: name the module that registers it in `task_modules`, "
                "docs/add-a-task.md)"
            )
        return message
    if error.validator == "type":
        message = f"{where!r} must be of type {error.validator_value}, got {error.instance!r}"
        if isinstance(error.instance, str) and _YAML11_FLOAT_TEXT.fullmatch(error.instance):
            fixed = re.sub(r"^([-+]?\d+)([eE])", r"\1.0\2", error.instance)
            message += f" (YAML reads {error.instance} as text: write {fixed}, with a decimal point)"
        return message
    if error.validator == "required":
        missing = error.message.split(" is a required")[0]
        message = f"{where!r} is missing a required key: {missing}"
        if unknown_beside.get(where):
            beside = ", ".join(map(repr, unknown_beside[where]))
            message += f" (beside it is the unknown key {beside}: renamed or misspelt?)"
        return message
    if error.validator == "pattern" and (words := _pattern_in_words(error, where)):
        return words
    if error.validator == "propertyNames":
        return f"{where!r}: the name {error.instance!r} does not match {error.validator_value.get('pattern')}"
    return f"{where!r}: {error.message}"


def schema_problems(config: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Every schema violation of `config`, a line each with its key path (empty when it is valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema or load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    unknown_beside = {_key_path(e): _unknown_keys(e) for e in errors if e.validator == "additionalProperties"}
    return [_explain(e, unknown_beside) for e in errors]


def file_problems(path: str | Path) -> list[str]:
    """The problems of one config file, each line starting with its path: YAML syntax first (nothing else
    can be checked without it), then `config_problems`."""
    import yaml

    if not Path(path).is_file():
        return [f"{path}: no such file"]
    syntax = yaml_problem(path)
    if syntax:
        return [syntax]
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        return [f"{path}: a config is a mapping of keys (experiment, data, defaults, tasks, grids, ...)"]
    return [f"{path}: {problem}" for problem in config_problems(config)]


# ---------------------------------------------------------------------------------------------------------
# Beyond the schema: what the workflow would refuse at parse time, or a job would fail on later


def config_problems(config: Mapping[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    """Every problem of a parsed config, a line each with its key path; empty when the workflow accepts it.

    The config's task_modules first (they register tasks the schema's names then include), then the schema:
    the later checks read the structure it guarantees, so they run only on a config that satisfies it, with
    its defaults filled in (a copy: `config` is not changed).
    """
    modules = config.get("task_modules") if isinstance(config, Mapping) else None
    if isinstance(modules, list) and all(isinstance(m, str) for m in modules):  # else: the schema says so
        try:
            load_modules(modules)
        except ValueError as err:
            return [f"task_modules: {err}"]
    try:
        registered = parts.registered(config if isinstance(config, Mapping) else None)
    except ValueError as err:  # a part the config registers does not import
        return [f"parts: {err}"]
    schema = _with_part_sections(
        _with_config_variants(with_tasks(schema or load_schema()), config), registered
    )
    problems = schema_problems(config, schema)
    if problems:
        return problems
    filled = with_defaults(config, schema)
    built = built_checks(filled, registered)
    problems = grid_problems(filled) + built["variants"]
    if problems:  # the runs cannot be listed
        return problems
    return built["models"] + data_problems(filled) + built["parts"] + estimate.cluster_problems(filled)


def built_checks(config: Mapping[str, Any], registered: tuple[parts.Part, ...]) -> dict[str, list[str]]:
    """The checks that build models (torch): the config's own variants' rows (`variants`), then, when the
    runs can be listed, every selected run's model and own operators (`models`) and each part's own check
    (`parts`). Their answer is kept by the digest of the code, of the filled config and of the own
    operators' code (pdelra.planning.check_cache), so a repeated parse of the workflow neither imports torch
    nor builds a model. Checked afresh, never kept: a config with task modules or parts of its own, whose
    code no digest here covers, and an operator whose code is not found."""
    key = _built_key(config)
    if key is not None:
        kept = check_cache.read(check_cache.BUILT_CHECKS)
        if isinstance(kept.get(key), dict):
            return kept[key]
    answer = {"variants": variant_problems(config), "models": [], "parts": []}
    if not (answer["variants"] or grid_problems(config)):
        answer |= {"models": model_problems(config), "parts": part_problems(config, registered)}
    if key is not None:
        kept = check_cache.read(check_cache.BUILT_CHECKS)  # again: another process may have added to it
        kept.pop(key, None)
        check_cache.write(check_cache.BUILT_CHECKS, kept | {key: answer})
    return answer


def _built_key(config: Mapping[str, Any]) -> str | None:
    """The key of `built_checks`'s answer for `config`; None when it is not kept (its docstring says when)."""
    if not check_cache.keeps_answers() or config.get("task_modules") or config.get("parts"):
        return None
    try:  # None: a row of built-in operators only, which the package's digest covers
        operators = {name: operator_code(row) for name, row in (config.get("variants") or {}).items()}
    except ValueError:
        return None
    return check_cache.answer_key("built checks", config, operators)


def part_problems(config: Mapping[str, Any], registered: tuple[parts.Part, ...]) -> list[str]:
    """Each part's own check of its section (pdelra.parts: `check`), for the parts the config runs."""
    return [
        problem
        for part in registered
        if part.check and part.runs_in(config)
        for problem in part.check(config)
    ]


def _with_part_sections(schema: dict[str, Any], registered: tuple[parts.Part, ...]) -> dict[str, Any]:
    """The schema whose top level also takes the section of each registered part (a mapping its part's own
    check validates, part_problems)."""
    schema = copy.deepcopy(schema)
    for part in registered:
        if part.section and part.section not in schema["properties"]:
            schema["properties"][part.section] = {"type": "object"}
    return schema


def _with_config_variants(schema: dict[str, Any], config: Any) -> dict[str, Any]:
    """The schema whose grids may also name the variants the config declares (`variants`)."""
    declared = config.get("variants") if isinstance(config, Mapping) else None
    allowed = schema["definitions"]["variant"].get("enum")
    if not isinstance(declared, Mapping) or allowed is None:
        return schema
    schema = copy.deepcopy(schema)
    extra = [name for name in declared if name not in allowed]
    schema["definitions"]["variant"]["enum"] = [*allowed, *extra]
    return schema


def variant_problems(config: Mapping[str, Any]) -> list[str]:
    """The config's own variants: a name is not a built-in one's, and each key names an insertion point or a
    built-in position and each operator is one the model can place there (pdelra.nn.model.config_row). The
    operators themselves are built and run in model_problems, with each grid's model sizes."""
    model = check_cache.model_module()  # torch (built_checks keeps the answer)
    VARIANTS, POINTS, config_row = model.VARIANTS, model.POINTS, model.config_row

    problems = []
    for name, row in (config.get("variants") or {}).items():
        if name in VARIANTS:
            problems.append(
                f"variants.{name}: {name!r} is a built-in variant (pdelra.nn.model.VARIANTS): rename yours"
            )
            continue
        for key, spec in row.items():
            try:
                config_row({key: spec}, POINTS)
            except ValueError as err:
                problems.append(f"variants.{name}.{key}: {err}")
    return problems


def with_defaults(config: Mapping[str, Any], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a schema-valid `config` with the schema's defaults filled in, as Snakemake's
    `validate(..., set_default=True)` fills them into the workflow's config."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, json.loads(json.dumps(sub["default"])))
        yield from validate_properties(validator, properties, instance, schema)

    filled = copy.deepcopy(dict(config))
    filling = jsonschema.validators.extend(base, {"properties": set_defaults})(schema or load_schema())
    for _ in filling.iter_errors(filled):
        pass  # valid (checked before): iterating fills in the defaults
    return filled


def grid_problems(config: Mapping[str, Any]) -> list[str]:
    """run_grids names defined grids; their tasks are configured; each setting name means one thing."""
    grids = config.get("grids", {})
    problems = [
        f"run_grids[{i}]: {name!r} is not a grid; the config's grids are: {', '.join(grids) or 'none'}"
        for i, name in enumerate(config["run_grids"])
        if name not in grids
    ]
    selected = [name for name in config["run_grids"] if name in grids]
    for name in selected:
        missing = [task for task in grids[name]["tasks"] if task not in config["tasks"]]
        if missing:
            problems.append(f"grids.{name}.tasks: task(s) {missing} have no entry under 'tasks'")
    try:
        run_layout.merge_settings(grids, selected)
    except ValueError as err:
        problems.append(str(err))
    return problems


def model_problems(config: Mapping[str, Any]) -> list[str]:
    """One line per distinct problem of a selected run's model, as ModelConfig (its own checks) refuses it,
    and of each own variant's operators as they run at each task's real max_length (check_operators: forward
    and backward on a padded batch, once per grid, d_model and max_length, naming the tasks; then whether its
    memory at each task's batch fits that task's job, `job_memory`). Probes of an operator's own code are
    kept by their code's digest (pdelra.planning.check_cache): a repeated check does not run them again."""
    ModelConfig = check_cache.model_module().ModelConfig  # torch: built_checks keeps the answer
    from pdelra.nn.operator_check import PROBE_SHORT_LENGTH, check_operators

    declared = config.get("variants") or {}
    problems: dict[str, None] = {}
    probes: dict[tuple[str, str, int, int], tuple[Any, list[tuple[str, int, int | None]]]] = {}
    for name in config["run_grids"]:
        grid = config["grids"][name]
        settings = run_layout.grid_settings(grid, f"grids.{name}")
        for task, variant, scale, setting in product(
            grid["tasks"], grid["variants"], grid["scales"], settings
        ):
            layers = [("defaults.model", config["defaults"]["model"]),
                      (f"tasks.{task}.model", config["tasks"][task].get("model", {})),
                      (f"grids.{name}.settings.{setting}.model", settings[setting]["model"])]  # fmt: skip
            model, origin = layered(layers)
            heads = heads_problem(model, origin, ModelConfig)
            if heads:
                problems[heads] = None
                continue
            operators = declared.get(variant)
            max_length = config["tasks"][task]["max_length"]
            try:
                cfg = ModelConfig(
                    vocab_size=2, num_classes=2, max_length=max_length, variant=variant, scale=scale,
                    operators=operators, **model,
                )  # fmt: skip
            except (TypeError, ValueError) as err:
                where = f"grids.{name}: task {task} (defaults.model < tasks.{task}.model"
                where += f" < setting {setting})" if setting != run_layout.BASE_SETTING else ")"
                problems[f"{where}: {err}"] = None
                continue
            if operators is not None:  # the user's operators: run at this task's length (below)
                key = (variant, name, cfg.d_model, max_length)
                jobs = probes.setdefault(key, (cfg, []))[1]
                batch = {**config["defaults"].get("train", {}), **config["tasks"][task].get("train", {}),
                         **settings[setting]["train"]}.get("batch_size")  # fmt: skip
                job = (task, batch, job_memory(config, task))
                if job not in jobs:
                    jobs.append(job)
    cache = check_cache.read(check_cache.PROBE_CACHE)
    before = dict(cache)
    for (variant, name, d_model, max_length), (cfg, jobs) in probes.items():
        tasks = list(dict.fromkeys(task for task, _, _ in jobs))
        where = f"grids.{name}, task{'s' if len(tasks) > 1 else ''} {', '.join(tasks)}"
        try:
            code = _code_digest(cfg.operators)
            check_operators(cfg, cache=cache, code=code)
            for task, batch, memory in jobs:  # the probe once, its memory at each task's batch
                where = f"grids.{name}, task {task}, batch {batch}"
                check_operators(cfg, batch_size=batch, memory_bytes=memory, cache=cache, code=code)
        except ValueError as err:
            where += f", d_model {d_model}, max_length {max_length}"
            problems[f"variants.{variant} ({where}): {err}"] = None
    if cache != before:
        check_cache.write(check_cache.PROBE_CACHE, cache)
    used = {variant for name in config["run_grids"] for variant in config["grids"][name]["variants"]}
    for variant in sorted(set(declared) - used):  # declared, in no selected grid: checked at defaults.model
        try:
            cfg = ModelConfig(
                vocab_size=2, num_classes=2, max_length=1, variant=variant, operators=declared[variant],
                **config["defaults"]["model"],
            )  # fmt: skip
            check_operators(cfg, length=PROBE_SHORT_LENGTH)
        except (TypeError, ValueError) as err:
            problems[f"variants.{variant} (defaults.model): {err}"] = None
    return list(problems)


def _code_digest(operators: Mapping[str, Any] | None) -> str | None:
    """The digest of a variant's own operator code, the key of its cached probe; None (probed, not cached)
    when its module is not found: the probe then says why in the check's own words."""
    try:
        return operator_code(operators)
    except ValueError:
        return None


def job_memory(config: Mapping[str, Any], task: str) -> int | None:
    """Bytes a training job of `task` may use for its model's tensors: on a GPU, the card's memory
    (`cluster.gpu_model`, pdelra.planning.flops.GPU_MEMORY_GB; None when the model is not named or not
    known), else its host-memory request (`resources.mem_mb`)."""
    resources = {**config["defaults"].get("resources", {}), **config["tasks"][task].get("resources", {})}
    if resources.get("gpu"):
        model = (config.get("cluster") or {}).get("gpu_model")
        try:
            return int(flops.GPU_MEMORY_GB[flops.gpu_model(model)] * 1e9) if model else None
        except flops.GPUError:
            return None
    mem = resources.get("mem_mb")
    return None if mem is None else int(mem) * 1_000_000


def data_problems(config: Mapping[str, Any]) -> list[str]:
    """Real data needs its downloads; generated data needs settings `pdelra generate` can meet."""
    tasks = {task for name in config["run_grids"] for task in config["grids"][name]["tasks"]}
    data = config["data"]
    if data["source"] == "real":
        downloads = data.get("downloads") or {}
        unsourced = sorted(t for t in tasks if t in TASKS and TASKS[t].source is None)
        return [
            f"data.source is real, but task {t} has no archive to download (pdelra.tasks: source None); "
            "set data.source: generated"
            for t in unsourced
        ] + [
            f"data.source is real, so data.downloads.{source} (url, md5) is needed for task(s) "
            f"{', '.join(sorted(tasks & set(of)))}; or set data.source: generated"
            for source, of in tasks_of_source().items()
            if tasks & set(of) and source not in downloads
        ]

    problems = []
    for task in sorted(tasks | part_data_tasks(config)):
        try:
            resolve_params(task, {"seed": data["seed"], **data["generate"].get(task, {})})
        except UserError as err:
            problems.append(str(err))
    return problems


# ---------------------------------------------------------------------------------------------------------
# Command line


def check_command(args: argparse.Namespace) -> int:
    """`pdelra config check FILE ...` (declared in pdelra.planning.cli)."""
    bad = 0
    for path in args.files:
        problems = file_problems(path)
        if problems:
            bad += 1
            print(f"Invalid config ({path}):\n" + "\n".join(f"  - {problem}" for problem in problems))
        else:
            print(f"{path}: valid (the workflow accepts it: schema, grids, models, data settings)")
            _print_runtime_warnings(path)
    if bad:
        raise UserError(f"{bad} of {len(args.files)} config file(s) invalid")
    return 0


def _print_runtime_warnings(path: Path) -> None:
    """What the workflow warns about a valid config at parse time: runtimes cut to cluster.max_runtime."""
    import yaml

    config = with_defaults(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    for line in runtime_warnings(config):
        print(f"  warning: {line}")
