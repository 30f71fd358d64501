"""The grammar: every option of the table, order dependence, config file, aliases."""
from __future__ import annotations

import pickle
from pathlib import Path
from dataclasses import FrozenInstanceError

import pytest

from torque_async import cmdline
from torque_async.applies import APPLIES
from torque_async.options import (ACTION, GLOBAL, GLOBAL_DEFAULTS, LOCAL, LOCAL_DEFAULTS, OPTIONS,
                                  ArgError, Locals)
from torque_async.units import KB, MB

from conftest import REPO

CANDIDATES = ("8", "1", "r", "file.dat", "auto", "0", "sync", "8x8", "nv12", "fixed")


def sample_args(opt, default) -> list[str]:
    """A valid argument for each of an option's arguments, none equal to the field's default
    (a default value would not show that the option reached its field)."""
    out = []
    for arg in opt.args:
        for text in CANDIDATES:
            try:
                if arg.parse(text) == default:
                    continue
            except ArgError:
                continue
            out.append(text)
            break
        else:
            raise AssertionError(f"no sample for -{opt.name} {arg.name}")
    return out


# An action on the command line, with arguments where it needs them.
ACTION_TOKENS = {name: [f"-{name}", *{"files": ["3"], "V": ["1"], "cyclic": ["1000"], "aio": ["4"],
                                      "scan": ["disk"], "scanfile": ["disk"],
                                      "streams": "r 1 64 10 0 1 8".split(),
                                      "memStreams": "r 1 64 10 0 1 8".split()}.get(name, [])]
                 for name, o in OPTIONS.items() if o.scope == ACTION}


@pytest.mark.parametrize("name", sorted(n for n, o in OPTIONS.items() if o.scope != LOCAL))
def test_every_global_and_action_is_accepted_and_lands_in_its_field(name):
    """(The local options: test_every_local_option_before_every_action_...)"""
    opt = OPTIONS[name]
    default = GLOBAL_DEFAULTS.get(opt.field)
    tokens = [f"-{name}", *sample_args(opt, default)]
    if name in ("c", "aliasFile"):          # options that read a file: give them an empty one
        open(tokens[1], "w").close()
    plan = cmdline.parse(tokens)
    expected = opt.value([a.parse(t) for a, t in zip(opt.args, tokens[1:])])
    assert opt.scope == ACTION or expected != default
    if opt.scope == GLOBAL:
        got = getattr(plan.settings, opt.field)
        assert got == ((expected,) if opt.field == "files" else expected)
    else:
        assert plan.groups[0].action == name
        assert plan.groups[0].args == tuple(a.parse(t) for a, t in zip(opt.args, tokens[1:]))


def test_sizes_use_powers_of_two():
    groups = cmdline.parse(["-B", "100", "-r", "-KB", "4", "-r", "-MB", "2", "-r",
                            "-GB", "1", "-r"]).groups
    assert [g.local.size for g in groups] == [100, 4 * KB, 2 * MB, 1 << 30]


def test_locals_apply_only_to_the_next_action():
    plan = cmdline.parse(["-p", "1", "-n", "8", "-i", "20", "-MB", "4", "-load",
                          "-n", "256", "-V", "6", "-nh"])
    load, video = plan.groups
    assert (load.local.n, load.local.i, load.local.size) == (8, 20, 4 * MB)
    assert (video.local.n, video.local.i, video.local.size) == (256, 10, MB)
    assert video.args == (6,) and plan.settings.nh
    assert load.text == "-p 1 -n 8 -i 20 -MB 4 -load" and video.text == "-n 256 -V 6"


def test_the_man_pages_two_equivalent_lines_give_the_same_processes():
    short = cmdline.parse("-p 2 -n 8 -i 10 -MB 4 -load".split()).procs()
    long = cmdline.parse("-p 1 -n 8 -i 10 -MB 4 -load -p 1 -n 8 -i 10 -MB 4 -load".split()).procs()
    assert len(short) == len(long) == 2
    assert [p.group.local.n * p.group.local.size for p in short] == \
           [p.group.local.n * p.group.local.size for p in long]
    assert [p.index for p in short] == [0, 1] and [p.index for p in long] == [0, 0]


def test_globals_anywhere_and_last_local_wins():
    plan = cmdline.parse(["-n", "4", "-seed", "7", "-n", "5", "-bcopy", "-fast"])
    assert plan.groups[0].local.n == 5 and plan.settings.seed == 7
    assert plan.settings.slow is False and not plan.slow


def test_slow_is_the_default_with_more_than_one_process():
    assert not cmdline.parse(["-load"]).slow
    assert cmdline.parse(["-p", "2", "-load"]).slow
    assert cmdline.parse(["-load", "-bzero"]).slow


def test_bp_sets_both_patterns_and_mfile_units_exclude_each_other():
    g = cmdline.parse(["-bp", "0x1234", "-load"]).groups[0]
    assert g.local.bp1 == g.local.bp2 == 0x1234
    g = cmdline.parse(["-mfileXfer", "5", "-mfileMB", "2", "-r"]).groups[0]
    assert (g.local.mfile, g.local.mfileXfer) == (2 * MB, None)
    g = cmdline.parse(["-mfile4K", "3", "-mfileXfer", "5", "-r"]).groups[0]
    assert (g.local.mfile, g.local.mfileXfer) == (None, 5)


def test_plan_is_picklable_and_frozen():
    plan = cmdline.parse(["-p", "2", "-n", "3", "-Striad", "-spinWait"])
    again = pickle.loads(pickle.dumps(plan))
    assert again == plan and again.procs() == plan.procs()
    with pytest.raises(FrozenInstanceError):
        plan.groups[0].local.n = 4  # type: ignore[misc]
    assert isinstance(plan.groups[0].local, Locals)


def test_child_keeps_one_process():
    plan = cmdline.parse(["-child", "2", "-p", "2", "-load", "-p", "2", "-bzero"])
    (proc,) = plan.procs()
    assert proc.row == 0 and proc.group.action == "bzero" and proc.index == 0


def write(path, text):
    path.write_text(text)
    return str(path)


def test_config_globals_apply_and_its_actions_run_only_without_command_line_actions(tmp_path):
    write(tmp_path / "Torque.config", "# default workload\n-seed 11 -f conf.dat\n"
                                      "-n 4 -MB 2 -bcopy   # a comment\n")
    own = cmdline.parse(["-f", "mine.dat", "-seed", "5", "-load"], cwd=str(tmp_path))
    assert own.settings.seed == 5                       # the command line wins
    assert own.settings.files == ("mine.dat", "conf.dat")   # command-line files first
    assert [g.action for g in own.groups] == ["load"] and not own.from_config
    default = cmdline.parse([], cwd=str(tmp_path))
    assert default.settings.seed == 11 and default.from_config
    assert [(g.action, g.local.n, g.local.size) for g in default.groups] == [("bcopy", 4, 2 * MB)]
    assert default.config.endswith("Torque.config")


def test_aliases_expand(tmp_path):
    aliases = write(tmp_path / "a.alias", "# hdtv read\nhd = -n 4 -MB 8 -load\ntwo = -hd -hd\n")
    plan = cmdline.parse(["-aliasFile", aliases, "-two"])
    assert [(g.action, g.local.n) for g in plan.groups] == [("load", 4), ("load", 4)]
    assert dict(plan.aliases)["hd"] == "-n 4 -MB 8 -load"


def test_what_was_typed_before_an_alias_wins_over_the_alias_s_own(tmp_path):
    """-p 300 -dir mine before -webserver (-dir webserver -cfiles -p 100 -web) gave p=100 and
    the alias's directory; a global the alias sets too (-seed) stays the one typed, before it
    or after it. A local of the alias's later groups is the alias's; -printAlias's 'from' line
    leaves out what lost."""
    aliases = write(tmp_path / "a.alias", "two = -p 2 -seed 1 -bp 7 -load -p 3 -bzero\n")
    plan = cmdline.parse(["-aliasFile", aliases, "-seed", "9", "-p", "5", "-bp1", "4", "-two"])
    assert [(g.action, g.local.p) for g in plan.groups] == [("load", 5), ("bzero", 3)]
    assert (plan.settings.seed, plan.groups[0].local.bp1, plan.groups[0].local.bp2) == (9, 4, 7)
    assert plan.groups[0].text == "-p 5 -bp1 4 -bp 7 -load"
    plan = cmdline.parse(["-aliasFile", aliases, "-two", "-seed", "9"])
    assert [g.local.p for g in plan.groups] == [2, 3] and plan.settings.seed == 9
    shipped = cmdline.parse(["-quit", "-aliasFile", cmdline.SHIPPED_ALIASES, "-p", "300",
                             "-webFiles", "100000", "-dir", "mine", "-webserver"])
    (web,) = shipped.groups
    assert (web.local.p, web.local.dir, web.local.webFiles, web.local.cfiles) == \
        (300, "mine", 100000, True)


def test_without_a_config_the_packaged_default_workload_applies(tmp_path):
    plan = cmdline.parse([], cwd=str(tmp_path))
    assert plan.config == cmdline.PACKAGED_CONFIG and plan.from_config
    top = cmdline.parse(["-c", str(REPO / "Torque.config")])
    assert [g.text for g in plan.groups] == [g.text for g in top.groups] != []
    assert not cmdline.parse(["-load"], cwd=str(tmp_path)).from_config


def test_the_packaged_config_is_the_top_level_one():
    assert Path(cmdline.PACKAGED_CONFIG).read_bytes() == (REPO / "Torque.config").read_bytes()


LOCALS = sorted(n for n, o in OPTIONS.items() if o.scope == LOCAL)


@pytest.mark.parametrize("action", sorted(ACTION_TOKENS))
def test_every_local_option_before_every_action_is_taken_or_refused_naming_both(action):
    """The table decides every pair: taken, the value lands in the group; refused, one line
    names the option and the action (never a silent no-op)."""
    for name in LOCALS:
        opt = OPTIONS[name]
        tokens = [f"-{name}", *sample_args(opt, LOCAL_DEFAULTS.get(opt.field)),
                  *ACTION_TOKENS[action]]
        if opt.field in APPLIES[action]:
            plan = cmdline.parse(tokens)
            expected = opt.value([a.parse(t) for a, t in zip(opt.args, tokens[1:])])
            assert getattr(plan.groups[0].local, opt.field) == expected, name
        else:
            with pytest.raises(cmdline.UsageError, match=f"^-{name} does not apply to -{action}"
                                                         r"( \(.+\))?; it applies to \S"):
                cmdline.parse(tokens)


def test_a_refused_option_in_the_config_file_is_named_with_its_line(tmp_path):
    conf = tmp_path / "Torque.config"
    conf.write_text("# streams\n-n 8 -streams r 1 64 10 0 1 8\n")
    with pytest.raises(cmdline.UsageError, match=r"Torque.config:2: -n does not apply to -streams"):
        cmdline.parse([], cwd=str(tmp_path))


def test_the_table_covers_every_action_and_local_option():
    """(An option applying to no action, or to one not in the table: test_options_table.py.)"""
    from torque_async import applies
    assert set(APPLIES) == set(ACTION_TOKENS)
    assert set().union(*APPLIES.values()) == applies.LOCAL_FIELDS


def test_a_configuration_file_cannot_name_another(tmp_path):
    (tmp_path / "Torque.config").write_text("-load\n-c other.config\n")
    with pytest.raises(cmdline.UsageError, match=r"Torque.config:2: -c in a configuration file"):
        cmdline.parse([], cwd=str(tmp_path))


def test_the_readme_s_alias_path_away_from_the_checkout_says_where_the_shipped_one_is(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cmdline.UsageError) as e:
        cmdline.parse(["-aliasFile", "aliases/workloads.alias", "-webserver"])
    assert str(e.value) == ("cannot read alias file aliases/workloads.alias: No such file or "
                            f"directory (the shipped one: -aliasFile {cmdline.SHIPPED_ALIASES})")
    with pytest.raises(cmdline.UsageError) as e:
        cmdline.parse(["-aliasFile", "other.alias", "-webserver"])
    assert "shipped" not in str(e.value)


def test_a_shipped_workload_named_without_its_alias_file_says_where_it_is(tmp_path):
    with pytest.raises(cmdline.UsageError) as e:
        cmdline.parse(["-videoserver"], cwd=str(tmp_path))
    assert str(e.value) == (f"unknown option -videoserver (a shipped workload: -aliasFile "
                            f"{cmdline.SHIPPED_ALIASES} -videoserver)")
    mine = tmp_path / "mine.alias"
    mine.write_text("quick = -n 2 -bzero\n")
    with pytest.raises(cmdline.UsageError) as e:       # an alias file of its own: no hint
        cmdline.parse(["-aliasFile", str(mine), "-videoserver"], cwd=str(tmp_path))
    assert str(e.value) == "unknown option -videoserver"


@pytest.mark.parametrize("argv,config", [
    (["-c", "via.config"], "-aliasFile c.alias\n-z -bcopy\n"),     # an alias the config uses
    (["-aliasFile", "c.alias", "-z"], ""),                           # one on the command line
])
def test_an_alias_cannot_name_the_configuration_file(tmp_path, argv, config):
    """The configuration file is chosen before aliases expand: one named by an alias was never
    read (the default's groups ran under the alias's name), or crashed with a traceback."""
    (tmp_path / "c.alias").write_text("z = -c l.config\n")
    (tmp_path / "via.config").write_text(config)
    (tmp_path / "l.config").write_text("-load\n")
    with pytest.raises(cmdline.UsageError, match=r"^c.alias:1: -c in an alias: name the "):
        cmdline.parse(argv, cwd=str(tmp_path))


def test_a_repeated_config_or_alias_file_is_the_last_one_named_everywhere(tmp_path, monkeypatch):
    """As every global option: the file read is the one the plan names (it read the first)."""
    for name, action in (("a.config", "-load"), ("b.config", "-bzero")):
        (tmp_path / name).write_text(f"{action}\n")
    for name, alias in (("a.alias", "x = -store"), ("b.alias", "x = -bcopy")):
        (tmp_path / name).write_text(f"{alias}\n")
    monkeypatch.chdir(tmp_path)
    plan = cmdline.parse(["-c", "a.config", "-c", "b.config"])
    assert (plan.config, plan.settings.config) == ("b.config", "b.config")
    assert [g.action for g in plan.groups] == ["bzero"]
    plan = cmdline.parse(["-aliasFile", "a.alias", "-aliasFile", "b.alias", "-x"])
    assert [g.action for g in plan.groups] == ["bcopy"]


def test_a_configuration_file_with_a_bom_reads_and_one_not_utf8_names_its_line(tmp_path):
    (tmp_path / "bom.config").write_bytes(b"\xef\xbb\xbf-load\n")
    assert [g.action for g in cmdline.parse(["-c", str(tmp_path / "bom.config")]).groups] == \
        ["load"]
    (tmp_path / "bad.config").write_bytes(b"-n 8\n-MB 4 \xff -load\n")
    with pytest.raises(cmdline.UsageError, match=r"bad.config:2: not UTF-8 text \(byte 0xff\)$"):
        cmdline.parse(["-c", str(tmp_path / "bad.config")])


def test_an_integer_with_a_leading_zero_is_decimal_and_prefixes_say_the_base():
    """'-n 010' was refused as not an integer (Python's base-0 int), while '1_000' and other
    scripts' digits were taken."""
    plan = cmdline.parse("-n 010 -MB 0x10 -load".split())
    assert (plan.groups[0].local.n, plan.groups[0].local.size) == (10, 16 * MB)
    assert cmdline.parse("-n 0b101 -load".split()).groups[0].local.n == 5
