"""Random token sequences built from the option table: -quit exits 0, or one clean error (2)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torque_async.options import OPTIONS

from conftest import assert_one_clean_line, execute

NAMES = sorted(f"-{n}" for n in OPTIONS if n != "freeSharedMemory")   # it removes real segments
WORDS = ["0", "1", "8", "64", "-3", "x", "0x10", "r", "rrw", "1.5", "", "-", "--", "1e9",
         "99999999999999999999", "nan"]
token = st.one_of(st.sampled_from(NAMES), st.sampled_from(WORDS), st.text(max_size=6))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(token, max_size=12))
def test_any_token_sequence_parses_or_fails_cleanly(capsys, tokens):
    code, out, err = execute(capsys, *tokens, "-quit")
    if code == 2:
        assert_one_clean_line(code, out, err)
    else:
        assert code == 0 and out and not err, (tokens, code, err)
