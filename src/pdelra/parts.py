"""The registry of an experiment's parts: the related systems and the diagnostics that run beside the LRA
grid, each declared once (docs/add-a-related-system.md says how to add one).

A `Part` names everything of a system by "module:function" strings, imported only when used: its config
section and the function that checks it, its training rules (their jobs, as `TrainingJob`s the planner
counts and prices), its other jobs and the raw data it needs, its tables and which of them `pdelra aggregate`
reads, its claims, its report section and heading, and the module adding its `pdelra` subcommand. The
planner (pdelra.planning), the config check, aggregate, claims, the report and the workflow loop over
`registered(config)` and import no system by name.

The built-in parts (`BUILTIN`) are PhysQK-AD's LM, the mechanism diagnostics and Continuous-Time Attention's
own experiments; a user's part is registered by its record's "module:attr" in the config's `parts` list
(found on sys.path or in the working directory, pdelra.importing). A part with `workflow = GENERIC` needs
no .smk file of its own: workflow/rules/parts.smk runs its jobs (`pdelra part run`) and tables (`pdelra part
aggregate`).

Ground floor: imports nothing of the pipeline above pdelra.importing and pdelra.runs; common.smk imports it on
every Snakemake call, so it stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pdelra.importing import import_callable, import_object
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
    """A training rule of a part: `jobs` is "module:function" of the workflow config → [TrainingJob]."""

    name: str
    jobs: str
    runs_dir: str  # its run folders under results/{experiment}


@dataclass(frozen=True)
class Part:
    """One part of an experiment beside the LRA grid. Each callable is "module:function" (None: none)."""

    name: str  # the aggregate rule's named input holding its tables; `pdelra part ... NAME`
    section: str | None  # the config key that turns it on (None: always on)
    tables: tuple[str, ...]  # what it writes into tables/ (NAME.csv): all inputs of the aggregate rule
    reads: tuple[str, ...]  # those `pdelra aggregate` reads (built-ins: its option --NAME)
    runs: str  # the folder of its runs under results/{experiment}
    run_file: str  # each run folder's file its tables are built from (the partial report looks for these)
    build: str  # (run files, tables folder) → writes `tables` there
    check: str | None = None  # (filled config) → [problem, ...] of its section
    training: tuple[TrainingRule, ...] = ()
    other_jobs: str | None = None  # (config) → {rule: jobs} of its non-training rules
    data_tasks: str | None = None  # (config) → {LRA task whose raw data it reads, ...}
    claims: str | None = None  # ({table: DataFrame}) → [claim row, ...] (pdelra.results.claims rows)
    report: str | None = None  # (pdelra.reporting.sections.Report) → None: its report section
    heading: str = ""  # the section's markdown heading ("## ...")
    cli: str | None = None  # module with `register(subparsers)`: its `pdelra` subcommand(s)
    workflow: str = OWN_RULES  # OWN_RULES or GENERIC (workflow/rules/parts.smk)
    run: str | None = (
        None  # GENERIC: (run config, out folder, device) → writes out/{run_file} (`pdelra part run`)
    )
    spec: str = ""  # how a config names it ("module:attr", set by `plugins`); "" for a built-in one

    def runs_in(self, config: Mapping[str, Any]) -> bool:
        """Whether a workflow config runs this part (its section is present and not empty)."""
        return self.section is None or bool(config.get(self.section))

    def jobs(self, config: Mapping[str, Any]) -> list[TrainingJob]:
        """Its training jobs, rule by rule (none when the config does not run it)."""
        if not self.runs_in(config):
            return []
        return [job for rule in self.training for job in call(rule.jobs, "jobs of " + self.name)(config)]

    def other_job_counts(self, config: Mapping[str, Any]) -> dict[str, int]:
        """{rule: jobs} of its non-training rules as a fresh `snakemake -n` plans them (a GENERIC part's:
        its tables rule `{name}_aggregate`, workflow/rules/parts.smk)."""
        if not self.runs_in(config):
            return {}
        jobs = (
            dict(call(self.other_jobs, f"part {self.name}'s other jobs")(config)) if self.other_jobs else {}
        )
        if self.workflow == GENERIC:
            jobs[self.aggregate_rule] = 1
        return jobs

    def raw_data_tasks(self, config: Mapping[str, Any]) -> set[str]:
        """The LRA tasks whose raw data it reads (none when the config does not run it)."""
        if not (self.data_tasks and self.runs_in(config)):
            return set()
        return set(call(self.data_tasks, f"part {self.name}'s data tasks")(config))

    @property
    def aggregate_rule(self) -> str:
        """A GENERIC part's tables rule (workflow/rules/parts.smk)."""
        return f"{self.name}_aggregate"

    def build_finished(self, experiment_dir: Path, tables: Path) -> dict[str, Path]:
        """This part's tables from the run files under `experiment_dir` now, written into `tables`; the ones
        `pdelra aggregate` reads, by name. None (empty) when no run has finished yet."""
        files = find_run_files(Path(experiment_dir) / self.runs, self.run_file)
        if not files:
            return {}
        call(self.build, f"part {self.name}'s builder")(files, Path(tables))
        return {name: Path(tables) / f"{name}.csv" for name in self.reads}


def call(spec: str, what: str) -> Any:
    """The function named "module:function", imported now."""
    return import_callable(spec, what)


# In the order `pdelra aggregate`'s options are given on its command line (a different order would be a
# changed parameter, which reruns the aggregate job of a finished experiment).
BUILTIN: tuple[Part, ...] = (
    # PhysQK-AD's LM (workflow/rules/lm.smk, `pdelra lm ...`); its report section is the related systems'.
    Part(
        name="lm",
        section="lm",
        tables=("lm_runs", "lm_dynamics", "lm_history"),
        reads=("lm_runs", "lm_dynamics"),
        runs="lm/runs",
        run_file="metrics.json",
        build="pdelra.lm.aggregate:aggregate_lm",
        check="pdelra.lm.check:problems",
        training=(TrainingRule("lm_train", "pdelra.lm.jobs:training_jobs", "lm/runs"),),
        other_jobs="pdelra.lm.jobs:other_jobs",
        data_tasks="pdelra.lm.jobs:data_tasks",
        claims="pdelra.results.catalogue.physqk:part_claims",
        cli="pdelra.lm.cli",
    ),
    # The mechanism diagnostics (workflow/rules/diagnose.smk). The workflow concatenates its diagnose jobs'
    # part files; those are assembled from each run folder's cached diagnostics.csv, which the partial report
    # reads directly, since a diagnose job still running has written only its runs' files. Its jobs are the
    # LRA runs' (pdelra.planning.experiment.diagnose_parts).
    Part(
        name="diagnostics",
        section=None,
        tables=("diagnostics",),
        reads=("diagnostics",),
        runs="runs",
        run_file="diagnostics.csv",
        build="pdelra.steps.diagnose:write_tables",  # what `pdelra diagnose table` runs
        claims="pdelra.results.diagnostics:part_claims",
        report="pdelra.reporting.sections.diagnostics:render",
        heading="## Operator-theory diagnostics: roughness, perturbation bounds, non-commutativity",
    ),
    # Continuous-Time Attention's own experiments (workflow/rules/cta_official.smk, `pdelra cta-official`).
    Part(
        name="cta_official",
        section="cta_official",
        tables=("cta_official_runs", "cta_official_summary", "cta_official_lm"),
        reads=("cta_official_runs",),
        runs="cta_official/runs",
        run_file="metrics.json",
        build="pdelra.cta_official.aggregate:aggregate",
        check="pdelra.cta_official.check:problems",
        training=(
            TrainingRule("cta_official_train", "pdelra.cta_official.jobs:training_jobs", "cta_official/runs"),
            TrainingRule("cta_lm_train", "pdelra.cta_official.jobs:lm_training_jobs", "cta_official/runs"),
        ),
        other_jobs="pdelra.cta_official.jobs:other_jobs",
        data_tasks="pdelra.cta_official.jobs:data_tasks",
        claims="pdelra.results.catalogue.cta:part_claims",
        report="pdelra.reporting.sections.cta_official:render",
        heading="## Continuous-Time Attention as its authors run it",
        cli="pdelra.cta_official.cli",
    ),
)
BUILTIN_RULES = {rule.name: rule for part in BUILTIN for rule in part.training}


def plugins(config: Mapping[str, Any] | None) -> tuple[Part, ...]:
    """The parts a config registers (`parts`: ["module:attr", ...], each a Part record). ValueError names a
    spec that does not import, is not a Part, or reuses a name."""
    found = []
    for spec in (config or {}).get("parts") or ():
        part = import_object(spec, "part")
        if not isinstance(part, Part):
            raise ValueError(f"part {spec!r} is a {type(part).__name__}, not a pdelra.parts.Part")
        found.append(replace(part, spec=spec))
    names = [part.name for part in (*BUILTIN, *found)]
    if len(set(names)) != len(names):
        raise ValueError(f"parts: a name is registered twice ({', '.join(names)})")
    return tuple(found)


def registered(config: Mapping[str, Any] | None = None) -> tuple[Part, ...]:
    """Every part: the built-in ones, then those the config registers, in that order."""
    return (*BUILTIN, *plugins(config))


def by_name(config: Mapping[str, Any] | None = None) -> dict[str, Part]:
    return {part.name: part for part in registered(config)}


def family_labels(specs: Iterable[str] = ()) -> dict[str, str]:
    """{family: label} of the claims of the parts a config registers (`specs`, its `parts` list): a part's
    claims are of the family named as it is, labelled on both report pages by its heading."""
    return {
        part.name: part.heading.lstrip("# ").strip() or f"the part {part.name}"
        for part in registered({"parts": list(specs)})
    }


def reads(parts: Iterable[Part]) -> tuple[str, ...]:
    """Every table aggregate may read, in the parts' order."""
    return tuple(name for part in parts for name in part.reads)


def aggregate_inputs(tables: Iterable[str | Path], parts: Iterable[Part] = BUILTIN) -> dict[str, Path]:
    """Of the table files given, those `pdelra aggregate` reads, by name, in the parts' order."""
    by_stem = {Path(path).stem: Path(path) for path in tables}
    return {name: by_stem[name] for name in reads(parts) if name in by_stem}


def option(name: str) -> str:
    """`pdelra aggregate`'s option for the built-in table `name`: `lm_runs` → `--lm-runs`."""
    return f"--{name.replace('_', '-')}"


def add_part_option(parser: Any) -> None:
    """`--part MODULE:ATTR` (repeatable) of the commands that need a config's own parts but not the config
    (aggregate, claims, report): the workflow passes its `parts` list."""
    parser.add_argument(
        "--part",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a part the config registers (its `parts` list, pdelra.parts): its tables, claims, section",
    )


def options(config: Mapping[str, Any]) -> str:
    """`--part SPEC ...` of a config's own parts, for a command line ('' without any)."""
    return " ".join(f"--part {spec}" for spec in config.get("parts") or ())
