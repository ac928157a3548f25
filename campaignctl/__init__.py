"""campaignctl: orchestrate ML training campaigns on Slurm."""

__version__ = "0.1.0"
