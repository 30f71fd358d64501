"""Random token sequences built from the option table: -quit exits 0, or one clean error (2)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torque_async import cli
from torque_async.options import OPTIONS

NAMES = sorted(f"-{n}" for n in OPTIONS if n not in ("freeSharedMemory", "g"))
WORDS = ["0", "1", "8", "64", "-3", "x", "0x10", "r", "rrw", "1.5", "", "-", "--", "1e9",
         "99999999999999999999", "nan"]
token = st.one_of(st.sampled_from(NAMES), st.sampled_from(WORDS), st.text(max_size=6))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(token, max_size=12))
def test_any_token_sequence_parses_or_fails_cleanly(capsys, tokens):
    code = cli.execute([*tokens, "-quit"])
    out, err = capsys.readouterr()
    assert code in (0, 2), (tokens, code, err)
    if code == 2:
        assert err.startswith("torque-async: error: ") and err.count("\n") == 1, (tokens, err)
        assert out == ""
    else:
        assert out and err == ""
    assert "Traceback" not in err
