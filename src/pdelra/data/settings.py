"""What the data steps accept, importable without numpy: the subcommands' help (pdelra.data.cli) and the
config check read these here, the steps themselves through their own modules (generate, extract, cta)."""

from __future__ import annotations

from typing import Any

from pdelra import tasks

# `pdelra generate` (pdelra.data.generate): every source's settings and their defaults.
COMMON = {"n_train": 1000, "n_val": 100, "n_test": 100, "seed": 0}
# The tasks' own (LRA's settings, lengths of text in characters = byte tokens) are their registry records'
# `generate` (pdelra.tasks); demo configs shorten the lengths. These are the other sources'.
OTHER_GENERATE_DEFAULTS: dict[str, dict[str, Any]] = {
    # The official CTA experiments' sources (pdelra.data.cta); wikitext103 counts articles, not lines.
    "agnews": {**COMMON, "signal": 0.8},
    "sst2": {**COMMON, "signal": 0.8},
    "wikitext103": {**COMMON, "n_train": 200, "n_val": 20, "n_test": 20, "noise": 0.05},
    # Tokenizer stand-ins, built from generated text of the sources above (n_texts rows of each).
    "wordpiece": {"seed": 0, "n_texts": 500, "split_longer_than": 7},
    "bpe": {"seed": 0, "n_texts": 200, "vocab_size": 300},
}


def generate_defaults() -> dict[str, dict[str, Any]]:
    """{source: its settings and their defaults}: every registered task's, then the other sources'. Read at
    call time, so a task registered after this module was imported (a config's task_modules) is in it."""
    own = {t.name: {**COMMON, **t.generate} for t in tasks.TASKS.values()}
    return own | OTHER_GENERATE_DEFAULTS


# `pdelra extract` (pdelra.data.extract): the archives it reads.
EXTRACT_SOURCES = ("lra_release", "imdb", "cifar10", "agnews", "sst2", "wikitext103")

# `pdelra preprocess-cta` and `pdelra subset` (pdelra.data.cta): the official CTA experiments' tasks.
CTA_CLASSIFICATION_TASKS = ("agnews", "sst2", "imdb", "imdb_char")
CTA_LM_TASKS = ("wikitext103",)
CTA_TASKS = CTA_CLASSIFICATION_TASKS + CTA_LM_TASKS
CTA_DEFAULT_MAX_LENGTH = {"agnews": 256, "sst2": 128, "imdb": 256, "imdb_char": 2048, "wikitext103": 512}
# run_ablation_datasize.py's --data_sizes default, also what run_all_ablations.sh passes
ABLATION_FRACTIONS = (0.001, 0.01, 0.05, 0.1)
