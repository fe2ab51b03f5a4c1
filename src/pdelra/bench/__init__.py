"""`pdelra bench`: benchmarks that print figures and ratios measured side by side in one process.

They are not tests: speed goals are judged from their printed ratios, never from timed assertions that
flake on a noisy machine.
"""
