"""Tables for people and for pipes, that never cut an id or a time.

A UUIDv7 cut to ``01a20aee-b808…`` names nothing (ids made in the same second share
their first 13 characters), and a time cut to ``2026-11-24T00:2…`` says nothing. So:

- on a terminal, ids and times are printed whole; when the table is wider than the
  terminal, a column may give way to a narrower one saying the same in fewer characters
  (a job's ``next_fire_at`` to ``next fire``: ``in 58 s``), the least important columns
  are left out (each column has a rank), and the free-text ones (a name, an error) wrap;
- in a pipe, every column is printed whole as tab-separated values under a header line,
  one row per line, whatever ``COLUMNS`` says: ``cut -f1`` gives the ids, and
  ``--json`` gives everything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cronwheel.core.text import escape_controls

Kind = Literal["id", "time", "text", "short"]
_GAP = 2  # spaces between two columns on a terminal
_MIN_TEXT = 12  # a free-text column narrower than this is not worth showing


@dataclass(frozen=True)
class Column:
    """One column: the field it shows, how, and its rank (0: always shown; among the
    others, the highest rank is left out first when the terminal is too narrow).
    ``narrow`` is shown in its place on a terminal too narrow for it whole; a pipe
    always gets the column itself."""

    key: str
    header: str | None = None
    kind: Kind = "short"
    rank: int = 0
    value: Callable[[Mapping[str, Any]], Any] | None = None
    narrow: Column | None = None

    @property
    def title(self) -> str:
        return self.header or self.key

    def cell(self, row: Mapping[str, Any]) -> str:
        """The text of this column in ``row``, whole, with every control character,
        bidi control and line separator escaped: a value from the server (a name stored
        before names were checked, an error a target answered) neither drives the
        terminal, nor splits a tab-separated row, nor reorders what follows it."""
        return escape_controls(text(self.value(row) if self.value else row.get(self.key)))


def text(value: Any) -> str:
    """A value as a person reads it: times in ISO 8601 as the API gives them (with
    ``+00:00``), nothing for a missing value."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def is_terminal() -> bool:
    """Whether stdout is a terminal a person reads (as rich decides it)."""
    return Console().is_terminal


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> None:
    """``rows`` as a table on a terminal, as tab-separated values in a pipe."""
    if not is_terminal():
        _print_tsv(columns, [[column.cell(row) for column in columns] for row in rows])
        return
    console = Console()
    console.print(rich_table(rows, columns, console.width), crop=False)


def rich_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], width: int) -> Table:
    """``rows`` as a terminal table ``width`` characters wide (see :func:`layout`), for
    a caller that prints it itself (e.g. inside a live display)."""
    columns, cells, shown = layout(rows, columns, width)
    table = Table(box=None, pad_edge=False, padding=(0, _GAP // 2), header_style="bold")
    for index in shown:
        column = columns[index]
        whole = column.kind in ("id", "time")
        table.add_column(
            column.title,
            no_wrap=whole,
            overflow="fold",  # never "…": if a value cannot fit, it goes on the next line
            min_width=_natural(column, cells, index) if whole else None,
        )
    for row in cells:
        # Text, not str: rich would read a value's "[bold]" or "[/]" as its markup.
        table.add_row(*(Text(row[index]) for index in shown))
    return table


def layout(
    rows: Sequence[Mapping[str, Any]], columns: Sequence[Column], width: int
) -> tuple[list[Column], list[list[str]], list[int]]:
    """The columns of a terminal table ``width`` characters wide, with their cells and
    the indexes of those shown: each column that does not fit whole gives way to its
    narrow form, if it has one, which then competes at the same rank."""
    cells = [[column.cell(row) for column in columns] for row in rows]
    shown = fit(columns, cells, width)
    if all(c.narrow is None or i in shown for i, c in enumerate(columns)):
        return list(columns), cells, shown
    chosen = [
        c if c.narrow is None or i in shown else replace(c.narrow, rank=c.rank)
        for i, c in enumerate(columns)
    ]
    cells = [[column.cell(row) for column in chosen] for row in rows]
    return chosen, cells, fit(chosen, cells, width)


def fit(columns: Sequence[Column], cells: Sequence[Sequence[str]], width: int) -> list[int]:
    """The indexes of the columns shown in ``width`` characters: every rank-0 column,
    then the others by rank while they fit (an empty one is not worth its room), in
    their own order."""
    need = {i: _least(column, cells, i) for i, column in enumerate(columns)}
    chosen = {i for i, column in enumerate(columns) if column.rank == 0}
    used = sum(need[i] for i in chosen) + _GAP * (len(chosen) - 1)
    optional = sorted(
        (c.rank, i) for i, c in enumerate(columns) if c.rank > 0 and any(r[i] for r in cells)
    )
    for _, index in optional:
        if used + _GAP + need[index] <= width:
            chosen.add(index)
            used += _GAP + need[index]
    return sorted(chosen)


def _natural(column: Column, cells: Sequence[Sequence[str]], index: int) -> int:
    return max([len(column.title), *(len(row[index]) for row in cells)])


def _least(column: Column, cells: Sequence[Sequence[str]], index: int) -> int:
    """The narrowest a column may be: whole for ids, times and short values; free text
    wraps, down to a dozen characters."""
    natural = _natural(column, cells, index)
    return min(natural, max(_MIN_TEXT, len(column.title))) if column.kind == "text" else natural


def _print_tsv(columns: Sequence[Column], cells: Sequence[Sequence[str]]) -> None:
    for line in tsv_lines(columns, cells):
        click.echo(line)


def tsv_lines(columns: Sequence[Column], cells: Sequence[Sequence[str]]) -> list[str]:
    """A header line, then one line per row, every value whole, tab-separated."""
    lines = ["\t".join(column.title for column in columns)]
    lines += ["\t".join(_one_field(value) for value in row) for row in cells]
    return lines


def _one_field(value: str) -> str:
    # A tab or a line break inside a value would split it into two fields or two rows.
    return " ".join(value.replace("\t", " ").splitlines()) if value else ""
