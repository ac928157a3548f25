"""`submit --dry-run` of a search says what the search is and which trials its first tick would
ask, the values the sampler asks for with the same seed and no trials yet; it records nothing."""

from __future__ import annotations

import json
from pathlib import Path

from campaignctl.adapters.optuna_sampler import OptunaSampler
from campaignctl.services.submit import load_spec
from tests.cli.test_cli import run_cli
from tests.conftest import write_spec
from tests.core.test_search_spec import SEARCH


def test_a_search_dry_run_shows_the_trials_its_first_tick_would_ask(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SEARCH, "tune.yaml")
    done = run_cli("submit", str(spec), "--dry-run", "--json", state=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["data"]
    assert data["outcome"] == "dry-run" and data["tasks"] == 24 and data["chunks"] == []
    notes = [n for n in data["notes"] if "would ask" in n]
    search = load_spec(spec)[0].search
    assert search is not None
    first = OptunaSampler().ask(search, [], 4)
    assert len(notes) == 4 and f"trial 0: lr={first[0]['lr']:.4g} width={first[0]['width']}" in notes[0]
    assert "tpe search, 24 trials, 4 at once, min val_loss" in data["notes"][0]
    assert not (tmp_path / "campaignctl").exists()  # a dry run records nothing


def test_simulate_runs_a_search_over_the_synthetic_objective_and_says_how_close_it_came(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SEARCH, "tune.yaml")
    done = run_cli("simulate", str(spec), "--json", "--seed", "3", state=tmp_path)
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)["data"]["runs"]
    assert run["policy"] == "campaign" and run["decisions"]["search → ask"] == 24
    assert run["decisions"]["search → tell"] == 24  # the last trial told by the tick that saw it end
    assert 1.0 <= run["search"]["best"] < 1.25 and run["search"]["optimum"] == 1.0
    again = json.loads(run_cli("simulate", str(spec), "--json", "--seed", "3", state=tmp_path).stdout)
    assert again["data"]["runs"][0]["search"] == run["search"]  # the same seed: the same search
    refused = run_cli("simulate", str(spec), "--policy", "attempt-scaled", state=tmp_path)
    assert refused.returncode != 0 and "asks no trials" in refused.stderr
