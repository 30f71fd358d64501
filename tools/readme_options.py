"""Regenerate docs/options.md, the option reference, from the option table:
python3 tools/readme_options.py"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from torque_async import applies  # noqa: E402
from torque_async.helptext import help_lines  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "docs" / "options.md"


def text() -> str:
    """The whole page: `torque-async -help`, then where each local option applies."""
    return "\n".join([
        "# Option reference", "",
        "Generated from the option table (`torque_async/options.py`) by "
        "`python3 tools/readme_options.py`; a test fails when this page is stale. "
        "`torque-async -help` prints the same. How to combine the options: "
        "[the README](../README.md) and the [other pages](README.md).", "",
        "```", *help_lines("all"), "```", "",
        "## Where each local option applies", "",
        "Decided against the man page, in the table's order; before any other action it is "
        "refused with one line, exit 2.", "",
        "```", *applies.lines(), "```", ""])


if __name__ == "__main__":
    PAGE.write_text(text())
