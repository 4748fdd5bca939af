"""Number, duration and text formatting shared by the page and the markdown export.

The page and the markdown must show the same figures, so both format through here.
"""

from __future__ import annotations

import re
from typing import Any

_BACKTICKS = re.compile(r"`+")


def fmt_hours(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def fmt_usd(value: Any) -> str:
    return "—" if value is None else f"${float(value):,.2f}"


def fmt_fraction(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f} ({value * 100:.1f}%)"


def fmt_input(value: Any) -> str:
    if value is None or value == "":
        return "—"
    number = float(value)
    if number.is_integer():
        return f"{int(number):,}"
    return f"{number:,.4f}".rstrip("0").rstrip(".")


def fmt_duration(seconds: float | None) -> str:
    """`1 h 20 min`, `5 min`, `45 s`; `—` when unknown."""
    if seconds is None:
        return "—"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, _ = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h {minutes} min"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


def md_cell(value: Any) -> str:
    """Text safe inside a GFM table cell: no pipe or newline breaks the row, no raw HTML."""
    text = "" if value is None else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    text = text.replace("<", "&lt;").replace(">", "&gt;")
    text = " ".join(text.split())  # newlines, tabs, runs of spaces → one space
    return text or "—"


def md_code(value: Any, *, in_table: bool = False) -> str:
    """Inline code for untrusted text (a log line): fenced with more backticks than it holds.

    Markdown renders a code span's content literally (no HTML), so only the fence and, in
    a table, the pipe need care: GFM splits table cells before it parses code spans.
    """
    text = " ".join(("" if value is None else str(value)).split())
    if not text:
        return ""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def md_text(value: Any) -> str:
    """Free text people wrote: kept as markdown, but raw HTML is shown, not run."""
    text = ("" if value is None else str(value)).replace("\r\n", "\n").strip()
    return text.replace("<", "&lt;").replace(">", "&gt;")
