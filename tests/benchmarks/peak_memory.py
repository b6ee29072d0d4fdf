"""A process's real peak memory, for the benchmarks: ``VmHWM`` from ``/proc/PID/status``.

``resource.getrusage(...).ru_maxrss`` is wrong for a child of the test process: on Linux a
process started by fork and exec keeps its parent's high-water mark (a child of a 300 MB
pytest reports 311 MB while its own peak is 11 MB). ``VmHWM`` is the peak of the process's
own address space, which exec starts afresh: read it inside the child (``pid="self"``) or,
while it runs, from its parent.
"""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(pid: int | str = "self") -> float:
    """The peak resident memory of process ``pid`` so far, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/{pid}/status has no VmHWM line (not Linux, or a zombie)")
