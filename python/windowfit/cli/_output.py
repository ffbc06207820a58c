"""Shared output of the commands: rich tables and progress bars when ``rich`` is installed
(``pip install 'windowfit[cli]'``), plain text otherwise; JSON for scripts; errors on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["EXIT_BAD_INPUT", "EXIT_IO", "Out", "fail", "print_json", "progress"]

#: bad arguments or a malformed input file (argparse uses 2 as well)
EXIT_BAD_INPUT = 2
#: a file that cannot be read or written
EXIT_IO = 1


def fail(command: str, message: str, code: int = EXIT_BAD_INPUT) -> int:
    """Print ``windowfit COMMAND: message`` on stderr; returns the exit code."""
    print(f"windowfit {command}: {message}", file=sys.stderr)
    return code


def print_json(data: Any, file: TextIO | None = None) -> None:
    json.dump(data, file or sys.stdout, ensure_ascii=False, indent=1, default=str)
    (file or sys.stdout).write("\n")


class Out:
    """Headings, lines and tables on ``file`` (stdout by default)."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file or sys.stdout
        try:
            from rich.console import Console
            from rich.table import Table

            # piped or captured output has no terminal width: keep tables readable in logs
            width = None if self.file.isatty() else 160
            self._console: Any = Console(
                file=self.file, highlight=False, soft_wrap=False, width=width
            )
            self._table_cls: Any = Table
        except ImportError:  # pragma: no cover - depends on the environment
            self._console = None
            self._table_cls = None

    def heading(self, text: str) -> None:
        if self._console is not None:
            self._console.rule(f"[bold]{text}")
        else:
            print(f"\n== {text} " + "=" * max(0, 70 - len(text)), file=self.file)

    def line(self, text: str = "", style: str | None = None) -> None:
        if self._console is not None:
            self._console.print(text, style=style, markup=False)
        else:
            print(text, file=self.file)

    def table(
        self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None
    ) -> None:
        cells = [[str(c) for c in row] for row in rows]
        if self._table_cls is not None:
            from rich.markup import escape

            table = self._table_cls(title=title, title_justify="left")
            for k, col in enumerate(columns):
                table.add_column(escape(col), justify="left" if k == 0 else "right")
            for row in cells:
                table.add_row(*(escape(c) for c in row))
            self._console.print(table)
            return
        if title:
            print(title, file=self.file)
        widths = [max([len(col), *(len(r[k]) for r in cells)]) for k, col in enumerate(columns)]
        print("  ".join(col.ljust(w) for col, w in zip(columns, widths)), file=self.file)
        for row in cells:
            print(
                "  ".join(
                    c.ljust(w) if k == 0 else c.rjust(w)
                    for k, (c, w) in enumerate(zip(row, widths))
                ),
                file=self.file,
            )


@contextmanager
def progress(label: str, total: int, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for long work; yields ``advance(n)``. Rich draws it only on a
    terminal, so piped and captured output stays clean."""
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    except ImportError:  # pragma: no cover - depends on the environment
        enabled = False
    if not enabled:

        def nothing(n: int = 1) -> None:
            pass

        yield nothing
        return
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)

        def advance(n: int = 1) -> None:
            bar.advance(task, n)

        yield advance
