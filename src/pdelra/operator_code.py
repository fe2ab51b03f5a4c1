"""The code of a config variant's own operators, as one hash: part of its runs' identity.

A config names a user's operator as "module:attr" (pdelra.nn.model.resolve_operator). Its runs depend on
that module's source and on the user's modules it imports, none of which the project's commit (metrics.json's
`code_version`) records. `operator_code` hashes them, so that an edit of the operator reruns exactly its
variant's runs: the workflow puts the hash in the run config (a params value of the train rule,
pdelra.planning.experiment.run_config), and the trainer records the hash of the code it ran in metrics.json.

Which files: the module that "module:attr" names, the `__init__.py` of each package above it (they run when
it is imported), and, transitively, every module it imports that lies in the same tree - the folder on the
import path where the module was found (the working directory or an `examples/` folder, say) - read
statically from the import statements, never by running the code. This is the set an edit of the user's
own code can change; what it leaves out is covered elsewhere or is not the user's code:
- modules found outside the tree (torch, numpy: `versions` in metrics.json; pdelra itself: `code_version`);
- for a module installed into site-packages or the standard library (`torch.nn:Flatten`), only the named
  module's own file: an installed library is not edited in place but upgraded, and following its imports
  would hash thousands of files (torch's) every time the workflow plans;
- an import made by name at run time (importlib.import_module(name)) or a data file the module reads: no
  import statement names them. Keep such code in modules imported by a plain `import`.
Reading imports statically over-includes at worst (a module imported only under `if TYPE_CHECKING`), which
costs a rerun, never a stale result.

The module is found as pdelra.importing finds it to import it: on sys.path, then in the working directory.
This module imports no torch (the workflow calls it while it plans the jobs).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent  # pdelra itself: its code is `code_version`'s
_SOURCE = ".py"


def user_operators(operators: Mapping[str, Mapping[str, Any]] | None) -> list[str]:
    """The "module:attr" names of a variant's operators that are a user's code (built-in operator names
    have no colon: pdelra.nn.model.OPERATORS), sorted and each once."""
    names = {str(spec.get("operator", "")) for spec in (operators or {}).values()}
    return sorted(name for name in names if ":" in name)


def operator_code(operators: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    """sha256 (hex) of the source files of a variant's own operators (`operator_files`), each under its path
    relative to its tree; None when the variant has no operator of a user's (nothing beyond the project's
    code). ValueError names an operator whose module has no source file to be found."""
    specs = user_operators(operators)
    if not specs:
        return None
    digest = hashlib.sha256()
    for name, path in sorted(operator_files(specs).items()):
        content = path.read_bytes()
        # Name and length first, so that no two different file sets give the same stream of bytes.
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def operator_files(specs: Iterable[str]) -> dict[str, Path]:
    """{path relative to its tree: file} of every file the operators "module:attr" in `specs` run."""
    files: dict[str, Path] = {}
    for spec in specs:
        module_name = spec.partition(":")[0]
        found = _find(module_name, _roots())
        if found is None:
            raise ValueError(
                f"operator {spec!r}: no source of module {module_name!r} on sys.path or in the working "
                f"directory ({Path.cwd()}), so its code cannot be recorded"
            )
        root, module_file = found
        tree = _tree(root, module_name)
        for path in [module_file] if tree is None else _closure(module_name, root, tree):
            files[path.relative_to(root).as_posix()] = path
    return files


def _roots() -> list[Path]:
    """Where a module is looked for, in order: sys.path (its '' is the working directory), then the
    working directory, the fallback of pdelra.importing."""
    here = Path.cwd()
    roots = [Path(entry).resolve() if entry else here for entry in sys.path]
    return [root for root in dict.fromkeys([*roots, here]) if root.is_dir()]


def _module_path(root: Path, module_name: str) -> Path | None:
    """The file that holds `module_name` under `root`: a .py file, a package's __init__.py or an extension
    module; None when there is none (a namespace package's folder has no file to hash)."""
    base = root.joinpath(*module_name.split("."))
    candidates = [base.with_name(base.name + _SOURCE), base / f"__init__{_SOURCE}"]
    candidates += [base.with_name(base.name + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    return next((path for path in candidates if path.is_file()), None)


def _find(module_name: str, roots: list[Path]) -> tuple[Path, Path] | None:
    """(root, file) of the first root that holds `module_name`."""
    for root in roots:
        path = _module_path(root, module_name)
        if path is not None:
            return root, path
    return None


@cache
def _installed_dirs() -> frozenset[Path]:
    """The folders installed code lives in: site-packages (system and user) and the standard library."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    dirs += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    return frozenset(Path(d).resolve() for d in dirs if d)


def _tree(root: Path, module_name: str) -> Path | None:
    """The folder whose modules count as the user's: the root the module was found in; None when that root
    is where installed libraries live (then only the named module's file counts)."""
    if root in _installed_dirs() or root.name in ("site-packages", "dist-packages"):
        return None
    return root


def _inside(path: Path, tree: Path, package: bool = False) -> bool:
    """Whether `path` is the user's code: in `tree`, and not the pdelra package (`code_version` has it); with
    `package`, whether it is the pdelra package's code."""
    if package:
        return path.is_relative_to(_PACKAGE_DIR)
    return path.is_relative_to(tree) and not path.is_relative_to(_PACKAGE_DIR)


TRAINING_PACKAGE = "pdelra.training"  # its modules run `pdelra train` and `pdelra train-pack`


@cache
def training_code() -> str:
    """sha256 (hex) of the pdelra source files a training process runs: the modules of TRAINING_PACKAGE (its
    commands name their handlers as strings, so each module is a start) and every module of pdelra they
    import, transitively (read statically, as for operators). A finished run is restored only by
    the same training code (pdelra.training.finished): an edit of the model, the training loop or the data
    loading changes it; an edit of the README, a profile, a config or the reporting code does not, unlike
    `git describe --dirty`."""
    root = _PACKAGE_DIR.parent
    folder = root.joinpath(*TRAINING_PACKAGE.split("."))
    files: set[Path] = set()
    for module in sorted(folder.glob(f"*{_SOURCE}")):
        files.update(_closure(f"{TRAINING_PACKAGE}.{module.stem}", root, root, package=True))
    digest = hashlib.sha256()
    for path in sorted(files):
        content = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def _closure(module_name: str, root: Path, tree: Path, package: bool = False) -> list[Path]:
    """The files of `module_name`, its parent packages and every module of `tree` they import, in turn."""
    seen: dict[Path, None] = {}
    pending = [module_name]
    done: set[str] = set()
    while pending:
        name = pending.pop()
        if name in done:
            continue
        done.add(name)
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__.py and a/b/__init__.py
            prefix = ".".join(parts[:depth])
            path = _module_path(root, prefix)
            if path is None or not _inside(path.resolve(), tree.resolve(), package) or path in seen:
                continue
            seen[path] = None
            if path.suffix == _SOURCE:
                pending += _imports(path, prefix, is_package=path.name == f"__init__{_SOURCE}")
    return list(seen)


def _imports(path: Path, module_name: str, is_package: bool) -> list[str]:
    """The module names a source file's import statements name (anywhere in it: also inside functions and
    try blocks), relative imports resolved against its package. `from m import x` also names m.x, which is a
    module when x is a submodule (and names nothing found otherwise)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []  # the import itself fails, and the config check says so; the file is hashed all the same
    package = module_name if is_package else module_name.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, *([base] if base else [])])
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
    return names
