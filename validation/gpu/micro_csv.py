"""The row format every microbenchmark script here writes (standalone: no torch, no `sim`):
``name,params,value,unit,notes`` - the format of validation/measurements/h200_micro*.csv."""
from __future__ import annotations

import csv
from pathlib import Path

MICRO_FIELDS = ["name", "params", "value", "unit", "notes"]


def write_micro_csv(path: str | Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MICRO_FIELDS)
        w.writeheader()
        w.writerows(rows)
