"""`pdelra config check FILE ...`: a config's YAML syntax and schema in plain words, before Snakemake.

The workflow (workflow/rules/common.smk) runs the same checks on the config it is given, and more (each
selected run's model must exist as configured, real data needs its downloads). What it cannot do is name the
line of a YAML syntax error in a `--configfile`: Snakemake reads that file before the workflow starts and says
only "Config file is not valid JSON or YAML" (its `--verbose` traceback ends with the parser's line). This
command names FILE:LINE:COLUMN, then lists every schema problem with its key path; exit 1 if there is any.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from pdelra.errors import UserError

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"
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


def load_schema(path: str | Path = SCHEMA) -> dict[str, Any]:
    """The config schema, with the variant names taken from pdelra.model.VARIANTS (their one source)."""
    import yaml

    from pdelra.model import VARIANTS

    schema = yaml.safe_load(Path(path).read_text())
    schema["definitions"]["variant"]["enum"] = list(VARIANTS)
    return schema


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
        return f"{where!r} is {error.instance!r}; allowed values: {', '.join(map(str, schema['enum']))}"
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
    """The problems of one config file: its YAML syntax first (nothing else can be checked without it)."""
    import yaml

    if not Path(path).is_file():
        return [f"{path}: no such file"]
    syntax = yaml_problem(path)
    if syntax:
        return [syntax]
    config = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        return [f"{path}: a config is a mapping of keys (experiment, data, defaults, tasks, grids, ...)"]
    return schema_problems(config)


# ---------------------------------------------------------------------------------------------------------
# Command line


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "config",
        help="check workflow config files (YAML syntax with its line, then the schema)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="YAML syntax (FILE:LINE:COLUMN) and schema problems of each FILE")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help="config files (YAML)")
    check.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        problems = file_problems(path)
        if problems:
            bad += 1
            print(f"Invalid config ({path}):\n" + "\n".join(f"  - {problem}" for problem in problems))
        else:
            print(f"{path}: valid YAML and schema (`snakemake -n --configfile {path}` checks the models too)")
    if bad:
        raise UserError(f"{bad} of {len(args.files)} config file(s) invalid")
    return 0
