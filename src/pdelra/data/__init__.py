"""Data for the five LRA tasks: fetch (DVC), extract, generate, preprocess, and the processed-array store.

Importing this package is cheap; the heavy pieces (numpy, Pillow) load inside the modules that need them.
"""

TASKS = ("listops", "text", "retrieval", "pathfinder", "image")
SPLITS = ("train", "val", "test")
