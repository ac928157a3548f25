"""What placement reads (core/placement/placement.py): when each of a campaign's clusters would start
one element of its new arrays now — one `sbatch -M <cluster> --test-only` per cluster, of a script
asking what the spec asks as that cluster names it (core/spec/clusters_spec.py), once per tick with
new arrays."""

from __future__ import annotations

import tempfile
from pathlib import Path

from campaignctl.adapters import slurm
from campaignctl.adapters.submission import ArraySubmission
from campaignctl.core.placement.placement import Prediction
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.plan import ArrayChunk
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.services.dispatch import parameters


def predictions(spec: CampaignSpec, resources: Resources, task: int = 0) -> dict[str, Prediction]:
    """By cluster of `spec.clusters`, when it would start an element of task `task` asking `resources`."""
    out = {}
    chunk = ArrayChunk(task_indices=(task,), throttle=None)
    with tempfile.TemporaryDirectory(prefix="campaignctl-placement-") as tmp:
        for cluster in spec.clusters:
            params = parameters(spec.name, cluster.resources(resources), "PLACEMENT", chunk, 0,
                                spec.policy.slurm_requeue)
            script = Path(tmp) / f"{cluster.name}.sbatch"
            script.write_text(ArraySubmission(Path(tmp), "PLACEMENT", params).render())
            out[cluster.name] = Prediction(*slurm.predicted_start(str(script), cluster.name))
    return out
