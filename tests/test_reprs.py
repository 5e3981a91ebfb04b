"""Python reprs read without executing them (:mod:`logpipe.reprs`): the JSON reading of
plain reprs gives what :mod:`ast` gives, and so does a launch's ``server_args``."""

from __future__ import annotations

import ast
import math
import random
import re

import pytest

from logpipe.engines.sglang import server_args
from logpipe.reprs import literal, read_plain
from tests.conftest import SAMPLES


def test_plain_reprs_read_as_json_mean_what_python_reads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON reading of a plain repr (a request's meta_info) gives what
    ``ast.literal_eval`` gives, value, type and key order; what it must not read (a
    tuple, inf, an int key, an escape, a cut value, a trailing comma) goes to
    ``ast.literal_eval`` and raises or reads as it does."""

    def same(a: object, b: object) -> bool:
        if type(a) is not type(b):
            return False
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or (
                a == b and math.copysign(1, a) == math.copysign(1, b))
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        if isinstance(a, dict) and isinstance(b, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        return a == b

    def read(f: object, text: str) -> object:
        try:
            return f(text)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001
            return ("raises", type(exc).__name__)

    rnd = random.Random(7)
    atoms = [None, True, False, 0, -0.0, 0.0, 1e-8, 3159055696.9621368, 10**20, -(10**19),
             float("inf"), float("nan"), "", "None", "True false", "s'q", 's"q', "back\\s",
             "tab\t", "é\u2028", "x, 'y': 1"]

    def value(depth: int = 0) -> object:
        r = rnd.random()
        if depth < 3 and r < 0.2:
            return {rnd.choice(["a", "id", "None", 1, 2.5, "b c"]): value(depth + 1)
                    for _ in range(rnd.randint(0, 3))}
        if depth < 3 and r < 0.35:
            return [value(depth + 1) for _ in range(rnd.randint(0, 3))]
        if depth < 3 and r < 0.4:
            return tuple(value(depth + 1) for _ in range(rnd.randint(0, 3)))
        return rnd.choice(atoms + [rnd.uniform(-1e6, 1e6), rnd.randint(-999, 999)])

    texts = [repr(value()) for _ in range(3000)]
    texts += ["[1,]", "01", "", "NoneNone", "{1: 2}", "'a' ... 'b'", "[1] ... [2]",
              "{'a': 1} x",
              # what JSON reads and Python does not, or reads otherwise
              "null", "{'a': true}", "[false, 1]", "NaN", "[Infinity]", "-Infinity",
              "{'null': None}", "'true'", "'a' 'b'", "'unclosed", "[1, 'a]",
              "\n1", "[1,\n2]", "{'a':\t1}", "[1,\r2]", "\x0c1", "'a\x01b'", "[1\x00]",
              "[1e400, -1e400]", "-0", "1E5", "1.", ".5", "1_0", "0x10", "+1", "- 1",
              "[1.5e-05, -0.0]", "{'a': 1, 'a': None}", "{'b': 1, 'a': 2, 'b': 3}",
              "1" * 5000, "[" + "1" * 5000 + ", inf]"]
    plain = 0
    for text in texts:
        plain += read_plain(text)[0]
        assert same(read(ast.literal_eval, text), read(literal, text)), text
    assert 500 < plain < len(texts)  # both readings were exercised
    # a plain repr never reaches ast
    meta = ("{'id': 'r-1', 'finish_reason': {'type': 'length', 'length': 6}, "
            "'e2e_latency': 0.0666, 'cached_tokens_details': None, 'spec': [1, -2.5e-05]}")
    expected = ast.literal_eval(meta)
    monkeypatch.setattr(ast, "literal_eval", lambda text: pytest.fail("ast was used"))
    assert same(literal(meta), expected)



def test_server_args_read_fast_are_those_ast_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``server_args`` line of the samples (both styles, every era) and odd ones
    read the same with the plain-repr reading as with :mod:`ast` alone; most samples take
    the plain reading."""
    lines = {m.group() for path in SAMPLES.rglob("*") if path.is_file()
             for m in re.finditer(r"server_args=.*", path.read_text(errors="replace"))}
    assert len(lines) > 20
    lines |= {"server_args=ServerArgs(a=1, a=2)", "server_args=ServerArgs(1, a=2)",
              "server_args={1: 2, 'a': 3}", "server_args=ServerArgs(a=inf, b=1)",
              "server_args=ServerArgs()", "server_args={}", "server_args=ServerArgs(a=1,)",
              "server_args=ServerArgs(Nonex=None, b='c=d', e={'f': [1, 2.5e-05]})",
              "server_args={'a': 1} x", "server_args=ServerArgs(a=(1, 2))",
              "server_args={'a': None, 'a': True}"}
    plain = sum(server_args._plain(line.split("=", 1)[1]) is not None for line in lines)
    fast = {line: repr(server_args._parse.__wrapped__(line)) for line in lines}
    monkeypatch.setattr(server_args, "_plain", lambda body: None)
    slow = {line: repr(server_args._parse.__wrapped__(line)) for line in lines}
    assert fast == slow
    assert len(lines) // 2 < plain < len(lines)


def test_a_launch_line_read_once_gives_the_event_attrs_and_the_runs_arguments() -> None:
    """A ``server_args`` line's event attrs, as the slow lines' reader makes them (the
    arguments redacted and encoded once, for the attrs and the run's arguments), are the
    JSON of :func:`event_attrs` byte for byte, and its arguments JSON theirs, on every
    such line of the samples and on odd ones: secrets, nested secrets, no arguments, an
    unreadable line, values only ``str`` can encode."""
    import json

    from logpipe.engines.sglang.events import event_attrs
    from logpipe.engines.sglang.slowlines import read_event
    from logpipe.redaction import redact

    lines = {m.group() for path in SAMPLES.rglob("*.log") if path.is_file()
             for m in re.finditer(r"server_args=.*", path.read_text(errors="replace"))}
    assert len(lines) > 20
    lines |= {"server_args={}", "server_args=ServerArgs()", "server_args=garbage(",
              "server_args=ServerArgs(api_key='s3cret', tp_size=2, "
              "extra={'hf_token': 'abc', 'max_new_tokens': 8})",
              "server_args={'a': float('nan'), 'b': object, 'c': (1, 2)}"}
    secrets = 0
    for line in lines:
        attrs, args, text, args_json = read_event("server_args", line)
        assert attrs == json.dumps(event_attrs("server_args", line), default=str), line
        want = server_args.parse_server_args(line)
        assert args == want
        assert args_json == (json.dumps(redact(want), default=str) if want else None)
        assert text == server_args.redact_text(line, want or {})
        secrets += "s3cret" in line and "s3cret" not in attrs + text
    assert secrets == 1
