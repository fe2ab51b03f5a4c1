"""pdelra: where to add PDE diffusion in Transformers, reproduced on the Long Range Arena."""

__version__ = "0.1.0"
