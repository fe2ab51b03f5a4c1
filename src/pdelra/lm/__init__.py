"""PhysQK-AD's own experiment: a causal byte-level language model (data, model, trainer, tables)."""
