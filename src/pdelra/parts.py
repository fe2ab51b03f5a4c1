"""The registry of an experiment's parts: the related systems and the diagnostics that run beside the LRA
grid, each declared once, as a module (docs/add-a-related-system.md says how to add one).

A part is a module (`PartModule`) in its system's own folder: its record's data as module constants (its
config section, its tables and which of them `pdelra aggregate` reads, its runs, its training rules, its
report heading, its claims' family) beside its hooks, plain functions under fixed names (its jobs, as
`TrainingJob`s the planner counts and prices, its other jobs and the raw data it reads, its tables'
builder, its claims, its report section, its `pdelra` subcommands, its config check). `Part.of` reads such a
module into a `Part`; the planner (pdelra.planning), the config check, aggregate, claims, the report and the
workflow loop over `registered(config)` and import no system by name.

The built-in parts (pdelra.lm.part, pdelra.diagnostics.part, pdelra.cta_official.part) are PhysQK-AD's LM,
the mechanism diagnostics and Continuous-Time Attention's own experiments: pdelra.builtin_parts, above the
systems, imports them (plain imports, their one list) and hands them to this registry (`declare_builtin`);
each entry (the CLI, the fork server, the workflow, the report notebook) imports it first. A user's part is
registered by its module's name in the config's `parts` list (found on sys.path or in the working directory,
pdelra.importing), and is declared the same way. A part with `WORKFLOW = GENERIC` (the default)
needs no .smk file of its own: workflow/rules/parts.smk runs its jobs (`pdelra part run`) and tables
(`pdelra part aggregate`).

Ground floor: imports nothing of the pipeline above pdelra.importing and pdelra.runs; it receives the
built-in parts from above (`declare_builtin`) and imports a config's own when first asked for (`load`), one
name each, so that this module stays below the systems it lists.
The built-in ones are cheap to import (common.smk loads them on every Snakemake call): each hook imports
what it runs when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from pdelra.importing import import_module
from pdelra.runs import find_run_files

Run = tuple[str, str, str, str, int]  # (task, variant, scale, setting, seed): pdelra.runs.RUN_KEYS
TABLES_DIR = "tables"  # results/{experiment}/tables: where every part writes its tables
DEFAULT_MAX_RUNTIME = 1440  # minutes: 24 h, under the MaxTime of most GPU partitions (often 24-72 h)
OWN_RULES = "own"  # a part whose rules live in its own .smk file (lm.smk, cta_official.smk, diagnose.smk)
GENERIC = "generic"  # a part whose jobs workflow/rules/parts.smk runs
# What `pdelra part run` writes beside a GENERIC part's run file once it exists: the job's wall time and
# device, from which the plan prices the part's jobs still to run (its own runs' time, no other model's).
TIMING_FILE = "part_timing.json"


@dataclass(frozen=True)
class TrainingJob:
    """One job of a training rule: its run, resolved run config and the resources it asks for. A packed job
    (`train_pack`) trains several runs of one grid cell at once; `run` and `config` are its first run's."""

    rule: str
    run: Run
    config: Mapping[str, Any]  # the run config its rule passes; the plan reads its `train.batch_size`
    gpus: int
    runtime_min: int  # first attempt's limit (a pack: K runs' time / pack_gain); attempt n: n × it, capped
    runs: int = 1  # runs trained by the job, side by side
    mem_mb: int | None = None  # host memory and cores it asks for (a pack: K × one run's)
    cpus: int | None = None
    max_runtime: int = DEFAULT_MAX_RUNTIME  # cluster.max_runtime: no attempt asks for more
    runs_dir: str = "runs"  # where its run folders live under results/{experiment} (pdelra.runs layout)

    @property
    def task(self) -> str:
        return self.run[0]


def job_asks(config: Mapping[str, Any], resources: Mapping[str, Any], runs: int = 1) -> dict[str, Any]:
    """A job's host-memory and core request from its resources section (K × one run's for a pack) and the
    cap on any attempt's time (`cluster.max_runtime`): TrainingJob's keyword arguments."""
    mem, cpus = resources.get("mem_mb"), resources.get("cpus_per_task")
    return {
        "mem_mb": None if mem is None else mem * runs,
        "cpus": None if cpus is None else cpus * runs,
        "max_runtime": config.get("cluster", {}).get("max_runtime", DEFAULT_MAX_RUNTIME),
    }


@dataclass(frozen=True)
class TrainingRule:
    """A training rule of a part: its name and where its runs live. Its jobs are those of the part's
    `training_jobs` that name it."""

    name: str
    runs_dir: str  # its run folders under results/{experiment}


class PartModule(Protocol):
    """A part is a module: its record's data as module constants, beside its hooks, plain functions under
    these fixed names. `Part.of` reads it; the built-in parts' modules are pdelra.builtin_parts's, a config's
    own are named in its `parts` list, and both are declared the same way (docs/add-a-related-system.md).

    Required: NAME, TABLES, RUNS, RUN_FILE and `build`. The other data have defaults (`Part`'s), and every
    other hook may be left out: `check(config) -> [problem]` (of its filled config section),
    `training_jobs(config) -> [TrainingJob]` (each naming one of TRAINING's rules), `other_jobs(config) ->
    {rule: jobs}` (of rules of its own .smk file), `data_tasks(config) -> {task}` (whose raw data it reads),
    `claims(inputs) -> [claim row]` (pdelra.results.claims rows, family NAME), `report(report) -> None` (its
    report section, pdelra.reporting.sections.Report), `register(subparsers)` (its `pdelra` subcommands) and
    `run(run_config, out, device)` (one job of a GENERIC part: writes out/RUN_FILE)."""

    NAME: (
        str  # the aggregate rule's named input holding its tables; `pdelra part ... NAME`; its claims' family
    )
    TABLES: tuple[str, ...]  # what it writes into tables/ (NAME.csv): all inputs of the aggregate rule
    RUNS: str  # the folder of its runs under results/{experiment}
    RUN_FILE: str  # each run folder's file its tables are built from (the partial report looks for these)

    def build(self, files: list[Path], tables: Path) -> None:
        """Its tables from its run files, written into the folder `tables`."""


Hook = Callable[..., Any]


@dataclass(frozen=True)
class Part:
    """One part of an experiment beside the LRA grid, as its module declares it (`Part.of`): its data, and
    its hooks as the module's own functions (None: the module has none)."""

    name: str
    section: str | None  # the config key that turns it on (None: always on)
    tables: tuple[str, ...]
    reads: tuple[str, ...]  # those `pdelra aggregate` reads (built-ins: its option --NAME; default: TABLES)
    runs: str
    run_file: str
    build: Hook
    module: str = ""  # the module that declares it: how a config names its own (`parts`), parts.csv
    training: tuple[TrainingRule, ...] = ()
    heading: str = ""  # its report section's markdown heading ("## ...")
    family: str = ""  # its claims' family label on the report pages (default: its heading, else its name)
    workflow: str = GENERIC  # OWN_RULES (its own .smk file) or GENERIC (workflow/rules/parts.smk)
    forked: tuple[str, ...] = ()  # its subcommands (`register`) worth forking from the fork server: torch
    preload: tuple[str, ...] = ()  # modules those run, which the fork server imports once (pdelra.forkserver)
    check: Hook | None = None
    training_jobs: Hook | None = None
    other_jobs: Hook | None = None
    data_tasks: Hook | None = None
    claims: Hook | None = None
    report: Hook | None = None
    register: Hook | None = None
    run: Hook | None = None

    @classmethod
    def of(cls, module: ModuleType | PartModule) -> Part:
        """The part a module declares (PartModule); ValueError names what the module lacks."""
        where = getattr(module, "__name__", str(module))
        missing = [name for name in REQUIRED if not hasattr(module, name)]
        if missing:
            raise ValueError(
                f"part {where!r}: the module defines no {', '.join(missing)} (pdelra.parts.PartModule)"
            )
        data = {key: getattr(module, key.upper()) for key in DATA_FIELDS if hasattr(module, key.upper())}
        hooks = {name: getattr(module, name) for name in HOOKS if callable(getattr(module, name, None))}
        tables = tuple(module.TABLES)
        return cls(
            name=module.NAME,
            section=data.pop("section", module.NAME),
            tables=tables,
            reads=tuple(data.pop("reads", tables)),
            runs=module.RUNS,
            run_file=module.RUN_FILE,
            module=where,
            **data,
            **hooks,
        )

    def runs_in(self, config: Mapping[str, Any]) -> bool:
        """Whether a workflow config runs this part (its section is present and not empty)."""
        return self.section is None or bool(config.get(self.section))

    def jobs(self, config: Mapping[str, Any]) -> list[TrainingJob]:
        """Its training jobs (none when the config does not run it)."""
        if not (self.runs_in(config) and self.training_jobs):
            return []
        return list(self.training_jobs(config))

    def other_job_counts(self, config: Mapping[str, Any]) -> dict[str, int]:
        """{rule: jobs} of its non-training rules as a fresh `snakemake -n` plans them (a GENERIC part's:
        its tables rule `{name}_aggregate`, workflow/rules/parts.smk)."""
        if not self.runs_in(config):
            return {}
        jobs = dict(self.other_jobs(config)) if self.other_jobs else {}
        if self.workflow == GENERIC:
            jobs[self.aggregate_rule] = 1
        return jobs

    def raw_data_tasks(self, config: Mapping[str, Any]) -> set[str]:
        """The LRA tasks whose raw data it reads (none when the config does not run it)."""
        if not (self.data_tasks and self.runs_in(config)):
            return set()
        return set(self.data_tasks(config))

    @property
    def aggregate_rule(self) -> str:
        """A GENERIC part's tables rule (workflow/rules/parts.smk)."""
        return f"{self.name}_aggregate"

    @property
    def family_label(self) -> str:
        """Its claims' family as the report pages label it."""
        return self.family or self.heading.lstrip("# ").strip() or f"the part {self.name}"

    def build_finished(self, experiment_dir: Path, tables: Path) -> dict[str, Path]:
        """This part's tables from the run files under `experiment_dir` now, written into `tables`; the ones
        `pdelra aggregate` reads, by name. None (empty) when no run has finished yet."""
        files = find_run_files(Path(experiment_dir) / self.runs, self.run_file)
        if not files:
            return {}
        self.build(files, Path(tables))
        return {name: Path(tables) / f"{name}.csv" for name in self.reads}


REQUIRED = ("NAME", "TABLES", "RUNS", "RUN_FILE", "build")  # what a part's module must define
# The module constants of a part's data besides NAME, TABLES, RUNS and RUN_FILE (upper-case: SECTION, ...),
# and its hooks' names.
DATA_FIELDS = ("section", "reads", "training", "heading", "family", "workflow", "forked", "preload")
HOOKS = ("build", "check", "training_jobs", "other_jobs", "data_tasks", "claims", "report", "register", "run")

# The built-in parts, as pdelra.builtin_parts declares them (None: not yet, no entry imported it).
_builtin: tuple[Part, ...] | None = None


def declare_builtin(*modules: ModuleType | PartModule) -> tuple[Part, ...]:
    """Receive the built-in parts' modules (pdelra.builtin_parts, which imports them), in the order
    `pdelra aggregate`'s options are given; ValueError when other ones were declared before."""
    global _builtin
    found = tuple(Part.of(module) for module in modules)
    if _builtin is not None and _builtin != found:
        raise ValueError(f"the built-in parts are declared already: {', '.join(p.module for p in _builtin)}")
    _builtin = found
    return found


@cache
def load(module_name: str) -> Part:
    """The part the module `module_name` declares, imported now (found on sys.path or in the working
    directory, pdelra.importing); ValueError names a module that does not import or is not a part."""
    try:
        module = import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the module raises while importing
        raise ValueError(f"part {module_name!r}: cannot import it: {type(exc).__name__}: {exc}") from exc
    return Part.of(module)


def builtin() -> tuple[Part, ...]:
    """The built-in parts, as pdelra.builtin_parts declared them; RuntimeError when no entry imported it."""
    if _builtin is None:
        raise RuntimeError(
            "the built-in parts are not declared: import pdelra.builtin_parts first "
            "(as the CLI, the fork server, the workflow and the report notebook do)"
        )
    return _builtin


def builtin_rules() -> dict[str, TrainingRule]:
    """The built-in parts' training rules by name."""
    return {rule.name: rule for part in builtin() for rule in part.training}


def plugins(config: Mapping[str, Any] | None) -> tuple[Part, ...]:
    """The parts a config registers (`parts`: [module, ...], each a PartModule). ValueError names a module
    that does not import, is not a part, or reuses a name."""
    found = tuple(load(name) for name in (config or {}).get("parts") or ())
    names = [part.name for part in (*builtin(), *found)]
    if len(set(names)) != len(names):
        raise ValueError(f"parts: a name is registered twice ({', '.join(names)})")
    return found


def registered(config: Mapping[str, Any] | None = None) -> tuple[Part, ...]:
    """Every part: the built-in ones, then those the config registers, in that order."""
    return (*builtin(), *plugins(config))


def by_name(config: Mapping[str, Any] | None = None) -> dict[str, Part]:
    return {part.name: part for part in registered(config)}


def family_labels(specs: Iterable[str] = ()) -> dict[str, str]:
    """{family: label} of the claims of every part (`specs`: a config's own, its `parts` list): a part's
    claims are of the family named as it is."""
    return {part.name: part.family_label for part in registered({"parts": list(specs)})}


def reads(parts: Iterable[Part]) -> tuple[str, ...]:
    """Every table aggregate may read, in the parts' order."""
    return tuple(name for part in parts for name in part.reads)


def aggregate_inputs(tables: Iterable[str | Path], parts: Iterable[Part] | None = None) -> dict[str, Path]:
    """Of the table files given, those `pdelra aggregate` reads, by name, in the parts' order (default: the
    built-in parts)."""
    by_stem = {Path(path).stem: Path(path) for path in tables}
    return {name: by_stem[name] for name in reads(builtin() if parts is None else parts) if name in by_stem}


def option(name: str) -> str:
    """`pdelra aggregate`'s option for the built-in table `name`: `lm_runs` → `--lm-runs`."""
    return f"--{name.replace('_', '-')}"


def add_part_option(parser: Any) -> None:
    """`--part MODULE` (repeatable) of the commands that need a config's own parts but not the config
    (aggregate, claims, report): the workflow passes its `parts` list."""
    parser.add_argument(
        "--part",
        action="append",
        default=[],
        metavar="MODULE",
        help="a part the config registers (its `parts` list, pdelra.parts): its tables, claims, section",
    )


def options(config: Mapping[str, Any]) -> str:
    """`--part MODULE ...` of a config's own parts, for a command line ('' without any)."""
    return " ".join(f"--part {spec}" for spec in config.get("parts") or ())
