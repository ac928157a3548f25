"""Which nodes of a multi-node attempt a retry avoids: sacctmgr's node events for a NODE_FAIL
(recorded on the lab cluster), the ranks that reported a collective timeout, one rank's OOM."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.policy.output_causes import COLLECTIVE_TIMEOUT, GPU_OOM
from campaignctl.core.policy.policy import Policy, Rule
from campaignctl.core.policy.suspects import (
    NODE_EVENTS,
    RankCause,
    attempt_cause,
    failed_node_events,
    node_events_evidence,
    parse_node_events,
    suspect_nodes,
)
from campaignctl.core.spec.spec import Resources
from campaignctl.core.tick.decide import decide_task
from tests.core.test_decide import NOW

EVENTS = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm_events" / "node_down_two_node_job.txt").read_text()
GLOO = "[Gloo timeout] RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] " \
       "Timed out waiting 5000ms for recv operation to complete"


def test_the_recorded_event_names_the_node_that_went_down_not_its_healthy_partner() -> None:
    failed = failed_node_events(parse_node_events(EVENTS), "node[1-2]")
    assert node_events_evidence(failed) == "node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe"
    assert failed_node_events(parse_node_events(EVENTS), "node[3-4]") == []  # not this job's nodes


def test_a_node_that_went_down_before_the_job_started_did_not_fail_it() -> None:
    """sacctmgr's lines for a two-node NODE_FAIL on the 24.11 lab (CI run 25): trixie1 had been set
    DOWN by the test before, and was back in service when this job was given it; trixie2 went down
    under it. The query's window reaches 5 minutes before the job (clock slack), so both come back."""
    text = ("trixie1|2026-11-30T05:39:50|2026-11-30T05:39:52|DOWN|campaignctl-search-test|root(0)\n"
            "trixie2|2026-11-30T05:43:43|2026-11-30T05:43:43|DOWN|multinode-test|root(0)\n")
    started = datetime(2026, 11, 30, 5, 40, 2, tzinfo=UTC)
    failed = failed_node_events(parse_node_events(text), "trixie[1-2]", started)
    assert node_events_evidence(failed) == "trixie2|2026-11-30T05:43:43|2026-11-30T05:43:43|DOWN|multinode-test"
    assert len(failed_node_events(parse_node_events(text), "trixie[1-2]")) == 2  # no start known: both


@pytest.mark.parametrize(("nodelist", "cause", "evidence", "suspects"), [
    ("node[1-2]", NODE_EVENTS, "node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe", ["node2"]),
    ("node[1-4]", NODE_EVENTS, "node2|a|b|DOWN|x\nnode4|a|b|DOWN*+DRAIN|y", ["node2", "node4"]),
    ("node3", None, "", ["node3"]),  # a one-node NODE_FAIL: that node, as before
    ("node[1-2]", None, "", ["node1", "node2"]),  # no event recorded: every node of the attempt
    # ranks 0 and 1 on node1 waited; node2's ranks hung or died without a word
    ("node[1-2]", COLLECTIVE_TIMEOUT, f"[rank 0 on node1] {GLOO}\n[rank 1 on node1] {GLOO}", ["node2"]),
    ("node[1-2]", COLLECTIVE_TIMEOUT, f"[rank 0 on node1] {GLOO}\n[rank 2 on node2] {GLOO}", []),  # all waited
    ("node1", COLLECTIVE_TIMEOUT, GLOO, []),  # one node, unmarked: no suspect to avoid
])
def test_suspect_nodes(nodelist: str, cause: str | None, evidence: str, suspects: list[str]) -> None:
    assert suspect_nodes(nodelist, cause, evidence) == suspects


def test_one_ranks_gpu_oom_is_the_attempts_cause_whatever_the_others_printed() -> None:
    ranks = [RankCause(0, "node1", COLLECTIVE_TIMEOUT, GLOO),
             RankCause(3, "node2", GPU_OOM, "[PyTorch] CUDA out of memory")]
    assert attempt_cause(ranks, "node[1-2]") == (GPU_OOM, "[rank 3 on node2] [PyTorch] CUDA out of memory")


def test_a_collective_timeout_keeps_every_reporting_rank_and_its_node() -> None:
    ranks = [RankCause(1, "node1", COLLECTIVE_TIMEOUT, GLOO), RankCause(0, "node1", COLLECTIVE_TIMEOUT, GLOO)]
    cause, evidence = attempt_cause(ranks, "node[1-2]") or ("", "")
    assert cause == COLLECTIVE_TIMEOUT and evidence.splitlines()[0].startswith("[rank 0 on node1]")
    assert suspect_nodes("node[1-2]", cause, evidence) == ["node2"]


def test_a_one_node_attempt_keeps_rank_0s_cause_as_written() -> None:
    assert attempt_cause([RankCause(0, "node1", GPU_OOM, "e")], "node1") == (GPU_OOM, "e")
    assert attempt_cause([], "node[1-2]") is None


def failed_attempt(state: str, cause: str | None, evidence: str) -> TaskView:
    return TaskView(0, (AttemptView("s.0", 1, state, "7_0", Resources(nodes=2, tasks_per_node=2), 0, state,
                                    "node[1-2]", 30, cause=cause, evidence=evidence),))


POLICY = Policy(max_failures=6, rules={"node_fail": Rule("resubmit", max_retries=5, exclude_failed_node=True),
                       "failed": Rule("give_up")})


@pytest.mark.parametrize(("state", "cause", "evidence", "rule"), [
    ("NODE_FAIL", NODE_EVENTS, "node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe", "node_fail"),
    ("FAILED", COLLECTIVE_TIMEOUT, f"[rank 0 on node1] {GLOO}", COLLECTIVE_TIMEOUT),
])
def test_the_retry_excludes_the_suspect_node_only(state: str, cause: str, evidence: str, rule: str) -> None:
    decision = decide_task(failed_attempt(state, cause, evidence), POLICY, NOW)
    assert decision is not None and decision.rule == rule and decision.action == "resubmit"
    assert decision.resources is not None and decision.resources.exclude == "node2"
    assert "exclude None → node2" in decision.reason


def test_the_reason_names_the_node_that_failed_and_what_slurm_recorded() -> None:
    decision = decide_task(failed_attempt("NODE_FAIL", NODE_EVENTS,
                                          "node2|2026-11-24T08:30:19|2026-11-24T08:30:19|DOWN|mnprobe"), POLICY, NOW)
    assert decision is not None and decision.reason.startswith(
        "node fail of node2 (of node[1-2]: node2 DOWN at 2026-11-24T08:30:19, reason mnprobe) (attempt 1); retry 1")
