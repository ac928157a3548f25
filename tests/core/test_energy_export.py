"""Energy in the Prometheus export and the efficiency cells that status --wide, results --wide and
the report share."""

from __future__ import annotations

import pytest

from campaignctl.core.policy.policy_sections import Prices
from campaignctl.core.screens.prometheus import campaign_families, exposition
from campaignctl.core.spec.spec import Resources
from campaignctl.core.usage.efficiency import (
    COLUMNS,
    AttemptUse,
    campaign_efficiency,
    cells,
    efficiency_text,
    task_efficiency,
)
from campaignctl.core.usage.telemetry import Summary
from tests.core.test_prometheus import parse_exposition, snapshot

PRICES = Prices(gpu_hour={"default": 2.0}, cpu_hour=0.1)
KWH = COLUMNS.index("kWh")
TWO_GPUS = Resources(gpus=2, cpus_per_task=2, time_min=120)


def test_energy_spend_and_budget_are_exported_in_kwh() -> None:
    spend = {"spent": {"energy_kwh": 0.55}, "committed": {"energy_kwh": 0.1}, "projected": {"energy_kwh": 2.0}}
    families, samples = parse_exposition(exposition(campaign_families(
        [snapshot(spend=spend, limits={"energy_kwh": 5.0})], last_tick=None)))
    c = next(k[1][0] for k in samples if k[0] == "campaignctl_budget_energy_kwh")
    assert samples[("campaignctl_spend_energy_kwh", (c, ("kind", "spent")))] == 0.55
    assert samples[("campaignctl_budget_energy_kwh", (c,))] == 5.0
    kind, help_text = families["campaignctl_spend_energy_kwh"]
    assert kind == "gauge" and "sacct ConsumedEnergy" in help_text and "NVML" in help_text


def test_a_task_sums_its_attempts_energy_and_says_what_measured_it() -> None:
    # Attempt 1 ran 1 h on 2 GPUs at 250 W + 300 W: 1,980,000 J = 0.55 kWh (NVML).
    # Attempt 2 ran where sacct accounts energy: 101,630 J = 0.02823 kWh (node).
    gpu = AttemptUse("OUT_OF_MEMORY", 3600, TWO_GPUS, telemetry=Summary(samples=1, gpu_energy_j=1_980_000.0))
    node = AttemptUse("COMPLETED", 122, TWO_GPUS, consumed_energy_j=101_630)
    task = task_efficiency([gpu, node], PRICES)
    assert task.energy_kwh == pytest.approx(0.55 + 0.0282306, abs=1e-6) and task.energy_source == "node+gpu"
    assert cells(task)[KWH] == "0.578 node+gpu"
    assert cells(task_efficiency([gpu], PRICES))[KWH] == "0.55 gpu"
    assert "kWh 0.55 gpu" in efficiency_text(campaign_efficiency([gpu], PRICES))


def test_no_energy_measured_shows_a_dash() -> None:
    cpu_only = AttemptUse("COMPLETED", 60, Resources(), telemetry=Summary(samples=3))
    e = task_efficiency([cpu_only], PRICES)
    assert (e.energy_kwh, e.energy_source, cells(e)[KWH]) == (None, None, "-")


def test_energy_with_gaps_between_readings_reads_as_a_lower_bound() -> None:
    gappy = AttemptUse("COMPLETED", 3600, TWO_GPUS,
                       telemetry=Summary(samples=1, gpu_energy_j=1_800_000.0, energy_gap_s=120.0))
    e = task_efficiency([gappy], PRICES)
    assert e.energy_partial and cells(e)[KWH] == "≥0.5 gpu" and e.to_dict()["energy_partial"] is True
