"""Several clusters behind one slurmdbd: job ids qualified by cluster, squeue/sacct/--test-only
output of both (recorded on the lab, tests/fixtures/clusters), placement, and `clusters:`."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.placement.placement import Placer, Prediction
from campaignctl.core.resources import Resources
from campaignctl.core.slurm import job_ref
from campaignctl.core.slurm.clusters import UNREACHABLE, observe_clusters, split_by_cluster
from campaignctl.core.slurm.clusters import test_only_start as read_test_only
from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.spec.clusters_spec import ClusterSpec, clusters_from_settings
from campaignctl.core.spec.spec import CampaignSpec, validate_spec

FIXTURES = Path(__file__).parent.parent / "fixtures" / "clusters"
VERSIONS = ("22.05", "24.11")


def validate_text(text: str) -> CampaignSpec:
    return validate_spec(parse_yaml(text, "spec.yaml"), "/home/u/proj")


def test_a_qualified_job_id_keeps_its_cluster_and_a_plain_one_is_the_default_clusters() -> None:
    assert job_ref.split("lab2:12_3") == ("lab2", "12_3")
    assert job_ref.split("12_3") == ("", "12_3")
    assert job_ref.plain("lab2:12_[3,5]") == "12_[3,5]"
    assert job_ref.qualified("", "12") == "12" and job_ref.qualified("lab2", "12") == "lab2:12"
    assert sorted(["lab2:9", "10", "lab2:10", "9"], key=job_ref.order) == ["9", "10", "lab2:9", "lab2:10"]


@pytest.mark.parametrize("version", VERSIONS)
def test_squeue_of_two_clusters_is_read_by_cluster_and_a_cluster_with_no_job_still_answered(version: str) -> None:
    sections = split_by_cluster((FIXTURES / f"squeue_two_clusters_{version}.txt").read_text())
    assert sections["lab"] == []  # it answered: nothing of ours there
    assert len(sections["lab2"]) == 6 and all(line[0].isdigit() for line in sections["lab2"])
    assert "lab3" not in sections  # a cluster that did not answer has no section



@pytest.mark.parametrize("version", VERSIONS)
def test_a_cluster_whose_slurmctld_hangs_has_a_heading_but_did_not_answer(version: str) -> None:
    """squeue prints a cluster's heading before it asks; a slurmctld that is registered but does
    not answer leaves the heading with no column header under it. Read as an answer with no job,
    its queued jobs looked gone (a pending one could be declared lost and run twice)."""
    text = (FIXTURES / f"squeue_two_clusters_one_hung_{version}.txt").read_text()
    assert "CLUSTER: lab2" in text and "Socket timed out" in (
        FIXTURES / f"squeue_two_clusters_one_hung_{version}.stderr").read_text()
    sections = split_by_cluster(text)
    assert list(sections) == ["lab"] and len(sections["lab"]) == 1  # lab answered with its one job

@pytest.mark.parametrize("version", VERSIONS)
def test_the_same_job_id_on_two_clusters_never_mixes(version: str) -> None:
    lines = (FIXTURES / f"sacct_colliding_ids_{version}.txt").read_text().splitlines(keepends=True)
    job = lines[0].split("|")[1].split("_")[0]
    wanted = {(job, 0), (job, 1), (f"lab2:{job}", 0), (f"lab2:{job}", 1)}
    seen = observe_clusters(iter(lines), wanted, "lab", lambda rest, want: observe_jobs(rest, want))
    assert {seen[(job, i)].state.value for i in (0, 1)} == {"COMPLETED"}  # lab's, plain: the default cluster
    assert {(seen[(f"lab2:{job}", i)].state.value, seen[(f"lab2:{job}", i)].exit_code) for i in (0, 1)} == {
        ("FAILED", 3)}
    # a campaign that names lab among its clusters reads the same plain ids; nothing of lab2 leaks in
    only_lab = observe_clusters(iter(lines), {(job, 0)}, "lab", lambda rest, want: observe_jobs(rest, want))
    assert list(only_lab) == [(job, 0)] and only_lab[(job, 0)].nodes.startswith(("node", "trixie"))


@pytest.mark.parametrize("version", VERSIONS)
def test_test_only_says_when_a_cluster_would_start_a_job_or_why_not(version: str) -> None:
    when, why = read_test_only(0, (FIXTURES / f"test_only_start_{version}.txt").read_text())
    assert when is not None and when.startswith("2026-11-30T01:47:08") and why == ""
    when, why = read_test_only(1, (FIXTURES / f"test_only_drained_{version}.txt").read_text())
    assert when is None and why == "Requested node configuration is not available"
    assert read_test_only(1, (FIXTURES / "test_only_unreachable_24.11.txt").read_text()) == (None, UNREACHABLE)


def test_placement_takes_the_earliest_start_and_shares_a_tie_between_idle_clusters() -> None:
    soon, later = "2026-11-30T02:00:00+00:00", "2026-11-30T03:00:00+00:00"
    placer = Placer(["lab", "lab2"], {"lab": Prediction(later), "lab2": Prediction(soon)})
    assert [placer.place(50).cluster for _ in range(3)] == ["lab2"] * 3
    tie = Placer(["lab", "lab2"], {"lab": Prediction(soon), "lab2": Prediction("2026-11-30T02:00:30+00:00")})
    assert [tie.place(n).cluster for n in (100, 100, 40, 60)] == ["lab", "lab2", "lab", "lab2"]
    drained = Placer(["lab", "lab2"], {"lab": Prediction(None, "Requested node configuration is not available"),
                                       "lab2": Prediction(later)})
    placed = drained.place(10)
    assert placed.cluster == "lab2" and "lab: Requested node configuration" in placed.why
    assert placed.evidence["predictions"] == {"lab": {"why": "Requested node configuration is not available"},
                                              "lab2": {"start": later}}
    down = Placer(["lab", "lab2"], {"lab": Prediction(None, UNREACHABLE), "lab2": Prediction(None, "refused")})
    assert down.place(1).cluster == "lab2"  # it answered: its refusal is retried like any other


def test_clusters_in_the_spec_name_what_differs_and_are_checked() -> None:
    spec = validate_text("name: mc\ncommand: [python, t.py]\nresources: {gpus: 1, gpu_type: a100, partition: batch}\n"
                         "clusters: [lab, {name: lab2, partition: gpu, gpu_type: a100_80g}]\n")
    lab, lab2 = spec.clusters
    base = Resources(partition="batch", gpus=1, gpu_type="a100")
    assert lab.resources(base) == base
    assert (lab2.resources(base).partition, lab2.resources(base).gpu_type) == ("gpu", "a100_80g")
    assert clusters_from_settings(spec.settings()["clusters"]) == spec.clusters
    assert ClusterSpec("x", gpu_type="h100").resources(Resources()).gpu_type is None  # no GPUs asked: no type
    with pytest.raises(SpecError) as bad:
        validate_text("name: mc\ncommand: [python, t.py]\nclusters: [lab, 'a:b', lab, {name: c, queue: x}]\n")
    text = str(bad.value)
    assert "'a:b' is not allowed" in text and "names a cluster twice: lab" in text and "unknown key" in text
