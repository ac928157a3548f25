from __future__ import annotations

import pytest

from campaignctl.adapters.yaml_source import parse_yaml
from campaignctl.core.base.errors import SpecError
from campaignctl.core.model.params import MAX_TASKS
from campaignctl.core.spec.spec import CampaignSpec, validate_spec

GOOD = """\
name: lr-sweep
command: ["python", "train.py", "--lr", "{lr}", "--depth", "{depth}"]
matrix: {lr: [0.1, 0.01], depth: [2, 4]}
env: {OMP_NUM_THREADS: "4", RUN_TAG: "d{depth}"}
resources:
  {partition: batch, gpus: 1, gpu_type: a100, cpus_per_task: 2, mem: 4G, time: "02:00:00", cpu_bind: cores}
array: {max_parallel: 8}
policy: default
budget: {gpu_hours: 100}
"""


def spec_of(text: str, base: str = "/home/u/proj") -> CampaignSpec:
    return validate_spec(parse_yaml(text, "spec.yaml"), base)


def problems_of(text: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_of(text)
    return info.value.message


def with_line(key_line: str) -> str:
    """GOOD with one top-level line replaced or added."""
    key = key_line.split(":", 1)[0]
    lines, skipping = [], False
    for ln in GOOD.splitlines():
        skipping = ln.startswith(f"{key}:") or (skipping and ln.startswith(" "))
        if not skipping:
            lines.append(ln)
    return "\n".join([*lines, key_line]) + "\n"


def test_good_spec_expands_grid_into_argv_and_env() -> None:
    spec = spec_of(GOOD)
    assert len(spec.tasks) == 4
    assert spec.tasks[3].argv == ("python", "train.py", "--lr", "0.01", "--depth", "4")
    assert spec.tasks[3].env == {"OMP_NUM_THREADS": "4", "RUN_TAG": "d4"}
    r = spec.resources
    assert (r.gres, r.cpus_per_task, r.mem_mb, r.time_min) == ("gpu:a100:1", 2, 4096, 120)
    assert spec.max_parallel == 8 and spec.budget.gpu_hours == 100
    assert spec.run_dir == "/home/u/proj/runs/lr-sweep"


def test_explicit_task_list_and_literal_braces() -> None:
    spec = spec_of('name: t\ncommand: [echo, "{{x}}", "{a}"]\ntasks: [{a: 1}, {a: two}]\n')
    assert [t.argv for t in spec.tasks] == [("echo", "{x}", "1"), ("echo", "{x}", "two")]


@pytest.mark.parametrize(("line", "fragment"), [
    ("time: 1:30:00", "line 10: time: '1:30:00' is read by YAML 1.1 as a base-60 number"),
    ("description: no", "line 10: description: 'no' is read by YAML 1.1 as a boolean"),
    ("description: 0755", "octal"),
    ("name: other", "line 10: name: duplicate key"),
])
def test_yaml_11_traps_are_errors_with_line_and_key(line: str, fragment: str) -> None:
    text = GOOD + line + "\n"
    assert fragment in problems_of(text)


@pytest.mark.parametrize(("text", "fragment"), [
    (with_line("resources: {gpus: 1, gpu_type: a100, mem: lots}"), "resources.mem: 'lots' is not a memory size"),
    (with_line("resources: {time: 5400}"), None),  # minutes, as sbatch --time reads a bare number
    (with_line("resources: {cpus: 4}"), "resources.cpus: unknown key (did you mean cpus_per_task?); allowed:"),
    (with_line("resources: {cpu_bind: magic}"), "use one of: none, cores"),
    (with_line("resources: {gpus: 100}"), "must be a whole number from 0 to 64"),
    (with_line("resources: {gpu_type: a100}"), "gpu_type: is set but gpus is 0"),
    (with_line("colour: red"), "colour: unknown key; allowed: name, command"),
    (with_line("resorces: {mem: 1G}"), "resorces: unknown key (did you mean resources?); allowed: name"),
    (with_line("command: []"), "command: is required"),
    (with_line('command: [python, "{nope}"]'), "{nope} is not a parameter of every task"),
    (with_line("tasks: [{lr: 1}]"), "give either matrix (a grid) or tasks (a list), not both"),
    (with_line("budget: {gpu_hours: -1}"), "budget.gpu_hours: must be a number above 0"),
])
def test_invalid_keys_say_what_is_allowed(text: str, fragment: str | None) -> None:
    if fragment is None:
        assert spec_of(text).resources.time_min == 5400
    else:
        assert fragment in problems_of(text)


def test_grid_size_is_bounded_before_expansion() -> None:
    values = ",".join(map(str, range(1000)))
    message = problems_of(f"name: big\ncommand: [x]\nmatrix: {{a: [{values}], b: [{values}], c: [1, 2]}}\n")
    assert f"expands to 2,000,000 tasks (1000 × 1000 × 2); at most {MAX_TASKS:,}" in message


HOSTILE = ["evil\nname", "$(touch /tmp/x)", "`id`", "a;rm -rf ~", "%x", "../up"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_campaign_names_are_rejected(value: str) -> None:
    assert "name:" in problems_of(with_line(f"name: {value!r}".replace("'", '"').replace("\n", "\\n")))


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_in_command_and_env_stay_literal_or_are_rejected(value: str) -> None:
    quoted = '"' + value.replace("\n", "\\n") + '"'
    text = with_line(f"command: [echo, {quoted}, '{{lr}}']")
    text = text.replace('RUN_TAG: "d{depth}"', f"RUN_TAG: {quoted}")
    if "\n" in value:
        message = problems_of(text)
        assert "command[1]: must not contain newline" in message
        assert "env.RUN_TAG: must not contain newline" in message
    else:  # no shell ever sees argv or env: the text arrives verbatim
        task = spec_of(text).tasks[0]
        assert task.argv[1] == value and task.env["RUN_TAG"] == value


@pytest.mark.parametrize(("value", "fragment"), [
    ("/tmp/%x/runs", "must not contain '%'"),
    ("/tmp/a\\nb", "must not contain newline"),
    ("/tmp/a\\\\b", "must not contain '\\'"),
    ("/tmp/" + "x" * 256 + "/runs", "has a component longer than 255 bytes"),  # was exit 1 (ENAMETOOLONG)
    ("/tmp/" + "é" * 128, "has a component longer than 255 bytes"),  # bytes, not characters
])
def test_hostile_paths_are_rejected(value: str, fragment: str) -> None:
    assert fragment in problems_of(with_line(f'run_dir: "{value}"'))


def test_dotdot_in_paths_is_normalised_to_an_absolute_path() -> None:
    assert spec_of(with_line('run_dir: "../../elsewhere"'), "/home/u/proj").run_dir == "/home/elsewhere"


@pytest.mark.parametrize("value", ["a\\nb", "x;y", "$(id)", "%x"])
def test_hostile_slurm_words_are_rejected(value: str) -> None:
    for key in ("partition", "account", "qos", "gpu_type"):
        text = with_line(f'resources: {{gpus: 1, {key}: "{value}"}}')
        assert f"resources.{key}:" in problems_of(text)


@pytest.mark.parametrize("name", ["SLURM_JOB_ID", "CAMPAIGNCTL_TASK", "bad-name", "1X"])
def test_reserved_or_malformed_env_names_are_rejected(name: str) -> None:
    assert f"env.{name}:" in problems_of(with_line(f'env: {{"{name}": "1"}}'))


def test_same_content_hashes_equal_regardless_of_formatting() -> None:
    reordered = GOOD.replace("policy: default\n", "") + "policy:   default\n"
    assert spec_of(GOOD).spec_hash == spec_of(reordered).spec_hash
    assert spec_of(GOOD).spec_hash != spec_of(GOOD.replace("0.01", "0.02")).spec_hash


@pytest.mark.parametrize(("resources", "layout"), [
    ("{gpus: 2}", (1, 1, "srun")),  # no nodes key: one process, as before multi-node existed
    ("{nodes: 2, gpus: 2}", (2, 2, "srun")),  # one process per GPU on each node
    ("{nodes: 2}", (2, 1, "srun")),
    ("{nodes: 4, tasks_per_node: 8, launcher: torchrun}", (4, 8, "torchrun")),
    ("{launcher: torchrun, gpus: 4}", (1, 4, "torchrun")),
])
def test_multi_node_layout(resources: str, layout: tuple[int, int, str]) -> None:
    r = spec_of(with_line(f"resources: {resources}")).resources
    assert (r.nodes, r.tasks_per_node, r.launcher) == layout


@pytest.mark.parametrize(("resources", "fragment"), [
    ("{nodes: 0}", "resources.nodes"),
    ("{nodes: 2, launcher: mpirun}", "use one of: srun, torchrun"),
    ("{nodes: 2, tasks_per_node: 0}", "resources.tasks_per_node"),
])
def test_bad_multi_node_keys_are_refused(resources: str, fragment: str) -> None:
    assert fragment in problems_of(with_line(f"resources: {resources}"))


def test_an_exclude_naming_more_nodes_than_any_cluster_has_is_an_error_and_its_nodes_are_stored() -> None:
    problems = problems_of(with_line('resources: {exclude: "n[1-100000]"}'))
    assert "resources.exclude: names 100,000 nodes, more than 10,000" in problems
    spec = spec_of(with_line('resources: {exclude: "gpu[3-4],cpu1"}'))
    assert spec.settings()["exclude"] == ["cpu1", "gpu3", "gpu4"]  # what a tick keeps out of retries


def test_telemetry_interfaces_name_the_network_a_multi_node_task_counts() -> None:
    spec = spec_of(with_line('telemetry: {interval: 5s, interfaces: [ib0, "mlx5_0:1", lo]}'))
    assert spec.telemetry_interfaces == ("ib0", "mlx5_0:1", "lo") and spec.telemetry_interval_s == 5
    assert spec_of(GOOD).telemetry_interfaces == ()  # every device-backed interface and InfiniBand port
    message = problems_of(with_line('telemetry: {interfaces: ["eth0; rm -rf ~"]}'))
    assert "telemetry.interfaces" in message and "must be a list of interface names" in message
    assert "must be a list" in problems_of(with_line("telemetry: {interfaces: eth0}"))
