"""The processes of a task: a process and its descendants, found the cheap way where the kernel
offers one.

psutil's `children(recursive=True)` reads the parent of every process on the node (each
/proc/<pid>/stat): its cost grows with the node's process count, not the task's (11 ms a read on
a loaded 2-core machine of 150 processes). Linux lists a thread's own children in
/proc/<pid>/task/<tid>/children (since 3.5, with CONFIG_PROC_CHILDREN, which Debian, Ubuntu and
RHEL 8+ kernels set): walking those costs a few reads per process of the task. The kernel's docs
call the list unreliable unless the tasks are frozen: a child forked or reaped during the walk may
be missed or listed, which a sample taken once in a while can bear (the next sample sees it).
Where the file does not exist, psutil's scan is the fallback."""

from __future__ import annotations

import os

import psutil

_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)
CHILDREN_LISTED = os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def descendants(root: psutil.Process) -> list[psutil.Process]:
    """Every process below `root` (not `root`); [] once it is gone."""
    if not CHILDREN_LISTED:
        try:
            return list(root.children(recursive=True))
        except _GONE:
            return []
    found, seen, todo = [], {root.pid}, [root.pid]
    while todo:
        for pid in _children(todo.pop()):
            if pid in seen:
                continue
            seen.add(pid)
            try:
                found.append(psutil.Process(pid))
            except _GONE:
                continue
            todo.append(pid)
    return found


def _children(pid: int) -> list[int]:
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone
        return []
    pids: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as listed:
                pids.extend(int(p) for p in listed.read().split())
        except OSError:  # the thread ended between the listing and the read
            continue
    return pids
