"""The demo campaign, simulated, decides what the real-cluster demo decided: the same (task,
rule, action) set (tests/fixtures/sim/README.md says how both fixtures were made)."""

from __future__ import annotations

import json
from pathlib import Path

from campaignctl.services.simulate import simulate

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "sim"


def test_the_simulated_demo_makes_the_real_demos_decisions() -> None:
    real = json.loads((FIXTURES / "demo_decisions.json").read_text())["decisions"]
    result = simulate(REPO / "templates" / "demo.yaml", ["campaign"], str(FIXTURES / "demo_trace.csv"), 1, None,
                      tracked=True)
    run = result.runs[0]
    assert sorted(run.decided) == sorted((d["task"], d["rule"], d["action"]) for d in real)
    assert run.outcomes == {"completed": 8}
    assert run.attempts == 12  # as `campaignctl status demo` said: 8 tasks, 12 attempts
