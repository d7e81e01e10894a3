"""The C span decoder (`_otlpdecode`) against the protobuf runtime's path (`decode_python`).

Differential throughout: the C decoder must give the very records the protobuf runtime (upb) gives, and
raise ValueError exactly where upb refuses the bytes. Values are compared by type and repr, so 1 vs True,
0.0 vs -0.0 and NaN are told apart. A seeded mutation fuzz (no hypothesis here) covers the rest.

No deliberate difference from decode_python is known; upb's wire rules that the C decoder copies (found by
probing upb) are listed at the top of collector/receiver/_otlpdecode.c and each is pinned by a case below.

Span attributes nobody reads (decode.UNREAD_KEYS / UNREAD_PREFIXES) are left out by both paths; the C
decoder only checks their bytes, so refusals stay identical (pinned below, and by the fuzz, whose strings
include such keys). A test fails if a normaliser names one of them.

Both add the status message and the last exception event's exception.type / .message / .escaped to the
attributes (decode.py's docstring); the C decoder makes values of those three event attributes only, so the
wire forms of events (names after attributes, keys given twice, merged values) are pinned below too.

`python -m tests.test_decode` prints the per-span timing of both paths over the corpus, and of the C decoder
with and without leaving out unread attributes on spans carrying a 50 kB gen_ai.tool.definitions.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import math
import os
import random
import shutil
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from mastwatch.collector import normalize as normalize_pkg
from mastwatch.collector.model.content import PREVIEW_CHARS, Content
from mastwatch.collector.normalize import normalize_span
from mastwatch.collector.normalize.genai import TOOL_ARGUMENTS
from mastwatch.collector.receiver import decode as decode_mod
from mastwatch.collector.receiver.decode import (
    UNREAD_KEYS,
    UNREAD_PREFIXES,
    SpanRecord,
    count_spans_python,
    decode,
    decode_python,
)
from tests.otlp_corpus import corpus

# Tests of the C decoder's own interface (the protobuf runtime's path has none of it).
needs_c_decoder = pytest.mark.skipif(decode_mod._decode_c is None, reason="the C decoder is not built or not used")
FUZZ_ITERATIONS = int(os.environ.get("MASTWATCH_FUZZ_ITERATIONS", "20000"))
FUZZ_SEED = 20240611

TRACE = bytes(range(1, 17))
SPAN = bytes(range(21, 29))
PARENT = bytes(range(31, 39))

# --- wire bytes ---------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(fn: int, wt: int) -> bytes:
    return varint(fn << 3 | wt)


def ld(fn: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return tag(fn, 2) + varint(len(payload)) + payload


def vf(fn: int, n: int) -> bytes:
    """A varint field."""
    return tag(fn, 0) + varint(n)


def f64(fn: int, raw: bytes) -> bytes:
    return tag(fn, 1) + raw


def group(fn: int, body: bytes = b"") -> bytes:
    return tag(fn, 3) + body + tag(fn, 4)


def ser(msg: Any) -> bytes:
    return msg.SerializeToString()


def span_bytes(extra: bytes = b"", **fields: Any) -> bytes:
    fields.setdefault("trace_id", TRACE)
    fields.setdefault("span_id", SPAN)
    fields.setdefault("name", "op")
    return ser(Span(**fields)) + extra


def request(*spans: bytes, resource: bytes | None = None, rs_extra: bytes = b"", ss_extra: bytes = b"",
            req_extra: bytes = b"") -> bytes:
    """A request of one ResourceSpans holding one ScopeSpans with `spans` (raw Span contents)."""
    scope_spans = b"".join(ld(2, s) for s in spans) + ss_extra
    rs = (ld(1, resource) if resource is not None else b"") + ld(2, scope_spans) + rs_extra
    return ld(1, rs) + req_extra


def attr_span(*kvs: bytes) -> bytes:
    """A span whose attributes are the given raw KeyValue contents."""
    return span_bytes(b"".join(ld(9, kv) for kv in kvs))


def kv(key: str, value: AnyValue | None = None) -> bytes:
    return ser(KeyValue(key=key, value=value) if value is not None else KeyValue(key=key))


def service_resource(value: AnyValue | None) -> bytes:
    return ser(Resource(attributes=[KeyValue(key="host.name", value=AnyValue(string_value="h"))])) + ld(
        1, kv("service.name", value))


# --- comparison ---------------------------------------------------------------------------------


def canon(v: Any) -> Any:
    """A comparable form that tells bool from int, -0.0 from 0.0 and keeps NaN equal to itself."""
    if v is None:
        return None
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, bytes):
        return ("bytes", v)
    if isinstance(v, list | tuple):
        return (type(v).__name__, [canon(x) for x in v])
    if isinstance(v, dict):
        return ("dict", [(canon(k), canon(x)) for k, x in v.items()])
    raise TypeError(type(v))


ERROR = "ValueError"


def outcome(fn: Callable[[bytes], Any], data: bytes) -> Any:
    try:
        spans, rejected = fn(data)
    except ValueError:
        return ERROR
    return [(type(r).__name__, canon(tuple(r))) for r in spans], canon(rejected)


def assert_same(data: bytes, expect_error: bool | None = None) -> Any:
    want = outcome(decode_python, data)
    got = outcome(decode, data)
    assert got == want, f"C {got!r:.400} != python {want!r:.400} for {data.hex()}"
    if expect_error is not None:
        assert (want == ERROR) == expect_error, f"decode_python gave {want!r:.200} for {data.hex()}"
    assert_counted(data)
    return want


def assert_counted(data: bytes) -> None:
    """count_spans (the C reader and the protobuf runtime's) gives the spans a request decodes to, the rejected
    ones too; where the C reader refuses a request, decoding refuses it too (it reads only the outer framing)."""
    try:
        spans, rejected = decode_python(data)
    except ValueError:
        with pytest.raises(ValueError):
            count_spans_python(data)
        with contextlib.suppress(ValueError):  # it may count a request broken inside a span
            decode_mod.count_spans(data)
        return
    assert decode_mod.count_spans(data) == count_spans_python(data) == len(spans) + rejected, data.hex()


# --- the real corpus ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_bytes() -> list[bytes]:
    return [ser(req) for _, _, req in corpus()]


def test_corpus_matches(corpus_bytes: list[bytes]) -> None:
    total = 0
    for data in corpus_bytes:
        want = assert_same(data, expect_error=False)
        total += len(want[0])
        got = decode(data)
        assert all(type(r) is SpanRecord for r in got.spans)
    assert total > 100


def test_whole_corpus_in_one_request(corpus_bytes: list[bytes]) -> None:
    assert_same(b"".join(corpus_bytes), expect_error=False)  # concatenated requests merge


# --- values ---------------------------------------------------------------------------------------

VALUES: list[AnyValue] = [
    AnyValue(string_value="plain"),
    AnyValue(string_value=""),
    AnyValue(string_value="héllo wörld ✓ 日本語 🦀 \U0010ffff \x00 end"),
    AnyValue(string_value="x" * 300),
    AnyValue(bool_value=True),
    AnyValue(bool_value=False),
    AnyValue(int_value=0),
    AnyValue(int_value=1),
    AnyValue(int_value=-1),
    AnyValue(int_value=-(2**63)),
    AnyValue(int_value=2**63 - 1),
    AnyValue(int_value=300),
    AnyValue(double_value=0.0),
    AnyValue(double_value=-0.0),
    AnyValue(double_value=1.5),
    AnyValue(double_value=math.inf),
    AnyValue(double_value=-math.inf),
    AnyValue(double_value=math.nan),
    AnyValue(double_value=5e-324),
    AnyValue(double_value=1.7976931348623157e308),
    AnyValue(bytes_value=b""),
    AnyValue(bytes_value=bytes(range(256))),
    AnyValue(array_value=ArrayValue()),
    AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue(string_value="a"), AnyValue()])),
    AnyValue(kvlist_value=KeyValueList()),
    AnyValue(kvlist_value=KeyValueList(values=[
        KeyValue(key="a", value=AnyValue(int_value=1)),
        KeyValue(key="b"),
        KeyValue(key="a", value=AnyValue(double_value=2.5)),  # duplicate key: the later wins
        KeyValue(key="", value=AnyValue(array_value=ArrayValue(values=[
            AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="deep", value=AnyValue(bytes_value=b"\xff"))])),
            AnyValue(array_value=ArrayValue(values=[AnyValue(bool_value=True), AnyValue(double_value=-0.0)])),
        ]))),
    ])),
    AnyValue(),
    AnyValue(string_value_strindex=3),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: v.WhichOneof("value") or "unset")
def test_attribute_values(value: AnyValue) -> None:
    assert_same(request(attr_span(kv("k", value), kv("other", AnyValue(int_value=7)))), expect_error=False)


@pytest.mark.parametrize("value", [*VALUES, None], ids=lambda v: (v.WhichOneof("value") or "unset") if v else "none")
def test_service_name_values(value: AnyValue | None) -> None:
    assert_same(request(span_bytes(), resource=service_resource(value)), expect_error=False)


RELEASE_KEYS = ("service.version", "deployment.environment.name", "deployment.environment")


@pytest.mark.parametrize("key", RELEASE_KEYS)
@pytest.mark.parametrize("value", VALUES, ids=lambda v: v.WhichOneof("value") or "unset")
def test_release_values(key: str, value: AnyValue) -> None:
    assert_same(request(span_bytes(), resource=ser(Resource(attributes=[KeyValue(key=key, value=value)]))),
                expect_error=False)


def test_a_span_takes_its_release_from_its_resource() -> None:
    """service.version and the deployment environment (the newer key, else the older one) come with each span of the
    resource, "" when it names none; the last value of a key wins."""
    def resource(*pairs: tuple[str, str]) -> bytes:
        return ser(Resource(attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in pairs]))

    cases = [((("service.version", "1.4.2"), ("deployment.environment.name", "production")), ("1.4.2", "production")),
             ((("deployment.environment", "staging"),), ("", "staging")),
             ((("deployment.environment", "staging"), ("deployment.environment.name", "production")),
              ("", "production")),
             ((("deployment.environment.name", ""), ("deployment.environment", "staging")), ("", "staging")),
             ((("service.version", "1"), ("service.version", "2")), ("2", "")),
             ((), ("", ""))]
    for pairs, (version, environment) in cases:
        data = request(span_bytes(), span_bytes(span_id=b"\x02" * 8), resource=resource(*pairs))
        for decoded in (decode(data), decode_python(data)):
            assert {(r.version, r.environment) for r in decoded.spans} == {(version, environment)}, pairs


def test_all_values_in_one_span() -> None:
    kvs = [kv(f"k{i}", v) for i, v in enumerate(VALUES)]
    assert_same(request(attr_span(*kvs), attr_span(*reversed(kvs))), expect_error=False)


@needs_c_decoder
def test_short_texts_are_shared() -> None:
    """Short ASCII keys, string values and span names come out as one str per text, the same from request to
    request; keys are interned (the very objects the compiled conventions compare keys with), values and names
    not (ids would pile up where interned strings are immortal). Colliding, long and non-ASCII texts decode to the
    same values as without sharing."""
    texts = [f"gen_ai.k{i}" for i in range(5000)]  # more than the table's slots: collisions take slots over
    texts += ["x" * 64, "y" * 65, "ключ", TOOL_ARGUMENTS[0]]
    data = request(*(span_bytes(ld(9, kv(t, AnyValue(string_value=t))), name=t) for t in texts))
    assert_same(data, expect_error=False)
    first, again = decode(data).spans, decode(data).spans
    for a, b, text in zip(first, again, texts, strict=True):
        ((key, value),) = a.attributes.items()
        ((key_again, value_again),) = b.attributes.items()
        assert key == value == a.name == text
        if len(text.encode()) <= 64 and text.isascii():
            assert sys.intern(key) is key is key_again
            assert value is a.name and value_again is b.name  # values and names share one table
            assert sys.intern(text) is not value
        else:
            assert value is not a.name
    assert next(iter(first[-1].attributes)) is TOOL_ARGUMENTS[0]
    few = request(attr_span(kv("gen_ai.request.model", AnyValue(string_value="gpt-4.1-mini"))))
    assert decode(few).spans[0].attributes["gen_ai.request.model"] is decode(few).spans[0].attributes[
        "gen_ai.request.model"]


@needs_c_decoder
def test_ids_are_shared_within_a_request() -> None:
    """Within a request a trace's spans share one trace id object, and children their parent's span id, which is
    the parent's own span id object when it comes after them (as exporters send them). 600 spans over 300 traces
    (more ids than the tables' slots: colliding ids take slots over) decode to the same records as without
    sharing."""
    traces = [i.to_bytes(2, "big") * 8 for i in range(1, 301)]
    spans = []
    for n, trace in enumerate(traces):
        root = (2 * n + 1).to_bytes(8, "big")
        spans.append(span_bytes(trace_id=trace, span_id=(2 * n + 2).to_bytes(8, "big"), parent_span_id=root))
        spans.append(span_bytes(trace_id=trace, span_id=root))
    data = request(*spans)
    assert_same(data, expect_error=False)
    records = decode(data).spans
    for child, root in zip(records[::2], records[1::2], strict=True):
        assert child.trace_id is root.trace_id
        assert child.parent_span_id is root.span_id
        assert root.parent_span_id == b""
    again = decode(data).spans
    assert again[0].trace_id == records[0].trace_id and again[0].trace_id is not records[0].trace_id


def test_raw_varint_values() -> None:
    """Values upb accepts in forms an encoder would not write."""
    cases = [
        vf(3, 2**64 - 1),                           # int_value -1
        tag(3, 0) + b"\xff" * 9 + b"\x7f",          # 10-byte varint, bits past 64 dropped
        vf(2, 2),                                    # bool_value 2 -> True
        vf(2, 1 << 40),                              # bool_value: any bit set
        vf(2, 1 << 63),
        tag(3, 0) + b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # non-canonical 1
        tag(1, 2) + b"\x81\x80\x80\x80\x00" + b"x",  # 5-byte length
        b"\x8a\x80\x80\x80\x00" + b"\x01x",          # 5-byte tag for string_value
        vf(8, 5),                                    # string_value_strindex
    ]
    for raw in cases:
        assert_same(request(attr_span(ld(1, b"k") + ld(2, raw))), expect_error=False)


# --- repeated occurrences of non-repeated fields --------------------------------------------------


def test_last_occurrence_wins_and_messages_merge() -> None:
    sv = ser(AnyValue(string_value="s"))
    iv = ser(AnyValue(int_value=5))
    arr1 = ser(AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1)])))
    arr2 = ser(AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=2), AnyValue(string_value="x")])))
    kvl1 = ser(AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(int_value=1)),
                                                          KeyValue(key="b", value=AnyValue(int_value=2))])))
    kvl2 = ser(AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(bool_value=True))])))
    value_sequences = [
        [sv, iv], [iv, sv], [arr1, arr2], [arr1, iv, arr2], [arr1, kvl1, arr2], [kvl1, kvl2], [kvl1, arr1, kvl2],
        [arr1, ser(AnyValue())], [sv, ser(AnyValue(string_value_strindex=1))],
        [ser(AnyValue(string_value_strindex=1)), sv],
        [arr1 + arr2], [sv + iv + arr1 + kvl1],
    ]
    for seq in value_sequences:
        kv_raw = ld(1, b"k") + b"".join(ld(2, v) for v in seq)
        assert_same(request(attr_span(kv_raw)), expect_error=False)
        for key in ("service.name", *RELEASE_KEYS):
            assert_same(request(span_bytes(), resource=ld(1, ld(1, key.encode()) + b"".join(ld(2, v) for v in seq))),
                        expect_error=False)
    # two keys: the last is the key
    assert_same(request(attr_span(ld(1, b"first") + ld(2, iv) + ld(1, b"second"))), expect_error=False)
    assert_same(request(attr_span(ld(2, iv))), expect_error=False)  # no key: ""
    # duplicate attribute keys in a span: the later wins
    assert_same(request(attr_span(kv("a", AnyValue(int_value=1)), kv("b", AnyValue(int_value=2)),
                                  kv("a", AnyValue(string_value="z")))), expect_error=False)
    # span scalars given twice
    s = span_bytes()
    for extra in [ld(5, b"second name"), ld(1, bytes(16)), ld(1, TRACE[::-1]), ld(2, PARENT), ld(4, PARENT),
                  ld(4, b""), f64(7, struct.pack("<Q", 2**64 - 1)), f64(8, struct.pack("<Q", 12345)),
                  ld(15, ser(Status(code=2))) + ld(15, ser(Status(message="m"))),
                  ld(15, ser(Status(code=1))) + ld(15, ser(Status(code=2))),
                  ld(15, ser(Status(code=2))) + ld(15, vf(3, 0))]:
        assert_same(request(s + extra), expect_error=False)
    # resources given twice merge; service.name twice: the last wins, wherever the resource is
    r1 = ser(Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="one"))]))
    r2 = ser(Resource(attributes=[KeyValue(key="x", value=AnyValue(int_value=1))]))
    r3 = ser(Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="three"))]))
    scope = ld(2, ld(2, span_bytes()))
    for rs in [ld(1, r1) + ld(1, r2) + scope, ld(1, r1) + scope + ld(1, r3), scope + ld(1, r3) + ld(1, r2),
               ld(1, r1 + r3) + scope, ld(1, r3 + r2 + r1) + scope + scope]:
        assert_same(ld(1, rs), expect_error=False)


def test_several_resources_and_scopes() -> None:
    def rs(service: str, n: int) -> ResourceSpans:
        return ResourceSpans(
            resource=Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value=service))]),
            scope_spans=[ScopeSpans(scope=InstrumentationScope(name=f"s{j}", version="1"),
                                    spans=[Span(trace_id=TRACE, span_id=bytes([j + 1, i + 1, 0, 0, 0, 0, 0, 1]),
                                                name=f"op{i}", start_time_unix_nano=i, end_time_unix_nano=i + 1)
                                           for i in range(n)]) for j in range(2)])

    assert_same(ser(ExportTraceServiceRequest(resource_spans=[rs("a", 2), ResourceSpans(), rs("b", 3)])),
                expect_error=False)


# --- ids ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fields", [
    {},
    {"trace_id": b""},
    {"trace_id": TRACE[:15]},
    {"trace_id": TRACE + b"\x01"},
    {"trace_id": bytes(16)},
    {"trace_id": bytes(15) + b"\x01"},
    {"span_id": b""},
    {"span_id": SPAN[:7]},
    {"span_id": SPAN + b"\x01"},
    {"span_id": bytes(8)},
    {"parent_span_id": PARENT},
    {"parent_span_id": PARENT[:7]},
    {"parent_span_id": PARENT + b"\x01"},
    {"parent_span_id": bytes(8)},
], ids=repr)
def test_ids(fields: dict[str, bytes]) -> None:
    want = assert_same(request(span_bytes(**fields), span_bytes(name="ok")), expect_error=False)
    assert len(want[0]) + want[1][1] == 2


def test_ids_as_wrong_wire_type_are_unknown_fields() -> None:
    bare = ser(Span(name="n"))
    assert_same(request(bare + ld(1, TRACE) + ld(2, SPAN) + vf(1, 5)), expect_error=False)
    assert_same(request(bare + vf(1, 5) + ld(2, SPAN)), expect_error=False)  # trace id missing: rejected


def test_times_status_and_others() -> None:
    for code in [0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1, 2**32 + 2, 2**63, 2**64 - 1]:
        assert_same(request(span_bytes(ld(15, vf(3, code)))), expect_error=False)
    s = span_bytes(start_time_unix_nano=2**64 - 1, end_time_unix_nano=1, kind=Span.SPAN_KIND_CLIENT, flags=0x301,
                   trace_state="a=b", dropped_attributes_count=3, dropped_events_count=4, dropped_links_count=5,
                   events=[Span.Event(time_unix_nano=1, name="ev", attributes=[KeyValue(key="e")])],
                   links=[Span.Link(trace_id=TRACE, span_id=SPAN, trace_state="x",
                                    attributes=[KeyValue(key="l", value=AnyValue(int_value=1))])],
                   status=Status(code=Status.STATUS_CODE_ERROR, message="boom"))
    assert_same(request(s), expect_error=False)
    assert_same(request(span_bytes(f64(7, b"\x01" * 8) + vf(7, 5) + vf(6, 2**64 - 1))), expect_error=False)


def test_empty_and_degenerate_requests() -> None:
    for data in [b"", ld(1, b""), ld(1, ld(2, b"")), ld(1, ld(2, ld(2, b""))), request(b""),
                 request(span_bytes(), resource=b""), ld(1, ld(1, b"") * 3)]:
        assert_same(data, expect_error=False)
    assert decode(b"") == ([], 0)


# --- the status message and exception events, added to the attributes -----------------------------


def exc_event(name: str = "exception", **attrs: AnyValue) -> bytes:
    """A Span.Event field (11) named `name` with the given attributes (keys with "_" for ".")."""
    return ld(11, ser(Span.Event(time_unix_nano=5, name=name, attributes=[
        KeyValue(key=k.replace("_", "."), value=v) for k, v in attrs.items()])))


def sv(text: str) -> AnyValue:
    return AnyValue(string_value=text)


def added(data: bytes) -> list[dict[str, Any]]:
    """Each span's attributes, the same from both decoders."""
    assert_same(data, expect_error=False)
    return [r.attributes for r in decode(data).spans]


def test_status_message_and_last_exception_event_are_added() -> None:
    sdk = exc_event(exception_type=sv("TimeoutError"), exception_message=sv("upstream timed out"),
                    exception_stacktrace=sv("Traceback (most recent call last):\n" * 50),
                    exception_escaped=sv("False"))  # as opentelemetry-sdk's record_exception writes it
    status = ld(15, ser(Status(code=2, message="TimeoutError: upstream timed out")))
    assert added(request(span_bytes(ld(9, kv("k", sv("v"))) + sdk + status))) == [{
        "k": "v", "exception.type": "TimeoutError", "exception.message": "upstream timed out",
        "exception.escaped": "False", "otel.status_description": "TimeoutError: upstream timed out"}]
    # the last exception event counts, whole: what it lacks is not taken from an earlier one
    first = exc_event(exception_type=sv("A"), exception_message=sv("first"))
    assert added(request(span_bytes(first + exc_event(exception_type=sv("B")) + exc_event("log", x=sv("y"))))) == [
        {"exception.type": "B"}]
    # events of other names, and exception attributes of the span itself, are left as they are
    assert added(request(span_bytes(exc_event("retry", exception_type=sv("X"))))) == [{}]
    own = ld(9, kv("exception.type", sv("Own"))) + ld(9, kv("exception.message"))  # the span's, even unset
    assert added(request(span_bytes(sdk + own + ld(15, ser(Status(message="m")))))) == [{
        "exception.type": "Own", "exception.message": None, "exception.escaped": "False",
        "otel.status_description": "m"}]
    assert added(request(span_bytes(ld(9, kv("otel.status_description", AnyValue(int_value=3))) + status))) == [
        {"otel.status_description": 3}]
    assert added(request(span_bytes(ld(15, ser(Status(code=2)))))) == [{}]  # no message, nothing added
    # strings and booleans only
    typed = exc_event(exception_type=AnyValue(int_value=7), exception_message=VALUES[23],  # an array
                      exception_escaped=AnyValue(bool_value=True))
    assert added(request(span_bytes(typed))) == [{"exception.escaped": True}]
    for value in VALUES:
        assert_same(request(span_bytes(exc_event(exception_type=value, exception_message=value,
                                                 exception_escaped=value))), expect_error=False)


@needs_c_decoder
def test_key_marks_are_those_of_the_keys_kept() -> None:
    """A record's key marks are the OR of its attribute keys' (normalize.span.KEY_MARKS), the keys added from the
    status and the exception event counted, keys left out not, whether a key is shared, long or seen again."""
    long_key = "gen_ai." + "x" * 80  # longer than the decoder shares
    marks = {"gen_ai.tool.name": 1, "error.type": 2, "exception.type": 4, long_key: 8, "gen_ai.prompt": 16,
             "otel.status_description": 32}
    span = span_bytes(ld(9, kv("gen_ai.tool.name", sv("t"))) + ld(9, kv(long_key, sv("v"))) +
                      ld(9, kv("gen_ai.prompt", sv("left out"))) + ld(9, kv("other", sv("o"))) +
                      exc_event(exception_type=sv("TimeoutError")))
    plain = span_bytes(ld(9, kv("other", sv("o"))))
    try:
        decode_mod._configure_c(UNREAD_KEYS, UNREAD_PREFIXES, PREVIEW_CHARS, marks)
        for _ in range(2):  # the second time from the shared keys
            records = decode(request(span, plain, span)).spans
            assert [r.key_marks for r in records] == [1 | 4 | 8, 0, 1 | 4 | 8]
        with pytest.raises(TypeError):
            decode_mod._configure_c((), (), PREVIEW_CHARS, [("k", 1)])
    finally:
        decode_mod._configure_c(UNREAD_KEYS, UNREAD_PREFIXES, PREVIEW_CHARS, normalize_pkg.span.KEY_MARKS)
    (record,) = decode(request(span)).spans
    assert record.key_marks == normalize_pkg.span.key_marks(record.attributes) > 0
    assert normalize_span(record) == normalize_span(record._replace(key_marks=-1))  # -1: scanned instead


def test_added_strings_are_cut_to_the_preview_length() -> None:
    for lead in (PREVIEW_CHARS - 2, PREVIEW_CHARS - 1, PREVIEW_CHARS, PREVIEW_CHARS + 1):
        for char in ("a", "é", "✓", "🦀"):
            text = "x" * lead + char * 3 + "tail" * 1000
            (attrs,) = added(request(span_bytes(exc_event(exception_message=sv(text)) + ld(15, ld(2, text.encode())))))
            assert attrs == {"exception.message": text[:PREVIEW_CHARS], "otel.status_description": text[:PREVIEW_CHARS]}


@needs_c_decoder
def test_the_preview_length_is_a_setting_of_the_c_decoder() -> None:
    with unread_kept():
        decode_mod._configure_c((), (), 3)
        assert decode(request(span_bytes(ld(15, ld(2, "日本語です".encode()))))).spans[0].attributes == {
            "otel.status_description": "日本語"}


def test_wire_forms_of_events_and_status() -> None:
    t, m = b"exception.type", b"exception.message"
    v1, v2 = ld(2, ser(sv("one"))), ld(2, ser(sv("two")))
    events = [
        ld(2, b"exception") + ld(3, ld(1, t) + v1) + ld(3, ld(1, t) + v2),  # an attribute twice: the last wins
        ld(3, ld(1, t) + v1) + ld(2, b"exception"),                            # the name after the attributes
        ld(2, b"exception") + ld(3, ld(1, t) + v1) + ld(2, b"log"),            # renamed: not an exception
        ld(2, b"log") + ld(3, ld(1, t) + v1) + ld(2, b"exception"),
        ld(2, b"exception") + ld(3, v1 + ld(1, t)),                            # the value before the key
        ld(2, b"exception") + ld(3, ld(1, t) + v1 + ld(1, b"k")),              # the last key counts
        ld(2, b"exception") + ld(3, ld(1, b"k") + v1 + ld(1, m)),
        ld(2, b"exception") + ld(3, ld(1, t) + v1 + ld(1, U)),
        ld(2, b"exception") + ld(3, ld(1, t) + v1 + ld(2, ser(AnyValue(int_value=1)))),  # merged: an int
        ld(2, b"exception") + ld(3, ld(1, t) + ld(2, ser(AnyValue(int_value=1))) + v2),
        ld(2, b"exception") + ld(3, ld(1, t) + ld(2, ser(sv("a")) + ser(sv("b")))),
        ld(2, b"exception") + ld(3, ld(1, t)),                                  # no value: None, not added
        ld(2, b"exception") + ld(3, ld(1, t) + v1) + ld(3, ld(1, t)),
        ld(2, b"exceptions") + ld(3, ld(1, t) + v1),
        ld(2, b"Exception") + ld(3, ld(1, t) + v1),
        ld(2, b"exception") + ld(3, ld(1, b"exception.typ") + v1) + ld(3, ld(1, b"exception.types") + v2),
        ld(2, b"exception") + ld(3, ld(1, b"exception.escaped") + ld(2, vf(2, 2))),
        ld(2, b"exception") + b"".join(ld(3, u + ld(1, t) + u + v1 + u) for u in UNKNOWN_FIELDS),
        ld(2, b"exception") + vf(2, 1) + group(3) + ld(3, ld(1, t) + v1),      # known fields, other wire types
        ld(2, b"exception") + ld(3, ld(1, t) + ld(2, nested_array(40))),
    ]
    for event in events:
        assert_same(request(span_bytes(ld(11, event))), expect_error=False)
        assert_same(request(span_bytes(ld(11, event) + ld(11, ld(2, b"exception")))), expect_error=False)
    assert added(request(span_bytes(ld(11, events[0])))) == [{"exception.type": "two"}]
    assert added(request(span_bytes(ld(11, events[1])))) == [{"exception.type": "one"}]
    assert added(request(span_bytes(ld(11, events[2])))) == [{}]
    for status in [ld(15, ld(2, b"a")) + ld(15, ld(2, b"b")), ld(15, ld(2, b"a") + ld(2, b"")),
                   ld(15, ld(2, b"a")) + ld(15, vf(3, 2)), ld(15, ld(2, b"a") + vf(2, 1)), ld(15, vf(2, 1))]:
        assert_same(request(span_bytes(status)), expect_error=False)
    assert added(request(span_bytes(ld(15, ld(2, b"a")) + ld(15, ld(2, b"b"))))) == [
        {"otel.status_description": "b"}]
    assert added(request(span_bytes(ld(15, ld(2, b"a") + ld(2, b""))))) == [{}]
    # spans left out for their ids add nothing, and leak nothing
    assert_same(request(span_bytes(trace_id=b"", status=Status(message="m")) + events[0]), expect_error=False)


def test_malformed_exception_events_are_refused() -> None:
    t = b"exception.type"
    for bad in BAD_UTF8:
        for event in [ld(2, b"exception") + ld(3, ld(1, t) + ld(2, ld(1, bad))),
                      ld(2, b"exception") + ld(3, ld(1, t) + ld(2, ld(1, bad) + vf(3, 1))),
                      ld(2, b"exception") + ld(3, ld(1, b"exception.stacktrace") + ld(2, ld(1, bad))),
                      ld(2, b"exception") + ld(3, ld(1, bad) + ld(1, t) + ld(2, ld(1, b"v"))),
                      ld(2, b"exception" + bad), ld(3, ld(1, t) + ld(2, ld(1, b"v"))) + ld(2, bad)]:
            assert_same(request(span_bytes(ld(11, event))), expect_error=True)
    for bad in [b"\x0a", b"\x0a\x05abc", b"\x08\xff", b"\x0e", b"\x0c", b"\x00\x00", b"\x0b"]:
        for event in [ld(2, b"exception") + ld(3, ld(1, t) + ld(2, bad)), ld(2, b"exception") + ld(3, ld(1, t) + bad),
                      ld(2, b"exception") + ld(3, bad + ld(1, t)), ld(2, b"exception") + bad]:
            assert_same(request(span_bytes(ld(11, event))), expect_error=True)
    for levels in range(44, 50):
        assert_same(request(span_bytes(ld(11, ld(2, b"exception") + ld(3, ld(1, t) + ld(2, nested_array(levels)))))))
        assert_same(request(span_bytes(ld(11, ld(2, b"exception") + ld(3, ld(1, t) + group(7, nested_groups(
            levels)))))))
    assert_same(request(span_bytes(ld(11, ld(2, b"exception") + ld(3, ld(1, t) + ld(2, nested_array(48)))))),
                expect_error=True)


# --- unknown fields and wire types ---------------------------------------------------------------

UNKNOWN_FIELDS = [
    vf(99, 1),
    vf(99, 2**64 - 1),
    tag(99, 0) + b"\xff" * 9 + b"\x7f",
    tag(99, 1) + b"\xff" * 8,
    tag(99, 5) + b"\xff" * 4,
    ld(99, b"\xff\xfe not utf-8, not a message"),
    ld(99, b""),
    group(99),
    group(99, vf(1, 1) + ld(2, b"\xff") + group(3, group(0, vf(0, 1))) + tag(5, 1) + bytes(8)),
    tag(2**29 - 1, 0) + b"\x00",
    b"\xf8\xff\xff\xff\x0f" + b"\x00",  # the largest 5-byte tag
    b"\xa8\x86\x80\x80\x00" + b"\x00",  # non-canonical 5-byte tag
]


@pytest.mark.parametrize("unknown", UNKNOWN_FIELDS, ids=lambda b: b.hex()[:24])
def test_unknown_fields_everywhere(unknown: bytes) -> None:
    u = unknown
    av = ser(AnyValue(array_value=ArrayValue(values=[AnyValue(kvlist_value=KeyValueList(values=[
        KeyValue(key="in", value=AnyValue(int_value=1))]))])))
    # unknown field inside the innermost KeyValue, AnyValue, KeyValueList, ArrayValue
    inner_kv = ld(1, b"in") + u + ld(2, vf(3, 1) + u)
    nested = ld(5, ld(1, ld(6, ld(1, inner_kv) + u) + u) + u) + u
    placements = [
        request(span_bytes(), req_extra=u),
        request(span_bytes(), rs_extra=u),
        request(span_bytes(), ss_extra=u),
        request(span_bytes(u)),
        request(span_bytes(), resource=service_resource(AnyValue(string_value="svc")) + u),
        request(span_bytes(), resource=ld(1, ld(1, b"service.name") + u + ld(2, nested))),
        request(span_bytes(), ss_extra=ld(1, ser(InstrumentationScope(name="sc")) + u)),
        request(attr_span(kv("k", AnyValue(string_value="v")) + u)),
        request(attr_span(ld(1, b"k") + ld(2, ser(AnyValue(string_value="v")) + u))),
        request(attr_span(ld(1, b"k") + ld(2, nested), ld(1, b"k2") + ld(2, av))),
        request(span_bytes(ld(15, ser(Status(code=2)) + u))),
        request(span_bytes(ld(11, ser(Span.Event(name="e")) + u) + ld(13, ser(Span.Link(trace_id=TRACE)) + u))),
        request(span_bytes(), resource=ld(3, ld(1, b"url") + u)),
        u + request(span_bytes()),
    ]
    for data in placements:
        assert_same(data, expect_error=False)


def test_known_fields_with_other_wire_types_are_unknown() -> None:
    for u in [vf(5, 1), tag(5, 1) + bytes(8), tag(5, 5) + bytes(4), group(5), vf(9, 1), group(9), vf(15, 1),
              ld(7, b"12345678"), vf(8, 9), group(1), ld(16, b"abcd")]:
        assert_same(request(span_bytes(u)), expect_error=False)
    for u in [vf(1, 1), ld(2, b"\x01"), ld(3, b"xx"), tag(4, 5) + bytes(4), vf(5, 1), vf(6, 1), ld(8, b"")]:
        assert_same(request(attr_span(ld(1, b"k") + ld(2, ser(AnyValue(string_value="v")) + u))), expect_error=False)
    assert_same(request(attr_span(ld(1, b"k") + ld(2, vf(5, 1) + tag(2, 1) + bytes(8)))), expect_error=False)
    assert_same(request(span_bytes(), rs_extra=vf(2, 1) + vf(1, 1) + group(3), req_extra=vf(1, 3)), expect_error=False)


# --- malformed input -----------------------------------------------------------------------------

BAD_UTF8 = [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"a\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80"]


@pytest.mark.parametrize("bad", BAD_UTF8, ids=lambda b: b.hex())
def test_invalid_utf8_in_every_string_field(bad: bytes) -> None:
    kvb = ld(1, b"k") + ld(2, ld(1, bad))
    placements = [
        request(span_bytes(ld(5, bad))),                                    # name
        request(span_bytes(ld(3, bad))),                                    # trace_state
        request(attr_span(ld(1, bad))),                                     # attribute key
        request(attr_span(kvb)),                                            # string value
        request(attr_span(ld(1, b"k") + ld(2, ld(1, bad) + vf(3, 1)))),     # overwritten string value
        request(attr_span(ld(1, b"k") + ld(2, ld(5, ld(1, ld(6, ld(1, kvb))))))),
        request(span_bytes(ld(15, ld(2, bad)))),                            # status message
        request(span_bytes(ld(11, ld(2, bad)))),                            # event name
        request(span_bytes(ld(11, ld(3, kvb)))),                            # event attribute
        request(span_bytes(ld(13, ld(3, bad)))),                            # link trace_state
        request(span_bytes(ld(13, ld(4, kvb)))),                            # link attribute
        request(span_bytes(), rs_extra=ld(3, bad)),                         # resource schema_url
        request(span_bytes(), ss_extra=ld(3, bad)),                         # scope schema_url
        request(span_bytes(), ss_extra=ld(1, ld(1, bad))),                  # scope name
        request(span_bytes(), ss_extra=ld(1, ld(2, bad))),                  # scope version
        request(span_bytes(), ss_extra=ld(1, ld(3, kvb))),                  # scope attribute
        request(span_bytes(), resource=ld(1, kvb)),                         # resource attribute
        request(span_bytes(), resource=ld(1, ld(1, b"service.name") + ld(2, ld(1, bad)))),
        request(span_bytes(), resource=ld(3, ld(1, bad))),                  # entity ref schema_url
        request(span_bytes(), resource=ld(3, ld(2, bad))),                  # entity ref type
        request(span_bytes(), resource=ld(3, ld(3, b"ok") + ld(3, bad))),   # entity ref id_keys
        request(span_bytes(), resource=ld(3, ld(4, bad))),                  # entity ref description_keys
    ]
    for data in placements:
        assert_same(data, expect_error=True)
    # bytes fields and unknown fields are not checked
    for data in [request(span_bytes(ld(1, bad))), request(attr_span(ld(1, b"k") + ld(2, ld(7, bad)))),
                 request(span_bytes(ld(99, bad))), request(attr_span(ld(1, b"k") + ld(2, tag(1, 0) + b"\x01")))]:
        assert_same(data, expect_error=False)


def test_malformed_wire() -> None:
    good = request(span_bytes(ld(9, kv("k", AnyValue(double_value=1.0)))))
    cases = [
        b"\x0a",                                 # length missing
        b"\x0a\x05abc",                          # length past end
        b"\x08",                                 # varint missing
        b"\x08" + b"\xff" * 10 + b"\x01",        # 11-byte varint
        b"\x08\xff",                             # truncated varint
        b"\x09\x00\x00",                         # truncated fixed64
        b"\x0d\x00",                             # truncated fixed32
        b"\x0e",                                 # wire type 6
        b"\x0f",                                 # wire type 7
        b"\x0c",                                 # stray end-group
        b"\x00\x00",                             # field number 0
        b"\x02\x00",
        b"\x03\x04",                             # group of field 0
        b"\x0b",                                 # unterminated group
        b"\x0b\x14",                             # mismatched end-group
        b"\x0b\x08",                             # truncated inside group
        b"\x0b\x0e\x0c",                         # wire type 6 inside group
        b"\x88\x80\x80\x80\x80\x00\x00",         # 6-byte tag
        b"\x88\x80\x80\x80\x10\x00",             # tag past 2^32
        b"\x0a\x81\x80\x80\x80\x80\x00x",        # 6-byte length
        b"\x0a\x81\x80\x80\x80\x10x",            # length past 2^32
        b"\x80",                                 # truncated tag
    ]
    for bad in cases:
        assert_same(bad, expect_error=True)
        assert_same(good + bad, expect_error=True)
        assert_same(request(span_bytes(bad)), expect_error=True)
        assert_same(request(attr_span(ld(1, b"k") + ld(2, bad))), expect_error=True)
        assert_same(request(attr_span(ld(1, b"gen_ai.tool.definitions") + ld(2, bad))), expect_error=True)
        assert_same(request(attr_span(ld(1, b"gen_ai.tool.definitions") + bad)), expect_error=True)
        assert_same(request(span_bytes(), resource=bad), expect_error=True)
    for cut in range(1, len(good)):
        assert_same(good[:cut])
    # a group may not span a sub-message boundary
    assert_same(request(span_bytes(tag(50, 3))) + tag(50, 4), expect_error=True)


@needs_c_decoder
def test_not_bytes() -> None:
    data = request(span_bytes())
    assert decode_mod._decode_c(bytearray(data), SpanRecord) == decode_mod._decode_c(memoryview(data), SpanRecord)
    with pytest.raises(TypeError):
        decode_mod._decode_c("text", SpanRecord)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        decode_mod._decode_c(data)  # type: ignore[call-arg]


@needs_c_decoder
def test_other_record_types() -> None:
    class Other(NamedTuple):
        a: Any
        b: Any
        c: Any
        d: Any
        e: Any
        f: Any
        g: Any
        h: Any
        i: Any
        j: Any
        k: Any
        m: Any

    data = request(span_bytes(), attr_span(kv("k", AnyValue(int_value=1))), resource=service_resource(None))
    want = [tuple(r) for r in decode_python(data).spans]
    spans, _ = decode_mod._decode_c(data, Other)
    assert all(type(r) is Other for r in spans) and [tuple(r) for r in spans] == want
    spans, _ = decode_mod._decode_c(data, lambda *a: ("made", *a))
    assert [r[1:] for r in spans] == want and all(r[0] == "made" for r in spans)

    def boom(*_: Any) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        decode_mod._decode_c(data, boom)


# --- nesting depth (upb allows 100 levels of sub-messages and groups below the request) ------------


def nested_array(levels: int, leaf: bytes = vf(3, 1)) -> bytes:
    """AnyValue contents with `levels` array_value levels (2 messages each) around an int."""
    m = leaf
    for _ in range(levels):
        m = ld(5, ld(1, m))
    return m


def nested_groups(levels: int) -> bytes:
    m = b""
    for _ in range(levels):
        m = group(77, m)
    return m


def test_depth_limit() -> None:
    # request > resource_spans(1) > scope_spans(2) > span(3) > key_value(4) > any_value(5), then 2 per level
    for levels in range(44, 50):
        for extra in [b"", ld(6, b""), ld(6, ld(1, b"")), ld(6, ld(1, ld(2, b""))), nested_groups(1),
                      nested_groups(2), nested_groups(3)]:
            assert_same(request(attr_span(ld(1, b"k") + ld(2, nested_array(levels, vf(3, 1) + extra)))))
            assert_same(request(attr_span(ld(1, b"llm.tools.0.tool.json_schema") + ld(2, nested_array(levels,
                                                                                                   extra)))))
            assert_same(request(span_bytes(ld(11, ld(3, ld(1, b"k") + ld(2, nested_array(levels, extra)))))))
            assert_same(request(span_bytes(), resource=ld(1, ld(1, b"service.name") + ld(2, nested_array(levels,
                                                                                                          extra)))))
    for levels in range(95, 102):
        assert_same(nested_groups(levels))
        assert_same(request(span_bytes(nested_groups(levels - 4))))
    deep_ok = request(attr_span(ld(1, b"k") + ld(2, nested_array(47))))
    assert assert_same(deep_ok, expect_error=False)
    assert_same(request(attr_span(ld(1, b"k") + ld(2, nested_array(48)))), expect_error=True)
    assert attr_keys(request(attr_span(ld(1, U) + ld(2, nested_array(47))))) == [[]]
    assert_same(request(attr_span(ld(1, U) + ld(2, nested_array(48)))), expect_error=True)
    assert_same(request(attr_span(ld(2, nested_array(48)) + ld(1, U))), expect_error=True)


# --- attributes nobody reads -----------------------------------------------------------------------

U = b"gen_ai.tool.definitions"
# Every unread key, and keys under every unread prefix (the bare prefix too: it starts with itself).
UNREAD_EXAMPLES = [*sorted(UNREAD_KEYS), *(p + "0.message.content" for p in UNREAD_PREFIXES), *UNREAD_PREFIXES]
# Keys the normalisers read, some next to left-out ones, and near misses that are kept.
KEPT_KEYS = ["gen_ai.operation.name", "gen_ai.system", "gen_ai.output.messages", "gen_ai.completion.0.content",
             "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.usage.prompt_tokens",
             "llm.output_messages.0.message.content", "llm.token_count.prompt", "llm.model_name", "input.value",
             "output.value", "langfuse.observation.input", "langfuse.observation.output", "traceloop.entity.input",
             "ai.response.text", "ai.usage.promptTokens", "ai.toolCall.args", "gen_ai.tool.definitions.count",
             "gen_ai.input.message", "gen_ai.prompts", "llm.input_messages", "llm.tools_count", "ai.promptx", ""]


@contextmanager
def unread_kept() -> Iterator[None]:
    """The C decoder leaving nothing out, for the span of the block."""
    decode_mod._configure_c((), (), PREVIEW_CHARS)
    try:
        yield
    finally:
        decode_mod._configure_c(UNREAD_KEYS, UNREAD_PREFIXES, PREVIEW_CHARS)


def attr_keys(data: bytes) -> list[list[str]]:
    """The attribute keys of each span, the same from both decoders."""
    assert_same(data, expect_error=False)
    return [list(r.attributes) for r in decode(data).spans]


def test_unread_lists() -> None:
    assert all(decode_mod.unread(k) for k in UNREAD_EXAMPLES)
    assert not any(decode_mod.unread(k) for k in KEPT_KEYS)
    assert all(p and p.endswith(".") for p in UNREAD_PREFIXES)


@needs_c_decoder
def test_unread_attributes_are_left_out() -> None:
    message = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "héllo ✓ 🦀 " * 2000}]}])
    values = [AnyValue(string_value=message), AnyValue(int_value=3), AnyValue(bool_value=True),
              AnyValue(double_value=1.5), AnyValue(bytes_value=b"\xff"), AnyValue(), VALUES[23], VALUES[25]]
    kvs = []
    for i, key in enumerate(UNREAD_EXAMPLES):
        kvs.append(kv(key, values[i % len(values)]))
        kvs.append(kv(KEPT_KEYS[i % len(KEPT_KEYS)], AnyValue(string_value=f"kept {i}")))
    kvs += [kv(k, AnyValue(string_value=k)) for k in KEPT_KEYS]
    kvs.append(ld(1, U))  # no value
    data = request(attr_span(*kvs), attr_span(*reversed(kvs)), attr_span(kv("gen_ai.tool.definitions", values[0])))
    assert attr_keys(data) == [KEPT_KEYS, KEPT_KEYS[::-1], []]
    spans = decode(data).spans
    assert spans[0].attributes["input.value"] == "input.value" and spans[1].attributes["input.value"] == "kept 10"
    with unread_kept():  # the dict as it was: everything, unread keys where they were
        full = decode(data).spans[0].attributes
    assert [k for k in full if not decode_mod.unread(k)] == KEPT_KEYS
    assert set(full) - set(KEPT_KEYS) == set(UNREAD_EXAMPLES)
    # service.name and attributes of resources, scopes, events and links are not concerned
    res = ser(Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="svc")),
                                   KeyValue(key="gen_ai.tool.definitions", value=AnyValue(string_value="m"))]))
    assert_same(request(span_bytes(ld(11, ld(3, kv("gen_ai.tool.definitions")))), resource=res), expect_error=False)
    assert decode(request(span_bytes(), resource=ld(1, kv("gen_ai.prompt", AnyValue(string_value="s"))) + ld(
        1, kv("service.name", AnyValue(string_value="gen_ai.prompt"))))).spans[0].service == "gen_ai.prompt"


def test_unread_key_wherever_it_is_on_the_wire() -> None:
    v = ld(2, ser(AnyValue(string_value="v")))
    cases = [
        (v + ld(1, U), []),                                  # value first
        (ld(1, U) + v + v, []),                              # value twice
        (ld(1, U) + v + ld(1, b"k"), ["k"]),                 # the last key counts
        (ld(1, b"k") + v + ld(1, U), []),
        (ld(1, b"k") + ld(1, U) + ld(1, b"k"), ["k"]),
        (ld(1, U + b"x") + v, ["gen_ai.tool.definitionsx"]),
        (ld(1, U[:-1]) + v, ["gen_ai.tool.definition"]),
        (ld(1, b"llm.tools.") + v, []),
        (ld(1, b"llm.tools") + v, []),
        (ld(1, b"llm.tool") + v, ["llm.tool"]),
    ]
    cases += [(u + ld(1, U) + u + v + u, []) for u in UNKNOWN_FIELDS]
    cases += [(u + ld(1, b"k") + u + v + u, ["k"]) for u in UNKNOWN_FIELDS]
    for raw, keys in cases:
        assert attr_keys(request(attr_span(raw, kv("z")))) == [[*keys, "z"]], raw.hex()


@pytest.mark.parametrize("bad", BAD_UTF8, ids=lambda b: b.hex())
def test_invalid_utf8_in_unread_attributes_is_refused(bad: bytes) -> None:
    kvs = [
        ld(1, U) + ld(2, ld(1, bad)),                                      # string value
        ld(1, U) + ld(2, ld(1, b"x" * 40 + bad + b"y" * 40)),              # inside ASCII runs
        ld(1, U) + ld(2, ld(1, "日本語".encode() * 20 + bad)),              # after non-ASCII
        ld(1, U) + ld(2, ld(1, bad) + vf(3, 1)),                           # overwritten string value
        ld(1, U) + ld(2, ld(1, bad)) + ld(2, vf(3, 1)),                    # overwritten by a second value
        ld(1, U) + ld(2, ld(5, ld(1, ld(1, bad)))),                        # in an array
        ld(1, U) + ld(2, ld(6, ld(1, ld(1, bad)))),                        # kvlist key
        ld(1, U) + ld(2, ld(6, ld(1, ld(1, b"k") + ld(2, ld(1, bad))))),   # kvlist value
        ld(1, bad) + ld(1, U) + ld(2, ld(1, b"v")),                        # an earlier key occurrence
        ld(2, ld(1, bad)) + ld(1, U),                                      # value before the key
        ld(1, b"llm.input_messages.0.message.content") + ld(2, ld(1, bad)),
        ld(1, b"llm.input_messages." + bad) + ld(2, ld(1, b"v")),             # in a key under a prefix
        ld(1, b"llm.tools." + bad),
        ld(1, b"llm.tools.x" + bad) + ld(1, U) + ld(2, ld(1, b"v")),          # in an earlier key left out
        ld(1, U) + ld(2, ld(1, b"v")) + ld(1, b"llm.tools." + bad),           # in a later one
    ]
    for raw in kvs:
        assert_same(request(attr_span(raw)), expect_error=True)
    # bytes and unknown fields are not checked, there as elsewhere
    for raw in [ld(1, U) + ld(2, ld(7, bad)), ld(1, U) + ld(2, ld(9, bad)), ld(1, U) + ld(3, bad)]:
        assert attr_keys(request(attr_span(raw))) == [[]]


def test_utf8_check_of_unread_values() -> None:
    """The C decoder's own UTF-8 check (ASCII runs by blocks) against upb: every boundary, random bytes."""
    seqs = [s.encode() for s in ("é", "✓", "日本語", "🦀", "\U0010ffff", "\x7f", "\ud7ff", "\ue000")] + BAD_UTF8
    seqs += [b"\xe0\xa0\x80", b"\xf0\x90\x80\x80", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf", b"\xf5\x80\x80\x80", b"\xc2"]
    for lead in range(0, 70):
        for seq in seqs:
            for tail_len in (0, 1, 7, 8, 9, 31, 33):
                value = b"a" * lead + seq + b"b" * tail_len
                assert_same(request(attr_span(ld(1, U) + ld(2, ld(1, value)))))
    rng = random.Random(FUZZ_SEED)
    alphabet = [b"a", b"{", b"\x00", b"\x7f", b"\x80", b"\xbf", b"\xc2", b"\xdf", b"\xe0", b"\xed", b"\xef", b"\xf0",
                b"\xf4", b"\xff", "é".encode(), "日".encode(), "🦀".encode(), b"x" * 40]
    outcomes = set()
    for _ in range(3000):
        value = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 24)))
        outcomes.add(assert_same(request(attr_span(ld(1, b"ai.prompt.messages") + ld(2, ld(1, value))))) == ERROR)
    assert outcomes == {True, False}


@needs_c_decoder
def test_configure() -> None:
    data = request(attr_span(kv("k", AnyValue(int_value=1)), kv("x.y"), kv("gen_ai.tool.definitions")))
    with unread_kept():
        assert list(decode(data).spans[0].attributes) == ["k", "x.y", "gen_ai.tool.definitions"]
        decode_mod._configure_c(["k"], ("x.",), PREVIEW_CHARS)
        assert list(decode(data).spans[0].attributes) == ["gen_ai.tool.definitions"]
        for args in [("abc", ()), ((), "x."), ([1], ()), ((), [b"x."]), (None, ()), ((), (), "160"), ((), (), 1.5)]:
            with pytest.raises(TypeError):
                decode_mod._configure_c(*args[:2], *args[2:] or (PREVIEW_CHARS,))
        for args in [((), ["x.", ""]), ([""], ())]:  # "" as a prefix would leave out everything
            with pytest.raises(ValueError):
                decode_mod._configure_c(*args, PREVIEW_CHARS)
        with pytest.raises(ValueError):
            decode_mod._configure_c((), (), -1)
        for args in [((),), ((), ())]:
            with pytest.raises(TypeError):
                decode_mod._configure_c(*args)
        assert list(decode(data).spans[0].attributes) == ["gen_ai.tool.definitions"]  # unchanged by the errors
    assert list(decode(data).spans[0].attributes) == ["k", "x.y"]


def _normalizer_strings() -> set[str]:
    """String literals of collector/normalize/*.py, with `NAME + "literal"` concatenations of module constants."""
    strings: set[str] = set()
    for path in Path(normalize_pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(t, ast.Name)}

        def value(node: ast.AST, names: dict[str, str] = names) -> str | None:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                return node.value
            if isinstance(node, ast.Name):
                return names.get(node.id)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                left, right = value(node.left), value(node.right)
                return left + right if left is not None and right is not None else None
            return None

        strings |= {v for node in ast.walk(tree) if (v := value(node)) is not None}
    return strings


def test_no_normaliser_reads_an_unread_attribute() -> None:
    """If a normaliser starts reading one of them, it must come off decode.UNREAD_KEYS / UNREAD_PREFIXES."""
    strings = _normalizer_strings()
    assert {"gen_ai.output.messages", "langfuse.observation.input", "llm.output_messages."} <= strings
    unread_names = UNREAD_KEYS | set(UNREAD_PREFIXES)
    for s in strings:
        assert s not in UNREAD_KEYS, f"a normaliser reads {s!r}"
        assert not s.startswith(UNREAD_PREFIXES), f"a normaliser reads {s!r}"
        if s.endswith("."):  # a namespace scanned with startswith
            assert not any(u.startswith(s) for u in unread_names), f"a normaliser scans {s!r}"


def _step_view(step: Any) -> tuple[Any, ...]:
    return tuple((v.fingerprint, v.preview) if isinstance(v, Content) else v
                 for v in (getattr(step, f.name) for f in dataclasses.fields(step)))


@needs_c_decoder
def test_left_out_attributes_change_no_step(corpus_bytes: list[bytes]) -> None:
    with unread_kept():
        full = [decode(d).spans for d in corpus_bytes]
    left_out = 0
    for data, full_spans in zip(corpus_bytes, full, strict=True):
        for record, full_record in zip(decode(data).spans, full_spans, strict=True):
            left_out += len(full_record.attributes) - len(record.attributes)
            assert _step_view(normalize_span(record)) == _step_view(normalize_span(full_record))
    assert left_out > 100


# --- fuzz -------------------------------------------------------------------------------------------


def fuzz_pool(corpus_data: list[bytes]) -> list[bytes]:
    pool = [d for d in corpus_data if len(d) <= 12_000]
    for _, _, req in corpus()[:20]:  # single spans of real requests, with their resource and scope
        for rs in req.resource_spans[:1]:
            for ss in rs.scope_spans[:1]:
                for s in ss.spans[:6]:
                    pool.append(ser(ExportTraceServiceRequest(resource_spans=[ResourceSpans(
                        resource=rs.resource, scope_spans=[ScopeSpans(scope=ss.scope, spans=[s])])])))
    pool += [request(attr_span(kv("k", v)), resource=service_resource(v)) for v in VALUES]
    pool += [request(span_bytes(u)) for u in UNKNOWN_FIELDS]
    pool.append(request(attr_span(ld(1, b"k") + ld(2, nested_array(40)))))
    return pool


INTERESTING = [0, 1, 2, 5, 8, 16, 127, 128, 255, 300, 2**31 - 1, 2**32, 2**63, 2**64 - 1]


def mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        pos = rng.randrange(len(b) + 1)
        op = rng.randrange(8)
        if op == 0:
            del b[pos:]
        elif op == 1 and b:
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif op == 2 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 3:  # a random tag, often followed by a value
            raw = tag(rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 15, 16, 99, 2**29 - 1)), rng.randrange(8))
            if rng.random() < 0.7:
                raw += varint(rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randrange(64))
            b[pos:pos] = raw
        elif op == 4:
            b[pos:pos] = varint(rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randrange(1 << 20))
        elif op == 5:
            del b[pos:pos + rng.randrange(1, 9)]
        elif op == 6 and b:  # duplicate a slice elsewhere
            start = rng.randrange(len(b))
            piece = b[start:start + rng.randrange(1, 64)]
            b[pos:pos] = piece
        else:  # splice another input in
            other = rng.choice(pool)
            start = rng.randrange(len(other) + 1)
            b[pos:pos] = other[start:start + rng.randrange(1, 128)]
    return bytes(b)


# Field kinds by message for the structured generator: framing stays valid, so the semantics get exercised.
SCHEMA: dict[str, dict[int, tuple[str, ...]]] = {
    "request": {1: ("msg", "resource_spans")},
    "resource_spans": {1: ("msg", "resource"), 2: ("msg", "scope_spans"), 3: ("str",)},
    "resource": {1: ("msg", "kv"), 2: ("varint",), 3: ("msg", "entity_ref")},
    "entity_ref": {1: ("str",), 2: ("str",), 3: ("str",), 4: ("str",)},
    "scope_spans": {1: ("msg", "scope"), 2: ("msg", "span"), 3: ("str",)},
    "scope": {1: ("str",), 2: ("str",), 3: ("msg", "kv"), 4: ("varint",)},
    "span": {1: ("id", 16), 2: ("id", 8), 3: ("str",), 4: ("id", 8), 5: ("str",), 6: ("varint",), 7: ("fixed64",),
             8: ("fixed64",), 9: ("msg", "kv"), 10: ("varint",), 11: ("msg", "event"), 12: ("varint",),
             13: ("msg", "link"), 14: ("varint",), 15: ("msg", "status"), 16: ("fixed32",)},
    "event": {1: ("fixed64",), 2: ("str",), 3: ("msg", "kv"), 4: ("varint",)},
    "link": {1: ("id", 16), 2: ("id", 8), 3: ("str",), 4: ("msg", "kv"), 5: ("varint",), 6: ("fixed32",)},
    "status": {2: ("str",), 3: ("varint",)},
    "kv": {1: ("key",), 2: ("msg", "any"), 3: ("varint",)},
    "any": {1: ("str",), 2: ("varint",), 3: ("varint",), 4: ("fixed64",), 5: ("msg", "array"), 6: ("msg", "kvlist"),
            7: ("bytes",), 8: ("varint",)},
    "array": {1: ("msg", "any")},
    "kvlist": {1: ("msg", "kv")},
}
FIELD_COUNTS = {"request": (1, 3), "resource_spans": (1, 4), "scope_spans": (1, 4), "span": (3, 9), "kv": (1, 3),
                "any": (0, 2), "array": (0, 4), "kvlist": (0, 4)}
STRINGS = ["", "a", "service.name", "k", "héllo ✓", "🦀", "x" * 40, "\x00", "gen_ai.system",
           "gen_ai.tool.definitions", "llm.input_messages.0.message.content",  # left out as keys
           "exception", "exception.type", "exception.message", "exception.escaped",  # added from events
           *RELEASE_KEYS]  # taken from the resource
DOUBLES = [0.0, -0.0, 1.5, math.inf, -math.inf, math.nan, 5e-324, -2.5e300]


def gen_value(rng: random.Random, kind: tuple[str, ...], depth: int) -> bytes:
    """The payload of one field (after its tag) of the given kind."""
    k = kind[0]
    if k in ("str", "key"):
        if rng.random() < 0.01:
            return ld(0, rng.choice(BAD_UTF8))[1:]
        return ld(0, rng.choice(STRINGS).encode())[1:]
    if k == "bytes":
        return ld(0, rng.randbytes(rng.randrange(6)))[1:]
    if k == "id":
        size = kind[1] if rng.random() < 0.85 else rng.choice((0, 1, kind[1] - 1, kind[1] + 1))
        raw = rng.randbytes(size) if rng.random() < 0.95 else bytes(size)
        return ld(0, raw)[1:]
    if k == "varint":
        return varint(rng.choice(INTERESTING) if rng.random() < 0.5 else rng.randrange(-5, 300))
    if k == "fixed64":
        return struct.pack("<d", rng.choice(DOUBLES)) if rng.random() < 0.5 else rng.randbytes(8)
    if k == "fixed32":
        return rng.randbytes(4)
    return ld(0, gen_msg(rng, kind[1], depth + 1))[1:]


WIRE_TYPE = {"str": 2, "key": 2, "bytes": 2, "id": 2, "msg": 2, "varint": 0, "fixed64": 1, "fixed32": 5}


def gen_msg(rng: random.Random, name: str, depth: int = 0) -> bytes:
    fields = SCHEMA[name]
    low, high = FIELD_COUNTS.get(name, (0, 3))
    if depth > 6:
        high = min(high, 1)
    out = bytearray()
    if name == "span" and rng.random() < 0.9:  # mostly valid ids, so that records come out
        out += tag(1, 2) + gen_value(rng, fields[1], depth) + tag(2, 2) + gen_value(rng, fields[2], depth)
    for _ in range(rng.randint(low, high)):
        r = rng.random()
        if r < 0.04:  # an unknown field
            out += rng.choice(UNKNOWN_FIELDS)
            continue
        fn = rng.choice(list(fields))
        kind = fields[fn]
        if r < 0.07:  # a known field with another wire type: an unknown field to upb
            other = rng.choice([k for k in ("varint", "fixed64", "fixed32", "bytes")
                                if WIRE_TYPE[k] != WIRE_TYPE[kind[0]]])
            out += tag(fn, WIRE_TYPE[other]) + gen_value(rng, (other,), depth)
            continue
        out += tag(fn, WIRE_TYPE[kind[0]]) + gen_value(rng, kind, depth)
    return bytes(out)


def test_fuzz(corpus_bytes: list[bytes]) -> None:
    """Mutated corpus requests and generated well-framed ones (sometimes mutated too), against upb."""
    rng = random.Random(FUZZ_SEED)
    pool = fuzz_pool(corpus_bytes)
    outcomes = {"error": 0, "accepted": 0, "records": 0}
    added_keys = {"exception.type", "exception.message", "exception.escaped", "otel.status_description"}
    with_added = 0  # records with an attribute added from the status or an exception event (or of that name)
    with_release = 0  # records with a version or environment from their resource
    for i in range(FUZZ_ITERATIONS):
        if i % 2:
            data = mutate(rng, rng.choice(pool), pool)
        else:
            data = gen_msg(rng, "request")
            if rng.random() < 0.2:
                data = mutate(rng, data, pool)
        want = assert_same(data)
        if want == ERROR:
            outcomes["error"] += 1
        else:
            outcomes["accepted"] += 1
            outcomes["records"] += len(want[0])
            spans = decode(data).spans
            with_added += sum(not added_keys.isdisjoint(r.attributes) for r in spans)
            with_release += sum(bool(r.version or r.environment) for r in spans)
    assert min(outcomes.values()) > FUZZ_ITERATIONS // 10, outcomes  # every outcome is well exercised
    assert with_added > FUZZ_ITERATIONS // 100
    assert with_release > FUZZ_ITERATIONS // 400, with_release


# --- timing (not a test) ------------------------------------------------------------------------------


def _genai_span_request(spans: int = 100, size: int = 50_000, ascii: bool = True) -> ExportTraceServiceRequest:
    """Model call spans with content capture: a `size`-byte gen_ai.tool.definitions next to the usual attributes
    and a short gen_ai.output.messages. The JSON is ASCII (non-ASCII escaped, as Python's json.dumps writes it),
    or, ascii=False, has a non-ASCII character every 12 bytes on average (as JSON.stringify writes it)."""
    history: list[dict[str, Any]] = []
    while len(json.dumps(history, ensure_ascii=ascii).encode()) < size:
        i = len(history)
        history.append({"role": ("user", "assistant")[i % 2], "parts": [
            {"type": "text", "content": f"turn {i}: " + "the agent checks the order — status “shipped” ✓ " * 8}]})
    messages = json.dumps(history, ensure_ascii=ascii).encode()[:size].decode(errors="ignore")
    attrs = [KeyValue(key="gen_ai.tool.definitions", value=AnyValue(string_value=messages)),
             *(KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in [
                 ("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "openai"),
                 ("gen_ai.request.model", "gpt-4o"), ("gen_ai.response.model", "gpt-4o-2024-08-06"),
                 ("gen_ai.response.id", "chatcmpl-123"), ("gen_ai.conversation.id", "conv-1"),
                 ("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [
                     {"type": "text", "content": "The order has shipped. " * 20}]}]))]),
             KeyValue(key="gen_ai.usage.input_tokens", value=AnyValue(int_value=12_500)),
             KeyValue(key="gen_ai.usage.output_tokens", value=AnyValue(int_value=120)),
             KeyValue(key="gen_ai.response.finish_reasons", value=AnyValue(array_value=ArrayValue(
                 values=[AnyValue(string_value="stop")])))]
    return ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="svc"))]),
        scope_spans=[ScopeSpans(spans=[Span(trace_id=TRACE, span_id=struct.pack(">Q", i + 1), name="chat gpt-4o",
                                            start_time_unix_nano=i, end_time_unix_nano=i + 5, attributes=attrs)
                                       for i in range(spans)])])])


def _per_span(fn: Callable[[bytes], Any], data: list[bytes], spans: int, rounds: int = 7) -> float:
    best = math.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        for d in data:
            fn(d)
        best = min(best, time.perf_counter() - t0)
    return best / spans * 1e6


def _timing() -> None:
    small_attrs = [KeyValue(key=f"attr.{i}", value=AnyValue(string_value=f"value {i}"))
                   if i % 3 else KeyValue(key=f"attr.{i}", value=AnyValue(int_value=i)) for i in range(12)]
    small = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name", value=AnyValue(string_value="svc"))]),
        scope_spans=[ScopeSpans(spans=[Span(trace_id=TRACE, span_id=SPAN, parent_span_id=PARENT, name="chat gpt-4o",
                                            start_time_unix_nano=i, end_time_unix_nano=i + 5, attributes=small_attrs,
                                            status=Status(code=1)) for i in range(500)])])])
    for label, data in [("corpus", [ser(req) for _, _, req in corpus()]),
                        ("500 spans of 12 short attributes", [ser(small)]),
                        ("100 model call spans, 50 kB gen_ai.tool.definitions each (ASCII JSON)",
                         [ser(_genai_span_request())]),
                        ("the same, JSON with a non-ASCII character every 12 bytes",
                         [ser(_genai_span_request(ascii=False))])]:
        spans = sum(len(r) + n for r, n in map(decode_python, data))
        c, py = _per_span(decode, data, spans), _per_span(decode_python, data, spans)
        with unread_kept():
            c_all = _per_span(decode, data, spans)
        print(f"{label}: {len(data)} requests, {spans} spans, {sum(map(len, data)) / 1e6:.2f} MB")
        print(f"  C decoder: {c:.2f} us/span (all attributes kept: {c_all:.2f})   "
              f"decode_python: {py:.2f} us/span   ({py / c:.1f}x)")


if __name__ == "__main__":
    _timing()


@needs_c_decoder
def test_the_protobuf_runtime_decoder_can_be_forced() -> None:
    """MASTWATCH_DECODER=protobuf: the protobuf runtime's path even where the C decoder is built (to compare, or to
    step around a decoder bug without a rebuild)."""
    import subprocess
    import sys

    probe = "from mastwatch.collector.receiver import decode as d; print(d._decode_c is None, d._count_c is None)"
    forced = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**__import__("os").environ, "MASTWATCH_DECODER": "protobuf"})
    assert forced.stdout.split() == ["True", "True"], forced.stderr
    default = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert default.stdout.split() == ["False", "False"], default.stderr


# The OTLP trace schema the C decoder was written against (opentelemetry-proto, pinned in pyproject.toml): every
# message it walks, with its field numbers. A release that adds a field fails here, so that the decoder is reviewed
# for it (and decode_python's reading of it) before the pin moves.
REVIEWED_SCHEMA = {
    "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest": {1},
    "opentelemetry.proto.trace.v1.ResourceSpans": {1, 2, 3},
    "opentelemetry.proto.resource.v1.Resource": {1, 2, 3},
    "opentelemetry.proto.common.v1.KeyValue": {1, 2, 3},
    "opentelemetry.proto.common.v1.AnyValue": {1, 2, 3, 4, 5, 6, 7, 8},
    "opentelemetry.proto.common.v1.ArrayValue": {1},
    "opentelemetry.proto.common.v1.KeyValueList": {1},
    "opentelemetry.proto.common.v1.EntityRef": {1, 2, 3, 4},
    "opentelemetry.proto.trace.v1.ScopeSpans": {1, 2, 3},
    "opentelemetry.proto.common.v1.InstrumentationScope": {1, 2, 3, 4},
    "opentelemetry.proto.trace.v1.Span": set(range(1, 17)),
    "opentelemetry.proto.trace.v1.Span.Event": {1, 2, 3, 4},
    "opentelemetry.proto.trace.v1.Span.Link": {1, 2, 3, 4, 5, 6},
    "opentelemetry.proto.trace.v1.Status": {2, 3},
}


def test_the_schema_has_no_field_the_decoder_was_not_reviewed_for() -> None:
    schema: dict[str, set[int]] = {}

    def walk(descriptor) -> None:
        if descriptor.full_name in schema:
            return
        schema[descriptor.full_name] = {f.number for f in descriptor.fields}
        for f in descriptor.fields:
            if f.message_type is not None:
                walk(f.message_type)

    walk(ExportTraceServiceRequest.DESCRIPTOR)
    assert schema == REVIEWED_SCHEMA, "opentelemetry-proto changed the trace schema: review _otlpdecode.c"


@needs_c_decoder
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for the sanitized build")
def test_fuzz_under_address_and_undefined_behaviour_sanitizers() -> None:
    """The fuzz against a build of the decoder with ASan and UBSan (tests/fuzz_sanitized.py; longer on demand:
    `python tests/fuzz_sanitized.py 1000000`)."""
    from tests.fuzz_sanitized import run

    result = run(int(os.environ.get("MASTWATCH_SANITIZED_ITERATIONS", "2000")), FUZZ_SEED)
    assert result.returncode == 0, result.stderr[-5000:]
    assert "no sanitizer report" in result.stdout
