"""The documentation stays true to the command: every torque-async command in a code block of
README.md and docs/*.md still parses (run with -quit), every tool it names exists with the
options it is given, and every relative link (and its #anchor) resolves."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from torque_async import cli, cmdline, helptext, interleave

from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_VARS = {"p": "4"}                       # the loop variables the recipes use
INPUTS = {"/data/big.dat": 1 << 30}           # files the pages name as the user's own, by size
SHARED_TREE = "/shared/site"                   # a cluster's tree, made once: -quit says it is not
NO_COMMANDS = {"README.md", "CHANGELOG.md", "benchmarks.md", "options.md", "how-it-works.md",
               "hacking.md",
               "safety.md"}                   # docs/ pages that show no command to type


def code_blocks(page: Path) -> list[list[str]]:
    """The lines of each fenced code block, a backslash-continued line joined into one."""
    blocks, current = [], None
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            if current and current[-1].endswith("\\"):
                current[-1] = current[-1][:-1] + " " + line.strip()
            else:
                current.append(line)
    assert current is None, f"{page.name}: a code block is not closed"
    return blocks


def command_lines(block: list[str]) -> list[str]:
    """A block that shows a session (`$ command`, then its output) holds commands only on its
    `$` lines; any other block is all commands (or none, when no line starts one)."""
    if any(ln.startswith("$ ") for ln in block):
        return [ln[2:] for ln in block if ln.startswith("$ ")]
    return block


def commands(page: Path) -> list[list[str]]:
    """Each torque-async command (and tools/ script) of the page's code blocks, as its words: a
    line cut at ;, | and &&, a loop's `do` and an `mpiexec ...` launcher taken off, shell
    variables given SHELL_VARS."""
    found = []
    for block in code_blocks(page):
        for line in command_lines(block):
            if line.startswith(helptext.USAGE.removeprefix("usage: ")[:22]):
                continue                                         # the grammar, not a command
            for part in re.split(r"\|\||&&|[|;]", line):
                part = re.sub(r"^\s*do\s", "", part)
                if not re.match(r"\s*(torque-async|mpiexec|python3 tools/)", part) or \
                        re.match(r"\s*torque-async:", part):     # (its messages, not a command)
                    continue
                words = shlex.split(re.sub(r"\$(\w+)", lambda m: SHELL_VARS[m.group(1)], part),
                                    comments=True)
                if words[0] == "mpiexec":
                    words = words[words.index("torque-async"):]
                found.append(words)
    return found


def test_the_pages_hold_commands_to_check():
    """The extraction finds the commands a reader copies: the README's recipes at least."""
    readme = commands(REPO / "README.md")
    assert len([c for c in readme if c[0] == "torque-async"]) >= 15
    assert {c[1] for c in readme if c[0] == "torque-async" and len(c) > 1} >= {
        "compare", "plot", "capacity", "-baseline"}
    assert ["torque-async"] in readme
    assert ["torque-async", "-rtprio", "50", "-bufferFramesAll", "3", "-fps"] == \
        [c for c in readme if "-fps" in c][0][:6]                 # a continued line is joined
    assert sum(len(commands(p)) for p in PAGES) >= 60


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """The pages' paths made true in a scratch directory: the checkout's aliases/, and the
    user's input files (sparse), named by their place in it."""
    (tmp_path / "aliases").symlink_to(REPO / "aliases")
    named = {}
    for path, size in INPUTS.items():
        stand_in = tmp_path / "inputs" / path.lstrip("/")
        stand_in.parent.mkdir(parents=True, exist_ok=True)
        with open(stand_in, "wb") as f:
            f.truncate(size)
        named[path] = str(stand_in)
    return named


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_on_the_page_still_parses(page, inputs, capsys):
    checked = 0
    for words in commands(page):
        if words[0] == "python3":                        # a tool: it exists, with its options
            tool = REPO / words[1]
            assert words[1].startswith("tools/") and tool.is_file(), words
            source = tool.read_text()
            flags = [w.split("=")[0] for w in words[2:] if w.startswith("--")]
            assert all(f'"{f}"' in source for f in flags), words
            continue
        args = [inputs.get(w, w) for w in words[1:]]
        if args[:1] in (["plot"], ["compare"], ["capacity"]):   # the subcommand's options parse
            cli.main.commands[args[0]].make_context(args[0], args[1:])
            if "--interleave" in args:                   # and each plan, as one quoted argument
                for plan in args[args.index("--") + 1:]:
                    interleave.plan_args(plan)
            elif args[0] == "capacity" and "--" in args:  # and its plan's grammar
                cmdline.parse(args[args.index("--") + 1:])
        elif SHARED_TREE in args and "-cfiles" not in args:   # parsed whole, to the tree's check
            code = cli.execute([*args, "-quit"])
            err = capsys.readouterr().err
            assert re.search(rf"there is no -(files|web) tree .*in {SHARED_TREE}", err), words
            assert code == 2, words
        else:
            code = cli.execute([*args, "-quit"])
            out, err = capsys.readouterr()
            assert (code, err) == (0, ""), (words, err)
            assert out.startswith("command line: torque-async"), words
        checked += 1
    assert checked or (page.parent.name == "docs" and page.name in NO_COMMANDS), page.name


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    inside = False
    for line in page.read_text().splitlines():
        inside ^= line.startswith("```")
        if not inside and (m := re.match(r"#{1,6} (.+)", line)):
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            seen.setdefault(f"{base}-{n}" if n else base, 1)
    return set(seen)


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"\w+:", t)]


def test_every_relative_link_resolves_to_a_file_and_its_anchor():
    total = 0
    for page in PAGES:
        for target in links(page):
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            assert where.is_file(), f"{page.name}: {target}"
            if anchor:
                assert anchor in anchors(where), f"{page.name}: {target}"
            total += 1
    assert total >= 60


def test_the_readme_is_short_and_starts_with_its_two_set_up_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 400
    assert lines[3].startswith("./tools/setup.sh && . .venv/bin/activate && torque-async ")
    assert lines[4].startswith("./tools/setup.sh && . .venv/bin/activate && python3 -m pytest -q ")
    docs = {p.name for p in PAGES[1:]}
    assert {f"docs/{n}" for n in docs - {"README.md"}} <= set(re.findall(
        r"\]\((docs/[\w.-]+)", "\n".join(lines))), "a docs page the README does not link"
