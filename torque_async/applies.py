"""Which local options each action honours; the scanner refuses every other one before it.

A local option changes the test of the action after it, so one that the test would ignore is
an error, named with both (exit 2), never a silent no-op. Each local option's entry in the
table (options.py) names the actions it applies to (Option.applies, from the named sets of
action_sets.py, which say why); the decisions here go by the field the option writes
(-B/-KB/-MB/-GB all set `size`).
"""
from __future__ import annotations

from .kinds import KINDS
from .options import ACTION, LOCAL, OPTIONS

LOCAL_FIELDS = {o.field for o in OPTIONS.values() if o.scope == LOCAL}
# action -> the fields of the local options that apply to it
APPLIES: dict[str, frozenset[str]] = {
    action: frozenset(o.field for o in OPTIONS.values() if action in o.applies)
    for action, a in OPTIONS.items() if a.scope == ACTION}


def field_of(name: str) -> str:
    """The field a local option writes (-sa writes sample, -bp bp1: as -sample and -bp1)."""
    return OPTIONS[name].field


def applies(option: str, action: str) -> bool:
    return field_of(option) in APPLIES[action]


# Why an option a man-page reader expects everywhere is refused where it is.
WHY = {"T": "a stream is paced by its bandwidth, -cyclic by its interval",
       "size": "a stream's frame size is its sizeKB argument, a video transfer IH x IW x 4, "
               "-cyclic moves nothing",
       **dict.fromkeys(("n", "i", "t", "ramp"), "a stream runs for its runTime argument"),
       "bp1": "STREAM's arrays hold the values its validation needs",
       "affinityParent": "loop tests are coroutines of the main process: nothing is launched",
       "sample": "-web's requests differ in size: a sample's bandwidth would not be its bytes"}


def takers(field: str) -> str:
    """The actions a field applies to, a whole family named once (memory, file, ...)."""
    if all(field in fields for fields in APPLIES.values()):
        return "every test"
    families: dict[str, list[str]] = {}
    for action, kind in KINDS.items():
        families.setdefault(kind.family, []).append(action)
    parts = []
    for family, actions in families.items():
        taking = [a for a in actions if field in APPLIES[a]]
        if len(taking) == len(actions) and len(actions) > 1:
            parts.append(f"{family} tests")
        else:
            parts += [f"-{a}" for a in taking]
    return ", ".join(parts)


def refusal(option: str, action: str) -> str:
    """Why -option cannot stand before -action: what it does apply to (and why not here)."""
    field = field_of(option)
    why = WHY.get(field, "")
    return f"-{option} does not apply to -{action}" + (f" ({why})" if why else "") + \
        f"; it applies to {takers(field)}"


def lines() -> list[str]:
    """The decisions, one line per local option in the table's order (docs/options.md, -help)."""
    return [f"  -{name:<22}{takers(o.field)}" for name, o in OPTIONS.items() if o.scope == LOCAL]
