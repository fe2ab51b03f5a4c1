"""`pdelra lm {prepare, train, aggregate}`: PhysQK-AD's byte-level language-model experiment, declared here
(argparse only) and run by the handlers named: pdelra.lm.data, pdelra.lm.trainer, pdelra.lm.aggregate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdelra.training.cli import add_lm_train_arguments


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("lm", help="PhysQK-AD's byte-level LM: prepare, train, aggregate")
    sub = parser.add_subparsers(dest="lm_command", metavar="STEP", required=True)

    prep = sub.add_parser("prepare", help="split a raw text corpus by document and pack byte windows")
    prep.add_argument("corpus", choices=("text", "retrieval"), help="IMDb reviews (text) or AAN (retrieval)")
    prep.add_argument("--raw", type=Path, required=True, help="the corpus's raw folder (data/raw/TASK)")
    prep.add_argument("--out", type=Path, required=True, help="processed folder (data/processed/lm_TASK)")
    prep.add_argument("--window", type=int, default=128, help="tokens per training window (seed: 128)")
    prep.add_argument("--val-fraction", type=float, default=0.05)
    prep.add_argument("--test-fraction", type=float, default=0.05)
    prep.add_argument("--seed", type=int, default=0, help="seed of the document split")
    prep.add_argument("--max-documents", type=int, default=None, help="use only the first N documents")
    prep.set_defaults(handler="pdelra.lm.data:prepare_command")

    train = sub.add_parser("train", help="train one LM run and write its metrics.json (exit 75: resume)")
    add_lm_train_arguments(
        train,
        "pdelra.lm.trainer",
        "task lm_CORPUS, variant (condition), scale, setting, seed, model, train",
        "processed LM folder (pdelra lm prepare)",
    )

    agg = sub.add_parser(
        "aggregate", help="LM runs' metrics.json → lm_runs.csv, lm_dynamics.csv, lm_history.csv"
    )
    agg.add_argument("metrics", nargs="*", type=Path, help="metrics.json files of LM runs")
    agg.add_argument("--runs", type=Path, help="also every T/V/S/SETTING/seedN/metrics.json under it")
    agg.add_argument("--out", type=Path, required=True, help="tables folder")
    agg.set_defaults(handler="pdelra.lm.aggregate:aggregate_command")
