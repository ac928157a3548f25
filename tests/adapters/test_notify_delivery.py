"""Delivery against a real local HTTP server (tests/webhook_server.py) and real commands."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from campaignctl.adapters.notify import USER_AGENT, deliver
from campaignctl.core.screens.notify import Event
from tests.webhook_server import GARBAGE, HANG, webhook

EVENT = Event("7/give_up/tick9", "lr-sweep", "give_up", 3, (3,), "exit code 1 is not in retry_exit_codes: a bug",
              42, (42,), "2026-11-24T05:00:00+00:00", 2, "applied", "campaignctl log show lr-sweep --task 3")


def far() -> float:
    return time.monotonic() + 60


def test_a_webhook_gets_the_event_as_json_with_content_type_and_user_agent() -> None:
    with webhook([200]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 4, far())
    assert (result.ok, result.tries) == (True, 1)
    (got,) = hook.received
    assert got.body == EVENT.to_dict() and got.body["event"] == "give_up" and got.body["task"] == 3
    assert got.headers["Content-Type"] == "application/json" and got.headers["User-Agent"] == USER_AGENT
    assert got.path == "/hooks/T0/B0/s3cr3t-token?key=tok3n"


def test_a_5xx_is_tried_again_and_the_retry_succeeds() -> None:
    with webhook([500, 503, 200]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 4, far())
    assert (result.ok, result.tries, hook.answered) == (True, 3, 3)


def test_a_4xx_is_final_and_never_tried_again_and_the_token_is_not_in_the_error() -> None:
    with webhook([404, 200]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 4, far())
        port = hook.url.split(":")[2].split("/")[0]
    assert (result.ok, result.final, result.tries, hook.answered) == (False, True, 1, 1)
    assert result.error == f"http://127.0.0.1:{port}/… answered HTTP 404 Not Found"
    assert "s3cr3t" not in result.error and "tok3n" not in result.error


def test_429_too_many_requests_is_tried_again() -> None:
    with webhook([429, 200]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 4, far())
    assert (result.ok, result.tries) == (True, 2)


def test_a_hanging_endpoint_costs_the_timeout_per_try_and_no_more_than_the_deadline() -> None:
    with webhook([HANG]) as hook:
        started = time.monotonic()
        result = deliver("webhook", hook.url, EVENT, 1, 4, time.monotonic() + 2.5)
        took = time.monotonic() - started
    # the second try gets what is left of the deadline, at most its 1 s (0.9 s on a loaded machine)
    assert not result.ok and not result.final and re.search(r"did not answer within (1\.0|0\.\d) s", result.error)
    # 1 s, wait 0.5 s, 1 s; a third try would pass the deadline. The endpoint hangs 30 s: a try that
    # ignored its timeout would take that long, whatever the machine's load.
    assert result.tries == 2 and took < 20


def test_a_refused_connection_is_tried_again_then_reported() -> None:
    with webhook([200]) as hook:
        url = hook.url
    result = deliver("webhook", url, EVENT, 2, 3, far())  # the server is gone: connection refused
    assert (result.ok, result.final, result.tries) == (False, False, 3)
    assert "ConnectionRefusedError" in result.error and "s3cr3t" not in result.error


def test_an_answer_that_is_not_http_is_a_failure_tried_again_not_a_crash() -> None:
    with webhook([GARBAGE, 200]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 4, far())
    assert (result.ok, result.tries) == (True, 2)
    with webhook([GARBAGE]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, 1, far())
    assert not result.ok and result.error.endswith(": BadStatusLine")


def test_no_try_is_started_past_the_deadline() -> None:
    result = deliver("webhook", "http://127.0.0.1:9/x", EVENT, 5, 4, time.monotonic())
    assert (result.ok, result.tries) == (False, 0)


def command(tmp_path: Path, body: str) -> tuple[str, ...]:
    script = tmp_path / "hook.py"
    script.write_text("import json, os, sys\n" + body)
    return (sys.executable, str(script), str(tmp_path / "got.json"))


def test_a_command_reads_the_event_on_stdin_and_as_environment_variables(tmp_path: Path) -> None:
    argv = command(tmp_path, "event = json.load(sys.stdin)\n"
                             "env = {k: v for k, v in os.environ.items() if k.startswith('CAMPAIGNCTL_EVENT_')}\n"
                             "json.dump({'stdin': event, 'env': env}, open(sys.argv[1], 'w'))\n")
    result = deliver("command", argv, EVENT, 10, 1, far())
    assert (result.ok, result.tries) == (True, 1)
    got = json.loads((tmp_path / "got.json").read_text())
    assert got["stdin"] == EVENT.to_dict()
    assert got["env"]["CAMPAIGNCTL_EVENT_EVENT"] == "give_up" and got["env"]["CAMPAIGNCTL_EVENT_TASK"] == "3"
    env = got["env"]
    assert env["CAMPAIGNCTL_EVENT_DECISION_ID"] == "42" and env["CAMPAIGNCTL_EVENT_CAMPAIGN"] == "lr-sweep"


def test_a_command_that_exits_non_zero_is_reported_with_its_last_stderr_line(tmp_path: Path) -> None:
    argv = command(tmp_path, "sys.stdin.read()\nprint('pager: queue full', file=sys.stderr)\nsys.exit(3)\n")
    result = deliver("command", argv, EVENT, 10, 2, far())
    assert (result.ok, result.final, result.tries) == (False, False, 2)
    assert result.error == f"command {sys.executable} exited 3: pager: queue full"


def test_a_command_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    argv = command(tmp_path, "import subprocess\n"
                             "child = subprocess.Popen(['sleep', '30'])\n"
                             "open(sys.argv[1], 'w').write(str(child.pid))\nchild.wait()\n")
    started = time.monotonic()
    result = deliver("command", argv, EVENT, 1, 1, far())
    assert not result.ok and "did not finish within 1.0 s" in result.error
    assert time.monotonic() - started < 20  # not the grandchild's 30 s
    grandchild = int((tmp_path / "got.json").read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]


def test_a_command_that_exits_0_leaving_a_child_behind_is_delivered_once(tmp_path: Path) -> None:
    """Issue 40's probe: the child kept the stderr pipe open, so the command's exit looked like a
    timeout and it was run again at each backoff."""
    argv = command(tmp_path, "import subprocess\nsys.stdin.read()\n"
                             "open(sys.argv[1], 'a').write('ran\\n')\n"
                             "subprocess.Popen(['sleep', '30'])\n")  # inherits stderr; not waited for
    started = time.monotonic()
    result = deliver("command", argv, EVENT, 3, 2, far())
    assert (result.ok, result.tries) == (True, 1), result.error
    assert (tmp_path / "got.json").read_text() == "ran\n" and time.monotonic() - started < 20  # not the child's 30 s


def test_a_missing_program_is_reported_not_raised(tmp_path: Path) -> None:
    result = deliver("command", (str(tmp_path / "nope"),), EVENT, 5, 1, far())
    assert not result.ok and result.error.endswith("No such file or directory")


@pytest.mark.parametrize("retries", [0, 2])
def test_tries_are_bounded_by_what_the_caller_allows(retries: int) -> None:
    with webhook([500]) as hook:
        result = deliver("webhook", hook.url, EVENT, 5, retries + 1, far())
    assert result.tries == hook.answered == retries + 1
