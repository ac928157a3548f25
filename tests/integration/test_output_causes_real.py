"""Program-output causes on the real cluster: a program printing a real GPU OOM traceback is
retried with a smaller batch (and more accumulation) until it fits; without params or a roomier
GPU it is given up with a hint; a site pattern (NCCL watchdog) gets its own rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from campaignctl.services.submit import submit
from tests.conftest import logged, write_spec
from tests.integration.test_real_cluster import cli
from tests.integration.test_reconcile_real import history, ticking_until_finished
from tests.lab_nodes import nodes_with

pytestmark = pytest.mark.slurm
HERE = Path(__file__).parent
FIXTURES = HERE.parent / "fixtures" / "output"
HALVING = "{batch: {factor: 0.5, min: 1}, grad_accum: {factor: 2}}"


def program(tmp_path: Path) -> None:
    shutil.copy(HERE / "gpu_oom_task.py", tmp_path / "prog.py")
    shutil.copy(FIXTURES / "torch24_cuda_oom_then_second_exception.txt", tmp_path / "oom.txt")
    shutil.copy(FIXTURES / "nccl_watchdog_timeout.txt", tmp_path / "nccl.txt")


def campaign(tmp_path: Path, name: str, tasks: str, policy: str,
             resources: str = "{cpus_per_task: 1, mem: 200M, time: \"00:05:00\"}", extra_args: str = "") -> str:
    program(tmp_path)
    submit(write_spec(tmp_path, f"""\
name: {name}
command: [python3, prog.py, --batch, "{{batch}}", --grad-accum, "{{grad_accum}}", --fail, "{{fail}}"{extra_args}]
{tasks}
resources: {resources}
policy: {policy}
""", name=f"{name}.yaml"))
    return name


def test_a_real_gpu_oom_traceback_is_retried_with_a_smaller_batch_until_it_fits(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    name = campaign(tmp_path, "oomfit", "matrix: {batch: [64], grad_accum: [1], fail: [oom]}",
                    f"{{use: default, rules: {{gpu_out_of_memory: {{params: {HALVING}}}}}}}")
    ticking_until_finished(name)

    rows = history(name)
    assert [r.state for r in rows] == ["FAILED", "FAILED", "COMPLETED"]
    assert [r.cause for r in rows] == ["gpu_out_of_memory", "gpu_out_of_memory", None]
    assert "torch.OutOfMemoryError: CUDA out of memory" in rows[0].evidence
    params = [json.loads(r.params_json) for r in rows]
    assert [(p["batch"], p["grad_accum"]) for p in params] == [(64, 1), (32, 2), (16, 4)]
    # the argv the job really ran, as the program printed it
    run_dir = tmp_path / "runs" / name / "tasks" / "0"
    outputs = [next(line for line in (run_dir / r.token / "output.log").read_text().splitlines()
                    if line.startswith("batch=")) for r in rows]
    assert [o.split(" node=")[0] for o in outputs] == ["batch=64 grad_accum=1 effective=64",
                                                       "batch=32 grad_accum=2 effective=64",
                                                       "batch=16 grad_accum=4 effective=64"]
    decided = [(e.rule, e.action) for e in logged(name)]
    assert decided == [("gpu_out_of_memory", "resubmit")] * 2
    log = cli("log", name)
    assert log.returncode == 0 and "batch 64 → 32, grad_accum 1 → 2" in log.stdout
    assert "batch 32 → 16, grad_accum 2 → 4" in log.stdout
    status = cli("status", name, "--json")
    assert status.returncode == 0 and '"batch": 16' in status.stdout
    # policy replay knows the causes and params: the same rule reproduces both retries, the
    # default policy (no params, no gpu_memory) would have given up at the first OOM
    same = tmp_path / "halving.yaml"
    same.write_text(f"name: halving\nmax_failures: 6\nrules: {{gpu_out_of_memory: {{params: {HALVING}}}}}\n")
    replayed = cli("policy", "replay", name, str(same), "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["data"]["reproduced"] == 3  # and the first array's start
    quarter = tmp_path / "quarter.yaml"
    quarter.write_text(same.read_text().replace("factor: 0.5", "factor: 0.25"))
    quartered = json.loads(cli("policy", "replay", name, str(quarter), "--json").stdout)["data"]
    assert quartered["reproduced"] == 1  # the first array's start alone
    default = json.loads(cli("policy", "replay", name, "default", "--json").stdout)["data"]
    assert not default["identical"] and "gpu_out_of_memory" in json.dumps(default["differences"])


def test_without_params_or_roomier_gpu_a_gpu_oom_is_given_up_and_a_site_cause_gets_its_own_rule(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    tasks = "tasks: [{batch: 64, grad_accum: 1, fail: oom}, {batch: 8, grad_accum: 1, fail: nccl}]"
    policy = ('{use: default, causes: {nccl_timeout: {pattern: "Watchdog caught collective operation timeout"}}, '
              "rules: {nccl_timeout: {action: resubmit, max_retries: 1}}}")
    name = campaign(tmp_path, "oomgiveup", tasks, policy)
    ticking_until_finished(name)

    rows = history(name)
    assert [(r.task_index, r.cause) for r in rows] == [(0, "gpu_out_of_memory"), (1, "nccl_timeout"),
                                                        (1, "nccl_timeout")]
    decided_all = sorted((e.task_index, e.rule, e.action) for e in logged(name))
    assert decided_all == [(0, "gpu_out_of_memory", "give_up"), (1, "nccl_timeout", "give_up"),
                      (1, "nccl_timeout", "resubmit")]
    give_up = next(e for e in logged(name) if e.task_index == 0)
    assert "rules.gpu_out_of_memory.params" in give_up.reason and "prices.gpu_memory" in give_up.reason
    assert "CUDA out of memory" in give_up.reason
    retry = next(e for e in logged(name) if e.rule == "nccl_timeout" and e.action == "resubmit")
    assert "Watchdog caught collective operation timeout" in str(retry.inputs["evidence"])


def test_a_gpu_oom_without_params_moves_to_a_listed_type_with_more_memory(
        slurm_conf: str, state_home: Path, tmp_path: Path) -> None:
    # the lab's a100s are on its first two nodes, its v100s on the others; the program fits only on an a100
    name = campaign(tmp_path, "oommove", "matrix: {batch: [64], grad_accum: [1], fail: [oom]}",
                    "{use: default, prices: {gpu_memory: {v100: 16G, a100: 80G}}}",
                    '{gpus: 1, gpu_type: [v100, a100], cpus_per_task: 1, mem: 200M, time: "00:05:00"}',
                    f', --fits-on, "{",".join(nodes_with("a100"))}"')
    ticking_until_finished(name)

    rows = history(name)
    assert [(r.state, r.cause) for r in rows] == [("FAILED", "gpu_out_of_memory"), ("COMPLETED", None)]
    assert rows[0].nodes in nodes_with("v100") and rows[1].nodes in nodes_with("a100")
    assert [json.loads(r.resources_json)["gpu_type"] for r in rows] == ["v100", "a100"]
    [move] = logged(name)
    assert (move.rule, move.action) == ("gpu_out_of_memory", "resubmit") and "gpu_type v100 → a100" in move.reason
