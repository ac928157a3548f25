"""notify through `campaignctl reconcile` and `notify test`, the fake Slurm answering and a real
local HTTP server (tests/webhook_server.py) standing in for the webhook."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from campaignctl.adapters.store import Store
from campaignctl.adapters.store_schema import notifications, ticks
from campaignctl.services import notify as notify_service
from campaignctl.services.submit import submit
from tests.conftest import run_main, write_spec
from tests.fakeslurm import FakeSlurm
from tests.webhook_server import ESCAPE, HANG, TRICKLE, TRICKLE_S, Webhook, webhook


def campaign(tmp_path: Path, notify: str, name: str = "nt") -> None:
    spec = write_spec(tmp_path, f"""\
name: {name}
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1, 2]}}
resources: {{mem: 1G, time: "00:10:00"}}
notify: {notify}
""")
    submit(spec)


def give_up_task_1(fake: FakeSlurm) -> None:
    fake.set_state(min(fake.jobs, key=int), 1, "FAILED", "1:0", "node1")  # exit 1: a bug, given up


def rows() -> list[tuple[str, str, int, str]]:
    with Store.open().engine.connect() as conn:
        n = notifications.c
        return [tuple(r) for r in conn.execute(sa.select(n.event_key, n.status, n.tries, n.last_error).order_by(n.id))]


def test_a_give_up_and_the_finish_are_told_exactly_once_on_each_channel_across_ticks(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    got = tmp_path / "got.jsonl"
    script = tmp_path / "hook.py"
    script.write_text("import sys\nopen(sys.argv[1], 'a').write(sys.stdin.read() + '\\n')\n")
    with webhook([200]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', command: [{sys.executable}, {script}, {got}]}}")
        give_up_task_1(fake_slurm)
        outputs = [run_main(monkeypatch, capsys, "reconcile", "nt") for _ in range(3)]
    assert [code for code, _, _ in outputs] == [0, 0, 0]
    assert "notify: 4 sent, 0 failed" in outputs[0][1] and "notify:" not in outputs[1][1] + outputs[2][1]
    assert hook.events() == ["give_up", "finish"]
    give_up, finish = (r.body for r in hook.received)
    assert give_up["task"] == 1 and "1" in str(give_up["reason"]) and give_up["campaign"] == "nt"
    assert finish["reason"] == "every task settled: 3 task(s), 1 given up" and finish["decision_id"] is None
    assert [json.loads(line)["event"] for line in got.read_text().splitlines()] == ["give_up", "finish"]
    assert [status for _, status, _, _ in rows()] == ["sent"] * 4


def test_a_hanging_endpoint_never_holds_back_the_ticks_decisions_and_is_tried_again_next_tick(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notify_service, "NOTIFY_BUDGET_S", 2.5)
    with webhook([HANG, 200]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', timeout: 2s, on: [give_up], retries: 3}}")
        give_up_task_1(fake_slurm)
        code, out, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
        # the 2.5 s budget holds one try of 2 s, not 4 tries × 2 s (a timing here failed under CI's load)
        assert code == 0 and hook.answered == 1
        with Store.open().engine.connect() as conn:
            assert conn.execute(sa.select(ticks.c.status)).scalars().all() == ["ok", "ok"]  # written before sending
        assert "give_up" in out and "notify: 0 sent, 0 failed, 1 left for the next tick" in out
        assert "did not answer within 2.0 s" in out and "s3cr3t" not in out and "tok3n" not in out
        ((_, status, tries, _),) = rows()
        assert (status, tries) == ("pending", 1)
        # its next try waits 5 minutes (core/screens/notify.next_try_in_s): the next tick sends nothing
        code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all")
        assert code == 0 and "notify:" not in out and hook.answered == 1
        _five_minutes_pass()
        # the campaign finished in that tick: --all reconciles no campaign now, but sends its queue
        code, out, _ = run_main(monkeypatch, capsys, "reconcile", "--all")
    assert code == 0 and "nothing-to-do" in out and "notify: 1 sent, 0 failed" in out
    assert hook.events() == ["give_up"] and rows()[0][1:3] == ("sent", 2)


def one_give_up_told(tmp_path: Path, fake: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str], answer: int | str,
                     options: str = "") -> tuple[Webhook, int, str, float]:
    """A give-up told to a webhook that answers `answer`: (the hook, reconcile's exit code and
    output, seconds the tick took)."""
    with webhook([answer]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', {options}on: [give_up]}}")
        give_up_task_1(fake)
        started = time.monotonic()
        code, out, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
        return hook, code, out, time.monotonic() - started


def _five_minutes_pass() -> None:
    """What the next tick after five minutes sees: every notice's next try is due."""
    with Store.open().engine.begin() as conn:
        conn.execute(notifications.update().where(notifications.c.next_try_at.is_not(None))
                     .values(next_try_at="2000-01-01T00:00:00+00:00"))


def test_an_outage_shorter_than_the_retries_loses_nothing_across_ticks(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The probe: every retry inside one tick (3.5 s), so a 4-second outage lost the event."""
    with webhook([503, 503, 200]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', on: [give_up], retries: 3}}")
        give_up_task_1(fake_slurm)
        first = run_main(monkeypatch, capsys, "reconcile", "nt")[1]
        assert hook.answered == 1 and "1 left for the next tick" in first  # one try per tick
        (next_try,) = _next_tries()
        assert next_try is not None
        _five_minutes_pass()
        run_main(monkeypatch, capsys, "reconcile", "--all")
        _five_minutes_pass()
        last = run_main(monkeypatch, capsys, "reconcile", "--all")[1]
    assert "notify: 1 sent, 0 failed" in last and hook.answered == 3  # 503, 503, then 200
    assert rows()[0][1:3] == ("sent", 3)


def _next_tries() -> list[str | None]:
    with Store.open().engine.connect() as conn:
        return list(conn.execute(sa.select(notifications.c.next_try_at)).scalars())


@pytest.mark.parametrize("answer", [301, 302, 307])
def test_a_redirect_is_a_failure_never_followed_as_a_get_without_the_body(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], answer: int) -> None:
    hook, _, out, _ = one_give_up_told(tmp_path, fake_slurm, monkeypatch, capsys, answer)
    assert hook.answered == 1 and "notify: 0 sent, 1 failed" in out
    assert f"answered HTTP {answer} (a redirect to https://new.example.org/…)" in out and "tok3n" not in out
    assert rows()[0][1] == "failed"


def test_an_endpoint_that_trickles_its_answer_costs_the_tick_its_timeout_not_minutes(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, code, out, took = one_give_up_told(tmp_path, fake_slurm, monkeypatch, capsys, TRICKLE, "timeout: 4s, ")
    # One byte every 3 s would last 111 s: urllib's per-read timeout never fires on it. Half of that
    # tells a deadline from no deadline on any load (the tick took 13 s at nice 10 on a busy machine).
    assert code == 0 and took < TRICKLE_S * 37 / 2, took
    assert "did not answer within 4.0 s" in out and rows()[0][1] == "pending"


def test_control_characters_from_the_endpoint_never_reach_the_terminal(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, out, _ = one_give_up_told(tmp_path, fake_slurm, monkeypatch, capsys, ESCAPE)
    shown = run_main(monkeypatch, capsys, "notify", "list", "nt")[1]
    assert "answered HTTP 500 Oops ]0;pwned[2J" in out
    assert "\x1b" not in out + shown and "\x07" not in out + shown


def test_a_4xx_is_recorded_failed_once_and_not_tried_again(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with webhook([403]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', on: [give_up]}}")
        give_up_task_1(fake_slurm)
        _, first, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
        _, second, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
        port = hook.url.split(":")[2].split("/")[0]
    assert hook.answered == 1 and "notify: 0 sent, 1 failed" in first and "notify:" not in second
    assert f"nt give_up: http://127.0.0.1:{port}/… answered HTTP 403 Forbidden" in first
    assert [r[1:] for r in rows()] == [("failed", 1, f"http://127.0.0.1:{port}/… answered HTTP 403 Forbidden")]
    code, shown, _ = run_main(monkeypatch, capsys, "notify", "list", "nt")
    assert code == 0 and shown.startswith(f"nt: webhook http://127.0.0.1:{port}/…\n")
    assert "give_up" in shown and "failed" in shown and "answered HTTP 403 Forbidden" in shown
    assert "s3cr3t" not in shown and "tok3n" not in shown


def test_notify_test_sends_a_sample_event_and_says_where_without_the_token(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with webhook([200]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}'}}")
        code, out, _ = run_main(monkeypatch, capsys, "notify", "test", "nt")
        port = hook.url.split(":")[2].split("/")[0]
    assert code == 0 and out.strip() == f"nt: sent a test event to webhook http://127.0.0.1:{port}/…"
    assert hook.events() == ["test"] and hook.received[0].body["campaign"] == "nt"
    assert rows() == []  # a test is not an event: nothing queued


def test_notify_test_exits_69_with_the_reason_when_the_endpoint_refuses(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with webhook([404]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}'}}")
        code, out, err = run_main(monkeypatch, capsys, "notify", "test", "nt")
    assert code == 69 and "error: webhook failed after 1 try(s):" in err and "answered HTTP 404 Not Found" in err
    assert "s3cr3t" not in out + err and "tok3n" not in out + err


def test_notify_test_without_a_channel_says_how_to_add_one(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    campaign(tmp_path, "null")
    code, _, err = run_main(monkeypatch, capsys, "notify", "test", "nt")
    assert code == 4 and "has no notify channel" in err and "notify: {webhook: URL}" in err


def test_a_ticks_give_ups_reach_the_webhook_as_one_event(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with webhook([200]) as hook:
        campaign(tmp_path, f"{{webhook: '{hook.url}', on: [give_up]}}")
        first = min(fake_slurm.jobs, key=int)
        for index in (0, 2):
            fake_slurm.set_state(first, index, "FAILED", "1:0", "node1")
        code, out, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
    assert code == 0 and "notify: 1 sent, 0 failed" in out
    (got,) = hook.received
    assert got.body["tasks"] == [0, 2] and got.body["task"] is None and len(list(got.body["decision_ids"])) == 2
    assert str(got.body["reason"]).startswith("2 decisions, tasks 0, 2; task 0: ")


def test_a_budget_alert_and_hold_are_told_once_each(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # three 1-GPU tasks with a 1-hour limit against 0.5 GPU-h: one running attempt commits ~1 GPU-h
    with webhook([200]) as hook:
        submit(write_spec(tmp_path, f"""\
name: tight
command: [python3, train.py]
matrix: {{seed: [0, 1, 2]}}
resources: {{gpus: 1, time: "01:00:00"}}
budget: {{gpu_hours: 0.5}}
notify: {{webhook: '{hook.url}'}}
"""))
        [job] = fake_slurm.live_jobs()
        fake_slurm.set_state(job.job_id, 0, "RUNNING")
        for i in (1, 2):
            fake_slurm.set_state(job.job_id, i, "PENDING", nodes="None assigned")
        for _ in range(3):
            assert run_main(monkeypatch, capsys, "reconcile", "tight")[0] == 0
    assert sorted(hook.events()) == ["alert", "hold"]
    hold = next(r.body for r in hook.received if r.body["event"] == "hold")
    assert hold["status"] == "applied" and hold["task"] is None and "budget" in str(hold["reason"])


def test_a_ticks_decisions_awaiting_approval_are_told_once_with_the_command_that_lists_them(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with webhook([200]) as hook:
        submit(write_spec(tmp_path, f"""\
name: gated
command: [python3, train.py, "{{i}}"]
matrix: {{i: [0, 1]}}
resources: {{mem: 1G, time: "00:10:00"}}
policy: {{use: default, approval: {{max_mem: 1200M, expire_after: 1h}}}}
notify: {{webhook: '{hook.url}'}}
"""))
        first = min(fake_slurm.jobs, key=int)
        fake_slurm.set_state(first, 0, "OUT_OF_MEMORY", "0:125", "node1")
        fake_slurm.set_state(first, 1, "PENDING", "0:0", "")
        for _ in range(2):
            assert run_main(monkeypatch, capsys, "reconcile", "gated")[0] == 0
    (got,) = hook.received  # the OOM retry and the pending sibling's resize: one tick, one event
    assert got.body["event"] == "awaiting_approval" and got.body["tasks"] == [0, 1]
    assert got.body["hint"] == "campaignctl approvals gated" and got.body["status"] == "awaiting-approval"
    assert "out of memory" in str(got.body["reason"])


def test_policy_set_keeps_the_campaigns_channel_unless_the_new_policy_names_its_own(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    campaign(tmp_path, "{webhook: 'http://127.0.0.1:9/mine', on: [finish]}")
    assert run_main(monkeypatch, capsys, "policy", "set", "nt", "conservative")[0] == 0
    store = Store.open()
    record = store.campaign("nt")
    assert record is not None and record.current_revision == 2
    kept = notify_service.notify_of(store, record)
    assert (kept.webhook, kept.on) == ("http://127.0.0.1:9/mine", ("finish",))
    team = write_spec(tmp_path, "name: team\nnotify: {command: [page-me]}\n", name="team.yaml")
    assert run_main(monkeypatch, capsys, "policy", "set", "nt", str(team))[0] == 0
    record = store.campaign("nt")
    assert record is not None and notify_service.notify_of(store, record).command == ("page-me",)
    _, shown, _ = run_main(monkeypatch, capsys, "revisions", "nt", "--diff", "1")
    assert "notify: {webhook: 'http://127.0.0.1:9/…'" in shown and "/mine" not in shown


def test_a_notice_for_a_channel_a_new_revision_dropped_is_failed_not_left_pending_forever(
        tmp_path: Path, fake_slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notify_service, "NOTIFY_BUDGET_S", 0.1)  # nothing is sent this tick
    campaign(tmp_path, "{webhook: 'http://127.0.0.1:9/old', on: [give_up]}")
    fake_slurm.set_state(min(fake_slurm.jobs, key=int), 2, "PENDING", "0:0", "")
    give_up_task_1(fake_slurm)
    run_main(monkeypatch, capsys, "reconcile", "nt")
    assert [r[1] for r in rows()] == ["pending"]
    campaign(tmp_path, "{command: [/bin/true], on: [give_up]}")  # a new revision: the webhook is gone
    _, out, _ = run_main(monkeypatch, capsys, "reconcile", "nt")
    assert "notify: 0 sent, 1 failed" in out
    assert [r[1:] for r in rows()] == [("failed", 0, "no webhook channel in the campaign's current revision")]
