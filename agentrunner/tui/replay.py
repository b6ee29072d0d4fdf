"""Replay: play a trace back row by row, step by step or with its original timing.

While a replay runs, the event list shows only the rows revealed so far (its ``limit``);
each tick reveals the next row after the time that separated the two events when they were
recorded (divided by the speed; long pauses are capped at ``MAX_GAP_S``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from textual.timer import Timer

from agentrunner.tui.widgets.event_list import EventList

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)
MAX_GAP_S = 5.0  # a longer pause in the recording is shown as this long (at 1×)
RETRY_S = 0.05  # rows not read yet: look again after this long


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def _speed(value: float) -> str:
    return f"{value:g}×"


class Replay:
    """Drives an :class:`EventList`'s ``limit`` and cursor; ``on_change`` after each step."""

    def __init__(
        self,
        events: EventList,
        set_timer: Callable[[float, Callable[[], None]], Timer],
        on_change: Callable[[], None],
    ) -> None:
        self._list = events
        self._set_timer = set_timer
        self._on_change = on_change
        self._timer: Timer | None = None
        self.state = "off"  # off, playing, paused
        self.speed_index = SPEEDS.index(1.0)

    @property
    def speed(self) -> float:
        return SPEEDS[self.speed_index]

    @property
    def active(self) -> bool:
        return self.state != "off"

    def label(self) -> str:
        if self.state == "off":
            return ""
        mark = "▶" if self.state == "playing" else "⏸"
        return f"{mark} replay {_speed(self.speed)} ({self._list.limit}/{len(self._list.index)})"

    def _begin(self) -> None:
        total = len(self._list.index)
        start = self._list.cursor + 1 if self._list.cursor < total - 1 else 1
        self._list.limit = max(1, start)
        self._list.cursor = self._list.limit - 1

    def toggle(self) -> None:
        """Play, or pause a playing replay."""
        if self.state == "playing":
            self._cancel_timer()
            self.state = "paused"
        else:
            if self.state == "off":
                self._begin()
            self.state = "playing"
            self._schedule()
        self._on_change()

    def step(self, delta: int) -> None:
        """Reveal (or hide again) ``delta`` rows, pausing playback."""
        if self.state == "off":
            self._begin()
        self._cancel_timer()
        self.state = "paused"
        total = len(self._list.index)
        self._list.limit = max(1, min(total, (self._list.limit or 1) + delta))
        self._list.cursor = self._list.limit - 1
        self._on_change()

    def faster(self) -> None:
        self.speed_index = min(len(SPEEDS) - 1, self.speed_index + 1)
        self._on_change()

    def slower(self) -> None:
        self.speed_index = max(0, self.speed_index - 1)
        self._on_change()

    def stop(self) -> None:
        """Leave replay mode: every row is shown again."""
        self._cancel_timer()
        self.state = "off"
        self._list.limit = None
        self._on_change()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _schedule(self) -> None:
        if self.state != "playing":
            return
        shown = self._list.limit or 0
        if shown >= len(self._list.index):
            self.state = "paused"
            self._on_change()
            return
        current, _ = self._list.ensure(shown - 1)
        upcoming, _ = self._list.ensure(shown)
        if current is None or upcoming is None:
            self._timer = self._set_timer(RETRY_S, self._schedule)
            return
        gap = min(max(_ts(upcoming.ts) - _ts(current.ts), 0.0), MAX_GAP_S)
        self._timer = self._set_timer(gap / self.speed, self._advance)

    def _advance(self) -> None:
        self._timer = None
        if self.state != "playing":
            return
        self._list.limit = (self._list.limit or 0) + 1
        self._list.cursor = self._list.limit - 1
        self._on_change()
        self._schedule()
