"""The task registry: every LRA-like task the pipeline trains, one frozen `Task` record each.

A task's facts (its name and label, the archive it comes from, its lengths, classes, vocabulary, split sizes,
whether it pairs two documents, the functions that generate and read its raw data, and the key of its column
in the paper's tables) are written here once; the data steps, the planner, the config schema
(`pdelra.planning.config_check.with_tasks`), the claims and the report read them from `TASKS`.

A task of your own is one `register(Task(...))` in a module of yours, named in the config's `task_modules`
(the workflow imports it and passes it to every job through PDELRA_TASK_MODULES) or in that variable for a
command run by hand; docs/add-a-task.md shows the three files it takes. Those modules load through one
explicit call at each entry, never as a side effect of importing this module: `load_modules` where the
config is read (pdelra.planning.config_check, for `pdelra config check`, `pdelra plan` and the workflow's
common.smk), `load_environment` where a command starts (pdelra.cli.main, a forked command included) and in
the report's notebook.

Ground floor: imports nothing of pdelra but the equally low `pdelra.importing`, and no third-party package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pdelra.importing import import_module

SPLITS = ("train", "val", "test")
# Modules registering tasks, comma-separated, loaded by `load_environment`: how a job started by the workflow
# (common.smk sets it from the config's `task_modules`) or a user's shell learns of tasks beyond the five.
MODULES_ENV = "PDELRA_TASK_MODULES"
# The folder those modules are found in when they are on no sys.path: the project root a job started from (a
# job may run elsewhere: the report's notebook runs in a folder of its own).
ROOT_ENV = "PDELRA_TASK_ROOT"


@dataclass(frozen=True)
class Task:
    """One task. `generator` and `reader` are "module:function": generator(out: Path, settings: dict) writes
    the raw files (`pdelra generate`), reader(raw: Path, out: Path, max_length: int, seed: int) -> dict writes
    the processed splits through `pdelra.data.store` and returns the task's part of the manifest (`pdelra
    preprocess`)."""

    name: str
    label: str  # as tables and figures print it
    source: str | None  # the archive `pdelra extract` reads it from; None: generated only
    format: str  # the raw files' layout, in words
    max_length: int  # tokens per sequence (per document for a two-tower task): the paper's, or the task's
    num_classes: int
    vocab_size: int  # token ids a model embeds (the manifest states the processed data's own)
    splits: Mapping[str, int]  # examples per split of the published data set (the planner's fallback)
    generator: str
    reader: str
    generate: Mapping[str, Any] = field(default_factory=dict)  # `pdelra generate` settings beyond the sizes
    two_tower: bool = False  # examples are document pairs (the model encodes both with one encoder)
    paper: str | None = None  # its key in pdelra.paper's tables; None: a task the paper does not have

    def __post_init__(self) -> None:
        if set(self.splits) != set(SPLITS):
            raise ValueError(f"task {self.name!r}: splits must be {SPLITS}, got {sorted(self.splits)}")
        if self.num_classes < 2 or self.max_length < 1 or self.vocab_size < 1:
            raise ValueError(f"task {self.name!r}: needs num_classes >= 2, max_length >= 1, vocab_size >= 1")
        # Frozen all the way down: a record is shared by every reader.
        object.__setattr__(self, "splits", MappingProxyType(dict(self.splits)))
        object.__setattr__(self, "generate", MappingProxyType(dict(self.generate)))

    @property
    def chance(self) -> float:
        """Accuracy of a guess (classes balanced): where a diverged run is counted."""
        return 1 / self.num_classes


TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add `task` to TASKS (again with the same record is a no-op); ValueError on a name taken by another."""
    known = TASKS.get(task.name)
    if known is not None and known != task:
        raise ValueError(f"task {task.name!r} is registered already, with other facts")
    if not task.name.isidentifier() or not task.name.islower():
        raise ValueError(f"task name {task.name!r}: lower-case letters, digits and _ (it names folders)")
    TASKS[task.name] = task
    return task


def get(name: str) -> Task:
    """The task `name`; KeyError names the registered ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; tasks are {', '.join(TASKS)}") from None


def names() -> tuple[str, ...]:
    """Every registered task, the paper's five first in its order."""
    return tuple(TASKS)


def paper_tasks() -> tuple[str, ...]:
    """The tasks the paper has (a column of its tables)."""
    return tuple(t.name for t in TASKS.values() if t.paper is not None)


def new_tasks() -> tuple[str, ...]:
    """The tasks the paper does not have."""
    return tuple(t.name for t in TASKS.values() if t.paper is None)


def two_tower() -> frozenset[str]:
    return frozenset(t.name for t in TASKS.values() if t.two_tower)


def is_two_tower(name: str) -> bool:
    """Whether `name`'s examples are document pairs; False for a name the registry lacks."""
    return name in TASKS and TASKS[name].two_tower


def tasks_of_source() -> dict[str, tuple[str, ...]]:
    """{archive: its tasks}, as `pdelra extract` splits each archive (tasks with no archive are left out)."""
    out: dict[str, tuple[str, ...]] = {}
    for t in TASKS.values():
        if t.source is not None:
            out[t.source] = (*out.get(t.source, ()), t.name)
    return out


def label(name: str) -> str:
    """The task's label; a name the registry lacks as it is."""
    return TASKS[name].label if name in TASKS else name


def load_modules(modules: Iterable[str], root: str | None = None) -> None:
    """Import each module (which registers its tasks), from sys.path, `root` or the working directory; one
    found in none of them, or failing as it imports, is a ValueError naming it."""
    if root and root not in sys.path:
        sys.path.append(root)
    for module in modules:
        try:
            import_module(module)
        except Exception as exc:  # ImportError, or whatever the module raises while importing
            raise ValueError(
                f"task module {module!r}: cannot import it: {type(exc).__name__}: {exc}"
            ) from exc


# The paper's five (Tay et al. 2021's LRA; lengths, classes and split sizes as the paper and LRA state them).
# The generators and readers live in pdelra.data; their functions are imported only when a step runs them.
_BYTES = 257  # byte tokens 1..256 and padding 0
_PIXELS = 256  # grey levels
for _task in (
    Task(
        name="listops",
        label="ListOps",
        source="lra_release",
        format="listops-1000 TSV (Source, Target)",
        max_length=2000,
        num_classes=10,
        vocab_size=16,
        splits={"train": 96_000, "val": 2_000, "test": 2_000},
        generator="pdelra.data.generate:write_listops",
        reader="pdelra.data.preprocess:read_listops",
        generate={"min_length": 500, "max_length": 2000, "max_depth": 10, "max_args": 10},
        paper="listops",
    ),
    Task(
        name="text",
        label="Text",
        source="imdb",
        format="aclImdb review files (bytes)",
        max_length=4000,
        num_classes=2,
        vocab_size=_BYTES,
        splits={"train": 22_500, "val": 2_500, "test": 25_000},
        generator="pdelra.data.generate:write_text",
        reader="pdelra.data.preprocess:read_text",
        generate={"min_length": 200, "max_length": 2000, "signal": 0.8},
        paper="text",
    ),
    Task(
        name="retrieval",
        label="Retrieval",
        source="lra_release",
        format="AAN pairs TSV (bytes, two documents)",
        max_length=4000,
        num_classes=2,
        vocab_size=_BYTES,
        splits={"train": 147_086, "val": 18_090, "test": 17_437},
        generator="pdelra.data.generate:write_retrieval",
        reader="pdelra.data.preprocess:read_retrieval",
        generate={"min_length": 200, "max_length": 2000, "n_topics": 20, "signal": 0.35},
        two_tower=True,
        paper="retrieval",
    ),
    Task(
        name="pathfinder",
        label="PathFinder",
        source="lra_release",
        format="Pathfinder-32 PNGs + metadata",
        max_length=1024,
        num_classes=2,
        vocab_size=_PIXELS,
        splits={"train": 160_000, "val": 20_000, "test": 20_000},
        generator="pdelra.data.generate:write_pathfinder",
        reader="pdelra.data.preprocess:read_pathfinder",
        generate={"contour_length": 14, "distractors": 3, "marker_radius": 1.5, "per_folder": 1000},
        paper="pathfinder",
    ),
    Task(
        name="image",
        label="Image",
        source="cifar10",
        format="CIFAR-10 python batches (grey levels)",
        max_length=1024,
        num_classes=10,
        vocab_size=_PIXELS,
        splits={"train": 45_000, "val": 5_000, "test": 10_000},
        generator="pdelra.data.generate:write_image",
        reader="pdelra.data.preprocess:read_image",
        generate={"noise": 25.0},
        paper="image",
    ),
):
    register(_task)


def job_environment(modules: Iterable[str], root: str) -> dict[str, str]:
    """The environment variables that make a job (a child process) register the tasks of `modules`, found in
    `root`: the workflow sets them from the config's task_modules."""
    return {MODULES_ENV: ",".join(modules), ROOT_ENV: root}


def load_environment(environ: Mapping[str, str] = os.environ) -> None:
    """Register the tasks of the modules `environ` names (MODULES_ENV, found in ROOT_ENV): what a command
    calls as it starts, so that a job of the workflow (or a command run by hand with the variable set) knows a
    config's own tasks. ValueError names a module that does not import."""
    modules = [m.strip() for m in environ.get(MODULES_ENV, "").split(",") if m.strip()]
    load_modules(modules, environ.get(ROOT_ENV))
