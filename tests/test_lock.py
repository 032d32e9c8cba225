"""The one file lock (codesearch._lock): exclusive between processes, naming its holder, gone with it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from codesearch._lock import FileLock, LockHeld

HOLD = """
import sys, time
from codesearch._lock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire(0)
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_process_is_refused_with_the_holders_pid_until_it_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    root = str(ROOT)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": root})
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        lock = FileLock(path)
        with pytest.raises(LockHeld) as info:
            lock.acquire(0)
        assert info.value.holder == f"pid {proc.pid}" and info.value.path == path
        assert isinstance(info.value, TimeoutError)
        began = time.monotonic()
        with pytest.raises(LockHeld):
            lock.acquire(0.2)
        assert time.monotonic() - began >= 0.2
    finally:
        proc.kill()
        proc.wait()
    with FileLock(path).held(5):  # the kernel dropped the killed holder's lock
        assert path.read_text() == f"{os.getpid()}\n"
    assert path.read_text() == ""  # released: no holder named


def test_release_without_a_hold_does_nothing(tmp_path: Path) -> None:
    lock = FileLock(tmp_path / "LOCK")
    lock.release()
    with lock.held(0):
        pass
    lock.release()
    assert FileLock(tmp_path / "LOCK").holder() == "pid unknown"
