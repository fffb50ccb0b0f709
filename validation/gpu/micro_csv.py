"""CSV writers of the GPU scripts here (standalone: no torch, no `sim`), and the row format
every microbenchmark script writes: ``name,params,value,unit,notes`` - the format of
validation/measurements/h200_micro*.csv."""
from __future__ import annotations

import csv
from pathlib import Path

MICRO_FIELDS = ["name", "params", "value", "unit", "notes"]


def write_rows(path: str | Path, rows: list[dict]) -> None:
    """Dicts as CSV, the first row's keys as the header (nothing written for no rows)."""
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_table(path: str | Path, header: list[str], rows) -> None:
    """Sequences as CSV under ``header``."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def write_micro_csv(path: str | Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MICRO_FIELDS)
        w.writeheader()
        w.writerows(rows)
