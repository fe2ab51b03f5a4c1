"""Data for the tasks (pdelra.tasks): fetch (DVC), extract, generate, preprocess, and the processed-array
store.

Importing this package is cheap; the heavy pieces (numpy, Pillow) load inside the modules that need them.
"""

SPLITS = ("train", "val", "test")
