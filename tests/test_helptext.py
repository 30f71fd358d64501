"""Help comes from the option table: every option is documented, and the README agrees."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from torque_async.helptext import help_lines
from torque_async.options import ACTION, GLOBAL, LOCAL, OPTIONS

from conftest import execute

ROOT = Path(__file__).resolve().parents[1]


def test_each_help_level_lists_exactly_its_scope_with_the_tables_help():
    for level, scope in (("global", GLOBAL), ("local", LOCAL), ("actions", ACTION)):
        lines = help_lines(level)
        listed = {m.group(1): ln for ln in lines if (m := re.match(r"  -(\S+)", ln))}
        assert set(listed) == {n for n, o in OPTIONS.items() if o.scope == scope}, level
        assert all(OPTIONS[n].help in ln for n, ln in listed.items())


def test_help_shows_defaults_and_units():
    text = "\n".join(help_lines("all"))
    assert "(default 10)" in next(ln for ln in text.splitlines() if ln.startswith("  -i "))
    assert "0xdeca" in next(ln for ln in text.splitlines() if ln.startswith("  -smkey"))
    assert "Units: KB, MB, GB are 2^10, 2^20, 2^30 bytes" in text


def test_help_flags_print_their_level_and_exit_0(capsys):
    for flag, marker in (("-h", "Global parameters"), ("-hl", "Local parameters"),
                         ("-ha", "Actions"), ("-help", "Examples:"), ("-example", "Examples:"),
                         ("-version", "torque-async, version: ")):
        code, out, err = execute(capsys, flag)
        assert code == 0 and marker in out and err == "", flag
    code, out, _ = execute(capsys, "-hl")
    assert "Global parameters" not in out


def test_readme_option_reference_is_generated_from_the_table():
    spec = importlib.util.spec_from_file_location("readme_options", ROOT / "tools/readme_options.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    text = (ROOT / "README.md").read_text()
    assert tool.block() in text, "README is stale: run python3 tools/readme_options.py"
