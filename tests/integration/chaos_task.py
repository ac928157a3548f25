"""A task that fails on purpose, by mode, so reconcile's policies can be watched on real Slurm.

ok: exit 0 · bug: exit 3 every time · flaky: exit 75 (EX_TEMPFAIL) on attempt 1 · late_flaky S: the
same after S seconds (so failures of one campaign arrive over time) · oom MB: allocate
MB megabytes · late_oom MB: run 20 s on attempt 1, then allocate MB megabytes (a retry exits 0) ·
slow: on attempt 1 write a checkpoint and sleep (the test then provokes TIMEOUT, NODE_FAIL or
preemption); a retry finds the checkpoint and exits 0.
"""
import os
import pathlib
import sys
import time

mode = sys.argv[1]
attempt = int(os.environ.get("CAMPAIGNCTL_ATTEMPT", "1"))
ckpt = pathlib.Path(os.environ["CAMPAIGNCTL_CHECKPOINT_DIR"])
print(f"mode={mode} attempt={attempt} resume={os.environ.get('CAMPAIGNCTL_RESUME')}", flush=True)
if mode == "ok":
    sys.exit(0)
if mode == "bug":
    sys.exit(3)
if mode == "flaky":
    sys.exit(75 if attempt == 1 else 0)
if mode == "late_flaky":
    time.sleep(float(sys.argv[2]) if attempt == 1 else 0)
    sys.exit(75 if attempt == 1 else 0)
if mode == "oom":
    block = bytearray(int(sys.argv[2]) * 2**20)
    time.sleep(1)
    sys.exit(0)
if mode == "late_oom":
    if attempt > 1:
        sys.exit(0)
    time.sleep(20)
    block = bytearray(int(sys.argv[2]) * 2**20)
    time.sleep(1)
    sys.exit(0)
if mode == "slow":  # long first run; a retry finishes at once
    if attempt > 1:
        resumed = (ckpt / "step").exists()
        print("resumed from checkpoint:", resumed, flush=True)
        sys.exit(0 if resumed else 4)
    (ckpt / "step").write_text("1")
    time.sleep(600)
