"""The input functions of Continuous-Time Attention's own experiments (cta_official.smk, which holds the
section's globals: CTA, CTA_RESULTS, …; they are read when the functions are called)."""

from pdelra.cta_official import grid as cta_grid  # its system's own grid: here, not in common.smk


def cta_lm_tokenizer():
    """The tokenizer.json the LM is tokenised with: TinyLlama's download, or the generated folder."""
    if config["data"]["source"] == "real":
        return f"{RAW}/downloads/{cta_grid.DOWNLOAD_FILES[cta_grid.LM_TOKENIZER]}"
    return f"{RAW}/{cta_grid.BPE}"


def cta_tokenizer(task):
    """What holds the WordPiece vocab.txt a task is tokenised with: the download, or the generated folder
    (a directory output: its files cannot be inputs themselves); none for imdb_char."""
    if task not in cta_grid.WORDPIECE_TASKS:
        return []
    if config["data"]["source"] == "real":
        return [f"{RAW}/downloads/{cta_grid.DOWNLOAD_FILES[cta_grid.VOCAB]}"]
    return [f"{RAW}/{cta_grid.WORDPIECE}"]


@declared
def cta_tokenizer_option(wildcards, input):
    if not input.tokenizer:
        return ""
    generated = config["data"]["source"] == "generated"
    tokenizer = Path(input.tokenizer[0])
    return f"--tokenizer {tokenizer / 'vocab.txt' if generated else tokenizer}"


def cta_setting(part, name):
    """cta_official.{defaults < tasks.{task}}.{part}.{name} of a job (a number when every task agrees)."""
    values = {cta_grid.merged(CTA, part, task)[name] for task in CTA["tasks"]}
    if len(values) == 1:
        return values.pop()
    return declared(lambda wildcards: cta_grid.merged(CTA, part, wildcards.cta_task)[name])
