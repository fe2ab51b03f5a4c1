"""Continuous-Time Attention's own experiments as a grid of their own (config key `cta_official`).

The runs of workflow/rules/cta_official.smk, two kinds:

- classification (Tables 1-2), each trained by `pdelra train` with the authors' model (`model.backbone:
  official_cta`, `pdelra.nn.cta_official`): every task of `cta_official.tasks` × every variant of
  `cta_official.variants` × every seed; scale `h1` and setting `base` (neither applies to the official
  operator). Tasks are `pdelra preprocess-cta`'s classification tasks (Table 1: `imdb`, `agnews`, `sst2`;
  Table 2: `imdb_char`).
- the WikiText-103 causal LM (Tables 3-5, `cta_official.wikitext103`; `lm_runs`), each trained by `pdelra
  cta-official train-lm` (pdelra.cta_official.lm, the authors' OfficialCTALM), task `wikitext103`, scale
  `h1`, the setting naming what the official ablation scripts vary:
      none / base                 the standard Transformer (run_language_modeling.py; the steps ablation's 0)
      cta_official_diffusion / steps{n}   diffusion with n PDE steps, n in `steps` and `pde_steps` (Table 4,
                                  run_ablation_pdesteps.py; steps{pde_steps} is Table 3's PDE-Transformer)
      {kind} / steps{pde_steps}   each of `types` at the official steps (Table 5, run_ablation_pdetype.py)
      none, cta_official_diffusion / data{p}   a fraction of the training blocks, p its percentage with "p"
                                  for the point (0.001 → data0p1, 0.05 → data5; run_ablation_datasize.py;
                                  the rows are pdelra.data.cta.subset_rows drawn with the run's seed)
  Where two ablations name the same configuration (Table 3's PDE run, Table 4's steps4 and Table 5's
  diffusion) it is one run.

Folders follow pdelra.runs under results/{experiment}/cta_official/runs/.

This module imports nothing heavy (Snakemake imports it while it parses the workflow).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdelra import paper
from pdelra.runs import BASE_SETTING, BASELINE, MAIN_SCALE

Run = tuple[str, str, str, str, int]  # (task, variant, scale, setting, seed): pdelra.runs.RUN_KEYS

RUNS_DIR = "cta_official/runs"  # under results/{experiment}
# What `pdelra cta-official aggregate` writes into results/{experiment}/tables (NAME.csv): its part's tables.
TABLES = ("cta_official_runs", "cta_official_summary", "cta_official_lm")
PROCESSED_DIR = "cta_official"  # under data.processed_dir: one folder per task
# The classification tasks of `pdelra preprocess-cta` (pdelra.data.cta.TASKS without the LM's wikitext103).
TASKS = ("imdb", "agnews", "sst2", "imdb_char")
# The official baseline and the official PDE rows (pdelra.nn.cta_official.OFFICIAL_VARIANTS; a test keeps
# them equal: that module imports torch).
VARIANTS = (
    BASELINE,
    "cta_official_diffusion",
    "cta_official_wave",
    "cta_official_reaction_diffusion",
    "cta_official_advection_diffusion",
)
# The raw folder (data.raw_dir/{name}) each task is preprocessed from: IMDb is the LRA side's `text` task.
RAW_OF_TASK = {"imdb": "text", "imdb_char": "text", "agnews": "agnews", "sst2": "sst2"}
WORDPIECE_TASKS = ("imdb", "agnews", "sst2")  # tokenised with the BERT uncased WordPiece vocabulary
# Sources of their own: downloaded and extracted (pdelra extract), or generated (pdelra generate).
ARCHIVES = ("agnews", "sst2", "wikitext103")
VOCAB = "bert_uncased_vocab"  # the vocab.txt download (real data)
WORDPIECE = "wordpiece"  # the generated vocab.txt (`pdelra generate wordpiece`)
LM_TOKENIZER = "tinyllama_tokenizer"  # TinyLlama's tokenizer.json download (real data)
BPE = "bpe"  # the generated tokenizer.json (`pdelra generate bpe`)
# Download file names under data.raw_dir/downloads/ (extract tells tar from zip by content).
DOWNLOAD_FILES = {
    "agnews": "agnews.tgz",
    "sst2": "sst2.zip",
    VOCAB: "bert_uncased_vocab.txt",
    "wikitext103": "wikitext-103-v1.zip",
    LM_TOKENIZER: "tinyllama_tokenizer.json",
}

# The WikiText-103 causal LM (`cta_official.wikitext103`)
LM_TASK = "wikitext103"
LM_SECTION = "wikitext103"  # its config key under cta_official
# The PDE of the steps and data-size ablations and of Table 3 (run_ablation_pdesteps.py and
# run_ablation_datasize.py: --pde_type diffusion, the default of src/configs/wikitext103.yaml).
LM_PDE = "cta_official_diffusion"
# src/configs/wikitext103.yaml `pde.steps: 4` ("Table 4 shows 4 PDE steps is optimal"): Table 3's
# PDE-Transformer, Table 5's step count and the data-size ablation's. The paper config's `pde_steps`; the
# claims (pdelra.results.claims) and cta_official_lm.csv (which of Tables 3-5 a cell is in) place the
# published numbers at this count, whatever a config's `pde_steps` (another count trains, but its cells
# then answer Table 4 only).
OFFICIAL_LM_STEPS = paper.CTA_OFFICIAL_LM_STEPS


def tasks(section: Mapping[str, Any] | None) -> list[str]:
    return sorted(section["tasks"]) if section else []


def lm_section(section: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """`cta_official.wikitext103`, or None when the grid has no LM runs."""
    return (section or {}).get(LM_SECTION) or None


def steps_setting(steps: int) -> str:
    return f"steps{int(steps)}"


def data_setting(fraction: float) -> str:
    """The data-size ablation's setting: `data` + the percentage, "p" for its point (0.001 → data0p1)."""
    return "data" + f"{100 * fraction:g}".replace(".", "p")


def lm_settings(section: Mapping[str, Any] | None) -> dict[str, tuple[int, float | None]]:
    """{setting: (PDE steps, fraction of the training blocks or None = all)} of the LM runs."""
    lm = lm_section(section)
    if not lm:
        return {}
    official = int(lm["pde_steps"])
    settings: dict[str, tuple[int, float | None]] = {BASE_SETTING: (official, None)}
    for n in sorted({*lm["steps"], official}):
        settings[steps_setting(n)] = (int(n), None)
    for fraction in lm["data_sizes"]:
        settings[data_setting(fraction)] = (official, float(fraction))
    return settings


def lm_runs(section: Mapping[str, Any] | None) -> list[Run]:
    """(wikitext103, variant, h1, setting, seed) of every LM run, sorted (the module docstring's table);
    none without `cta_official.wikitext103`."""
    lm = lm_section(section)
    if not lm:
        return []
    official = steps_setting(lm["pde_steps"])
    cells = {(BASELINE, BASE_SETTING)}
    cells |= {(LM_PDE, steps_setting(n)) for n in {*lm["steps"], lm["pde_steps"]}}
    cells |= {(variant, official) for variant in lm["types"]}
    for fraction in lm["data_sizes"]:
        cells |= {(BASELINE, data_setting(fraction)), (LM_PDE, data_setting(fraction))}
    seeds = [int(seed) for seed in section["seeds"]]
    return sorted(
        (LM_TASK, variant, MAIN_SCALE, setting, seed) for variant, setting in cells for seed in seeds
    )


def lm_run_config(section: Mapping[str, Any], variant: str, setting: str, seed: int | str) -> dict[str, Any]:
    """One LM run's config for `pdelra cta-official train-lm` (pdelra.cta_official.lm.LM_SCHEMA): the
    section's model and train, the setting's step count (model.cta_steps, unused by `none`) and its
    fraction of the training blocks (train.data_fraction, null = all)."""
    lm = lm_section(section)
    if not lm:
        raise ValueError("cta_official has no wikitext103 section")
    settings = lm_settings(section)
    if setting not in settings:
        raise ValueError(f"unknown WikiText-103 setting {setting!r}; the grid has {', '.join(settings)}")
    steps, fraction = settings[setting]
    return {
        "task": LM_TASK,
        "variant": variant,
        "scale": MAIN_SCALE,
        "setting": setting,
        "seed": int(seed),
        "model": {**lm["model"], "cta_steps": steps},
        "train": {**lm["train"], "data_fraction": fraction},
    }


def runs(section: Mapping[str, Any] | None) -> list[Run]:
    """(task, variant, h1, base, seed) of every run, sorted; none without a `cta_official` section."""
    if not section:
        return []
    return sorted(
        (task, variant, MAIN_SCALE, BASE_SETTING, int(seed))
        for task in section["tasks"]
        for variant in section["variants"]
        for seed in section["seeds"]
    )


def merged(section: Mapping[str, Any], part: str, task: str) -> dict[str, Any]:
    """`cta_official.defaults.{part}` overridden by `cta_official.tasks.{task}.{part}`."""
    return {**section.get("defaults", {}).get(part, {}), **section["tasks"][task].get(part, {})}


def run_config(section: Mapping[str, Any], task: str, variant: str, seed: int | str) -> dict[str, Any]:
    """One run's config for `pdelra train` (docs/interfaces.md, "Run config")."""
    return {
        "task": task,
        "variant": variant,
        "scale": MAIN_SCALE,
        "setting": BASE_SETTING,
        "seed": int(seed),
        "model": merged(section, "model", task),
        "train": merged(section, "train", task),
    }


def lra_raw_tasks(section: Mapping[str, Any] | None) -> set[str]:
    """The LRA side's raw folders the grid reads (IMDb's `text`): fetched/generated by the LRA rules."""
    return {RAW_OF_TASK[t] for t in tasks(section)} - set(ARCHIVES)


def own_sources(section: Mapping[str, Any] | None, data_source: str) -> list[str]:
    """The grid's own raw sources: real → download names (DOWNLOAD_FILES), generated → `pdelra generate`
    sources (agnews, sst2, wordpiece, wikitext103, bpe)."""
    chosen = tasks(section) + ([LM_TASK] if lm_section(section) else [])
    archives = [a for a in ARCHIVES if a in chosen]
    needs_vocab = any(t in WORDPIECE_TASKS for t in chosen)
    tokenizer = VOCAB if data_source == "real" else WORDPIECE
    lm_tokenizer = LM_TOKENIZER if data_source == "real" else BPE
    return archives + ([tokenizer] if needs_vocab else []) + ([lm_tokenizer] if LM_TASK in chosen else [])


def data_jobs(section: Mapping[str, Any] | None, data_source: str) -> dict[str, int]:
    """{rule: jobs} of the grid's data and table rules (workflow/rules/cta_official.smk), as `snakemake -n`
    plans them from scratch; none without a `cta_official` section."""
    if not section:
        return {}
    sources = own_sources(section, data_source)
    jobs = {"cta_generate": len(sources)} if data_source == "generated" else {
        "cta_fetch": len(sources),
        "cta_extract": len([s for s in sources if s in ARCHIVES]),
    }  # fmt: skip
    jobs.update(
        cta_preprocess=len(tasks(section)),
        cta_lm_preprocess=1 if lm_section(section) else 0,
        cta_official_aggregate=1,
    )
    return {rule: n for rule, n in jobs.items() if n}
