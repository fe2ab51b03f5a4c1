"""Continuous-Time Attention as its authors run it, one folder as `lm/` is for PhysQK-AD: the grid of its own
experiments (`grid`: runs, run configs, the workflow's expansion), its WikiText-103 LM run (`lm`) and the
aggregation of its runs into tables (`aggregate`: `pdelra cta-official aggregate | train-lm`). Its backbone
and operator are networks, in `pdelra.nn.cta_official`; its claims are data, in
`pdelra.results.catalogue.cta`."""
