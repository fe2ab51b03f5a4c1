"""What a workflow config runs and costs: the grid of jobs (experiment), the config's checks, the plan of
jobs and device-hours, and what a Slurm site allows."""
