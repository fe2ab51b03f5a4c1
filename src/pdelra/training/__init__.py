"""Training: one run of the paper's recipe (Tables 8-9), deterministic, resumable and cost-metered.

Modules, one job each:
    runconfig   validate and hash the run config (no torch)
    runner      the training loop; `train_run(cfg, data_dir, out_dir, ckpt_dir, device) -> exit status`
    batches     seeded per-epoch shuffle, batches trimmed to their longest sequence
    schedule    linear warmup + cosine decay
    checkpoint  atomic checkpoint files; resume only a checkpoint of the same run
    seeding     run seed n → Python/NumPy/PyTorch seeds 42+n / 0+n / 1+n; RNG state capture
    interrupts  SIGTERM/SIGUSR1 → checkpoint and exit 75
    device      the single CUDA-or-CPU decision and what follows from it
    metrics     metrics.json fields, provenance, atomic JSON writes
    progress    tqdm at a terminal, periodic log lines in batch jobs
    cli         `pdelra train`
"""
