"""Subcommands `generate`, `fetch`, `extract`, `preprocess`, `preprocess-cta`, `subset`, `data-summary`: the
data steps, declared here (argparse only) and run by the handler each names in its implementation module,
imported only when it runs: `pdelra --help` imports no numpy, Pillow or DVC.
"""

from __future__ import annotations

import argparse

from pdelra import tasks as registry
from pdelra.data.settings import (
    ABLATION_FRACTIONS,
    CTA_DEFAULT_MAX_LENGTH,
    CTA_TASKS,
    EXTRACT_SOURCES,
    generate_defaults,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    defaults = generate_defaults()
    settings = "; ".join(f"{task}: {', '.join(sorted(keys))}" for task, keys in defaults.items())
    parser = subparsers.add_parser(
        "generate",
        help="write an offline stand-in for a task's raw source, in the real on-disk format",
        description=(
            "Write a seeded, generated raw source for TASK into --out (replaced as a whole), in the same "
            "layout as the real source so `pdelra preprocess` reads both alike. Settings (--params JSON "
            f"object; unknown keys are an error): {settings}."
        ),
    )
    tasks = tuple(defaults)
    parser.add_argument("task", choices=tasks, metavar="TASK", help=f"one of {', '.join(tasks)}")
    parser.add_argument("--out", required=True, help="raw task folder to write, e.g. data/raw/listops")
    parser.add_argument(
        "--params", default="{}", help="generation settings as JSON, e.g. '{\"n_train\": 500}'"
    )
    parser.set_defaults(handler="pdelra.data.generate:generate_command")

    parser = subparsers.add_parser(
        "fetch",
        help="download a source through DVC (dvc import-url), verifying its md5",
        description=(
            "Download URL to PATH with `dvc import-url` inside the DVC project holding PATH, so PATH.dvc "
            "records the URL and content md5; re-running with PATH.dvc present runs `dvc update`. The md5 is "
            "checked against --md5 when given, otherwise against the md5 the previous fetch recorded in "
            "PATH.dvc. On a mismatch or failed download the new file is removed and the previous one kept."
        ),
    )
    parser.add_argument("--url", required=True, help="source URL (http, https, s3, ...)")
    parser.add_argument("--out", required=True, help="download path, e.g. data/raw/downloads/lra_release.gz")
    parser.add_argument("--md5", help="published md5 of the content, when there is one")
    parser.set_defaults(handler="pdelra.data.fetch:fetch_command")

    parser = subparsers.add_parser(
        "extract",
        help="stream an archive and keep only the files the tasks use",
        description=(
            "Read ARCHIVE once as a stream and write the task folders it feeds under --out: lra_release → "
            "listops/, retrieval/, pathfinder/ (Pathfinder-32 hard decoded into one packed array); imdb → "
            "text/aclImdb/; cifar10 → image/cifar-10-batches-bin/; agnews → agnews/ag_news_csv/; sst2 → "
            "sst2/SST-2/; wikitext103 → wikitext103/wikitext-103/ (tar or zip, told by content). "
            "Unsafe members (absolute paths, '..', "
            "links, devices) are refused; a truncated archive leaves earlier outputs untouched."
        ),
    )
    sources = EXTRACT_SOURCES
    parser.add_argument("source", choices=sources, metavar="SOURCE", help=f"one of {', '.join(sources)}")
    parser.add_argument("--archive", required=True, help="the downloaded archive")
    parser.add_argument(
        "--out", required=True, help="raw data folder holding one folder per task, e.g. data/raw"
    )
    parser.set_defaults(handler="pdelra.data.extract:extract_command")

    names = registry.names()
    lengths = ", ".join(f"{t.name} {t.max_length}" for t in registry.TASKS.values())
    parser = subparsers.add_parser(
        "preprocess",
        help="tokenise a task's raw files into memory-mappable arrays + manifest.json",
        description=(
            "Read TASK's raw files in their source layout (generated or real) and write "
            "{split}_{tokens,lengths,labels}.npy and manifest.json (last) into --out. Default max length: "
            f"the task's ({lengths}; per document for a two-tower task)."
        ),
    )
    parser.add_argument("task", choices=names, metavar="TASK", help=f"one of {', '.join(names)}")
    parser.add_argument("--raw", required=True, help="raw task folder, e.g. data/raw/listops")
    parser.add_argument("--out", required=True, help="processed task folder, e.g. data/processed/listops")
    parser.add_argument(
        "--max-length", type=int, default=None, help="tokens kept per document (default per task)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the carved splits (text val, pathfinder)"
    )
    parser.set_defaults(handler="pdelra.data.preprocess:preprocess_command")

    lengths = ", ".join(f"{task} {n}" for task, n in CTA_DEFAULT_MAX_LENGTH.items())
    parser = subparsers.add_parser(
        "preprocess-cta",
        help="tokenise an official-CTA task (WordPiece or the TinyLlama tokenizer) into the processed store",
        description=(
            "As the official Continuous-Time Attention code prepares its data: agnews, sst2, imdb → "
            "'[CLS] text [SEP]' WordPiece ids (BERT uncased vocab.txt) cut and padded to --max-length; "
            "imdb_char → character ids (a vocabulary of the training texts, no tokenizer file); "
            "wikitext103 → causal-LM blocks of --max-length ids (tokenizer.json, </s> after each line, "
            f"1,000-line packing batches). Default lengths: {lengths}. val and test are the split the "
            "official code evaluates on, unless --val-fraction carves val from train."
        ),
    )
    parser.add_argument("task", choices=CTA_TASKS, metavar="TASK", help=f"one of {', '.join(CTA_TASKS)}")
    parser.add_argument(
        "--raw", required=True, help="raw task folder, e.g. data/raw/agnews (imdb: data/raw/text)"
    )
    parser.add_argument("--tokenizer", help="vocab.txt (the WordPiece tasks) or tokenizer.json (wikitext103)")
    parser.add_argument("--out", required=True, help="processed task folder, e.g. data/processed/cta_agnews")
    parser.add_argument("--max-length", type=int, default=None, help="tokens per row (LM: block size)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --val-fraction's draw")
    parser.add_argument(
        "--val-fraction", type=float, default=None, help="carve val from train (a deviation from the authors)"
    )
    parser.set_defaults(handler="pdelra.data.cta:preprocess_cta_command")

    parser = subparsers.add_parser(
        "subset",
        help="a seeded fraction of a processed task's train rows (the CTA data-size ablation)",
        description=(
            "Copy a processed task folder keeping int(N * --fraction) train rows drawn with --seed; val and "
            "test unchanged; the manifest records the source manifest's hash. The official ablation uses "
            f"fractions {', '.join(map(str, ABLATION_FRACTIONS))} of WikiText-103's training blocks."
        ),
    )
    parser.add_argument("--processed", required=True, help="processed task folder to draw from")
    parser.add_argument("--out", required=True, help="processed folder to write")
    parser.add_argument("--fraction", type=float, required=True, help="share of train rows kept, in (0, 1]")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    parser.set_defaults(handler="pdelra.data.cta:subset_command")

    parser = subparsers.add_parser(
        "data-summary",
        help="what data and model size each task ran on, beside the paper's (tables/data.csv)",
        description=(
            "Write one row per task: real or generated data (source URL and md5, or the generator and its "
            "settings), split sizes and max_length from the processed manifest, the configured model beside "
            "the paper's Table 8, and whether all of it is the paper's setting. The report's data banner."
        ),
    )
    parser.add_argument(
        "--spec",
        required=True,
        help="JSON object (inline or a file): task → {manifest: PATH, source: real|generated, origin: TEXT, "
        "model: {d_model, n_layers, n_heads, batch_size}}",
    )
    parser.add_argument("--out", required=True, help="the CSV to write, e.g. results/EXP/tables/data.csv")
    parser.set_defaults(handler="pdelra.data.summary:data_summary_command")
