"""A progress bar for long command-line tasks (demo, load), on a terminal or in a log."""

from __future__ import annotations

from time import perf_counter
from typing import TextIO


class Progress:
    """A progress bar for ``total`` steps on ``stream``. On a terminal it redraws one line
    at most 10 times a second; elsewhere (a pipe, a CI log) it prints a plain line every
    ``every`` seconds, so logs stay short. Call ``update(done)`` freely, ``finish()`` once:
    it prints the final state with the phase's duration."""

    def __init__(self, label: str, total: int, stream: TextIO, every: float = 2.0) -> None:
        self.label, self.total, self.stream = label, max(total, 1), stream
        self.tty = stream.isatty()
        self.start = perf_counter()
        self.interval = 0.1 if self.tty else every
        self.next_draw = self.start + self.interval

    def update(self, done: int) -> None:
        now = perf_counter()
        if now >= self.next_draw:
            self.next_draw = now + self.interval
            self._draw(done, now, final=False)

    def finish(self) -> None:
        self._draw(self.total, perf_counter(), final=True)

    def _draw(self, done: int, now: float, final: bool) -> None:
        frac = min(done / self.total, 1.0)
        text = f"{frac:4.0%} {done:>11,}/{self.total:,} {now - self.start:6.1f} s"
        if self.tty:
            filled = round(frac * 30)
            line = f"\r{self.label:<6} [{'#' * filled}{'.' * (30 - filled)}] {text}"
            self.stream.write(line + ("\n" if final else ""))
        else:
            self.stream.write(f"{self.label:<6} {text}\n")
        self.stream.flush()
