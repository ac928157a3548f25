"""Python API, for notebooks: build a campaign from a dict or keyword arguments, try it, submit
it, read where it stands and which config won. It calls the same services as the command line
and raises the same exceptions (`campaignctl.core.base.errors`, each with `.message`, `.hint` and the
CLI's `.exit_code`).

The spec is rendered to YAML (`yaml.safe_dump`) and goes through the same strict reader and
validation as a spec file; that text is stored as the revision, so `campaignctl revisions`,
`rollback` and `policy replay` work on API campaigns exactly as on file ones. Its directory is
`workdir`, given explicitly: relative paths in the spec (a policy file, `run_dir`) start there,
never in a temporary directory.

    from campaignctl import api
    sweep = api.Campaign(name="lr-sweep", command=["python", "train.py", "--lr", "{lr}"],
                         matrix={"lr": [0.1, 0.01]}, resources={"mem": "2G", "time": "00:30:00"},
                         workdir="~/experiments")
    sweep.dry_run().script      # the sbatch script, nothing submitted
    sweep.submit(reason="first try")
    api.results("lr-sweep")     # plain rows, the winner first: pandas.DataFrame(...)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.spec.spec import CampaignSpec
from campaignctl.services import results as results_service
from campaignctl.services import status as status_service
from campaignctl.services.submit import SubmitResult, spec_of, submit_spec

__all__ = ["Campaign", "results", "status"]


class Campaign:
    """A campaign spec held in memory. Keyword arguments are the spec's top-level keys (name,
    command, matrix or tasks, resources, policy, budget, rungs, …: README.md#spec-reference);
    `workdir` is required, `run_dir` optional (default `runs/NAME` under workdir)."""

    def __init__(self, *, workdir: str | Path, run_dir: str | Path | None = None, **spec: Any) -> None:
        self.workdir = Path(workdir).expanduser().resolve()
        doc = {k: v for k, v in spec.items() if v is not None}
        doc["workdir"] = str(self.workdir)
        if run_dir is not None:
            doc["run_dir"] = str(run_dir)
        self.doc: dict[str, Any] = doc
        self.yaml = render(doc)
        self.spec = self._validated()

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, workdir: str | Path | None = None,
                  run_dir: str | Path | None = None) -> Campaign:
        """A spec as a dict (what a YAML spec file holds). `workdir` and `run_dir` may be given here
        or in the dict, not both; workdir must be given one way or the other."""
        data = dict(spec)
        for key, value in (("workdir", workdir), ("run_dir", run_dir)):
            if value is not None and data.get(key) is not None:
                raise SpecError([f"{key}: given both in the dict ({data[key]!r}) and as an argument ({value!r})"],
                                "campaignctl.api", f"give {key} once")
        base, own_run_dir = data.pop("workdir", None), data.pop("run_dir", None)
        base = workdir if workdir is not None else base
        if base is None:
            raise SpecError(["workdir: required (where run directories and relative paths start)"],
                            "campaignctl.api", "e.g. Campaign.from_dict(spec, workdir='~/experiments')")
        return cls(workdir=base, run_dir=run_dir if run_dir is not None else own_run_dir, **data)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def source(self) -> str:
        """What the revisions record as the spec's path: `<workdir>/<name>.yaml` (no file is
        written; the text is in the store)."""
        return str(self.workdir / f"{self.spec.name}.yaml")

    def _validated(self) -> CampaignSpec:
        source = f"campaignctl.api ({self.doc.get('name', 'unnamed')})"
        return spec_of(parse_yaml(self.yaml, source), str(self.workdir), source)

    def dry_run(self) -> SubmitResult:
        """What `submit` would do (array chunks, the sbatch script); nothing is submitted."""
        return submit_spec(self.spec, self.yaml, self.source, dry_run=True)

    def submit(self, reason: str = "") -> SubmitResult:
        """Create the campaign and submit its first tasks, or record a new revision when the spec
        changed (`reason` goes into the revision), or nothing when it did not."""
        return submit_spec(self.spec, self.yaml, self.source, reason=reason)

    def status(self) -> dict[str, object]:
        return status(self.spec.name)

    def results(self, metric: str | None = None, by: str = "last", goal: str | None = None) -> list[dict[str, object]]:
        return results(self.spec.name, metric, by, goal)


def render(doc: Mapping[str, Any]) -> str:
    """The spec as YAML text, keys in the order given. Strings that YAML 1.1 would read as
    something else (`01:00:00`, `no`) come out quoted, so the strict reader sees what was meant."""
    try:
        return yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, default_flow_style=None)
    except yaml.representer.RepresenterError as exc:
        value = exc.args[1] if len(exc.args) > 1 else exc
        raise SpecError([f"{value!r} ({type(value).__name__}) is not plain data"], "campaignctl.api",
                        "use strings, numbers, booleans, lists and dicts (str() a Path, float() a numpy number)"
                        ) from None


def status(name: str) -> dict[str, object]:
    """What `campaignctl status NAME --json` prints under `data`: the campaign, each task's row
    (state, attempts, job id, efficiency …) and its spend. Asks Slurm once."""
    return status_service.status(name).to_dict()


def results(name: str, metric: str | None = None, by: str = "last", goal: str | None = None) -> list[dict[str, object]]:
    """The rows `campaignctl results NAME --json` prints under `data.rows`: one plain row per
    config, the winner first (`pandas.DataFrame(api.results(name))`). Reads the store only."""
    return results_service.results(name, metric, by, goal).rows()
