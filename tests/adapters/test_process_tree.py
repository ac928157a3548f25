"""A task's processes (adapters/process_tree.py): the kernel's per-thread children lists find the
same descendants as psutil's scan of every process on the node, grandchildren and a
multi-threaded parent's children included, and a process gone has none."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from campaignctl.adapters import process_tree
from campaignctl.adapters.process_tree import descendants

# a parent that starts a thread which forks (its child is listed under that thread's tid), and a
# child that forks a grandchild
TREE = """\
import subprocess, threading, time
def spawn():
    subprocess.Popen(["sleep", "600"])
threading.Thread(target=spawn).start()
subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"])
print("ready", flush=True)
time.sleep(600)
"""


def test_descendants_are_what_a_full_scan_finds_and_none_once_gone() -> None:
    if not process_tree.CHILDREN_LISTED:
        pytest.skip("this kernel lists no /proc/<pid>/task/<tid>/children: the scan is all there is here")
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "ready\n"
        root = psutil.Process(parent.pid)
        deadline = time.monotonic() + 120
        while len(root.children(recursive=True)) < 4 and time.monotonic() < deadline:  # sh's fork
            time.sleep(0.1)
        scanned = {p.pid for p in root.children(recursive=True)}
        assert len(scanned) == 4  # sleep (from the thread), sh, and sh's two sleeps
        assert {p.pid for p in descendants(root)} == scanned
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()
    assert descendants(root) == []
