"""Tables of the ``zoo`` commands: fitted to the terminal with ``rich`` on a TTY, plain aligned text otherwise.

* On a terminal (or with ``COLUMNS`` set) a table is laid out by ``rich`` in that many columns: long
  cells wrap inside their column, nothing runs past the right edge, rows may carry a colour.
* Not on a terminal and no ``COLUMNS`` (a pipe, a file, ``| grep``): one line per row, columns aligned
  with two spaces, no colour, nothing wrapped; ``rich`` is not even imported (``zoo list`` stays fast).

Cells are escaped with :func:`registry.errors.printable` *before* layout and handed to ``rich`` as
:class:`rich.text.Text` (never as markup), so text from a spec can neither inject control characters
nor ``[red]``-style markup; the only escape codes in the output are the SGR colour codes ``rich``
itself emits, which the caller may translate (``zoo.cli`` turns them into its private colour markers).
"""
from __future__ import annotations

import io
import os
import re
from collections.abc import Sequence
from typing import Any

from registry.errors import printable

#: row styles the commands use, as rich style names
STYLES = {"ok": "green", "bad": "red", "warn": "yellow", "dim": "dim", "bold": "bold"}


def env_width() -> int | None:
    """``$COLUMNS`` as a positive int (what the user or the shell says the width is), else None."""
    raw = os.environ.get("COLUMNS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def terminal_width(default: int = 120) -> int:
    """The terminal's width: ``$COLUMNS``, else the size of stdout's terminal, else ``default``."""
    import shutil

    return env_width() or shutil.get_terminal_size((default, 24)).columns or default


def plain(rows: Sequence[Sequence[object]], header: Sequence[str] | None = None, indent: str = "") -> list[str]:
    """Aligned columns separated by two spaces; the last column is not padded. Cells escaped first."""
    cells = [[printable(str(c)) for c in row] for row in ([list(header)] if header else []) + [list(r) for r in rows]]
    if not cells:
        return []
    ncol = max(len(r) for r in cells)
    widths = [max((len(r[i]) for r in cells if i < len(r)), default=0) for i in range(ncol)]
    return [(indent + "  ".join(c.ljust(widths[i]) if i < len(row) - 1 else c for i, c in enumerate(row))).rstrip()
            for row in cells]


def _console(width: int, color: bool) -> Any:
    from rich.console import Console

    return Console(file=io.StringIO(), width=width, force_terminal=color, color_system="standard" if color else None,
                   no_color=not color, highlight=False, markup=False, emoji=False, legacy_windows=False,
                   soft_wrap=False, force_jupyter=False, force_interactive=False)


def _table(ncol: int, header: Sequence[str] | None, color: bool, no_wrap: Sequence[int],
           widths: Sequence[int | None] | None = None) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, show_header=bool(header), header_style="bold" if color else "", pad_edge=False,
                  padding=(0, 2, 0, 0), show_edge=False, expand=False)
    for i in range(ncol):
        name = printable(str(header[i])) if header and i < len(header) else ""
        table.add_column(Text(name), overflow="fold", no_wrap=i in no_wrap, width=widths[i] if widths else None)
    return table


_TRAILING = re.compile(r"\s+((?:\x1b\[[0-9;]*m)*)$")


def _lines(console: Any, indent: str) -> list[str]:
    """The rendered lines, each without the padding rich adds after its last cell (also inside a colour)."""
    text = console.file.getvalue()
    return [_TRAILING.sub(r"\1", indent + line) for line in text.rstrip("\n").split("\n")] if text.strip() else []


def fitted(rows: Sequence[Sequence[object]], width: int, *, header: Sequence[str] | None = None, indent: str = "",
           styles: Sequence[str | None] | None = None, color: bool = False, no_wrap: Sequence[int] = (0,),
           stack_last: int | None = None) -> list[str]:
    """The rows laid out by ``rich`` in ``width`` columns (``indent`` included): every line is at most
    ``width`` characters wide and no text is lost; a cell too long for its column wraps (words, then
    characters) inside it. Columns in ``no_wrap`` (default: the first, the name) keep their cells on one
    line while they fit. With ``stack_last=N``, when the last column would get fewer than N characters
    beside the others, it goes on its own indented line(s) under each row instead (``zoo list`` in an
    80-column terminal: the title under the name).
    With ``color``, ``styles[k]`` (a key of :data:`STYLES`) colours row k and the header is bold; the
    result then holds ANSI SGR codes, and nothing else that is not printable."""
    from rich.text import Text

    inner = max(20, width - len(indent))
    ncol = max([len(r) for r in rows] + [len(header) if header else 0])
    cells = [[printable(str(c)) for c in row] + [""] * (ncol - len(row)) for row in rows]
    row_style = [STYLES.get((styles[k] if styles else None) or "", "") if color else "" for k in range(len(rows))]
    if stack_last and ncol > 1:
        natural = [max([len(r[i]) for r in cells] + [len(header[i]) if header and i < len(header) else 0]) for i in range(ncol)]
        if inner - (sum(natural[:-1]) + 2 * (ncol - 1)) < stack_last:
            return _stacked(cells, natural, inner, header, indent, row_style, color, no_wrap)
    console = _console(inner, color)
    table = _table(ncol, header, color, no_wrap)
    for k, row in enumerate(cells):
        table.add_row(*[Text(c) for c in row], style=row_style[k] or None)
    console.print(table)
    return _lines(console, indent)


def _stacked(cells: list[list[str]], natural: list[int], inner: int, header: Sequence[str] | None, indent: str,
             row_style: list[str], color: bool, no_wrap: Sequence[int]) -> list[str]:
    """The first columns as a table, the last column's text wrapped under each row (4 spaces in)."""
    from rich.padding import Padding
    from rich.text import Text

    ncol = len(natural)
    head = list(header[:-1]) if header else None
    # fixed widths for every row's table: the first column as is, the rest shrunk in proportion to their text
    room = inner - natural[0] - 2 * (ncol - 1)
    rest = natural[1:-1]
    scale = min(1.0, room / max(1, sum(rest)))
    widths = [natural[0], *[max(4, int(w * scale)) for w in rest]]
    console = _console(inner, color)
    if head:
        table = _table(ncol - 1, head, color, no_wrap, widths)
        console.print(table)
        if header:
            console.print(Padding(Text(printable(str(header[-1])), style="bold" if color else ""), (0, 0, 0, 4)))
    for k, row in enumerate(cells):
        table = _table(ncol - 1, None, color, no_wrap, widths)
        table.add_row(*[Text(c) for c in row[:-1]], style=row_style[k] or None)
        console.print(table)
        if row[-1]:
            console.print(Padding(Text(row[-1], style=row_style[k] or ""), (0, 0, 0, 4)))
    return _lines(console, indent)


def render(rows: Sequence[Sequence[object]], *, header: Sequence[str] | None = None, indent: str = "",
           styles: Sequence[str | None] | None = None, tty: bool = False, no_wrap: Sequence[int] = (0,),
           stack_last: int | None = None) -> list[str]:
    """:func:`fitted` to the terminal on a ``tty`` (coloured) or when ``$COLUMNS`` is set (plain text at that
    width); else :func:`plain` (a pipe: one line per row, nothing imported)."""
    if not rows and not header:
        return []
    width = terminal_width() if tty else env_width()
    if width is None:
        return plain(rows, header, indent)
    return fitted(rows, width, header=header, indent=indent, styles=styles, color=tty, no_wrap=no_wrap, stack_last=stack_last)
