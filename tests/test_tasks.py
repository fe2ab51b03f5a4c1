"""The task registry (pdelra.tasks): complete, consistent with the paper's tables and with what the data
steps write, the one source of the config schema's task names, and the only place the tasks are listed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import load_config

from pdelra import paper, tasks
from pdelra.data.generate import generate
from pdelra.data.preprocess import preprocess
from pdelra.planning.config_check import config_problems, load_schema, with_tasks
from pdelra.results.claim_types import CHANCE_ACCURACY
from pdelra.tasks import TASKS, Task, register

REPO = Path(__file__).resolve().parents[1]
FIVE = ("listops", "text", "retrieval", "pathfinder", "image")

# Small enough for seconds: each generator's size and length settings at their smallest useful values.
SMALL = {
    "listops": {"min_length": 20, "max_length": 60, "max_depth": 4, "max_args": 5},
    "text": {"min_length": 20, "max_length": 60},
    "retrieval": {"min_length": 20, "max_length": 60},
    "pathfinder": {"per_folder": 10},
    "image": {},
}


def test_the_registry_holds_the_papers_five_in_its_order() -> None:
    assert tasks.paper_tasks() == FIVE == paper.TASKS
    assert tasks.new_tasks() == ()
    assert tasks.two_tower() == {"retrieval"}
    assert tasks.tasks_of_source() == {
        "lra_release": ("listops", "retrieval", "pathfinder"),
        "imdb": ("text",),
        "cifar10": ("image",),
    }


def test_every_paper_key_names_a_column_of_the_papers_tables() -> None:
    for task in TASKS.values():
        assert task.paper is not None
        assert all(task.paper in row for row in paper.TABLE10.values()), task.name
        assert task.paper in paper.TABLE8, task.name
        assert paper.TASK_LABELS[task.name] == task.label


@pytest.mark.parametrize(
    ("name", "length", "classes"),
    [
        ("listops", 2000, 10),
        ("text", 4000, 2),
        ("retrieval", 4000, 2),
        ("pathfinder", 1024, 2),
        ("image", 1024, 10),
    ],
)
def test_the_papers_lengths_classes_and_chance(name: str, length: int, classes: int) -> None:
    task = tasks.get(name)
    assert (task.max_length, task.num_classes) == (length, classes)
    assert CHANCE_ACCURACY[name] == task.chance == 1 / classes


@pytest.mark.parametrize("name", FIVE)
def test_the_data_steps_write_what_the_record_states(name: str, tmp_path: Path) -> None:
    """Generated, then preprocessed with the record's own default length: the manifest's task facts are the
    record's (classes, vocabulary, length, a second document exactly for a two-tower task)."""
    task = tasks.get(name)
    sizes = {"n_train": 12, "n_val": 4, "n_test": 4, "seed": 0}
    generate(name, tmp_path / "raw", {**sizes, **SMALL[name]})
    manifest = preprocess(name, tmp_path / "raw", tmp_path / "out")
    assert manifest["num_classes"] == task.num_classes
    assert manifest["vocab_size"] == task.vocab_size
    assert manifest["max_length"] == task.max_length
    assert (tmp_path / "out" / "train_tokens2.npy").exists() == task.two_tower


def test_the_schema_takes_its_task_names_from_the_registry() -> None:
    text = (REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()
    assert not re.search(r"enum: \[listops|^\s+listops:", text, re.M)  # none typed in
    schema = load_schema()
    assert schema["definitions"]["task"]["enum"] == list(TASKS)
    generate_keys = schema["properties"]["data"]["properties"]["generate"]["properties"]
    assert generate_keys == {name: {"$ref": f"#/definitions/gen_{name}"} for name in FIVE}


@pytest.fixture
def parity() -> Iterator[Task]:
    """A sixth task registered for one test, then removed (the registry is process-wide)."""
    task = register(
        Task("parity", "Parity", None, "bits", 64, 2, 3, {"train": 8, "val": 4, "test": 4},
             "m:gen", "m:read", {"length": 64})
    )  # fmt: skip
    yield task
    del TASKS["parity"]


def test_a_registered_task_is_in_the_schema_and_a_config_may_use_it(parity: Task) -> None:
    schema = with_tasks(load_schema())
    assert schema["definitions"]["task"]["enum"] == [*FIVE, "parity"]
    assert "parity" not in schema["properties"]["data"]["properties"]["generate"]["properties"]  # no gen_
    config = load_config("tiny")
    config["tasks"]["parity"] = {"max_length": 64}
    config["data"]["generate"]["parity"] = {"length": 32}
    config["grids"]["main"]["tasks"] = ["parity"]
    assert config_problems(config) == []
    assert tasks.new_tasks() == ("parity",) and tasks.label("parity") == "Parity"


def test_a_task_without_an_archive_needs_generated_data(parity: Task) -> None:
    config = load_config("tiny")
    config["tasks"]["parity"] = {"max_length": 64}
    config["grids"]["main"]["tasks"] = ["parity"]
    config["data"]["source"] = "real"
    assert any("task parity has no archive" in p for p in config_problems(config))


def test_an_unknown_task_is_refused_with_the_registered_names() -> None:
    config = load_config("tiny")
    config["tasks"]["parity"] = {"max_length": 64}
    problems = config_problems(config)
    assert any("'parity'" in p and all(name in p for name in FIVE) for p in problems), problems
    assert all("name the module that registers it in `task_modules`" in p for p in problems), problems


def test_a_task_module_that_does_not_import_is_named() -> None:
    config = load_config("tiny")
    config["task_modules"] = ["no_such_tasks_module"]
    assert config_problems(config) == [
        "task_modules: task module 'no_such_tasks_module': cannot import it: ModuleNotFoundError: "
        "No module named 'no_such_tasks_module'"
    ]


def test_a_name_is_registered_once() -> None:
    clash = Task("listops", "L", None, "x", 10, 2, 3, {"train": 1, "val": 1, "test": 1}, "m:g", "m:r")
    with pytest.raises(ValueError, match="registered already"):
        register(clash)
    register(TASKS["listops"])  # the same record again: a no-op


def test_the_record_is_frozen() -> None:
    with pytest.raises(AttributeError):
        TASKS["listops"].max_length = 10  # type: ignore[misc]
    with pytest.raises(TypeError):
        TASKS["listops"].splits["train"] = 1  # type: ignore[index]


# A task name as code lists it: quoted, a YAML key, or an item of a YAML flow list.
_NAMED = re.compile(
    r"""["'](?P<q>listops|text|retrieval|pathfinder|image)["']"""
    r"""|^\s*(?P<k>listops|text|retrieval|pathfinder|image):"""
    r"""|[\[,]\s*(?P<l>listops|text|retrieval|pathfinder|image)\s*[,\]]"""
)


def test_no_copy_of_the_task_list_is_left() -> None:
    """No eight lines of src/ or workflow/ name four of the five tasks (a tuple, a dict by task, a schema's
    properties): the registry is the one list. pdelra.paper keys the paper's tables by task: its numbers,
    which the records point at (`Task.paper`)."""
    files = [
        *(REPO / "src").rglob("*.py"),
        *(REPO / "workflow").rglob("*.smk"),
        *(REPO / "workflow").rglob("*.yaml"),
    ]
    exempt = {REPO / "src" / "pdelra" / "tasks.py", REPO / "src" / "pdelra" / "paper.py"}
    copies = []
    for path in sorted(set(files) - exempt):
        lines = path.read_text().splitlines()
        named = [{next(g for g in m.groups() if g) for m in _NAMED.finditer(line)} for line in lines]
        for i in range(len(lines)):
            if len(set().union(*named[i : i + 8])) >= 4:
                copies.append(f"{path.relative_to(REPO)}:{i + 1}")
                break
    assert copies == []


def test_a_task_the_paper_lacks_gets_a_sign_claim_per_position_but_not_for_own_variants() -> None:
    import pandas as pd

    from pdelra.results.catalogue.new_tasks import FAMILY, new_task_claims

    rows = [
        ("parity", "between_layers", False),
        ("parity", "none", False),
        ("parity", "after_embedding", False),
        ("parity", "mine", True),  # a config's own variant: its claims are family `own`'s
        ("listops", "none", False),
        ("listops", "after_embedding", False),  # a paper task: Table 11's own claims
        ("copy", "after_mlp", False),  # no baseline ran on it: nothing to compare with
    ]
    runs = pd.DataFrame(rows, columns=["task", "variant", "own_variant"])
    claims = new_task_claims(runs)
    assert [c.claim_id for c in claims] == [
        "table11_sign_after_embedding_parity",
        "table11_sign_between_layers_parity",
    ]
    assert {c.family for c in claims} == {FAMILY}
    assert new_task_claims(runs[runs["task"] == "listops"]) == ()


def test_the_registry_is_ground_floor() -> None:
    """pdelra.tasks imports nothing of pdelra above it (only pdelra.importing, as low) and no third party: the
    schema loader, the data steps and pdelra.paper all read it."""
    import ast
    import sys

    tree = ast.parse((REPO / "src" / "pdelra" / "tasks.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {m for m in imported if m.startswith("pdelra")} == {"pdelra.importing"}
    assert {m.split(".")[0] for m in imported} - {"pdelra"} <= set(sys.stdlib_module_names) | {"__future__"}


def test_a_configs_own_tasks_load_at_the_commands_entry_not_on_import(tmp_path: Path) -> None:
    """Importing the registry registers the five tasks only, whatever the environment says; `pdelra` (and a
    command the fork server forks, which runs pdelra.cli.main with the job's environment) loads the modules
    PDELRA_TASK_MODULES names as it starts; one that does not import is one line, exit 2."""
    import subprocess
    import sys

    (tmp_path / "env_tasks.py").write_text(
        "from pdelra.tasks import Task, register\n"
        "register(Task(name='envtask', label='Env', source=None, format='-', max_length=8, num_classes=2,\n"
        "              vocab_size=4, splits={'train': 1, 'val': 1, 'test': 1}, generator='m:g',\n"
        "              reader='m:r'))\n"
    )
    env = {**tasks.job_environment(["env_tasks"], str(tmp_path)), "PATH": "/usr/bin:/bin"}
    code = (
        "import pdelra.tasks as t; print('envtask' in t.TASKS)\n"
        "from pdelra.cli import main; import sys; sys.argv = ['pdelra']\n"
        "try:\n    main(['config', 'check', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('envtask' in t.TASKS)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split()[0] == "False" and out.stdout.split()[-1] == "True", out.stdout + out.stderr
    env = {**tasks.job_environment(["no_such_tasks"], str(tmp_path)), "PATH": "/usr/bin:/bin"}
    bad = subprocess.run([sys.executable, "-m", "pdelra.cli", "--version"], env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "no_such_tasks" in bad.stderr and "Traceback" not in bad.stderr
