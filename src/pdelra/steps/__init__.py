"""The workflow's steps after training, each a `pdelra` subcommand: aggregate the runs into tables, diagnose
trained models, render the report, version the results (data/ and training/ are the steps before)."""
