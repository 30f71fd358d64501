"""Help comes from the option table: every option is documented, and the README agrees."""
from __future__ import annotations

import re

from tools import readme_options
from torque_async.helptext import help_lines
from torque_async.options import ACTION, GLOBAL, LOCAL, OPTIONS

from conftest import execute


def test_each_help_level_lists_exactly_its_scope_with_the_tables_help():
    for level, scope in (("global", GLOBAL), ("local", LOCAL), ("actions", ACTION)):
        lines = help_lines(level)
        listed = {m.group(1): ln for ln in lines if (m := re.match(r"  -(\S+)", ln))}
        assert set(listed) == {n for n, o in OPTIONS.items() if o.scope == scope}, level
        assert all(OPTIONS[n].help in ln for n, ln in listed.items())


def test_help_shows_defaults_and_units():
    lines = help_lines("all")
    assert "(default 10)" in next(ln for ln in lines if ln.startswith("  -i "))
    assert "0xdeca" in next(ln for ln in lines if ln.startswith("  -smkey"))
    assert any(ln.startswith("Units: KB, MB, GB are 2^10, 2^20, 2^30 bytes") for ln in lines)


def test_help_flags_print_their_level_and_exit_0(capsys):
    for flag, marker, absent in (("-h", "Global parameters", "Local parameters"),
                                 ("-hl", "Local parameters", "Global parameters"),
                                 ("-ha", "Actions", "Local parameters"),
                                 ("-help", "Examples:", "torque-async, version: "),
                                 ("-example", "Examples:", "Global parameters"),
                                 ("-version", "torque-async, version: ", "Global parameters")):
        code, out, err = execute(capsys, flag)
        assert code == 0 and marker in out and absent not in out and err == "", flag


def test_readme_option_reference_is_generated_from_the_table():
    assert readme_options.block() in readme_options.README.read_text(), \
        "README is stale: run python3 tools/readme_options.py"
