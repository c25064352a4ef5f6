"""The table: one per workload, a row per system; non-ok results say why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from lib.spec import TITLES

Row = dict[str, Any]


def _n(v: Any, unit: str = "") -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        v = f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}"
    elif isinstance(v, int):
        v = f"{v:,}"
    return f"{v}{unit}"


def _lag(key: str) -> Callable[[Row], str]:
    return lambda r: _n((r.get("lag") or {}).get(key), " ms")


COLUMNS: dict[str, list[tuple[str, Callable[[Row], str]]]] = {
    "W1": [
        ("runs", lambda r: _n(r.get("n"))),
        ("enqueue/s", lambda r: _n(r.get("enqueue_per_s"))),
        ("runs/s", lambda r: _n(r.get("runs_per_s"))),
        ("first start", lambda r: _n(r.get("first_start_s"), " s")),
        ("runs/s incl. start", lambda r: _n(r.get("runs_per_s_incl_startup"))),
        ("wall incl. start", lambda r: _n(r.get("wall_s_incl_startup"), " s")),
        ("lost", lambda r: _n(r.get("lost"))),
        ("dup", lambda r: _n(r.get("duplicated"))),
    ],
    "W2": [
        ("runs", lambda r: _n(r.get("n"))),
        ("p50", _lag("p50_ms")),
        ("p95", _lag("p95_ms")),
        ("p99", _lag("p99_ms")),
        ("max", _lag("max_ms")),
        ("last start", lambda r: _n(r.get("last_start_after_first_due_ms"), " ms")),
        ("lost", lambda r: _n(r.get("lost"))),
        ("dup", lambda r: _n(r.get("duplicated"))),
    ],
    "W3": [
        ("runs", lambda r: _n(r.get("n"))),
        ("p50", _lag("p50_ms")),
        ("p95", _lag("p95_ms")),
        ("p99", _lag("p99_ms")),
        ("max", _lag("max_ms")),
        ("lost", lambda r: _n(r.get("lost"))),
        ("dup", lambda r: _n(r.get("duplicated"))),
    ],
    "W4": [
        ("expected", lambda r: _n(r.get("expected"))),
        ("missed", lambda r: _n(r.get("missed"))),
        ("dup", lambda r: _n(r.get("duplicated"))),
        ("p50", _lag("p50_ms")),
        ("p99", _lag("p99_ms")),
        ("max", _lag("max_ms")),
    ],
    "W5": [
        ("jobs", lambda r: _n(r.get("jobs"))),
        ("create jobs/s", lambda r: _n(r.get("jobs_per_s"))),
        ("tick @small", lambda r: _tick(r, str(r.get("small")))),
        ("tick @all", lambda r: _tick(r, str(r.get("jobs")))),
        ("ratio", lambda r: _n(r.get("tick_ratio"), "x")),
    ],
    "W6": [
        ("A backlog", lambda r: _n(r.get("a"))),
        ("A drain", lambda r: _n(r.get("a_drain_s"), " s")),
        ("B runs", lambda r: _n((r.get("b_during") or {}).get("samples"))),
        ("B p50", lambda r: _n((r.get("b_during") or {}).get("p50_ms"), " ms")),
        ("B p99", lambda r: _n((r.get("b_during") or {}).get("p99_ms"), " ms")),
        ("B alone p50", lambda r: _n((r.get("b_alone") or {}).get("p50_ms"), " ms")),
        ("B alone p99", lambda r: _n((r.get("b_alone") or {}).get("p99_ms"), " ms")),
        ("lost", lambda r: _n(r.get("lost"))),
        ("dup", lambda r: _n(r.get("duplicated"))),
    ],
}


def _tick(r: Row, key: str) -> str:
    tick = (r.get("tick_ms") or {}).get(key)
    return "—" if tick is None else f"{tick['median']:.2f} ms"


def print_tables(results: list[Row], console: Console) -> None:
    for workload in COLUMNS:
        rows = [r for r in results if r["workload"] == workload]
        if not rows:
            continue
        table = Table(title=f"{workload} {TITLES[workload]}", title_justify="left")
        table.add_column("system")
        for name, _ in COLUMNS[workload]:
            table.add_column(name, justify="right")
        for r in rows:
            if r.get("status") == "ok":
                table.add_row(r["system"], *(fmt(r) for _, fmt in COLUMNS[workload]))
            else:
                why = f"{r.get('status')}: {r.get('short') or r.get('reason', '')}"
                table.add_row(r["system"], why, *[""] * (len(COLUMNS[workload]) - 1))
        console.print(table)
