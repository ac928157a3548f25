#!/usr/bin/env python3
"""Run the two third-party trainers of docs/trainers.md, unmodified, on the local lab cluster and
print what a user would check: each task's attempts and states, whether a retry resumed from the
trainer's own checkpoint, how many metric points arrived while it ran (and over what time), and
`campaignctl results`. Their code is not in this repository: give your own checkouts.

  git clone https://github.com/karpathy/nanoGPT /tmp/trainers/nanoGPT
  git clone https://github.com/pytorch/examples /tmp/trainers/examples
  eval "$(scripts/slurmlab up)"
  .venv/bin/python scripts/trainer_examples.py --nanogpt /tmp/trainers/nanoGPT \\
      --word-lm /tmp/trainers/examples/word_language_model

Each runs from a copy of its checkout (the trainers write their data and models there) with the
spec in templates/trainers/, `campaignctl reconcile` every --every seconds from `env -i` as cron
would, until the campaign finishes. nanoGPT's 1-minute limit makes attempt 1 end in TIMEOUT on
purpose. Data: nanoGPT's shakespeare_char/prepare.py downloads its text, so without internet
give --text FILE (any text, e.g. word_language_model/data/wikitext-2/test.txt); a checkout of
pytorch/examples whose wikitext-2 lacks train.txt gets valid.txt in its place.
Needs torch and numpy in this Python (the test extra has torch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAMPAIGNCTL = Path(sys.executable).parent / "campaignctl"


def run(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, env=env, cwd=cwd).stdout


def cron_env(state: Path) -> dict[str, str]:
    sbatch = shutil.which("sbatch") or "/usr/bin/sbatch"
    return {"HOME": os.environ.get("HOME", "/root"), "LOGNAME": os.environ.get("LOGNAME", "root"),
            "SHELL": "/bin/sh", "PATH": f"{Path(sbatch).parent}:/usr/bin:/bin",
            "SLURM_CONF": os.environ["SLURM_CONF"], "XDG_STATE_HOME": str(state)}


def prepare_nanogpt(src: Path, work: Path, text: Path | None) -> Path:
    shutil.copytree(src, work / "nanoGPT", ignore=shutil.ignore_patterns(".git", "runs", "out*"))
    data = work / "nanoGPT" / "data" / "shakespeare_char"
    if text is not None:
        shutil.copy(text, data / "input.txt")
    run(sys.executable, "prepare.py", cwd=data)
    shutil.copy(REPO / "templates" / "trainers" / "nanogpt.yaml", work / "nanogpt.yaml")
    return work / "nanogpt.yaml"


def prepare_word_lm(src: Path, work: Path) -> Path:
    shutil.copytree(src, work / "wlm", ignore=shutil.ignore_patterns(".git", "runs", "*.pt"))
    wiki = work / "wlm" / "data" / "wikitext-2"
    if not (wiki / "train.txt").exists():
        shutil.copy(wiki / "valid.txt", wiki / "train.txt")
    shutil.copy(REPO / "templates" / "trainers" / "word_language_model.yaml", work / "wlm" / "word_language_model.yaml")
    return work / "wlm" / "word_language_model.yaml"


def campaign(spec: Path, name: str, state: Path, every: float, timeout_s: float) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    env.pop("PYTHONUNBUFFERED", None)  # as a user who never heard of it: campaignctl's default applies
    run(str(CAMPAIGNCTL), "submit", str(spec), env=env)
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in cron_env(state).items()), str(CAMPAIGNCTL),
                        "reconcile", name], capture_output=True, text=True, timeout=300)
        data = json.loads(run(str(CAMPAIGNCTL), "status", name, "--json", env=env))["data"]
        if data["campaigns"][0]["state"] == "finished":
            print(f"{name}: finished in {time.monotonic() - started:.0f} s")
            return
        time.sleep(every)
    sys.exit(f"{name}: not finished after {timeout_s:.0f} s")


def report(name: str, run_dir: Path, state: Path, resumed_line: str) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "COLUMNS": "100"}
    tasks = json.loads(run(str(CAMPAIGNCTL), "status", name, "--json", env=env))["data"]["tasks"]
    for task in tasks:
        folder = run_dir / "tasks" / str(task["index"])
        attempts = sorted((p for p in folder.iterdir() if p.is_dir() and p.name != "checkpoint"),
                          key=lambda p: (p / "started.json").stat().st_mtime if (p / "started.json").exists() else 0)
        for number, attempt in enumerate(attempts, start=1):
            points = [json.loads(line) for line in (attempt / "metrics.jsonl").read_text().splitlines()] \
                if (attempt / "metrics.jsonl").exists() else []
            times = [p["t"] for p in points]
            spread = f"over {max(times) - min(times):.0f} s" if times else ""
            log = (attempt / "output.log").read_text(errors="replace")
            resumed = "resumed from its checkpoint" if resumed_line and resumed_line in log else ""
            print(f"  task {task['index']} attempt {number}: {len(points)} metric points {spread} {resumed}".rstrip())
        print(f"  task {task['index']}: {task['state']} after {task['attempts']} attempt(s); "
              f"last decision {task['last_decision'] or '-'}")
    print(run(str(CAMPAIGNCTL), "results", name, env=env))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanogpt", type=Path, help="a karpathy/nanoGPT checkout")
    parser.add_argument("--word-lm", type=Path, help="pytorch/examples' word_language_model directory")
    parser.add_argument("--text", type=Path, help="text for nanoGPT's shakespeare_char data (no download)")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between ticks (default 10)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up after this long per campaign")
    args = parser.parse_args()
    if not os.environ.get("SLURM_CONF"):
        sys.exit('the lab is not up: eval "$(scripts/slurmlab up)"')
    with tempfile.TemporaryDirectory(prefix="campaignctl-trainers-") as tmp:
        work, state = Path(tmp), Path(tmp) / "state"
        if args.nanogpt:
            spec = prepare_nanogpt(args.nanogpt, work, args.text)
            campaign(spec, "nanogpt", state, args.every, args.timeout)
            report("nanogpt", work / "nanoGPT" / "runs" / "nanogpt", state, "Resuming training from")
        if args.word_lm:
            spec = prepare_word_lm(args.word_lm, work)
            campaign(spec, "wordlm", state, args.every, args.timeout)
            report("wordlm", work / "wlm" / "runs" / "wordlm", state, "")


if __name__ == "__main__":
    main()
