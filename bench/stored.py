"""A results store's evaluations as the bench scripts read them: straight from its SQLite
file, in the order the store received them, with when each arrived."""

from __future__ import annotations

import datetime
import sqlite3
from typing import NamedTuple, Optional


class Stored(NamedTuple):
    #: When the store received it, in seconds since the epoch.
    at: float
    status: str
    compile_s: float
    verify_s: float
    benchmark_s: float
    #: The configuration, as JSON text.
    config: str


def evaluations(db: str, tuning: Optional[int] = None) -> list:
    """Every evaluation in the store at ``db`` (of one tuning, where given), oldest first."""
    query = "SELECT created, status, compile_s, verify_s, benchmark_s, config FROM evaluations"
    query += " WHERE tuning = ? ORDER BY created" if tuning is not None else " ORDER BY created"
    with sqlite3.connect(db) as connection:
        rows = connection.execute(query, () if tuning is None else (tuning,)).fetchall()
    return [Stored(_seconds(created), *rest) for created, *rest in rows]


def _seconds(created: str) -> float:
    # The store writes UTC with a trailing Z (strftime('%Y-%m-%dT%H:%M:%fZ')).
    return datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
