"""notify on the real cluster: a campaign with a task that fails with an exit code no rule
retries (a bug) and one that succeeds, reconciled until finished; a real local HTTP server
receives the give-up and the finish exactly once each, and a command channel the same."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from campaignctl.adapters import proc
from campaignctl.services.reconcile import reconcile
from campaignctl.services.submit import submit
from tests.conftest import write_spec
from tests.integration.test_reconcile_real import HERE, history, ticking_until_finished
from tests.webhook_server import webhook

pytestmark = pytest.mark.slurm
NAME = "notify16-real"


def test_a_give_up_and_the_finish_reach_the_webhook_and_the_command_exactly_once(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    shutil.copy(HERE / "chaos_task.py", tmp_path / "chaos.py")
    got = tmp_path / "got.jsonl"
    script = tmp_path / "hook.py"
    script.write_text("import os, sys\nopen(sys.argv[1], 'a').write(os.environ['CAMPAIGNCTL_EVENT_EVENT'] + ' '"
                      " + sys.stdin.read() + '\\n')\n")
    with webhook([200]) as hook:
        submit(write_spec(tmp_path, f"""\
name: {NAME}
command: [python3, chaos.py, "{{mode}}", "1"]
tasks: [{{mode: bug}}, {{mode: ok}}]
resources: {{mem: 200M, time: "00:05:00"}}
policy: default
notify: {{webhook: '{hook.url}', command: [{sys.executable}, {script}, {got}], on: [give_up, finish]}}
"""))
        try:
            ticking_until_finished(NAME, timeout_s=300)
            for _ in range(2):  # later ticks find both events queued already
                reconcile(NAME)
        finally:
            for row in history(NAME):
                if row.job_id and row.state not in ("COMPLETED", "FAILED"):
                    proc.run(["scancel", row.job_id.split("_")[0]], check=False)
    assert hook.events() == ["give_up", "finish"]
    give_up, finish = (r.body for r in hook.received)
    assert give_up["task"] == 0 and give_up["campaign"] == NAME and give_up["status"] == "applied"
    assert "exit code 3" in str(give_up["reason"]), give_up["reason"]
    assert finish["reason"] == "every task settled: 2 task(s), 1 given up"
    lines = got.read_text().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["give_up", "finish"]
    assert json.loads(lines[0].split(" ", 1)[1]) == give_up
