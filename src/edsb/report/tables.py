"""A report as blocks (a title, a header, rows and notes under them), written as Markdown or printed as tables at
the terminal's width, never cut: what `edsb report` and `edsb compare` share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from edsb.report.formats import ReportFormat, plural

ROWS_SHOWN = 20  # rows of a long list (per case, cases that flip) shown unless `--all`


@dataclass(frozen=True)
class Block:
    """One table of a report: a title, a header, the rows, notes printed under it, and how many rows a limit
    left out (the output says so, and how to see them)."""

    title: str
    header: Sequence[str]
    rows: list[list[str]]
    notes: Sequence[str] = ()
    hidden: int = 0

    def limited(self, show_all: bool, shown: int = ROWS_SHOWN) -> Block:
        """The first `shown` rows unless `show_all`; the rest counted in `hidden`."""
        if show_all or len(self.rows) <= shown:
            return self
        return replace(self, rows=self.rows[:shown], hidden=len(self.rows) - shown)

    @property
    def footer(self) -> list[str]:
        more = [f"{plural(self.hidden, 'more row')} not shown: --all shows every one"] if self.hidden else []
        return [*self.notes, *more]


def _markdown(block: Block) -> str:
    lines = ["| " + " | ".join(block.header) + " |", "|" + "---|" * len(block.header)]
    lines += ["| " + " | ".join(row) + " |" for row in block.rows]
    return "\n\n".join(["\n".join(lines), *block.footer])  # each note a paragraph of its own


def emit(blocks: Sequence[Block], fmt: ReportFormat, console: Console | None, label: str | None = None) -> str | None:
    """Markdown as text, or the tables printed to the console. `label` (a perturbed run's `perturbed (seed N)`) ends
    every block's title, so no table is mistaken for the benchmark's own numbers."""
    if label:
        blocks = [replace(block, title=f"{block.title} — {label}") for block in blocks]
    if fmt == ReportFormat.MARKDOWN:
        return "\n\n".join(f"### {block.title}\n\n{_markdown(block)}" for block in blocks if block.rows)
    console = console or Console()
    for block in blocks:
        if block.rows:
            print_block(console, block)
    return None


def column_widths(header: Sequence[str], rows: Sequence[Sequence[str]], available: int) -> list[int] | None:
    """Content widths that fit `available` cells in all, no column narrower than its longest word (so nothing is
    cut or broken mid-word), the room left going to the columns that need least of it to show their cells on one
    line; None when even the longest words do not fit side by side. (rich's own shrinking squeezes the widest
    columns first, below their longest word.)"""
    columns = list(zip(header, *rows, strict=True))
    shortest = [max(cell_len(word) for text in column for word in text.split() or [""]) for column in columns]
    # What a column needs to show every cell on one line (a header may wrap: it is one line of many).
    longest = [
        max(least, *(cell_len(text) for text in column[1:])) for least, column in zip(shortest, columns, strict=True)
    ]
    room = available - sum(shortest)
    if room < 0:
        return None
    widths = list(shortest)
    # The columns that need least room get all of it first (each one fewer wrapped cell), then the rest is shared.
    for index in sorted(range(len(widths)), key=lambda i: longest[i] - shortest[i]):
        extra = min(longest[index] - widths[index], room)
        widths[index] += extra
        room -= extra
    return widths


def print_block(console: Console, block: Block) -> None:
    """A block at the console's width, never cut: the title and notes wrap at spaces; the table wraps its cells
    at spaces, and one too wide even so (its longest words side by side exceed the width) is printed stacked, a
    `header  value` line per cell, each row a group of its own."""
    console.print(Text(block.title, style="bold"), soft_wrap=False)
    # A table's frame: a rule between and around the columns, and a space either side of every cell.
    widths = column_widths(block.header, block.rows, console.width - 3 * len(block.header) - 1)
    if widths is not None:
        columns = (Column(name, width=width, overflow="fold") for name, width in zip(block.header, widths, strict=True))
        table = Table(*columns)
        for row in block.rows:
            table.add_row(*row)
        console.print(table, soft_wrap=False)
    else:
        label = min(max(cell_len(name) for name in block.header), console.width // 3)
        for number, row in enumerate(block.rows):
            stacked = Table.grid(
                Column(style="bold", width=label, overflow="fold"), Column(overflow="fold"), padding=(0, 2)
            )
            for name, value in zip(block.header, row, strict=True):
                stacked.add_row(name, value)
            if number:
                console.print()
            console.print(stacked, soft_wrap=False)
    for line in block.footer:
        console.print(Text(line, style="dim"), soft_wrap=False)
