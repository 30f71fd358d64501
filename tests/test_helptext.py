"""Help comes from the option table: every option is documented, and docs/options.md agrees."""
from __future__ import annotations

import re

from click.testing import CliRunner

from tools import readme_options
from torque_async import helptext
from torque_async.cli import main
from torque_async.helptext import INDENT, WIDTH, help_lines, option_line
from torque_async.options import ACTION, GLOBAL, LOCAL, OPTIONS

from conftest import REPO, execute


def entries(lines: list[str]) -> dict[str, str]:
    """Each option's help text as one string (its continuation lines joined), by name."""
    found, name = {}, None
    for ln in lines:
        if m := re.match(r"  -(\S+)", ln):
            name = m.group(1)
            found[name] = ln[len(m.group(0)):]
        elif name and ln.startswith(" " * INDENT):
            found[name] += " " + ln.strip()
        else:
            name = None
    return {n: " ".join(t.split()) for n, t in found.items()}


def test_each_help_level_lists_exactly_its_scopes_with_the_tables_help():
    for level, scopes in (("global", {GLOBAL}), ("local", {LOCAL}), ("actions", {ACTION}),
                          ("short", {GLOBAL, ACTION}), ("all", {GLOBAL, LOCAL, ACTION})):
        lines = help_lines(level)
        listed = entries(lines)
        assert set(listed) == {n for n, o in OPTIONS.items() if o.scope in scopes}, level
        assert all(OPTIONS[n].help in text for n, text in listed.items())
        assert all(len(ln) <= WIDTH for ln in lines)
        headings = [ln for ln in lines if re.fullmatch(r" \S.*:", ln)]
        assert len(headings) == len(set(headings)) or level in ("all", "short"), level


def test_each_default_prints_once_in_its_options_unit():
    listed = entries(help_lines("all"))
    defaults = {n: re.findall(r"\(default ([^)]*)\)", t) for n, t in listed.items()}
    assert defaults["B"] == ["1048576"] and defaults["KB"] == ["1024"]
    assert defaults["MB"] == ["1"] and defaults["GB"] == ["1 MB"]
    assert defaults["smkey"] == [] and defaults["dir"] == ["filestest"]
    assert defaults["i"] == ["10"] and defaults["n"] == ["64"] and defaults["engine"] == ["auto"]
    assert defaults["bp2"] == ["0xaaaaaaaaaaaaaaaa"] and defaults["T"] == []
    assert all(len(d) <= 1 for d in defaults.values())


def test_stream_arguments_say_their_units():
    (line,) = [ln for ln in help_lines("actions") if ln.startswith("  -streams ")]
    assert line == "  -streams label lookahead(frames) size(KB) bw(MiB/s) start(s) run(s) mfile(MB)"


def test_click_help_prints_the_option_help_too():
    for argv in (["--help"], ["run", "--help"], ["--help", "compare"]):
        r = CliRunner().invoke(main, argv, prog_name="torque-async")
        assert r.exit_code == 0 and "\n".join(help_lines("all")) in r.output, argv
    assert "Commands:" in CliRunner().invoke(main, ["--help"]).output


def test_help_beside_option_names_prints_those_options_alone(capsys):
    """`-help -percR` (a newcomer's way to ask about one option) said '-percR needs 1
    argument'; `--help -streams` printed all 223 lines."""
    percr, streams = option_line("percR"), option_line("streams")
    for argv in (["-help", "-percR"], ["-percR", "-hl"], ["-h", "-percR", "-n", "4"]):
        code, out, err = execute(capsys, *argv)
        assert (code, err) == (0, "") and out.splitlines() == percr + (
            option_line("n") if "-n" in argv else []), argv
    for argv in (["--help", "-percR", "-streams"], ["run", "-percR", "--help", "-streams"],
                 ["-percR", "-streams", "--help"]):
        r = CliRunner().invoke(main, argv, prog_name="torque-async")
        assert (r.exit_code, r.output.splitlines()) == (0, percr + streams), argv


def complete(line: str) -> list[str]:
    words = line.split()
    env = {"_TORQUE_ASYNC_COMPLETE": "bash_complete", "COMP_WORDS": line,
           "COMP_CWORD": str(len(words) - (0 if line.endswith(" ") else 1))}
    r = CliRunner().invoke(main, [], prog_name="torque-async", env=env)
    return [item.split(",", 1)[1] for item in r.output.split()]


def test_shell_completion_names_commands_long_options_and_the_tables_options():
    assert complete("torque-async -Str") == ["-Striad"]
    assert complete("torque-async -p 2 -lo") == ["-load"]
    assert complete("torque-async run -sm") == ["-smkey"]
    assert complete("torque-async plot --o") == ["--output"]
    everything = complete("torque-async ")
    assert {"run", "plot", "compare", "-bcopy", "-smkey", "-p"} <= set(everything)
    assert len(complete("torque-async -load ")) == len(OPTIONS)


def test_help_flags_print_their_level_and_exit_0(capsys):
    for flag, marker, absent in (("-h", "Actions", "Local parameters"),
                                 ("-hl", "Local parameters", "Global parameters"),
                                 ("-ha", "Actions", "Local parameters"),
                                 ("-help", "Examples:", "torque-async, version: "),
                                 ("-example", "Examples:", "Global parameters"),
                                 ("-version", "torque-async, version: ", "Global parameters")):
        code, out, err = execute(capsys, flag)
        assert code == 0 and marker in out and absent not in out and err == "", flag
        if flag.startswith("-h"):                 # each help level says where the docs are
            assert out.splitlines()[-2:] == [helptext.OTHER_COMMANDS, helptext.READ_MORE], flag
    # -h named none of the subcommands: a newcomer found capacity, compare and plot in the
    # README only
    from torque_async import cli
    named = re.findall(r"(\w+)(?:,| \()", helptext.OTHER_COMMANDS.split(": ", 1)[1])
    assert sorted(named) == sorted(set(cli.main.commands) - {"run"}), named
    for name in ("README.md", "docs/options.md"):
        assert name in helptext.READ_MORE and (REPO / name).is_file(), name


def test_the_option_reference_page_is_generated_from_the_table():
    page = readme_options.PAGE.read_text()
    assert page == readme_options.text(), \
        "docs/options.md is stale: run python3 tools/readme_options.py"
    listed = entries(page.split("## Where each local option applies")[0].splitlines())
    assert set(listed) == set(OPTIONS) and all(OPTIONS[n].help in t for n, t in listed.items())


def test_a_reader_that_stops_early_is_not_an_error():
    """`torque-async -h | head -1`: the closed pipe ends the output quietly, exit 0."""
    import subprocess
    from conftest import CMD, ENV
    proc = subprocess.Popen([*CMD, "-h"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    proc.stdout.close()                     # before the command can have written a byte
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 0 and err == ""


def test_quit_shows_the_shared_memory_key_as_it_was_typed_and_its_segment_is_named(capsys):
    code, out, _ = execute(capsys, "-smkey", "0x7d08", "-quit", "-n", "4", "-bcopy")
    assert code == 0 and "globals: smkey=0x7d08" in out.splitlines()     # (it said 32008)


def test_every_example_parses_and_the_first_ones_run_long_enough_to_resolve():
    """The first example (the man page's -i 10) measured about 20 ms here, under the 100 ms a
    figure needs, so the help's first suggestion printed unresolved figures; -i 200 measured
    131-140 ms once -load took the faster of np.dot and np.add.reduce, so it is -i 500."""
    import shlex
    from torque_async import cmdline
    from torque_async.helptext import EXAMPLES
    commands = [part.split(None, 1)[1] for ln in EXAMPLES.splitlines()
                for part in re.split(r"[|;]", ln) if part.strip().startswith("torque-async -")]
    assert len(commands) == 13
    plans = [cmdline.parse(shlex.split(c)) for c in commands]
    for plan in plans[:2]:                       # 2 x 32 MB loads, n x i x size bytes each
        assert [p.group.local.n * p.group.local.i * p.group.local.size for p in plan.procs()] \
            == [8 * 500 * 4 << 20] * 2
