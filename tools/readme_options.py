"""Regenerate the README's option reference from the option table: python3 tools/readme_options.py"""
from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from torque_async import applies  # noqa: E402
from torque_async.helptext import help_lines  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"


def block() -> str:
    return "\n".join([BEGIN, "```", *help_lines("all"), "```", "",
                      "Where each local option applies (decided against the man page, in the "
                      "table's order; before any other action it is refused with one line, "
                      "exit 2):", "", "```", *applies.lines(), "```", END])


def updated(text: str) -> str:
    return re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block(), text, flags=re.S)


if __name__ == "__main__":
    README.write_text(updated(README.read_text()))
