"""campaignctl: orchestrate ML training campaigns on Slurm.

In a training script: `import campaignctl; campaignctl.report(step=100, val_loss=0.41)`.
"""

from campaignctl.task_metrics import report

__version__ = "0.1.0"
__all__ = ["__version__", "report"]
