"""The parity task: is the number of 1s in a bit string odd? Its registry record (docs/add-a-task.md)."""

from pdelra.tasks import Task, register

register(
    Task(
        name="parity",
        label="Parity",
        source=None,
        format="TSV of label and bit string per split",
        max_length=64,
        num_classes=2,
        vocab_size=3,
        splits={"train": 64, "val": 32, "test": 32},
        generator="parity_data:generate",
        reader="parity_data:read",
        generate={"length": 64},
    )
)
