"""A recurrent baseline on ListOps as a related system (docs/add-a-related-system.md, "A system on an LRA
task"): an LSTM and a BiLSTM trained on the processed ListOps the workflow prepares, one job per seed, its
table, one claim and its report section. Copy it into the project root and add its config section:

    parts: [lstm_part]
    rnn: {task: listops, seeds: [0, 1], steps: 20, batch_size: 16, d_model: 16, runtime: 10}

Each job names ListOps, so it waits for ListOps' processed data (its manifest.json), and the plan prices it
from its own finished runs, never from the Transformer's step time."""

import json
import math
from pathlib import Path

import pandas as pd

from pdelra.parts import TrainingJob, TrainingRule, job_asks

NAME = "rnn"  # its config section, `pdelra part run rnn`, its claims' family
TABLES = ("rnn_runs",)
RUNS = "rnn/runs"
RUN_FILE = "metrics.json"
TRAINING = (TrainingRule("rnn_train", RUNS),)
HEADING = "## A recurrent baseline on ListOps"
FAMILY = "the recurrent baseline (BiLSTM against LSTM)"
VARIANTS = ("lstm", "bilstm")


def training_jobs(config):
    """One job per (variant, seed): its run names the LRA task, its run config carries where the task's
    processed data is and how long to train."""
    section = config["rnn"]
    data = str(Path(config["data"]["processed_dir"]) / section["task"])
    keys = ("steps", "batch_size", "d_model")
    return [
        TrainingJob(
            "rnn_train",
            (section["task"], variant, "h1", "base", seed),
            {"variant": variant, "seed": seed, "data": data, **{k: section[k] for k in keys},
             "train": {"batch_size": section["batch_size"]}},
            0,
            section["runtime"],
            **job_asks(config, {}),
            runs_dir=RUNS,
        )
        for variant in VARIANTS
        for seed in section["seeds"]
    ]  # fmt: skip


def check(config):
    """Its section's problems, one line each."""
    section = config["rnn"]
    problems = [] if section.get("seeds") else ["rnn.seeds: give at least one seed"]
    if section.get("task") not in config["tasks"]:
        problems.append(f"rnn.task: {section.get('task')!r} is not one of the config's tasks")
    return problems


def run(run_config, out, device):
    """Train one model for its steps on random batches of the training split; test it; write metrics.json."""
    # torch and the data store only when a job runs: the workflow imports this module on every parse.
    import torch
    from torch import nn

    from pdelra.data.store import load_split, read_manifest

    torch.manual_seed(run_config["seed"])
    data = Path(run_config["data"])
    manifest = read_manifest(data)
    train, test = load_split(data, "train", mmap=False), load_split(data, "test", mmap=False)
    bidirectional = run_config["variant"] == "bilstm"
    d = run_config["d_model"]
    embed = nn.Embedding(manifest["vocab_size"], d)
    lstm = nn.LSTM(d, d, batch_first=True, bidirectional=bidirectional)
    head = nn.Linear(d * (2 if bidirectional else 1), manifest["num_classes"])
    parameters = [*embed.parameters(), *lstm.parameters(), *head.parameters()]
    optimizer = torch.optim.Adam(parameters, lr=3e-3)

    def logits(tokens, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            embed(tokens), lengths, batch_first=True, enforce_sorted=False
        )
        _, (hidden, _) = lstm(packed)  # the last valid step of each sequence, each direction
        return head(torch.cat(list(hidden), dim=-1))

    tokens = torch.as_tensor(train.tokens, dtype=torch.long)
    lengths, labels = torch.as_tensor(train.lengths), torch.as_tensor(train.labels)
    for _ in range(run_config["steps"]):
        batch = torch.randint(0, len(labels), (run_config["batch_size"],))
        loss = nn.functional.cross_entropy(logits(tokens[batch], lengths[batch]), labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        test_logits = logits(torch.as_tensor(test.tokens, dtype=torch.long), torch.as_tensor(test.lengths))
        accuracy = float((test_logits.argmax(-1) == torch.as_tensor(test.labels)).float().mean())
    run = {"task": data.name, "variant": run_config["variant"], "scale": "h1", "setting": "base"}
    metrics = {**run, "seed": run_config["seed"], "status": "completed", "test_accuracy": accuracy,
               "n_test": len(test.labels), "final_train_loss": loss.item(), "device": device}  # fmt: skip
    if not math.isfinite(metrics["final_train_loss"]):
        metrics["status"] = "diverged"
    (out / RUN_FILE).write_text(json.dumps(metrics))


def build(files, tables):
    """rnn_runs.csv: one row per run."""
    rows = [json.loads(Path(f).read_text()) for f in files]
    table = pd.DataFrame(rows).sort_values(["variant", "seed"])
    table.to_csv(tables / "rnn_runs.csv", index=False)


def claims(inputs):
    """One claim, judged by the pipeline's own engine (paired over seeds, pdelra.results.claims): the BiLSTM
    beats the LSTM on the task."""
    from pdelra.results import claims as C

    runs = inputs.get("rnn_runs")
    task = runs["task"].iloc[0] if runs is not None and len(runs) else "listops"
    claim = C.Difference("rnn_bilstm_vs_lstm", f"a BiLSTM beats an LSTM on {task}", "own", NAME,
                         C.Cell("bilstm"), C.Cell("lstm"), math.nan, metric=C.Metric(tasks=(task,)),
                         direction=+1)  # fmt: skip
    return [C.judge(claim, C.RunIndex(runs if runs is not None else pd.DataFrame()))]


def report(report):
    """Its section: its runs' test accuracy per variant, from its table."""
    from pdelra.reporting.display import say

    runs = report.table("rnn_runs")
    if runs.empty:
        say("_Not run._")
        return
    means = runs.groupby("variant")["test_accuracy"].mean()
    say(
        "Recurrent baseline: "
        + ", ".join(f"{v} {means[v]:.3f}" for v in VARIANTS if v in means)
        + " test accuracy."
    )
