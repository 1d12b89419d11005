"""What runs, from /proc: process groups, trees and their resident memory (Linux only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    pgrp: int
    state: str

    @property
    def cmdline(self) -> str:
        try:
            return Path(f"/proc/{self.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    @property
    def rss_kib(self) -> int:
        return rss_kib(self.pid)


def rss_kib(pid: int) -> int:
    """VmRSS, 0 once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def running() -> list[Process]:
    """Every process that is not a zombie (a zombie holds no memory and does nothing)."""
    found = []
    for folder in Path("/proc").iterdir():
        entry = folder.name
        if not entry.isdigit():
            continue
        try:
            stat = (folder / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            found.append(Process(int(entry), int(fields[1]), int(fields[2]), fields[0]))
    return found


def group(pgid: int) -> list[Process]:
    return [p for p in running() if p.pgrp == pgid]


def descendants(pid: int) -> list[Process]:
    everything = running()
    children: dict[int, list[Process]] = {}
    for process in everything:
        children.setdefault(process.ppid, []).append(process)
    found: list[Process] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


def alive(pid: int) -> bool:
    return any(p.pid == pid for p in running())
