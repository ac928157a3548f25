"""`campaignctl policy replay` as a user meets it: --help, --json, the table, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from tests.adapters.test_replay_fake_slurm import DEFAULT, changed_policy, run_campaign
from tests.cli.test_cli import assert_user_error, run_cli
from tests.fakeslurm import FakeSlurm


def test_policy_group_and_replay_have_help_with_an_example(tmp_path: Path) -> None:
    group = run_cli("policy", "--help", state=tmp_path)
    assert group.returncode == 0 and "replay" in group.stdout
    done = run_cli("policy", "replay", "--help", state=tmp_path)
    assert done.returncode == 0 and "Example: campaignctl policy replay" in done.stdout


def test_replay_json_envelope_and_human_report(tmp_path: Path, state_home: Path, fake_slurm: FakeSlurm) -> None:
    run_campaign(tmp_path, fake_slurm)
    done = run_cli("policy", "replay", "rp", str(DEFAULT), "--json", state=state_home)
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["schema"] == "campaignctl/v1" and envelope["command"] == "policy replay"
    data = envelope["data"]
    # the submit tick's start decision is replayed too
    assert data["identical"] and data["differences"] == [] and data["reproduced"] == 9
    assert data["policy"] == "default@v1" and data["ticks"] == 4
    same = run_cli("policy", "replay", "rp", str(DEFAULT), state=state_home)
    assert same.returncode == 0 and "no differences: 9 decision(s) reproduced" in same.stdout
    assert "history after a divergence is what actually happened" in same.stdout
    other = run_cli("policy", "replay", "rp", str(changed_policy(tmp_path)), state=state_home)
    assert other.returncode == 0, other.stderr  # a report, not a failure
    assert "out_of_memory → resubmit (mem_mb 1024 → 1536)" in other.stdout
    assert "out_of_memory → give_up" in other.stdout
    assert "delta +0.45 GPU-h" in other.stdout


def test_replay_refuses_a_bad_policy_file_and_an_unknown_campaign(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrules:\n  timeout: {time_factor: 0.5}\n")
    assert_user_error(run_cli("policy", "replay", "rp", str(bad), state=tmp_path), 3,
                      str(bad), "line 3", "rules.timeout.time_factor")
    assert_user_error(run_cli("policy", "replay", "rp", str(tmp_path / "nope.yaml"), state=tmp_path), 4,
                      "nope.yaml")
    assert_user_error(run_cli("policy", "replay", "ghost", str(DEFAULT), state=tmp_path), 4,
                      "no campaign named 'ghost'")


def test_the_old_order_file_then_campaign_still_works_with_a_note(tmp_path: Path, state_home: Path,
                                                                  fake_slurm: FakeSlurm) -> None:
    run_campaign(tmp_path, fake_slurm)
    new = run_cli("policy", "replay", "rp", str(DEFAULT), "--json", state=state_home)
    old = run_cli("policy", "replay", str(DEFAULT), "rp", "--json", state=state_home)
    assert old.returncode == 0 and json.loads(old.stdout) == json.loads(new.stdout)
    assert new.stderr == ""
    assert old.stderr == (f"note: `policy replay FILE NAME` is deprecated; the campaign comes first: "
                          f"campaignctl policy replay rp {DEFAULT}\n")
