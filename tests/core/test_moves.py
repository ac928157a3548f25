"""Moving pending work to another of the campaign's clusters, as tables: who moves, who stays and
why, how the move's cancel becomes a resubmission on the other cluster, and what a cluster that
does not answer makes of its jobs."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime

from campaignctl.core.decisions.action_records import Cancel
from campaignctl.core.decisions.actions import plan_actions
from campaignctl.core.decisions.decision import AttemptView, TaskView
from campaignctl.core.decisions.requests import LoggedRequest, standing_requests, with_requests
from campaignctl.core.model.records import HistoryRow
from campaignctl.core.model.slurm_states import State
from campaignctl.core.nodes.ledger import Exclusion
from campaignctl.core.placement.moves import MoveFacts, decide_moves
from campaignctl.core.placement.placement import Prediction
from campaignctl.core.policy.placement_section import Placement
from campaignctl.core.policy.policy import Policy
from campaignctl.core.resources import Resources
from campaignctl.core.slurm.clusters import unheard_as_unknown
from campaignctl.core.slurm.sacct import Observed
from campaignctl.core.spec.clusters_spec import ClusterSpec
from campaignctl.core.tick.decide import decide
from tests.core.test_decide import POLICY

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ASKED = Resources(partition="batch", cpus_per_task=1)
CLUSTERS = (ClusterSpec("lab"), ClusterSpec("lab2", partition="gpu"))
SOON = "2026-11-30T12:01:00+00:00"
STARTS_SOON = Prediction(SOON)
NO_ANSWER = Prediction(None, "")  # lab's own prediction not read


def pending(index: int, job_id: str, resources: Resources = ASKED) -> TaskView:
    return TaskView(index, (AttemptView(f"t.{index}", 1, "PENDING", job_id, resources),))


def facts(queued: dict[str, tuple[str, str]], answered: frozenset[str] = frozenset({"lab", "lab2"}),
          lab2: Prediction = STARTS_SOON, lab: Prediction = NO_ANSWER) -> MoveFacts:
    return MoveFacts(CLUSTERS, ASKED, "lab", answered, queued, {"lab": lab, "lab2": lab2})


def test_an_element_of_a_drained_partition_moves_and_one_waiting_for_us_or_without_an_estimate_stays() -> None:
    views = [pending(0, "12_0"), pending(1, "12_1"), pending(2, "12_2"), pending(3, "12_3"), pending(4, "12_4")]
    seen = facts({"12_0": ("N/A", "ReqNodeNotAvail, UnavailableNodes:node[1-4]"),
                  "12_1": ("N/A", "JobArrayTaskLimit"),  # the array's own throttle: ours, not the cluster's
                  "12_2": ("N/A", "Priority"),  # no estimate yet (lab's prediction: none either)
                  "12_3": ("2026-11-30T12:10:00", "Resources"),  # 10 min away: not worth 30
                  "12_4": ("2026-11-30T15:00:00", "Resources")})  # 3 h away, lab2 now: moved
    moved = decide_moves(views, seen, Placement(), NOW, {}, set())
    assert [(d.task_index, d.action, d.rule) for d in moved] == [(0, "cancel", "move"), (4, "cancel", "move")]
    # no estimate from squeue, but lab refuses a new one (its nodes drained): 12_2 waits for ever too
    drained = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
    both = MoveFacts(CLUSTERS, ASKED, "lab", frozenset({"lab", "lab2"}), {"12_2": ("N/A", drained)},
                     {"lab": Prediction(None, "Requested node configuration is not available"), "lab2": STARTS_SOON})
    assert [d.task_index for d in decide_moves(views, both, Placement(), NOW, {}, set())] == [2]
    # lab would start a new one in 5 min: an element with no estimate of its own is not moved for 4 min
    busy = MoveFacts(CLUSTERS, ASKED, "lab", frozenset({"lab", "lab2"}), {"12_2": ("N/A", "Priority")},
                     {"lab": Prediction("2026-11-30T12:05:00+00:00"), "lab2": STARTS_SOON})
    assert decide_moves(views, busy, Placement(), NOW, {}, set()) == []
    first = moved[0]
    assert isinstance(first.typed, Cancel) and first.typed.only_if == "PENDING" and first.typed.to_cluster == "lab2"
    assert first.resources is not None and first.resources.partition == "gpu"  # as lab2 names it
    assert first.inputs["predictions"] == {"lab": {"why": ""}, "lab2": {"start": SOON}}
    assert "not expected to start (ReqNodeNotAvail" in first.reason and "179 min sooner" in moved[1].reason


def test_nothing_moves_off_a_cluster_that_did_not_answer_nor_twice_nor_onto_a_cluster_that_refuses() -> None:
    view = [pending(0, "12_0")]
    drained = {"12_0": ("N/A", "ReqNodeNotAvail")}
    assert decide_moves(view, facts(drained, answered=frozenset({"lab2"})), Placement(), NOW, {}, set()) == []
    assert decide_moves(view, facts(drained), Placement(), NOW, {0: 1}, set()) == []  # max_moves 1
    assert decide_moves(view, facts(drained), Placement(), NOW, {}, {"t.0"}) == []  # its cancel is asked already
    assert decide_moves(view, facts(drained, lab2=Prediction(None, "refused")), Placement(), NOW, {}, set()) == []
    assert decide_moves(view, facts(drained), Placement(move_margin_s=0), NOW, {}, set()) == []  # off


def test_a_moved_elements_cancel_is_resubmitted_on_the_other_cluster_and_is_no_failure() -> None:
    new = Resources(partition="gpu", cpus_per_task=1)
    request = LoggedRequest(0, "t.0", "move", "cancel", {"only_if": "PENDING", "replacement": asdict(new),
                                                        "to_cluster": "lab2"}, "pending on lab", "applied")
    cancelled = TaskView(0, (AttemptView("t.0", 1, "CANCELLED", "12_0", ASKED, slurm_state="CANCELLED by 0"),))
    [d] = decide(with_requests([cancelled], standing_requests([request])), Policy(), NOW)
    assert (d.rule, d.action, d.resources) == ("move", "resubmit", new)
    plan = plan_actions([d], lambda token: "12", 101, None, lambda: "tok")
    assert [(g.cluster, g.chunk.task_indices) for g in plan.resubmits] == [("lab2", (0,))]
    # an ordinary retry goes where its task's last attempt ran: lab2:12's cluster
    retry = plan_actions([d.__class__(0, "t.0", "timeout", "resubmit", "", {}, d.typed.__class__(), ASKED)],
                         lambda token: "lab2:12", 101, None, lambda: "tok")
    assert [g.cluster for g in retry.resubmits] == ["lab2"]


def test_a_cluster_that_did_not_answer_makes_its_jobs_unknown_never_lost() -> None:
    row = HistoryRow(1, 0, 1, 3, "s.0", "lab2:12_3", "RUNNING", "RUNNING", None, "nodeb1", 40, "", None, None,
                     "{}", "s", "released", "2026-11-30T11:00:00+00:00")
    home = HistoryRow(2, 1, 1, 3, "h.0", "12_3", "RUNNING", "RUNNING", None, "node1", 40, "", None, None,
                      "{}", "h", "released", "2026-11-30T11:00:00+00:00")
    seen = unheard_as_unknown([row, home], Observed(), {"lab2"}, "lab")
    assert list(seen) == [("lab2:12", 3)]  # the default cluster answered: its job is read as sacct says
    obs = seen[("lab2:12", 3)]
    assert (obs.state, obs.slurm_state, obs.nodes, obs.end) == (State.UNKNOWN, "RUNNING", "nodeb1", None)


def test_nodes_left_out_on_one_cluster_stay_out_of_its_own_work_only_and_a_move_leaves_them_behind() -> None:
    """Node names are a cluster's own: Slurm refuses a job whose --exclude names a node it lacks."""
    def node_fail(index: int, job_id: str, node: str) -> TaskView:
        return TaskView(index, (AttemptView(f"t.{index}", 1, "NODE_FAIL", job_id, ASKED, slurm_state="NODE_FAIL",
                                            nodes=node, ended_at="2026-11-30T11:00:00+00:00"),))
    waiting = [pending(2, "40_0"), pending(3, "lab2:7_0")]
    tasks = [node_fail(0, "lab2:5_0", "nodeb1"), node_fail(1, "31_1", "node3"), *waiting]
    ledger = Exclusion(nodes=("node4",), why={"node4": "node4 failed 2 attempts"})
    decided = decide(tasks, replace(POLICY, campaign_exclude_after=1), NOW, ledger=ledger)
    excludes = {(d.task_index, d.action): d.resources.exclude for d in decided if d.resources}
    assert excludes == {(0, "resubmit"): "nodeb1",  # lab2's node; the ledger (lab's) says nothing there
                        (1, "resubmit"): "node3,node4",
                        (2, "resize_pending"): "node3,node4", (3, "resize_pending"): "nodeb1"}
    assert "node ledger" not in next(d.reason for d in decided if d.task_index == 0)
    # moved to lab2, an element pending on lab with lab's nodes left out asks for what the spec asks
    left_out = pending(0, "12_0", replace(ASKED, exclude="node3,node4"))
    [move] = decide_moves([left_out], facts({"12_0": ("N/A", "ReqNodeNotAvail")}), Placement(), NOW, {}, set())
    assert move.resources is not None and move.resources.exclude is None and move.resources.partition == "gpu"
    assert move.inputs["asked"] == {"partition": "batch", "gpu_type": None, "account": None, "qos": None,
                                    "constraint": None, "exclude": None}
