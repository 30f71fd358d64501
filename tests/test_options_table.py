"""The option table's own checks: each field one default, declared on one of its options; each
local option a known kind for compare and the actions it applies to."""
from __future__ import annotations

from dataclasses import fields, replace

import pytest

from torque_async import action_sets, applies, compare, options
from torque_async.options import GLOBAL, LOCAL, OPTIONS, SETTING, UNSET, WORK
from torque_async.units import KB, MB


def scope(name: str) -> list[options.Option]:
    return [o for o in OPTIONS.values() if o.scope == name]


def swapped(table: list[options.Option], name: str, **change) -> list[options.Option]:
    return [replace(o, **change) if o.name == name else o for o in table]


def test_the_defaults_are_built_from_the_table_one_per_field():
    assert options.defaults(scope(LOCAL)) == options.LOCAL_DEFAULTS
    assert options.LOCAL_DEFAULTS["size"] == MB and OPTIONS["B"].default == MB   # -B declares it
    assert OPTIONS["KB"].default is UNSET and OPTIONS["GB"].default is UNSET
    assert options.GLOBAL_DEFAULTS["help"] is None and options.GLOBAL_DEFAULTS["vl"] == 0
    assert options.GLOBAL_DEFAULTS["rankTimeout"] == 30.0 and options.GLOBAL_DEFAULTS["files"] == ()
    assert options.LOCAL_DEFAULTS["sa"] is False            # only -sa's `also` writes it
    assert {f.name: f.default for f in fields(options.Locals)} == options.LOCAL_DEFAULTS
    assert {f.name: f.default for f in fields(options.Globals)} == options.GLOBAL_DEFAULTS


def test_a_field_without_a_default_is_refused():
    with pytest.raises(TypeError, match="no option declares the default of n$"):
        options.defaults(swapped(scope(LOCAL), "n", default=UNSET))
    with pytest.raises(TypeError, match="default of size"):       # -B declares it for all four
        options.defaults(swapped(scope(LOCAL), "B", default=UNSET))


def test_a_field_with_two_defaults_is_refused():
    with pytest.raises(TypeError, match="-KB declares a second default of size"):
        options.defaults(swapped(scope(LOCAL), "KB", default=4 * KB))
    with pytest.raises(TypeError, match="-help declares a second default of help"):
        options.defaults(swapped(scope(GLOBAL), "h", default=None))   # None is a default too


def test_a_field_only_an_also_writes_needs_its_default_stated(monkeypatch):
    monkeypatch.setattr(options, "ALSO_DEFAULTS", {})
    with pytest.raises(TypeError, match="default of sa$"):
        options.defaults(scope(LOCAL))
    monkeypatch.setattr(options, "ALSO_DEFAULTS", {"sa": False, "sample": None})
    with pytest.raises(TypeError, match="sample has a default in the table and in ALSO"):
        options.defaults(swapped(scope(LOCAL), "sa", also=(("sa", True), ("sample", None))))


def test_compare_matches_tests_across_the_options_the_table_calls_settings():
    assert compare.HOW == options.settings(list(OPTIONS.values()))
    assert {"p", "affinityNumber", "sample", "sa"} <= compare.HOW            # -sa's also too
    assert not {"n", "size", "t", "bp1", "bp2"} & compare.HOW


def test_a_how_not_of_the_known_kinds_is_refused():
    table = list(OPTIONS.values())
    with pytest.raises(TypeError, match="-p says how='ignored'"):
        options.settings(swapped(table, "p", how="ignored"))
    with pytest.raises(TypeError, match="-load says how='setting'"):   # an action has none
        options.settings(swapped(table, "load", how=SETTING))
    assert "seed" not in options.settings(swapped(table, "seed", how=SETTING))   # a local's
    assert "seed" in options.settings(swapped(table, "seed", how=SETTING), options.GLOBAL)
    assert {"engine", "rtprio", "vl"} <= options.RUN_SETTINGS and "seed" not in \
        options.RUN_SETTINGS and not options.RUN_SETTINGS & compare.HOW
    with pytest.raises(TypeError, match="-sample makes sample a work, another option a setting"):
        options.settings(swapped(table, "sample", how=WORK))


def test_applies_is_built_from_each_local_options_actions():
    assert applies.APPLIES["load"] >= {"size", "stride", "bp1", "p"}    # -bp1's and -bp's field
    assert "size" not in applies.APPLIES["streams"] and "sample" not in applies.APPLIES["web"]
    assert {"streams", "memStreams"} == OPTIONS["fps"].applies == action_sets.STREAMS
    assert OPTIONS["GB"].applies == OPTIONS["B"].applies           # one field, one set of actions
    assert not OPTIONS["seed"].applies and not OPTIONS["r"].applies   # global, action: none


def test_an_option_applying_to_an_unknown_action_or_to_none_is_refused(monkeypatch):
    table = list(OPTIONS.values())
    with pytest.raises(TypeError, match="-n applies to nonsense: not an action"):
        options.check_applies(swapped(table, "n", applies=action_sets.COUNTED | {"nonsense"}))
    with pytest.raises(TypeError, match="-n is local: only a local option applies to actions, "
                                        "each to at least one"):
        options.check_applies(swapped(table, "n", applies=frozenset()))
    with pytest.raises(TypeError, match="-seed is global"):
        options.check_applies(swapped(table, "seed", applies={"r"}))
    with pytest.raises(TypeError, match="-KB applies to other actions than another option "
                                        "writing size"):
        options.check_applies(swapped(table, "KB", applies=action_sets.FILE))
    monkeypatch.setattr(options, "EVERY", action_sets.EVERY - {"web"})   # a new action unnamed
    with pytest.raises(TypeError, match="action_sets.EVERY lacks web"):
        options.check_applies(table)
