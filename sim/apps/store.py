"""A results store for sweeps: a folder of small Parquet part files keyed by content hash.

Layout of a store folder::

    DIR/store.json                      what this folder is (format, version)
    DIR/parts/part-<ns>-<pid>-<sha>.parquet   finished points, append-only
    DIR/results.parquet, results.csv    the last sweep's table (derived, rewritten)

Every row of a part is one finished point, keyed by ``hash``: a SHA-256 over the canonical
JSON of (resolved chip, workload, simulator version) - see :func:`content_hash`; the
version includes a digest of the simulator's sources (:func:`simulator_version`) - so a
re-run (or another sweep that shares points) skips what is already done, and a changed
simulator never reuses stale results.  Those keys are made in :mod:`sim.apps.store_keys`
(every name re-exported here); this module keeps the store's files, reading, writing and
claims.

Crash safety: a part is written to a temporary name, flushed to disk and renamed into
place with :func:`os.replace` (atomic on POSIX), so a process killed at any moment
(``kill -9`` included) leaves only complete parts plus, at worst, a stray temporary file,
which is ignored.  The part's name carries the first 16 hex digits of the SHA-256 of its
bytes; on opening, every part is read and checked against that digest, and a part that
fails is reported (:class:`StoreError` naming the file) - never rewritten or deleted: the
user decides what to do with it.  When two parts hold the same hash (a point re-run with
``retry_errors``), the later part wins.

Concurrency: a new store is assembled in a temporary sibling folder and renamed into place,
so two sweeps creating the same folder never see a half-made store (the loser opens the
winner's).  Sweeps sharing a store claim the points they simulate (``DIR/claims/<hash>``,
created exclusively, holding the claimant's pid): a second sweep leaves points another live
process has claimed to it and waits for their rows (taking a point over if its claimant
died), so two sweeps on one store never simulate a point twice.  Compaction and reading
tolerate each other: a part removed by another process's compaction is re-listed, not an error.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping

from sim.apps.store_keys import (_NOT_PHYSICS, _canon, canonical_json, content_hash, physics_files,
                                 simulator_version)
from sim.errors import SimError
from sim.version import __version__

__all__ = ["StoreError", "ResultStore", "content_hash", "canonical_json", "simulator_version", "export_csv",
           "read_results", "STRING_COLUMNS"]

STORE_FORMAT = "sim-results-store"
STORE_VERSION = 1
MANIFEST = "store.json"
PARTS = "parts"
CLAIMS = "claims"
_PART_RE = re.compile(r"^part-(\d{20})-(\d+)-([0-9a-f]{16})\.parquet$")
#: columns stored as strings; every other column is float64
STRING_COLUMNS = ("hash", "chip", "workload", "overrides", "error", "sim_version")


class StoreError(SimError):
    """A results store (or results file) cannot be used: corrupted, foreign or unreadable."""


# --------------------------------------------------------------------------- tables


def _normalise_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in STRING_COLUMNS:
            out[k] = None if v is None else str(v)
        elif v is None:
            out[k] = float("nan")
        elif isinstance(v, bool):
            out[k] = float(v)
        else:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                raise StoreError(f"store column '{k}' must be numeric, got {v!r}") from None
    return out


def _table(rows: list[dict[str, Any]]):
    import pyarrow as pa

    cols: list[str] = []
    seen = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    arrays, fields = [], []
    for c in cols:
        if c in STRING_COLUMNS:
            arrays.append(pa.array([r.get(c) for r in rows], type=pa.string()))
            fields.append(pa.field(c, pa.string()))
        else:
            arrays.append(pa.array([r.get(c, float("nan")) for r in rows], type=pa.float64()))
            fields.append(pa.field(c, pa.float64()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and :func:`os.replace`."""
    path = Path(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{path.name}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


# --------------------------------------------------------------------------- the store


class _PartVanished(Exception):
    """A listed part was removed (by another process's compaction) before it was read."""


class ResultStore:
    """A folder of finished points (see the module docstring).

    ``ResultStore(path)`` opens an existing store or creates a new one in an empty (or
    missing) folder; a non-empty folder that is not a store is refused, so that a typo in
    ``--out`` never scribbles over someone's files.
    """

    def __init__(self, path: str | os.PathLike, create: bool = True):
        self.path = Path(path)
        self.parts_dir = self.path / PARTS
        self._rows: dict[str, dict[str, Any]] | None = None
        self._seq = 0
        manifest = self.path / MANIFEST
        if manifest.is_file():
            self._check_manifest(manifest)
        elif self.path.exists():
            if not self.path.is_dir():
                raise StoreError(f"{self.path}: exists and is not a folder; choose another output folder")
            entries = [p.name for p in self.path.iterdir()]
            if entries and manifest.is_file():  # another process's store appeared meanwhile
                self._check_manifest(manifest)
            elif entries:
                raise StoreError(f"{self.path}: folder exists, is not empty and is not a sim results store "
                                 f"(no {MANIFEST}; it holds {', '.join(sorted(entries)[:5])}"
                                 f"{'...' if len(entries) > 5 else ''}); choose an empty or new folder")
            elif not create:
                raise StoreError(f"{self.path}: not a sim results store (no {MANIFEST})")
            else:
                self._create()
        else:
            if not create:
                raise StoreError(f"{self.path}: no such results store")
            self._create()
        self.parts_dir.mkdir(exist_ok=True)
        self.claims_dir = self.path / CLAIMS
        self.claims_dir.mkdir(exist_ok=True)

    def _check_manifest(self, manifest: Path) -> None:
        """Refuse a manifest that is not ours, corrupted, or from a newer store format."""
        try:
            info = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(f"{manifest}: the store's manifest is corrupted ({exc}); the store was left "
                             "untouched - restore or delete the file, or use another --out folder") from None
        if not isinstance(info, dict) or info.get("format") != STORE_FORMAT:
            raise StoreError(f"{manifest}: not a sim results store manifest (format "
                             f"{info.get('format') if isinstance(info, dict) else info!r}); left untouched")
        if int(info.get("version", 0)) > STORE_VERSION:
            raise StoreError(f"{manifest}: store format version {info.get('version')} is newer than this "
                             f"sim understands ({STORE_VERSION}); upgrade sim or use another folder")

    def _create(self) -> None:
        """Assemble the store in a temporary sibling and rename it into place: another
        process never sees a folder with ``parts/`` but no manifest.  Losing the race to a
        concurrent creator is fine - its store is the one opened."""
        # the (empty) target first: its errors name the path the user gave; the finished store
        # is then renamed onto it (a rename replaces an empty folder atomically)
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path.parent / f".tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}-{self.path.name}"
        tmp.mkdir()
        try:
            (tmp / PARTS).mkdir()
            atomic_write_bytes(tmp / MANIFEST, json.dumps(
                {"format": STORE_FORMAT, "version": STORE_VERSION,
                 "about": "finished sweep points; see sim/apps/store.py"}, indent=1).encode())
            try:
                os.rename(tmp, self.path)  # atomic; replaces an empty folder, fails on a non-empty one
            except OSError:
                if not (self.path / MANIFEST).is_file():
                    raise StoreError(f"{self.path}: could not be created as a results store (another process "
                                     "filled the folder with something else meanwhile)") from None
            _fsync_dir(self.path.parent)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    # -- reading
    def part_files(self) -> list[Path]:
        """Finished part files, oldest first (temporary files are not listed)."""
        if not self.parts_dir.is_dir():
            return []
        return sorted(p for p in self.parts_dir.iterdir() if _PART_RE.match(p.name))

    def stray_files(self) -> list[Path]:
        """Files in ``parts/`` that are neither parts nor temporaries (reported, never touched)."""
        if not self.parts_dir.is_dir():
            return []
        return sorted(p for p in self.parts_dir.iterdir()
                      if not _PART_RE.match(p.name) and not p.name.startswith(".tmp-"))

    def _read_part(self, path: Path) -> list[dict[str, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        m = _PART_RE.match(path.name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise _PartVanished(path) from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot read results part ({exc}); the store was left untouched") from None
        digest = hashlib.sha256(data).hexdigest()[:16]
        if m is None or digest != m.group(3):
            raise StoreError(
                f"{path}: results part is corrupted (its content does not match the checksum in its name); "
                "the store was left untouched - move or delete this file to re-run its points")
        try:
            table = pq.read_table(pa.BufferReader(data))
        except Exception as exc:  # pyarrow raises several types for damaged files
            raise StoreError(f"{path}: results part is corrupted ({type(exc).__name__}: {exc}); the store was left "
                             "untouched - move or delete this file to re-run its points") from None
        if "hash" not in table.column_names:
            raise StoreError(f"{path}: results part has no 'hash' column; the store was left untouched")
        return table.to_pylist()

    def load(self, refresh: bool = False) -> dict[str, dict[str, Any]]:
        """Every stored row by hash (later parts win); raises :class:`StoreError` on damage."""
        if self._rows is not None and not refresh:
            return self._rows
        stray = self.stray_files()
        if stray:
            raise StoreError(f"{stray[0]}: unexpected file in the store's parts folder (not a results part); "
                             "the store was left untouched - move it elsewhere")
        for _attempt in range(5):
            rows: dict[str, dict[str, Any]] = {}
            try:
                for p in self.part_files():
                    for r in self._read_part(p):
                        h = r.get("hash")
                        if not h:
                            raise StoreError(f"{p}: results part has a row without a hash; the store was left "
                                             "untouched")
                        rows[h] = r
            except _PartVanished:  # another process compacted the store meanwhile: list the parts again
                continue
            self._rows = rows
            return rows
        raise StoreError(f"{self.parts_dir}: the parts keep changing while being read (several processes "
                         "compacting at once?); try again")

    def done(self) -> set[str]:
        return set(self.load())

    def __len__(self) -> int:
        return len(self.load())

    def __contains__(self, h: str) -> bool:
        return h in self.load()

    def get(self, h: str) -> dict[str, Any] | None:
        return self.load().get(h)

    # -- writing
    def append(self, rows: Iterable[Mapping[str, Any]]) -> Path | None:
        """Write ``rows`` as one new part (atomically); returns its path (None when empty)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [_normalise_row(r) for r in rows]
        if not rows:
            return None
        for r in rows:
            if not r.get("hash"):
                raise StoreError("every stored row needs a 'hash'")
        buf = pa.BufferOutputStream()
        pq.write_table(_table(rows), buf, compression="zstd", write_page_checksum=True)
        data = buf.getvalue().to_pybytes()
        digest = hashlib.sha256(data).hexdigest()[:16]
        self._seq += 1
        name = f"part-{time.time_ns() + self._seq:020d}-{os.getpid()}-{digest}.parquet"
        path = self.parts_dir / name
        atomic_write_bytes(path, data)
        if self._rows is not None:
            for r in rows:
                self._rows[r["hash"]] = r
        return path

    # -- claims: which process simulates which point
    def claim(self, hashes: Iterable[str]) -> tuple[set[str], dict[str, int]]:
        """Claim points for this process: ``(claimed, held)`` where ``held`` maps the points
        another live process has claimed to its pid.  A claim left by a dead process is
        taken over; this process's own claims count as claimed."""
        mine, held = set(), {}
        me = os.getpid()
        note = self.claims_dir / f".tmp-{me}-{uuid.uuid4().hex[:8]}"
        note.write_text(str(me))  # linked into place whole: a claim is never seen half-written
        try:
            for h in hashes:
                path = self.claims_dir / h
                for _attempt in range(3):
                    try:
                        os.link(note, path)
                    except FileExistsError:
                        owner = _claim_owner(path)
                        if owner == me:
                            mine.add(h)
                        elif owner is not None and _alive(owner):
                            held[h] = owner
                        else:  # its claimant is gone: take it over
                            try:
                                path.unlink()
                            except FileNotFoundError:
                                pass
                            continue
                        break
                    mine.add(h)
                    break
        finally:
            note.unlink()
        return mine, held

    def release(self, hashes: Iterable[str]) -> None:
        """Drop this process's claims on ``hashes`` (others' claims are left alone)."""
        me = os.getpid()
        for h in hashes:
            path = self.claims_dir / h
            if _claim_owner(path) == me:
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

    def dataframe(self):
        """All stored rows as a DataFrame (one row per hash, sorted by hash)."""
        import pandas as pd

        rows = self.load()
        return pd.DataFrame([rows[h] for h in sorted(rows)])

    def compact(self) -> Path | None:
        """Merge every part into one (written first, then the old parts removed).

        A crash in between leaves both, which :meth:`load` de-duplicates.
        """
        old = self.part_files()
        if len(old) <= 1:
            return old[0] if old else None
        rows = self.load(refresh=True)
        new = self.append([rows[h] for h in sorted(rows)])
        for p in old:
            p.unlink()
        _fsync_dir(self.parts_dir)
        return new

    def clean_temporaries(self) -> int:
        """Remove temporary files left by writers that no longer run; returns how many."""
        n = 0
        for p in list(self.parts_dir.iterdir()) + list(self.path.iterdir()):
            m = re.match(r"^\.tmp-(\d+)-", p.name)
            if not m:
                continue
            if _alive(int(m.group(1))):
                continue
            try:
                p.unlink()
                n += 1
            except OSError:  # pragma: no cover
                pass
        return n


def _claim_owner(path: Path) -> int | None:
    """The pid in a claim file (None when it is gone or unreadable)."""
    try:
        text = path.read_text().strip()
    except (FileNotFoundError, OSError):
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    return True


# --------------------------------------------------------------------------- files


def write_table_files(df, folder: Path) -> tuple[Path, Path]:
    """``results.parquet`` and ``results.csv`` of a sweep, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(folder)
    buf = pa.BufferOutputStream()
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (OverflowError, pa.ArrowException):
        # a parameter no column type holds (an invalid point's m = 10^20 stopped the sweep
        # after its points had run): such columns are written as text
        def too_big(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and not -2**63 <= v < 2**63

        df = df.copy()
        for c in df.columns:
            if df[c].dtype == object and df[c].map(too_big).any():
                df[c] = df[c].map(lambda v: v if v is None else str(v))
        table = pa.Table.from_pandas(df, preserve_index=False)
    if df.attrs:
        meta = dict(table.schema.metadata or {})
        meta[b"sim_sweep"] = json.dumps(df.attrs, default=str).encode()
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, buf, compression="zstd")
    pq_path = folder / "results.parquet"
    atomic_write_bytes(pq_path, buf.getvalue().to_pybytes())
    csv_path = folder / "results.csv"
    atomic_write_bytes(csv_path, df.to_csv(index=False).encode("utf-8"))
    return pq_path, csv_path


def export_csv(source, path: str | os.PathLike) -> Path:
    """Write a sweep's results as CSV: ``source`` is a DataFrame, a store folder, or a
    ``.parquet`` results file.  The file is written atomically."""
    import pandas as pd

    df = source if isinstance(source, pd.DataFrame) else read_results(source)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, df.to_csv(index=False).encode("utf-8"))
    return path


def read_results(path: str | os.PathLike):
    """A sweep's results as a DataFrame, from a store folder (its ``results.parquet``, or
    the raw stored rows when there is none), a ``.parquet`` file or a ``.csv`` file."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        if (p / "results.parquet").is_file():
            p = p / "results.parquet"
        elif (p / MANIFEST).is_file():
            return ResultStore(p, create=False).dataframe()
        else:
            raise StoreError(f"{path}: not a sweep results folder (no results.parquet or {MANIFEST})")
    if not p.exists():
        raise StoreError(f"{path}: no such results file or folder")
    try:
        if p.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(p)
            df = table.to_pandas()
            meta = (table.schema.metadata or {}).get(b"sim_sweep")
            if meta:
                df.attrs = json.loads(meta.decode())
            return df
        if p.suffix == ".csv":
            return pd.read_csv(p)
    except Exception as exc:
        raise StoreError(f"{p}: cannot read results ({type(exc).__name__}: {exc})") from None
    raise StoreError(f"{path}: results must be a store folder, a .parquet or a .csv file")
