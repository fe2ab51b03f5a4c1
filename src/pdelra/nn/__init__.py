"""The networks and their math, at the bottom of the package: the diffusion operator (`ops`, its fused
kernels `fused`), the related systems' PDE refinements (`pde_schemes`), the model and its insertion points
(`model`), Continuous-Time Attention's official backbone (`cta_official`) and the operator-theory
diagnostics as pure tensor functions (`diagnostics`). They import torch and each other, nothing of the
pipeline (data, training, results, report), as nanoGPT's model.py imports only torch."""
