"""A plain-process pack's task has no step and no accounting row: its fate is what its started.json
and exit.json say (core/packing/inline_fates.py), inside what its element's sacct line says. The
element here is the lab's real recording of a pack's element (tests/fixtures/sacct/pack_oom_step.txt);
the files are what adapters/inline_pack.py writes (tests/adapters/test_inline_pack.py runs it)."""

from __future__ import annotations

from dataclasses import replace

from campaignctl.core.model.slurm_states import State
from campaignctl.core.pack_plan import PackShape
from campaignctl.core.packing.inline_fates import inline_step
from campaignctl.core.packing.pack_fates import packed_observations
from campaignctl.core.slurm.sacct import observe_jobs
from campaignctl.core.slurm.sacct_records import JobObservation
from tests.core.test_pack_fates import FIXTURE, TOKENS, row

T0 = 1_764_511_200.0  # 2025-11-30T14:00:00 UTC


def element(state: State = State.RUNNING) -> JobObservation:
    """The fixture's element line, in `state`."""
    observed = observe_jobs(FIXTURE.read_text(), step_tokens=set(TOKENS))
    return replace(observed[("13359", 0)], state=state)


def ended(code: int, cause: str = "") -> dict:
    return {"returncode": code, "started_at": T0, "ended_at": T0 + 42, "node": "node3",
            **({"cause": cause, "evidence": "…"} if cause else {})}


def test_exit_json_is_the_state_a_step_would_have_had() -> None:
    running = element()
    fates = {name: inline_step(running, {"started_at": T0}, data) for name, data in {
        "done": ended(0), "bug": ended(3), "time": ended(-9, "time_limit"), "memory": ended(-9, "out_of_memory"),
        "killed": ended(-15), "odd cause": ended(1, "gpu_out_of_memory")}.items()}
    assert {n: (f.state, f.exit_code, f.exit_signal) for n, f in fates.items() if f} == {
        "done": (State.COMPLETED, 0, 0), "bug": (State.FAILED, 3, 0), "time": (State.TIMEOUT, 0, 9),
        "memory": (State.OUT_OF_MEMORY, 0, 9), "killed": (State.FAILED, 0, 15), "odd cause": (State.FAILED, 1, 0)}
    done = fates["done"]
    assert done is not None
    assert (done.elapsed_s, done.start, done.end, done.nodes) == (42, "2025-11-30T14:00:00", "2025-11-30T14:00:42",
                                                                  "node3")


def test_started_is_running_and_nothing_yet_is_the_element_s_state() -> None:
    started = inline_step(element(), {"started_at": T0, "node": "node2"}, None)
    assert started is not None and (started.state, started.nodes, started.end) == (State.RUNNING, "node2", None)
    assert inline_step(element(), None, None) is None
    assert inline_step(element(), "not json", ["nor this"]) is None


def test_in_a_pack_a_task_that_never_ended_gets_its_element_s_fate() -> None:
    files = {TOKENS[0]: ({"started_at": T0}, ended(0)), TOKENS[1]: ({"started_at": T0}, None),
             TOKENS[2]: (None, None), TOKENS[3]: ({"started_at": T0}, ended(-9, "out_of_memory"))}
    shape = {"7fb17c3a6939": (PackShape(4, cpus=1, processes=2), 4)}
    read = lambda r: files[r.token]  # noqa: E731
    rows = [row(i) for i in range(4)]
    observed = observe_jobs(FIXTURE.read_text(), step_tokens=set(TOKENS))
    for state, then in ((State.RUNNING, [State.COMPLETED, State.RUNNING, State.RUNNING, State.OUT_OF_MEMORY]),
                        (State.COMPLETED, [State.COMPLETED, State.FAILED, State.FAILED, State.OUT_OF_MEMORY]),
                        (State.TIMEOUT, [State.COMPLETED, State.TIMEOUT, State.TIMEOUT, State.OUT_OF_MEMORY])):
        observed[("13359", 0)] = element(state)
        fates = packed_observations(rows, observed, shape, read)
        assert [fates[t].state for t in TOKENS[:4]] == then, state
    observed[("13359", 0)] = element(State.PENDING)
    assert all(f.state is State.PENDING for f in packed_observations(rows, observed, shape, read).values())
