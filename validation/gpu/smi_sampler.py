"""nvidia-smi sampled in a thread while a microbenchmark runs (standalone: no torch, no `sim`)."""
from __future__ import annotations

import statistics
import subprocess
import threading
import time

from micro_csv import write_table


class Smi:
    """``nvidia-smi --query-gpu=FIELDS -lms=PERIOD`` read line by line in a thread; each row is
    (host perf_counter time, field strings...)."""

    def __init__(self, fields: str = "clocks.sm,power.draw,clocks_event_reasons.active", period_ms: int = 50):
        self.n = len(fields.split(","))
        self.p = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits",
                                   f"-lms={period_ms}"], stdout=subprocess.PIPE, text=True)
        self.rows: list[tuple] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) == self.n:
                self.rows.append((time.perf_counter(), *parts))

    def between(self, a: float, b: float, j: int):
        """Median of field ``j`` (1-based: 0 is the host time) over samples taken in [a, b];
        "" when none is a number."""
        v = [float(r[j]) for r in self.rows if a <= r[0] <= b and r[j].replace(".", "", 1).isdigit()]
        return statistics.median(v) if v else ""

    def stop(self):
        self.p.terminate()

    def write(self, path, t0: float, header: list[str]) -> None:
        """The samples as CSV: host time since ``t0`` (s), then the fields, under ``header``."""
        write_table(path, header, [(round(r[0] - t0, 4), *r[1:]) for r in self.rows])
