"""A metrics.from_output pattern that never matched: `status` and `results` say so, with the
pattern and the last line of output, over nanoGPT's real log (tests/fixtures/output_metrics/nanogpt.txt)
and a pattern with a typo ("valid loss" where nanoGPT prints "val loss")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from campaignctl.adapters.store import Store
from campaignctl.core.model.records import RevisionRecord
from campaignctl.core.tuning.output_metrics import compile_patterns, record_of_line
from campaignctl.services import submit as submit_service
from campaignctl.services.metric_warnings import _patterns
from campaignctl.services.reconcile import reconcile
from campaignctl.services.results import results
from campaignctl.services.status import status
from tests.conftest import write_spec
from tests.fakeslurm import FakeSlurm

NANOGPT_LOG = Path(__file__).resolve().parent.parent / "fixtures" / "output_metrics" / "nanogpt.txt"
TYPO = r"step (?P<step>\d+): train loss (?P<train_loss>[-\d.]+), valid loss (?P<val_loss>[-\d.]+)"


def finished_with_output(tmp_path: Path, fake_slurm: FakeSlurm, pattern: str) -> None:
    result = submit_service.submit(write_spec(tmp_path, f"""\
name: gpt
command: [python3, train.py]
matrix: {{lr: [0.001, 0.0006]}}
metrics: {{from_output: '{pattern}'}}
objective: {{metric: val_loss, goal: min}}
"""))
    store = Store.open()
    for attempt in store.attempts(store.campaign("gpt").id):  # type: ignore[union-attr]
        folder = tmp_path / "runs" / "gpt" / "tasks" / str(attempt.task_index) / attempt.token
        folder.mkdir(parents=True)
        shutil.copy(NANOGPT_LOG, folder / "output.log")
        # what the job-side runner appends while the program prints (adapters/output_metrics.py)
        points = [record_of_line(line, compile_patterns([pattern]), 1.0, -1) for line in NANOGPT_LOG.open()]
        (folder / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points if p))
    fake_slurm.finish(result.chunks[0].job_id or "")
    reconcile("gpt")


def test_a_pattern_that_matched_no_line_is_a_warning_in_status_and_results(
        tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    finished_with_output(tmp_path, fake_slurm, TYPO)
    last = [ln for ln in NANOGPT_LOG.read_text().splitlines() if ln.strip()][-1]
    [said] = status("gpt").unmatched
    assert said.startswith(f"metrics.from_output {TYPO!r} matched no line of the output of the 2 completed task(s) "
                           "(0-1); task 0's last line: ")
    assert repr(last[:200]) in said
    assert results("gpt").warnings == [said]


def test_a_pattern_that_matched_says_nothing(tmp_path: Path, fake_slurm: FakeSlurm) -> None:
    finished_with_output(tmp_path, fake_slurm, TYPO.replace("valid loss", "val loss"))
    assert status("gpt").unmatched == [] and results("gpt").warnings == []


def revision(text: str) -> RevisionRecord:
    return RevisionRecord(1, 1, text, "h", "spec.yaml", "2026-11-30T00:00:00+00:00")


def test_the_patterns_are_read_from_the_metrics_block_of_a_spec_of_any_size() -> None:
    grid = "tasks:\n" + "".join(f"  - {{seed: {i}}}\n" for i in range(10_000))
    block = ("metrics:\n  # the loss lines\n  from_output:\n    - 'loss (?P<loss>[\\d.]+)'\n\n"
             "    - 'acc (?P<acc>[\\d.]+)'\n")
    assert _patterns(revision(f"name: a\n{grid}{block}objective: {{metric: loss}}\n")) == [
        r"loss (?P<loss>[\d.]+)", r"acc (?P<acc>[\d.]+)"]
    assert _patterns(revision(f"name: a\nmetrics: {{from_output: 'x (?P<x>\\d+)'}}\n{grid}")) == [r"x (?P<x>\d+)"]
    assert _patterns(revision(f"name: a\n{grid}")) == []
    # a block naming an anchor defined elsewhere does not parse alone: the whole spec is read
    anchored = "name: a\ndescription: &p 'y (?P<y>\\d+)'\nmetrics: {from_output: *p}\n"
    assert _patterns(revision(anchored)) == [r"y (?P<y>\d+)"]
