"""Fuzzing what clients control: continue tokens, selectors, query strings, and all three
end to end through the apiserver; then, end to end, every route and body the server has
beyond the core kinds: named API groups (Leases, events.k8s.io Events), CRDs and the
objects of their kinds, discovery and OpenAPI.

The contract under test: every input yields a valid result or a ``StatusError`` with a
message and a 4xx code — 400 BadRequest for what cannot be parsed, 422 Invalid for option
combinations Kubernetes' validation forbids — and never another exception, a 500, a crash
or a hang. End to end (the ASGI app in-process over a real one-member etcd), a response is
2xx with a valid body (a 304 or 301 where HTTP caching says so) or a ``metav1.Status``
with a 4xx code; the only 5xx allowed is Kubernetes' own answer to a resourceVersion the
store has not reached, ``504 Timeout: Too large resource version`` (a fuzzed rv is
usually in the future). Writes that are dry runs must not move etcd's revision. Writes
of custom objects and CRDs are real (each example deletes what it made): an accepted
object reads back; a CRD is served as its conditions say, its delete completes, and the
server stays ready, its controllers running, with no traceback in its log.

Inputs are mostly near-valid: valid tokens, selectors and queries (some minted by the
real server) put through a few random edits (insert, delete, replace, truncate, duplicate,
swap), because random noise alone dies in the first check of each parser. Pure noise is
mixed in too. Bodies likewise: valid objects (CRDs with random schema trees, objects drawn
against a CRD's schema, Events, Leases, Scales; tests/support/kube_fuzz.py) edited as
trees, encoded as JSON, YAML or protobuf, and now and then edited as bytes.

How many: ``WATCHCACHE_FUZZ_EXAMPLES`` examples per test (default 250: the module runs
in about 70 s on two cores), a tenth of that for the CRD lifecycle test (every example
creates, serves and deletes a CRD); ``make fuzz-long`` runs 21,000 per test. The count of
inputs each target ran and the HTTP answers by status are printed at the end of the
module. Reproducible: without ``WATCHCACHE_FUZZ_SEED`` the run is derandomized (the same
inputs every time, from the test's name); ``make fuzz-long`` picks a random seed, prints
it, and ``WATCHCACHE_FUZZ_SEED=<seed>`` replays that run. A failure also prints
hypothesis' ``@reproduce_failure`` blob (and, for the CRD lifecycle test, which does not
shrink, every request and answer of the failing example).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import k8s_strategies
import kube_fuzz
import pytest
from hypothesis import HealthCheck, Phase, assume, given, note, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from watchcache import _core
from watchcache.apiserver.app import ApiServer
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
from watchcache.registry import resources as resource_specs
from watchcache.wire.errors import BadRequestError, ContinueTokenError, InvalidError
from watchcache.wire.options import ListOptions, WatchOptions, parse_query
from watchcache.wire.selectors import (
    FieldRequirement,
    LabelRequirement,
    SelectorError,
    compile_selector,
    format_field_selector,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)
from watchcache.wire.tokens import (
    CONTINUE_TOKEN_VERSION,
    decode_continue,
    encode_continue,
    parse_continue,
)

# ---------------------------------------------------------------------------------------------
# Settings, counts

EXAMPLES = int(os.environ.get("WATCHCACHE_FUZZ_EXAMPLES", "250"))
_SEED_TEXT = os.environ.get("WATCHCACHE_FUZZ_SEED", "").strip()
SEED = int(_SEED_TEXT, 0) if _SEED_TEXT else None

settings.register_profile(
    "watchcache-fuzz",
    max_examples=EXAMPLES,
    deadline=None,  # a shared, noisy machine: per-example timings mean nothing
    derandomize=SEED is None,
    database=None,  # a run is reproduced by its seed, not by a local example database
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
FUZZ = settings.get_profile("watchcache-fuzz")

INPUTS: Counter[str] = Counter()
#: What the end-to-end inputs got (status, and list or watch), to show what was reached.
OUTCOMES: Counter[str] = Counter()

T = TypeVar("T")


def fuzz(test: Callable[..., T]) -> Callable[..., T]:
    """The fuzz profile, and the run's seed when one was given (applied after @given)."""
    test = settings(FUZZ)(test)
    if SEED is not None:
        test = hypothesis_seed(SEED)(test)
    return test


def fuzz_examples(count: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """:func:`fuzz` with ``count`` examples and no shrinking, for a test whose every
    example costs a second or so (a CRD created, served and deleted) and whose draws
    depend on what the server answered (so a shrunk replay is not the same example): a
    failure reports the example as it ran, its requests and answers in the notes."""

    def apply(test: Callable[..., T]) -> Callable[..., T]:
        phases = (Phase.explicit, Phase.reuse, Phase.generate)
        test = settings(FUZZ, max_examples=count, phases=phases)(test)
        if SEED is not None:
            test = hypothesis_seed(SEED)(test)
        return test

    return apply


@pytest.fixture(scope="module", autouse=True)
def _report_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not INPUTS:
        return
    per_target = ", ".join(f"{name} {n:,}" for name, n in sorted(INPUTS.items()))
    seed = f"seed {SEED}" if SEED is not None else "derandomized"
    line = f"fuzz: {sum(INPUTS.values()):,} inputs ({per_target}); {EXAMPLES:,} per test, {seed}"
    if OUTCOMES:
        line += "\nfuzz: HTTP answers " + ", ".join(
            f"{outcome} {n:,}" for outcome, n in sorted(OUTCOMES.items())
        )
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        # Past the capture of this teardown, or the line only shows when a test fails.
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)


# ---------------------------------------------------------------------------------------------
# Mutation: a few random edits of a valid text


def mutated(base: st.SearchStrategy[str], pieces: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``base`` with 0-4 edits, each inserting or replacing with one of ``pieces``
    (characters or short tokens that matter to the parser), deleting, truncating,
    duplicating a slice or swapping two characters."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        text = draw(base)
        for _ in range(draw(st.integers(0, 4))):
            at = draw(st.integers(0, len(text)))
            edit = draw(st.sampled_from(["insert", "replace", "delete", "cut", "copy", "swap"]))
            if edit == "insert":
                text = text[:at] + draw(pieces) + text[at:]
            elif edit == "replace":
                text = text[:at] + draw(pieces) + text[at + 1 :]
            elif edit == "delete":
                text = text[:at] + text[at + draw(st.integers(1, 3)) :]
            elif edit == "cut":
                text = text[:at]
            elif edit == "copy":
                end = draw(st.integers(at, len(text)))
                text = text[:end] + text[at:end] + text[end:]
            elif at + 1 < len(text):
                text = text[:at] + text[at + 1] + text[at] + text[at + 2 :]
        return text

    return build()


ODD_CHARACTERS = st.sampled_from(
    ["\x00", "\t", "\n", "\r", " ", "\x7f", "\u00e9", "\u017f", "\u212a", "\ufffd", "\U0001f600"]
)

# ---------------------------------------------------------------------------------------------
# (a) Continue tokens

PREFIX = "/registry/configmaps/"
NAMES = st.text(alphabet="abcz019-.", min_size=1, max_size=12)
KEYS = st.builds(lambda ns, name: f"{PREFIX}{ns}/{name}", NAMES, NAMES)
TOKEN_RVS = st.one_of(st.integers(1, 10**6), st.just(-1), st.integers(-(2**63), 2**63 - 1))


def _mint(key: str, rv: int) -> str:
    return encode_continue(key + "\x00", PREFIX, rv if rv != 0 else 1)


VALID_TOKENS = st.builds(_mint, KEYS, TOKEN_RVS)
BASE64_PIECES = st.one_of(
    st.sampled_from(list("AZaz09-_+/=\r\n.")), ODD_CHARACTERS, st.sampled_from(["==", "%3D"])
)
JSON_PIECES = st.sampled_from(
    ['"', "\\", "\\u0000", "\\ud800", "\\u017f", "{", "}", "[", "]", ",", ":", "null", "0",
     "-", "1e3", "..", "/", "//", "\xff", "9" * 20, " "]
)  # fmt: skip


def _token_json(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("utf-8")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).rstrip(b"=").decode()


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from([CONTINUE_TOKEN_VERSION, "/", "..", "a/../b", "//a", "a/", "."]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
)
TOKEN_MEMBERS = st.sampled_from(["v", "rv", "start", "V", "Rv", "START", "\u017ftart", "x"])

TOKENS = st.one_of(
    # Valid, then edited as text (mostly base64 damage).
    mutated(VALID_TOKENS, BASE64_PIECES),
    # Valid JSON inside, edited, re-encoded: gets past base64 into the JSON checks.
    mutated(VALID_TOKENS.map(_token_json), JSON_PIECES).map(_b64),
    # Any JSON object with token-like members.
    st.dictionaries(TOKEN_MEMBERS | NAMES, JSON_VALUES, max_size=5).map(json.dumps).map(_b64),
    # Noise.
    st.text(max_size=60),
    st.binary(max_size=60).map(lambda data: base64.urlsafe_b64encode(data).decode()),
)


def check_continue_token(token: str) -> None:
    """A token decodes to a key inside the prefix, or is refused with a 400."""
    try:
        from_key, rv = decode_continue(token, PREFIX)
    except ContinueTokenError as error:
        assert isinstance(error, BadRequestError) and error.code == 400
        assert error.message.startswith("invalid continue token: continue key is not valid: ")
        return
    parsed = parse_continue(token)
    assert rv == parsed.resource_version != 0
    assert from_key.startswith(PREFIX)
    # Traversal: what follows the prefix is a clean path that cannot climb out of it.
    rest = from_key[len(PREFIX) :]
    assert not any(segment in (".", "..") for segment in rest.split("/")), from_key
    assert "//" not in "/" + rest


@fuzz
@given(TOKENS)
def test_fuzz_continue_tokens_decode_or_get_400(token: str) -> None:
    INPUTS["tokens"] += 1
    check_continue_token(token)
    # The LIST options keep the token for later: it is never an error at that stage.
    options = ListOptions(continue_token=token)
    assert options.continue_token == token


# ---------------------------------------------------------------------------------------------
# (b) Label and field selectors

_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?"
LABEL_KEYS = st.one_of(
    st.sampled_from(["app", "tier", "a", "example.com/role", "in", "notin", "x" * 63]),
    st.from_regex(rf"([a-z0-9]([-a-z0-9.]{{0,10}}[a-z0-9])?/)?{_LABEL_NAME}", fullmatch=True),
)
LABEL_VALUES = st.one_of(
    st.sampled_from(["", "web", "db", "1", "-1", "+7", "007", str(2**63 - 1), str(2**63)]),
    st.from_regex(_LABEL_NAME, fullmatch=True),
)
INT_VALUES = st.one_of(st.integers(-(2**63), 2**63 - 1).map(str), st.sampled_from(["+3", "-0"]))
LABEL_REQUIREMENTS = st.one_of(
    st.builds(LabelRequirement, LABEL_KEYS, st.sampled_from(["=", "!="]), st.tuples(LABEL_VALUES)),
    st.builds(
        LabelRequirement,
        LABEL_KEYS,
        st.sampled_from(["in", "notin"]),
        st.lists(LABEL_VALUES, min_size=1, max_size=3).map(lambda v: tuple(sorted(set(v)))),
    ),
    st.builds(LabelRequirement, LABEL_KEYS, st.sampled_from(["exists", "!"])),
    st.builds(LabelRequirement, LABEL_KEYS, st.sampled_from(["gt", "lt"]), st.tuples(INT_VALUES)),
)
FIELD_KEYS = st.sampled_from(
    ["metadata.name", "metadata.namespace", "spec.nodeName", "status.phase", "", "a.b"]
)
FIELD_VALUES = st.text(alphabet="ab1-.=,\\! \u00e9", max_size=8)
FIELD_REQUIREMENTS = st.builds(
    FieldRequirement, FIELD_KEYS, st.sampled_from(["=", "!="]), FIELD_VALUES
)
VALID_LABEL_SELECTORS = st.lists(LABEL_REQUIREMENTS, max_size=4).map(format_label_selector)
VALID_FIELD_SELECTORS = st.lists(FIELD_REQUIREMENTS, max_size=3).map(format_field_selector)
LABEL_PIECES = st.one_of(
    st.sampled_from(list("=!(),<> \t/.-_a9")),
    st.sampled_from([" in ", " notin ", "==", "!=", "()", "(,)", ",,", "x" * 70]),
    ODD_CHARACTERS,
)
FIELD_PIECES = st.one_of(st.sampled_from([*"=!,\\ .a", "==", "!=", "\\,", "\\="]), ODD_CHARACTERS)
LABEL_SELECTORS = st.one_of(mutated(VALID_LABEL_SELECTORS, LABEL_PIECES), st.text(max_size=40))
FIELD_SELECTORS = st.one_of(mutated(VALID_FIELD_SELECTORS, FIELD_PIECES), st.text(max_size=40))

_INT64 = re.compile(r"[+-]?[0-9]+")


def _go_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, None when it fails."""
    if not _INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def oracle_matches(
    labels_wanted: Sequence[LabelRequirement],
    fields_wanted: Sequence[FieldRequirement],
    labels: Mapping[str, str],
    fields: Mapping[str, str],
) -> bool:
    """Kubernetes' ``Requirement.Matches`` and field selectors, restated (all must hold)."""
    for r in labels_wanted:
        present = r.key in labels
        value = labels.get(r.key, "")
        if r.op in ("=", "in"):
            ok = present and value in r.values
        elif r.op in ("!=", "notin"):
            ok = not present or value not in r.values
        elif r.op in ("exists", "!"):
            ok = present == (r.op == "exists")
        else:
            have, bound = _go_int64(value), _go_int64(r.values[0])
            ok = present and have is not None and bound is not None
            ok = ok and (have > bound if r.op == "gt" else have < bound)  # type: ignore[operator]
        if not ok:
            return False
    return all((fields.get(f.key, "") == f.value) == (f.op == "=") for f in fields_wanted)


def check_selector_error(error: SelectorError, text: str) -> None:
    assert error.code == 400
    assert 0 <= error.position <= len(text)
    assert str(error) and error.detail


@fuzz
@given(LABEL_SELECTORS, FIELD_SELECTORS, st.data())
def test_fuzz_selectors_parse_compile_and_match_or_get_400(
    label_selector: str, field_selector: str, data: st.DataObject
) -> None:
    INPUTS["selectors"] += 1
    try:
        labels_wanted = parse_label_selector(label_selector)
    except SelectorError as error:
        check_selector_error(error, label_selector)
        labels_wanted = None
    try:
        fields_wanted = parse_field_selector(field_selector)
    except SelectorError as error:
        check_selector_error(error, field_selector)
        fields_wanted = None
    # The options layer turns either failure into a 400 Status, label selector first.
    try:
        options = ListOptions(label_selector=label_selector, field_selector=field_selector)
    except BadRequestError as error:
        assert error.code == 400 and error.message
        assert labels_wanted is None or fields_wanted is None
        return
    assert labels_wanted is not None and fields_wanted is not None
    assert options.label_requirements == labels_wanted
    compiled = options.selector()
    if compiled is None:
        assert not labels_wanted and not fields_wanted
        compiled = compile_selector(label_selector, field_selector)
    assert isinstance(compiled, _core.Selector)
    # Label sets near the requirements: their keys, their values, numbers, noise.
    keys = st.sampled_from([r.key for r in labels_wanted] or ["app"]) | LABEL_KEYS
    values = st.sampled_from([v for r in labels_wanted for v in r.values] or ["x"])
    # Not a value starting with '+': validation refuses it in an object's labels, and the
    # engine (std::from_chars) would not read it as a number where Go's ParseInt does.
    values = (values | LABEL_VALUES | INT_VALUES | st.text(max_size=5)).filter(
        lambda v: not v.startswith("+")
    )
    field_keys = st.sampled_from([f.key for f in fields_wanted] or ["metadata.name"])
    field_values = st.sampled_from([f.value for f in fields_wanted] or [""]) | FIELD_VALUES
    for _ in range(3):
        labels = data.draw(st.dictionaries(keys, values, max_size=4))
        # Never a field named "": objects have the fixed set of paths the codec extracts.
        fields = data.draw(
            st.dictionaries(field_keys | FIELD_KEYS, field_values, max_size=3).map(
                lambda f: {k: v for k, v in f.items() if k}
            )
        )
        expected = oracle_matches(labels_wanted, fields_wanted, labels, fields)
        assert compiled.matches(labels, fields) is expected, (labels, fields)
        item = _core.Item("/k", b"{}", 1, labels=labels, fields=fields)
        assert compiled.matches_item(item) is expected


@pytest.mark.parametrize(
    ("field_selector", "matches"),
    [("=", True), ("==", True), ("!=", False), ("=b", False), ("!=b", True), ("=,a=1", False)],
)
def test_a_field_selector_with_an_empty_key_compiles_as_kubernetes_reads_it(
    field_selector: str, matches: bool
) -> None:
    """Regression (found by the fuzz test above): the grammar allows an empty field key,
    the engine refused it, so ``selector()`` of a valid ListOptions raised ValueError. No
    object has a field named "": the term is true or false for every object."""
    compiled = ListOptions(field_selector=field_selector).selector()
    assert compiled is not None
    assert compiled.matches({}, {"metadata.name": "x"}) is matches


# ---------------------------------------------------------------------------------------------
# (c) Query strings

RESOURCE_VERSIONS = st.one_of(
    st.sampled_from(["", "0", "1", "5", str(2**64 - 1), str(2**64), "-1", "abc", " 1", "01"]),
    st.integers(0, 10**6).map(str),
)
QUERY_VALUES: dict[str, st.SearchStrategy[str]] = {
    "resourceVersion": RESOURCE_VERSIONS,
    "resourceVersionMatch": st.sampled_from(["", "Exact", "NotOlderThan", "exact", "Any"]),
    "limit": st.one_of(
        st.integers(-(2**64), 2**64).map(str), st.sampled_from(["", "+1", "1.0", "0x5"])
    ),
    "continue": TOKENS,
    "labelSelector": LABEL_SELECTORS,
    "fieldSelector": FIELD_SELECTORS,
    "watch": st.sampled_from(["", "1", "0", "true", "false", "FALSE", "fal\u017fe", "yes"]),
    "allowWatchBookmarks": st.sampled_from(["true", "false", "", "0"]),
    "sendInitialEvents": st.sampled_from(["true", "false", "", "1"]),
    "timeoutSeconds": st.one_of(
        st.integers(-5, 2**63).map(str), st.sampled_from(["", "1s", "-0", "1e2"])
    ),
    "includeObject": st.sampled_from(["None", "Metadata", "Object", "", "x"]),
}
PARAMETER_NAMES = st.one_of(
    st.sampled_from(sorted(QUERY_VALUES)), st.sampled_from(["Limit", "watch ", "pretty", "x"])
)


@st.composite
def _pairs(draw: st.DrawFn) -> list[tuple[str, str]]:
    names = draw(st.lists(PARAMETER_NAMES, max_size=6))
    return [(n, draw(QUERY_VALUES.get(n, st.text(max_size=5)))) for n in names]


QUERY_PIECES = st.one_of(
    st.sampled_from(
        ["&", "=", "%", "%ff", "%00", "%e2%82", "%ZZ", "+", ";", "#", "?", "%3D", "&&"]
    ),
    ODD_CHARACTERS,
)
#: Raw query strings as a server hands them to the app: percent-encoded, then edited.
QUERIES = st.one_of(
    mutated(_pairs().map(urllib.parse.urlencode), QUERY_PIECES),
    st.text(alphabet=st.characters(max_codepoint=0x7E, min_codepoint=0x21), max_size=60),
)


def query_pairs(query: str) -> list[tuple[str, str]]:
    """What the apiserver decodes a query string into (``app._query``)."""
    return urllib.parse.parse_qsl(query, keep_blank_values=True)


def check_options(query: str) -> ListOptions | WatchOptions | None:
    """Options, or None for a 4xx StatusError (checked); anything else propagates."""
    try:
        options = parse_query(query_pairs(query))
    except (BadRequestError, InvalidError) as error:
        assert error.code in (400, 422) and error.message
        return None
    if isinstance(options, ListOptions):
        assert ListOptions.from_query(options.to_query()) == options
    else:
        assert WatchOptions.from_query(options.to_query()) == options
    return options


@fuzz
@given(QUERIES)
def test_fuzz_query_strings_parse_or_get_4xx(query: str) -> None:
    INPUTS["queries"] += 1
    note(f"query: {query!r}")
    options = check_options(query)
    if options is not None and options.has_selector:
        assert isinstance(options.selector(), _core.Selector)


# ---------------------------------------------------------------------------------------------
# (d) End to end: the ASGI app in-process, over a real etcd


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    streamed: bool


class ServerLog(logging.Handler):
    """What the server logged at WARNING and above while the module ran: a traceback in
    it (a controller's failed sync, a follower's handler) is a bug even when every HTTP
    answer was fine, because controllers log their exceptions and retry."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self, since: int = 0) -> list[str]:
        return [
            f"{r.name}: {r.getMessage()}\n{self.format(r)}"
            for r in self.records[since:]
            if r.exc_info
        ]


@dataclass
class LiveServer:
    """An ApiServer started in an event loop of its own thread, so that hypothesis (which
    is synchronous) can call it; its caches keep syncing between examples."""

    loop: asyncio.AbstractEventLoop
    server: ApiServer
    app: Any
    tokens: list[str] = field(default_factory=list)
    log: ServerLog = field(default_factory=ServerLog)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def request(
        self,
        method: str,
        path: str,
        query: str = "",
        *,
        body: bytes = b"",
        accept: str = "application/json",
        content_type: str = "application/json",
        if_none_match: str | None = None,
    ) -> Answer:
        return self.run(
            _asgi_request(
                self.app,
                method,
                path,
                query=query,
                body=body,
                accept=accept,
                content_type=content_type,
                if_none_match=if_none_match,
            )
        )


#: What a client sends as is in a query: visible ASCII but '#' (it starts the fragment).
_SENT_AS_IS = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "#")


def on_the_wire(query: str) -> str:
    """``query`` as a client puts it on the wire: anything an HTTP parser would refuse
    (controls, spaces, non-ASCII) percent-encoded as UTF-8 (a lone surrogate as its
    three bytes), the rest as is, so ``%ff`` and ``%ZZ`` arrive as written."""
    return urllib.parse.quote(query.encode("utf-8", "surrogatepass"), safe=_SENT_AS_IS)


async def _asgi_request(
    app: Any,
    method: str,
    path: str,
    *,
    query: str,
    body: bytes,
    accept: str,
    content_type: str = "application/json",
    if_none_match: str | None = None,
) -> Answer:
    """One request through the ASGI app, as uvicorn would make it; a streamed answer (a
    watch) is read for a moment and then the client disconnects."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": urllib.parse.unquote(path),
        "raw_path": path.encode("ascii"),
        "query_string": on_the_wire(query).encode("ascii"),
        "root_path": "",
        "headers": [
            (b"host", b"fuzz"),
            (b"accept", accept.encode("latin-1")),
            (b"content-type", content_type.encode("latin-1")),
            (b"content-length", str(len(body)).encode()),
        ]
        + ([] if if_none_match is None else [(b"if-none-match", if_none_match.encode("latin-1"))]),
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    disconnected = asyncio.Event()
    started: dict[str, Any] = {}
    head_sent = asyncio.Event()
    chunks: list[bytes] = []
    first_chunk = asyncio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
            head_sent.set()
        elif message["type"] == "http.response.body" and message.get("body"):
            chunks.append(message["body"])
            first_chunk.set()

    task = asyncio.ensure_future(app(scope, receive, send))
    waiter = asyncio.ensure_future(head_sent.wait())
    try:
        async with asyncio.timeout(30):  # a hang is a failure
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            assert started, f"the app ended without a response: {task}"
            # Header bytes as the wire has them (Latin-1 maps each byte to a character).
            headers = {
                k.decode("latin-1"): v.decode("latin-1") for k, v in started.get("headers", [])
            }
            # Warnings are UTF-8 text, as Kubernetes sends them (a UnicodeDecodeError here
            # is a failure of the answer).
            for name, value in started.get("headers", []):
                if name.lower() == b"warning":
                    value.decode("utf-8")
            # Only a stream (a watch) has no length; read it for a moment, then hang up.
            streamed = "content-length" not in headers
            if streamed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await first_chunk.wait()
                disconnected.set()
            await task
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return Answer(started["status"], headers, b"".join(chunks), streamed)


def _configmap(name: str, app: str, tier: str) -> bytes:
    labels = {"app": app, "tier": tier, "n": str(len(name))}
    return json.dumps({"metadata": {"name": name, "labels": labels}, "data": {"k": name}}).encode()


def _pod(name: str, node: str) -> bytes:
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}
    return json.dumps({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": spec}).encode()


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-apiserver", daemon=True)
    thread.start()
    try:
        with EtcdCluster(1) as etcd:
            resources = contextlib.AsyncExitStack()
            try:
                live = asyncio.run_coroutine_threadsafe(
                    _start(resources, etcd.endpoints, loop), loop
                ).result(120)
                logging.getLogger("watchcache").addHandler(live.log)
                try:
                    _seed(live)
                    _seed_named_groups(live)
                    yield live
                finally:
                    logging.getLogger("watchcache").removeHandler(live.log)
            finally:
                asyncio.run_coroutine_threadsafe(resources.aclose(), loop).result(120)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()


async def _start(
    resources: contextlib.AsyncExitStack, endpoints: Sequence[str], loop: asyncio.AbstractEventLoop
) -> LiveServer:
    client = await resources.enter_async_context(EtcdClient(endpoints, timeout=30))
    # A fuzzed rv is mostly ahead of etcd: its 504 comes after wait_timeout, 3 s by
    # default. Consistent reads wait as long for the cache to catch up, so not too short.
    server = ApiServer(client, max_limit=50, min_request_timeout=2, wait_timeout=0.5)
    await server.start()
    resources.push_async_callback(server.stop)
    return LiveServer(loop, server, server.app(manage_lifecycle=False))


def _create(live: LiveServer, path: str, body: bytes) -> None:
    for _ in range(20):
        made = live.request("POST", path, body=body)
        if made.status != 504:  # the cache lagging on a loaded machine
            break
    assert made.status in (201, 409), made


def _seed(live: LiveServer) -> None:
    """Objects for selectors to find, and continue tokens the server minted."""
    for ns in ("fuzz-a", "fuzz-b"):
        _create(live, "/api/v1/namespaces", _namespace(ns))
        for i in range(6):
            body = _configmap(f"cm-{i}", "web" if i % 2 else "db", f"t{i % 3}")
            _create(live, f"/api/v1/namespaces/{ns}/configmaps", body)
        _create(live, f"/api/v1/namespaces/{ns}/pods", _pod("p", f"node-{ns}"))
    for limit in ("1", "2", "3"):
        page = live.request("GET", "/api/v1/configmaps", f"limit={limit}")
        live.tokens.append(json.loads(page.body)["metadata"]["continue"])


def _namespace(name: str) -> bytes:
    return json.dumps({"metadata": {"name": name}}).encode()


COLLECTIONS = st.sampled_from(
    [
        "/api/v1/configmaps",
        "/api/v1/namespaces/fuzz-a/configmaps",
        "/api/v1/namespaces/fuzz-b/configmaps",
        "/api/v1/namespaces/nowhere/configmaps",
        "/api/v1/pods",
        "/api/v1/namespaces/fuzz-a/pods",
        "/api/v1/namespaces",
        "/api/v1/secrets",
        "/api/v1/events",
        "/api/v1/namespaces/fuzz-a/events",
        "/apis/coordination.k8s.io/v1/leases",
        "/apis/coordination.k8s.io/v1/namespaces/fuzz-b/leases",
    ]
)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
ACCEPTS = st.one_of(
    st.sampled_from(["application/json", "*/*", "", TABLE, TABLE + ",application/json"]),
    mutated(st.just(TABLE), st.sampled_from([*";=,*/ ", "v1beta1", "\xff"])),
)
WATCH_EVENT_TYPES = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"}


def _is_too_large_rv(status: Mapping[str, Any]) -> bool:
    causes = status.get("details", {}).get("causes", [])
    return status.get("reason") == "Timeout" and any(
        c.get("reason") == "ResourceVersionTooLarge" for c in causes
    )


def check_status(status: Mapping[str, Any], code: int) -> None:
    """A metav1.Status with a 4xx code, or the 504 for a future resourceVersion."""
    assert status["kind"] == "Status" and status["apiVersion"] == "v1", status
    assert status["status"] == "Failure" and status["message"], status
    assert status["code"] == code, status
    assert 400 <= code < 500 or (code == 504 and _is_too_large_rv(status)), status


def check_answer(answer: Answer) -> None:
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} {'watch' if answer.streamed else 'list'}"] += 1
    if answer.status != 200:
        assert answer.headers.get("content-type") == "application/json", answer
        check_status(json.loads(answer.body), answer.status)
        return
    if not answer.streamed:
        listed = json.loads(answer.body)
        assert listed["kind"].endswith("List") or listed["kind"] == "Table", listed
        assert isinstance(listed.get("items", listed.get("rows")), list), listed
        return
    # A watch: whole lines are events; an error inside the stream is a Status too.
    for line in answer.body.split(b"\n")[:-1]:
        event = json.loads(line)
        assert event["type"] in WATCH_EVENT_TYPES, event
        if event["type"] == "ERROR":
            check_status(event["object"], event["object"]["code"])


@st.composite
def _queries_with_live_tokens(draw: st.DrawFn, tokens: Sequence[str]) -> str:
    """A fuzzed query, often with a continue token the server itself minted (edited)."""
    query = draw(QUERIES)
    if draw(st.booleans()):
        token = draw(mutated(st.sampled_from(tokens), BASE64_PIECES))
        query += "&" + urllib.parse.urlencode({"continue": token})
    return query


@fuzz
@given(COLLECTIONS, ACCEPTS, st.data())
def test_fuzz_list_and_watch_urls_end_to_end(
    live: LiveServer, path: str, accept: str, data: st.DataObject
) -> None:
    INPUTS["http"] += 1
    query = data.draw(_queries_with_live_tokens(live.tokens))
    if data.draw(st.integers(0, 3)) == 0:
        query += "&watch=1"  # a third of the rest are watches already
    note(f"GET {path}?{query} (Accept: {accept!r})")
    check_answer(live.request("GET", path, query, accept=accept))


@fuzz
@given(st.data())
def test_fuzz_item_urls_end_to_end(live: LiveServer, data: st.DataObject) -> None:
    """GET of one object: fuzzed names (percent-escaped, any bytes) and query."""
    name = data.draw(mutated(st.sampled_from(["cm-1", "cm-4", "p"]), QUERY_PIECES | BASE64_PIECES))
    # A '/' (escaped or not) reaches the router as a path separator, another route.
    name = name.replace("/", "")
    assume(name)
    INPUTS["http-item"] += 1
    escaped = urllib.parse.quote(name.encode("utf-8", "surrogatepass"), safe="%")
    query = data.draw(QUERIES)
    path = f"/api/v1/namespaces/fuzz-a/configmaps/{escaped}"
    note(f"GET {path}?{query}")
    answer = live.request("GET", path, query)
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} item"] += 1
    if answer.status == 200:
        assert json.loads(answer.body)["metadata"]["name"] == urllib.parse.unquote(escaped)
    else:
        check_status(json.loads(answer.body), answer.status)


DRY_RUN_VALUES = st.lists(
    mutated(st.just("All"), st.sampled_from(["", "all", "ALL", "None", ",", "\x00", "true"])),
    min_size=1,
    max_size=3,
)


@st.composite
def _delete_options_bodies(draw: st.DrawFn, dry_run: list[str]) -> bytes:
    """A DeleteOptions body: members of the right and wrong types; its dryRun (when it has
    one) adds to the query's, so the request stays a dry run."""
    options: dict[str, Any] = {}
    if draw(st.booleans()):
        options["kind"] = draw(st.sampled_from(["DeleteOptions", "Pod", ""]))
        options["apiVersion"] = draw(st.sampled_from(["v1", "meta.k8s.io/v1", "x"]))
    if draw(st.booleans()):
        options["dryRun"] = draw(st.one_of(st.just(dry_run), JSON_LEAVES))
    for member in ("gracePeriodSeconds", "propagationPolicy", "orphanDependents"):
        if draw(st.booleans()):
            options[member] = draw(
                st.one_of(JSON_LEAVES, st.sampled_from(["Orphan", "Background", "Foreground"]))
            )
    if draw(st.booleans()):
        options["preconditions"] = draw(
            st.one_of(JSON_LEAVES, st.fixed_dictionaries({"uid": JSON_LEAVES}))
        )
    return json.dumps(options).encode()


@fuzz
@given(st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]), DRY_RUN_VALUES, st.data())
def test_fuzz_dry_run_writes_answer_and_never_write(
    live: LiveServer, method: str, dry_run: list[str], data: st.DataObject
) -> None:
    """Every write with a dryRun parameter, valid or not, answers a 2xx object or a 4xx
    Status and leaves etcd's revision where it was."""
    INPUTS["http-dry-run"] += 1
    query = "&".join(urllib.parse.urlencode({"dryRun": v}) for v in dry_run)
    if data.draw(st.booleans()):
        query += "&" + data.draw(QUERIES)
    collection = "/api/v1/namespaces/fuzz-a/configmaps"
    content_type = "application/json"
    if method == "POST":
        path, body = collection, _configmap(data.draw(st.sampled_from(["cm-1", "new"])), "x", "y")
    elif method == "PUT":
        path, body = f"{collection}/cm-1", _configmap("cm-1", "changed", "t")
    elif method == "PATCH":
        path, body = f"{collection}/cm-1", b'{"data":{"k":"patched"}}'
        content_type = "application/merge-patch+json"
    else:
        path = f"{collection}/{data.draw(st.sampled_from(['cm-1', 'missing']))}"
        body = data.draw(st.one_of(st.just(b""), _delete_options_bodies(dry_run)))
    note(f"{method} {path}?{query} {body[:300]!r}")
    before = live.run(live.server.client.current_revision(b"/registry"))
    answer = live.request(method, path, query, body=body, content_type=content_type)
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} dry-run"] += 1
    if not 200 <= answer.status < 300:
        check_status(json.loads(answer.body), answer.status)
    assert live.run(live.server.client.current_revision(b"/registry")) == before


_CAPTURED = Path(__file__).parents[1] / "data" / "kubectl-1.37"
#: Bodies real clients sent (kubectl 1.37's protobuf and JSON), and the same objects in
#: YAML: the seeds the byte-level mutations start from.
_BODY_SEEDS: list[tuple[bytes, str]] = [
    ((_CAPTURED / "create-configmap.pb").read_bytes(), "application/vnd.kubernetes.protobuf"),
    ((_CAPTURED / "create-secret.pb").read_bytes(), "application/vnd.kubernetes.protobuf"),
    (
        (_CAPTURED / "create-configmap-binary.pb").read_bytes(),
        "application/vnd.kubernetes.protobuf",
    ),
    (
        b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fz","labels":{"a":"b"}},'
        b'"data":{"k":"v"},"binaryData":{"b":"AAE="}}',
        "application/json",
    ),
    (
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fz\n  labels: {a: b}\n"
        b"data:\n  k: v\n  n: 12\nx: &a [1, *a]\n",
        "application/yaml",
    ),
]
_CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "application/json; charset=utf-8",
        "APPLICATION/YAML",
        "text/plain",
        "",
    ]
)


@st.composite
def _mutated_bytes(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` with 0-6 byte edits (none or one most often, so valid bodies keep coming):
    flip a bit, insert, delete, truncate, duplicate a slice."""
    data = bytearray(seed)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2, 3, 6]))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["flip", "insert", "delete", "cut", "copy"]))
        if edit == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        elif edit == "cut":
            del data[at:]
        elif edit == "copy":
            end = draw(st.integers(at, len(data)))
            data[end:end] = data[at:end]
    return bytes(data)


@fuzz
@given(st.sampled_from(_BODY_SEEDS), st.data())
def test_fuzz_request_bodies_in_every_media_type_answer_2xx_or_4xx(
    live: LiveServer, seed: tuple[bytes, str], data: st.DataObject
) -> None:
    """POST and PUT of mutated protobuf, JSON and YAML bodies under any Content-Type and
    fieldValidation: a Status 4xx or the object, never a 500, a hang or a write (every
    request is a dry run, so any write at all would move etcd's revision)."""
    INPUTS["http-body"] += 1
    body = data.draw(_mutated_bytes(seed[0]))
    content_type = data.draw(st.one_of(st.just(seed[1]), _CONTENT_TYPES))
    validation = data.draw(st.sampled_from(["", "Strict", "Warn", "Ignore"]))
    method, path = data.draw(
        st.sampled_from(
            [
                ("POST", "/api/v1/namespaces/fuzz-a/configmaps"),
                ("PUT", "/api/v1/namespaces/fuzz-a/configmaps/cm-1"),
                ("POST", "/api/v1/namespaces/fuzz-a/secrets"),
            ]
        )
    )
    query = "dryRun=All" + (f"&fieldValidation={validation}" if validation else "")
    note(f"{method} {path}?{query} ({content_type!r}) {body[:200]!r}")
    before = live.run(live.server.client.current_revision(b"/registry"))
    answer = live.request(method, path, query, body=body, content_type=content_type)
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} body"] += 1
    if not 200 <= answer.status < 300:
        check_status(json.loads(answer.body), answer.status)
    else:
        assert isinstance(json.loads(answer.body), dict)
    assert live.run(live.server.client.current_revision(b"/registry")) == before


# ---------------------------------------------------------------------------------------------
# (e) Named groups, CustomResourceDefinitions, custom objects, discovery and OpenAPI, end to
# end. The live server also serves Leases, Events through both APIs, and two CRDs of the
# fixture (tests/support/kube_fuzz.py: a namespaced kind with every schema keyword, status
# and scale, two versions; a cluster-scoped one), each with a few objects.

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FUZZ_V1 = "/apis/fuzz.example.com/v1"
THINGS = f"{FUZZ_V1}/namespaces/fuzz-a/fuzzthings"
THINGS_BETA = "/apis/fuzz.example.com/v1beta1/namespaces/fuzz-a/fuzzthings"
CLUSTER_FUZZES = f"{FUZZ_V1}/clusterfuzzes"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/fuzz-a/leases"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/fuzz-a/events"
CORE_EVENTS = "/api/v1/namespaces/fuzz-a/events"
MERGE_PATCH = "application/merge-patch+json"
#: The Table Accept header kubectl sends, for lists of the CRDs' kinds (printer columns).
TABLE_ACCEPT = f"{TABLE},application/json"


def _lease(name: str, holder: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 1},
    }


def _core_event(name: str, kind: str, reason: str, kind_of_event: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"kind": kind, "name": "p", "namespace": "fuzz-a", "apiVersion": "v1",
                           "fieldPath": "spec.containers{c}"},
        "reason": reason,
        "message": "seen",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2026-03-04T05:06:07Z",
        "lastTimestamp": "2026-03-04T05:16:07Z",
        "count": 2,
        "type": kind_of_event,
    }  # fmt: skip


def _event_v1(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2026-03-04T05:06:07.123456Z",
        "reportingController": "example.com/fuzzer",
        "reportingInstance": "fuzzer-1",
        "action": "Fuzzing",
        "reason": "Fuzzed",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "fuzz-a", "apiVersion": "v1"},
        "note": "the fuzzer looked",
        "type": "Normal",
    }


def _thing(object_name: str, version: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"fuzz.example.com/{version}",
        "kind": "FuzzThing",
        "metadata": {"name": object_name, "labels": {"app": "web"}},
        "spec": spec,
    }


def _wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.02)


def _lists(live: LiveServer, url: str) -> bool:
    return live.request("GET", url).status == 200


def _seed_named_groups(live: LiveServer) -> None:
    """Objects of every named-group resource for lists, items and field selectors to find:
    two Leases, Events written through each API, the fixture's CRDs once they are served,
    and objects of their kinds."""
    for name, holder in (("lease-1", "a"), ("lease-2", "b")):
        _create(live, LEASES, kube_fuzz.to_json(_lease(name, holder)))
    for name, kind, reason, kind_of_event in (
        ("ev-1", "Pod", "Created", "Normal"),
        ("ev-2", "ConfigMap", "Changed", "Warning"),
    ):
        _create(
            live, CORE_EVENTS, kube_fuzz.to_json(_core_event(name, kind, reason, kind_of_event))
        )
    _create(live, EVENTS_V1, kube_fuzz.to_json(_event_v1("ev-v1")))
    for crd in (kube_fuzz.FUZZ_THINGS_CRD, kube_fuzz.CLUSTER_FUZZES_CRD):
        _create(live, CRDS, kube_fuzz.to_json(crd))
    # The CRD controller serves them within a second; a loaded machine may take longer.
    for url in (THINGS, THINGS_BETA, CLUSTER_FUZZES):
        _wait_for(functools.partial(_lists, live, url), 30, f"{url} served")
    _create(live, THINGS, kube_fuzz.to_json(_thing("seed-1", "v1", mode="Fast", replicas=3,
                                                   name="alpha", port=8080)))  # fmt: skip
    _create(live, THINGS, kube_fuzz.to_json(_thing("seed-2", "v1", mode="Slow", replicas=0,
                                                   enabled=False, port="http")))  # fmt: skip
    _create(live, THINGS_BETA, kube_fuzz.to_json(_thing("seed-3", "v1beta1", mode="Off")))
    for name, kind in (("cf-1", "plain"), ("cf-2", "other")):
        cluster_fuzz = {
            "apiVersion": "fuzz.example.com/v1",
            "kind": "ClusterFuzz",
            "metadata": {"name": name},
            "spec": {"kind": kind, "free": [1]},
        }
        _create(live, CLUSTER_FUZZES, kube_fuzz.to_json(cluster_fuzz))


@dataclass(frozen=True)
class Served:
    """A named-group resource (or core Events) as the URL tests address it."""

    root: str
    plural: str
    namespaced: bool
    #: Field selector keys it supports (from its ResourceSpec, or the CRD).
    fields: tuple[str, ...]
    #: Names of objects seeded, and values their selectable fields hold.
    names: tuple[str, ...]
    values: tuple[str, ...]
    subresources: tuple[str, ...] = ()


_EVENT_VALUES = (
    "Pod", "ConfigMap", "p", "fuzz-a", "v1", "Created", "Changed", "Fuzzed", "kubelet",
    "example.com/fuzzer", "Normal", "Warning", "spec.containers{c}",
)  # fmt: skip
_EVENT_NAMES = ("ev-1", "ev-2", "ev-v1")
NAMED: tuple[Served, ...] = (
    Served("/apis/coordination.k8s.io/v1", "leases", True, resource_specs.LEASES.selectable_fields,
           ("lease-1", "lease-2"), ("lease-1", "fuzz-a")),
    Served("/apis/events.k8s.io/v1", "events", True, resource_specs.EVENTS_V1.selectable_fields,
           _EVENT_NAMES, _EVENT_VALUES),
    Served("/api/v1", "events", True, resource_specs.EVENTS.selectable_fields, _EVENT_NAMES,
           _EVENT_VALUES),
    Served("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False,
           resource_specs.CUSTOM_RESOURCE_DEFINITIONS.selectable_fields,
           ("fuzzthings.fuzz.example.com", "clusterfuzzes.fuzz.example.com"),
           ("fuzzthings.fuzz.example.com",), ("status",)),
    Served(FUZZ_V1, "fuzzthings", True, kube_fuzz.FUZZ_THINGS_FIELDS,
           ("seed-1", "seed-2", "seed-3"), ("Fast", "Slow", "Off", "3", "0", "1", "true", "false",
                                            "alpha", "seed-1"), ("status", "scale")),
    Served("/apis/fuzz.example.com/v1beta1", "fuzzthings", True, kube_fuzz.FUZZ_THINGS_FIELDS,
           ("seed-1", "seed-3"), ("Fast", "Off", "1", "true"), ("status", "scale")),
    Served(FUZZ_V1, "clusterfuzzes", False, ("metadata.name", "spec.kind"), ("cf-1", "cf-2"),
           ("plain", "other", "cf-1")),
)  # fmt: skip
#: Keys another resource supports (refused here with a 400), and odd ones.
OTHER_FIELD_KEYS = st.sampled_from(
    ["spec.nodeName", "involvedObject.kind", "regarding.kind", "spec.color", "status.phase",
     "spec", "spec.mode.x", "metadata.labels", ""]
)  # fmt: skip


@st.composite
def _field_selectors_for(draw: st.DrawFn, served: Served) -> str:
    """A field selector over the resource's own keys (mostly) and values its objects hold,
    then edited as text."""
    keys = st.sampled_from(served.fields) | st.sampled_from(served.fields) | OTHER_FIELD_KEYS
    values = st.sampled_from(served.values) | st.just("") | FIELD_VALUES
    wanted = draw(st.lists(st.builds(FieldRequirement, keys, st.sampled_from(["=", "!="]),
                                     values), max_size=3))  # fmt: skip
    return draw(mutated(st.just(format_field_selector(wanted)), FIELD_PIECES))


@st.composite
def _named_queries(draw: st.DrawFn, served: Served) -> str:
    """A LIST/WATCH query with a field selector for ``served``, mostly with other
    parameters too; the whole string now and then edited as raw text."""
    pairs = [(n, v) for n, v in draw(_pairs()) if n != "fieldSelector"]
    if draw(st.integers(0, 4)):
        pairs.append(("fieldSelector", draw(_field_selectors_for(served))))
    query = urllib.parse.urlencode(pairs)
    if draw(st.integers(0, 3)) == 0:
        query = draw(mutated(st.just(query), QUERY_PIECES))
    return query


@st.composite
def _escaped_names(draw: st.DrawFn, names: Sequence[str]) -> str:
    name = draw(mutated(st.sampled_from(names), QUERY_PIECES | BASE64_PIECES)).replace("/", "")
    return urllib.parse.quote(name.encode("utf-8", "surrogatepass"), safe="%") or names[0]


def check_item_answer(answer: Answer, subresource: str) -> None:
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} item"] += 1
    if answer.status != 200:
        check_status(json.loads(answer.body), answer.status)
        return
    got = json.loads(answer.body)
    if subresource == "scale":
        assert got["kind"] == "Scale" and got["apiVersion"] == "autoscaling/v1", got
    elif got.get("kind") != "Table":
        assert got["metadata"]["name"], got


@fuzz
@given(st.sampled_from(NAMED), ACCEPTS, st.data())
def test_fuzz_named_group_urls_end_to_end(
    live: LiveServer, served: Served, accept: str, data: st.DataObject
) -> None:
    """LIST, WATCH and GET of Leases, Events (both APIs: ``regarding.*`` and
    ``involvedObject.*`` selectors), CRDs, and the fixture's custom kinds in two versions
    (``spec.*`` selectable fields, status and scale): the same contract as the core ones."""
    INPUTS["http-named"] += 1
    namespace = ""
    if served.namespaced:
        namespace = data.draw(st.sampled_from(["fuzz-a", "fuzz-a", "fuzz-b", "nowhere", ""]))
    root = served.root + (f"/namespaces/{namespace}" if namespace else "")
    if data.draw(st.integers(0, 2)) or (served.namespaced and not namespace):
        query = data.draw(_named_queries(served))
        if data.draw(st.integers(0, 3)) == 0:
            query += "&watch=1"
        path = f"{root}/{served.plural}"
        note(f"GET {path}?{query} (Accept: {accept!r})")
        check_answer(live.request("GET", path, query, accept=accept))
        return
    path = f"{root}/{served.plural}/{data.draw(_escaped_names(served.names))}"
    subresource = data.draw(st.sampled_from(["", "", *served.subresources, "scale", "x"]))
    if subresource:
        path += f"/{subresource}"
    query = data.draw(QUERIES)
    note(f"GET {path}?{query} (Accept: {accept!r})")
    check_item_answer(live.request("GET", path, query, accept=accept), subresource)


DISCOVERY_PATHS = st.sampled_from(
    ["/api", "/apis", "/api/v1", "/apis/fuzz.example.com", "/apis/fuzz.example.com/v1",
     "/apis/events.k8s.io/v1", "/apis/nope.example.com", "/apis/fuzz.example.com/v9",
     "/openapi/v2", "/openapi/v3", "/openapi/v3/api/v1", "/openapi/v3/apis/fuzz.example.com/v1",
     "/openapi/v3/apis/fuzz.example.com/v1beta1",
     "/openapi/v3/apis/apiextensions.k8s.io/v1", "/openapi/v3/apis/nope/v1", "/version"]
)  # fmt: skip
#: The 200 answer's kind on each path whose document has one (the legacy discovery).
_LEGACY_KINDS = {"/api": "APIVersions", "/apis": "APIGroupList", "/api/v1": "APIResourceList"}


@pytest.fixture(scope="module")
def validators(live: LiveServer) -> dict[str, list[str]]:
    """The ETags the server hands out, by path (a v3 document's is its quoted hash): what
    If-None-Match and ``?hash=`` are drawn from (then edited)."""
    found: dict[str, list[str]] = {}
    for path in ("/api", "/apis"):
        for accept in (kube_fuzz.KUBECTL_DISCOVERY, kube_fuzz.AGGREGATED_V2BETA1):
            etag = live.request("GET", path, accept=accept).headers["etag"]
            found.setdefault(path, []).append(etag)
    for accept in ("application/json", kube_fuzz.OPENAPI_V2_PROTOBUF):
        etag = live.request("GET", "/openapi/v2", accept=accept).headers["etag"]
        found.setdefault("/openapi/v2", []).append(etag)
    index = live.request("GET", "/openapi/v3")
    found["/openapi/v3"] = [index.headers["etag"]]
    for name, entry in json.loads(index.body)["paths"].items():
        found[f"/openapi/v3/{name}"] = [f'"{entry["serverRelativeURL"].partition("?hash=")[2]}"']
    return found


@st.composite
def _if_none_match(draw: st.DrawFn, etags: Sequence[str]) -> str | None:
    """None (no header), an ETag as sent, weak, unquoted, edited, in a list, or ``*``."""
    shapes = ["none", "exact", "exact", "exact", "exact", "weak", "bare", "list", "edited", "star"]
    shape = draw(st.sampled_from([*shapes, "noise"]))
    etag = draw(st.sampled_from(etags))
    if shape == "none":
        return None
    if shape == "exact":
        return etag
    if shape == "weak":
        return f"W/{etag}"
    if shape == "bare":
        return etag.strip('"')
    if shape == "list":
        return f'"x", {etag}, W/"y"'
    if shape == "edited":
        return draw(
            mutated(st.just(etag), st.sampled_from(['"', ",", " ", "*", "W/", "A", "\xff"]))
        )
    if shape == "star":
        return "*"
    return draw(st.text(alphabet=st.characters(max_codepoint=0xFF), max_size=20))


def check_discovery_answer(
    path: str, query: str, answer: Answer, if_none_match: str | None
) -> None:
    """200 with a document (JSON; protobuf for OpenAPI v2 when asked), 304 when the client
    holds the current ETag, 301 for a stale v3 hash, or a 404/406 Status."""
    note(f"answer: {answer.status} {answer.headers} {answer.body[:200]!r}")
    content_type = answer.headers.get("content-type", "")
    OUTCOMES[f"{answer.status} discovery"] += 1
    if answer.status == 304:
        etag = answer.headers["etag"]
        assert not answer.body and etag and if_none_match and etag in if_none_match, answer
        return
    if answer.status == 301:
        assert "hash=" in query and answer.headers["location"].startswith("/openapi/v3/"), answer
        return
    if answer.status != 200:
        assert answer.status in (404, 406), answer
        assert content_type == "application/json", answer
        check_status(json.loads(answer.body), answer.status)
        return
    if "protobuf" in content_type:
        assert path == "/openapi/v2" and answer.body, answer
        return
    assert content_type.startswith("application/json"), answer
    document = json.loads(answer.body)
    assert isinstance(document, dict), answer
    if "as=APIGroupDiscoveryList" in content_type:
        assert path in ("/api", "/apis") and document["kind"] == "APIGroupDiscoveryList"
        assert answer.headers.get("etag"), answer
    elif path in _LEGACY_KINDS:
        assert document["kind"] == _LEGACY_KINDS[path], document


@fuzz
@given(DISCOVERY_PATHS, kube_fuzz.ACCEPT_HEADERS, st.data())
def test_fuzz_discovery_and_openapi_negotiation(
    live: LiveServer, validators: dict[str, list[str]], path: str, accept: str, data: st.DataObject
) -> None:
    """``/api`` and ``/apis`` (aggregated discovery by Accept), the group documents,
    ``/openapi/v2`` (JSON or protobuf) and ``/openapi/v3[/<gv>]`` (``?hash=``): Accept
    headers built from clients' media types and parameters then edited, If-None-Match with
    the server's own ETags, as sent or edited."""
    INPUTS["http-discovery"] += 1
    accept = data.draw(
        st.one_of(st.just(accept), mutated(st.just(accept), kube_fuzz.ACCEPT_PIECES))
    )
    # Mostly this path's own ETags (a 304 is possible), now and then another's.
    everything = sorted({etag for etags in validators.values() for etag in etags})
    etags = validators.get(path, everything) if data.draw(st.integers(0, 3)) else everything
    if_none_match = data.draw(_if_none_match(etags))
    query = ""
    if path.startswith("/openapi/v3/") and data.draw(st.booleans()):
        wanted = data.draw(st.sampled_from(etags) | mutated(st.sampled_from(etags), BASE64_PIECES))
        query = urllib.parse.urlencode({"hash": wanted.strip('"')})
    note(f"GET {path}?{query} (Accept: {accept!r}, If-None-Match: {if_none_match!r})")
    answer = live.request("GET", path, query, accept=accept, if_none_match=if_none_match)
    check_discovery_answer(path, query, answer, if_none_match)


# Writes: CRDs, custom objects and their subresources, events.k8s.io Events, Leases.

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"
CRD_MUTATION_KEYS = (*kube_fuzz.CRD_KEYS, *kube_fuzz.SCHEMA_KEYWORDS)
FIELD_VALIDATIONS = st.sampled_from(["", "Strict", "Warn", "Ignore"])


def check_write_answer(answer: Answer, what: str) -> dict[str, Any] | None:
    """A 2xx answer's JSON object, or None for a 4xx Status (checked)."""
    note(f"answer: {answer.status} {answer.body[:300]!r}")
    OUTCOMES[f"{answer.status} {what}"] += 1
    if 200 <= answer.status < 300:
        obj = json.loads(answer.body)
        assert isinstance(obj, dict), answer
        return obj
    check_status(json.loads(answer.body), answer.status)
    return None


def _get_json(live: LiveServer, path: str) -> dict[str, Any] | None:
    got = live.request("GET", path)
    return json.loads(got.body) if got.status == 200 else None


@st.composite
def _bodies(
    draw: st.DrawFn,
    obj: Any,
    api_version: str,
    kind: str,
    keys: Sequence[str],
    *,
    protobuf: bool = True,
) -> tuple[bytes, str]:
    """``obj`` edited as a tree, encoded in a media type, and now and then edited as bytes."""
    edited = draw(kube_fuzz.mutated_tree(obj, keys))
    body, content_type = draw(kube_fuzz.encoded(edited, api_version, kind, protobuf=protobuf))
    if draw(st.integers(0, 4)) == 0:
        body = draw(_mutated_bytes(body))
    return body, content_type


#: fieldManager values: mostly a good one (an apply needs it), now and then none, one too
#: long, or one with a character Kubernetes refuses.
FIELD_MANAGERS = st.sampled_from(["fuzz", "fuzz", "fuzz", "other", "", "x" * 129, "a\tb"])


def _write_query(data: st.DataObject, dry_run: bool) -> str:
    pairs = [("dryRun", "All")] if dry_run else []
    validation = data.draw(FIELD_VALIDATIONS)
    if validation:
        pairs.append(("fieldValidation", validation))
    manager = data.draw(FIELD_MANAGERS)
    if manager:
        pairs.append(("fieldManager", manager))
    # force belongs to apply; on any other write it is a 422.
    if data.draw(st.integers(0, 7)) == 0:
        pairs.append(("force", data.draw(st.sampled_from(["true", "false", "1", "yes"]))))
    return urllib.parse.urlencode(pairs)


def _renamed_crd(crd: Mapping[str, Any], plural: str, kind: str) -> dict[str, Any]:
    """A fixture CRD under other names (a create of the fixture itself would be a 409)."""
    copied: dict[str, Any] = json.loads(json.dumps(crd))
    group = copied["spec"]["group"]
    copied["metadata"]["name"] = f"{plural}.{group}"
    copied["spec"]["names"] = {"plural": plural, "singular": plural[:-1], "kind": kind}
    return copied


_CRD_SEEDS = (
    _renamed_crd(kube_fuzz.FUZZ_THINGS_CRD, "copies", "Copy"),
    _renamed_crd(kube_fuzz.CLUSTER_FUZZES_CRD, "clustercopies", "ClusterCopy"),
)


def _dry_write(
    live: LiveServer,
    method: str,
    path: str,
    query: str,
    body: bytes,
    *,
    content_type: str,
    what: str,
) -> None:
    """A dry-run write: checked as any answer, and etcd's revision must not move."""
    note(f"{method} {path}?{query} ({content_type!r}) {body[:400]!r}")
    before = live.run(live.server.client.current_revision(b"/registry"))
    answer = live.request(method, path, query, body=body, content_type=content_type)
    check_write_answer(answer, what)
    assert live.run(live.server.client.current_revision(b"/registry")) == before


@fuzz
@given(st.sampled_from(["create", "create", "create", "update", "status", "patch", "delete"]),
       st.data())  # fmt: skip
def test_fuzz_crd_bodies_answer_2xx_or_4xx(
    live: LiveServer, operation: str, data: st.DataObject
) -> None:
    """Dry-run writes of CustomResourceDefinitions: generated CRDs (random schema trees with
    every keyword, names, versions, subresources, printer columns, selectable fields,
    conversion) and the fixture's, edited as trees, in JSON, YAML or protobuf, edited as
    bytes; creates, updates and ``/status`` writes of the fixture's CRD, patches of every
    type, deletes. A 2xx object or a 4xx Status, and nothing written."""
    INPUTS["http-crd"] += 1
    target = f"{CRDS}/fuzzthings.fuzz.example.com"
    query = _write_query(data, dry_run=True)
    stored = _get_json(live, target)
    assert stored is not None
    if operation == "create":
        base = data.draw(kube_fuzz.crds() | st.sampled_from(_CRD_SEEDS))
        body, content_type = data.draw(_bodies(base, CRD_API_VERSION, CRD_KIND, CRD_MUTATION_KEYS))
        _dry_write(live, "POST", CRDS, query, body, content_type=content_type, what="crd")
    elif operation in ("update", "status"):
        if operation == "status" and data.draw(st.booleans()):
            stored["status"] = data.draw(
                kube_fuzz.mutated_tree(stored["status"], CRD_MUTATION_KEYS)
            )
        if data.draw(st.booleans()):
            del stored["metadata"]["resourceVersion"]
        body, content_type = data.draw(
            _bodies(stored, CRD_API_VERSION, CRD_KIND, CRD_MUTATION_KEYS)
        )
        path = target if operation == "update" else f"{target}/status"
        _dry_write(live, "PUT", path, query, body, content_type=content_type, what="crd")
    elif operation == "patch":
        patch_type = data.draw(st.sampled_from(kube_fuzz.PATCH_TYPES))
        body = data.draw(kube_fuzz.patches(stored, patch_type, CRD_MUTATION_KEYS))
        path = data.draw(st.sampled_from([target, f"{target}/status"]))
        _dry_write(live, "PATCH", path, query, body, content_type=patch_type, what="crd")
    else:
        body = data.draw(st.one_of(st.just(b""), _delete_options_bodies(["All"])))
        _dry_write(live, "DELETE", target, query, body, content_type="application/json", what="crd")


_EVENT_AND_LEASE_KINDS = (
    ("events.k8s.io/v1", "Event", EVENTS_V1, "ev-v1", _event_v1("new-v1")),
    ("v1", "Event", CORE_EVENTS, "ev-1", _core_event("new-core", "Pod", "Created", "Normal")),
    ("coordination.k8s.io/v1", "Lease", LEASES, "lease-1", _lease("new-lease", "c")),
)
_EVENT_KEYS = (
    *kube_fuzz.OBJECT_KEYS, "regarding", "related", "note", "reason", "reportingController",
    "reportingInstance", "action", "eventTime", "series", "count", "lastObservedTime",
    "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
    "deprecatedCount", "involvedObject", "source", "message", "firstTimestamp",
    "lastTimestamp", "reportingComponent", "type", "holderIdentity", "leaseDurationSeconds",
    "acquireTime", "renewTime", "leaseTransitions", "strategy", "preferredHolder",
)  # fmt: skip


@st.composite
def _canonical_objects(draw: st.DrawFn, api_version: str, kind: str) -> dict[str, Any]:
    """Any object Go could marshal for the kind (k8s_strategies), mostly invalid for its
    validation: reaches the checks past decoding with values nobody would pick."""
    message = kube_fuzz.SCHEMA.kind(api_version, kind)
    assert message is not None
    obj = draw(k8s_strategies.objects(message, max_depth=2))
    return {"apiVersion": api_version, "kind": kind, **obj}


@fuzz
@given(st.sampled_from(_EVENT_AND_LEASE_KINDS), st.data())
def test_fuzz_event_and_lease_bodies_answer_2xx_or_4xx(
    live: LiveServer, target: tuple[str, str, str, str, dict[str, Any]], data: st.DataObject
) -> None:
    """Dry-run creates, updates, patches and deletes of events.k8s.io/v1 Events (converted
    to core Events at the etcd boundary), core Events and Leases: valid objects and any
    object the protobuf schema allows, edited as trees, in JSON, YAML or protobuf."""
    api_version, kind, collection, existing, valid = target
    INPUTS["http-event-lease"] += 1
    item = f"{collection}/{existing}"
    query = _write_query(data, dry_run=True)
    operation = data.draw(st.sampled_from(["create", "create", "update", "patch", "delete"]))
    if operation == "create":
        base = data.draw(st.just(valid) | _canonical_objects(api_version, kind))
        body, content_type = data.draw(_bodies(base, api_version, kind, _EVENT_KEYS))
        _dry_write(
            live, "POST", collection, query, body, content_type=content_type, what="event-lease"
        )
        return
    stored = _get_json(live, item)
    assert stored is not None
    if operation == "update":
        body, content_type = data.draw(_bodies(stored, api_version, kind, _EVENT_KEYS))
        _dry_write(live, "PUT", item, query, body, content_type=content_type, what="event-lease")
    elif operation == "patch":
        patch_type = data.draw(st.sampled_from(kube_fuzz.PATCH_TYPES))
        body = data.draw(kube_fuzz.patches(stored, patch_type, _EVENT_KEYS))
        _dry_write(live, "PATCH", item, query, body, content_type=patch_type, what="event-lease")
    else:
        body = data.draw(st.one_of(st.just(b""), _delete_options_bodies(["All"])))
        _dry_write(
            live, "DELETE", item, query, body, content_type="application/json", what="event-lease"
        )


@dataclass(frozen=True)
class CustomTarget:
    """A custom kind the object tests write to."""

    collection: str
    api_version: str
    kind: str
    schema: Mapping[str, Any]
    served: Served
    #: Seeded objects, written to only with dryRun (examples stay independent).
    seeds: tuple[str, ...]


_STATUS_KEYS = (*kube_fuzz.OBJECT_KEYS, "phase", "conditions", "type", "status", "observed")
_SCALE_KEYS = ("spec", "status", "replicas", "selector", "metadata", "resourceVersion", "name")
CUSTOM_TARGETS = (
    CustomTarget(THINGS, "fuzz.example.com/v1", "FuzzThing", kube_fuzz.FUZZ_THINGS_SCHEMA,
                 NAMED[4], ("seed-1", "seed-2")),
    CustomTarget(THINGS_BETA, "fuzz.example.com/v1beta1", "FuzzThing",
                 kube_fuzz.FUZZ_THINGS_SCHEMA, NAMED[5], ("seed-3",)),
    CustomTarget(CLUSTER_FUZZES, "fuzz.example.com/v1", "ClusterFuzz",
                 kube_fuzz.CLUSTER_FUZZES_SCHEMA, NAMED[6], ("cf-1",)),
)  # fmt: skip
CUSTOM_OPERATIONS = st.sampled_from(
    ["put", "status", "patch", "patch-status", "scale-get", "scale-put", "scale-patch",
     "list", "get"]
)  # fmt: skip


def _write(
    live: LiveServer,
    method: str,
    path: str,
    query: str,
    body: bytes,
    *,
    content_type: str = "application/json",
    what: str,
) -> dict[str, Any] | None:
    note(f"{method} {path}?{query} ({content_type!r}) {body[:400]!r}")
    return check_write_answer(
        live.request(method, path, query, body=body, content_type=content_type), what
    )


def _custom_operation(
    live: LiveServer,
    data: st.DataObject,
    target: CustomTarget,
    item: str,
    operation: str,
    *,
    query: str,
) -> None:
    """One fuzzed request on an existing object (its current state read first)."""
    current = _get_json(live, item)
    if current is None:
        return
    api_version, kind = target.api_version, target.kind
    if operation == "put":
        body_obj = data.draw(kube_fuzz.custom_objects(target.schema, api_version, kind))
        body_obj["metadata"] = current["metadata"]
        if data.draw(st.integers(0, 3)) == 0:
            del body_obj["metadata"]["resourceVersion"]
        body, content_type = data.draw(
            _bodies(body_obj, api_version, kind, kube_fuzz.OBJECT_KEYS, protobuf=False)
        )
        _write(live, "PUT", item, query, body, content_type=content_type, what="custom")
    elif operation == "status":
        status_schema = target.schema["properties"].get("status", {})
        current["status"] = data.draw(kube_fuzz.values_for(status_schema))
        body, content_type = data.draw(
            _bodies(current, api_version, kind, _STATUS_KEYS, protobuf=False)
        )
        _write(live, "PUT", f"{item}/status", query, body, content_type=content_type,
               what="custom")  # fmt: skip
    elif operation in ("patch", "patch-status"):
        patch_type = data.draw(st.sampled_from(kube_fuzz.PATCH_TYPES))
        body = data.draw(kube_fuzz.patches(current, patch_type, _STATUS_KEYS))
        path = item if operation == "patch" else f"{item}/status"
        _write(live, "PATCH", path, query, body, content_type=patch_type, what="custom")
    elif operation.startswith("scale"):
        got = live.request("GET", f"{item}/scale")
        check_item_answer(got, "scale")
        if operation == "scale-get" or got.status != 200:
            return
        scale = json.loads(got.body)
        if operation == "scale-put":
            scale["spec"] = {"replicas": data.draw(LEAVES_FOR_REPLICAS)}
            body, content_type = data.draw(_bodies(scale, "autoscaling/v1", "Scale", _SCALE_KEYS))
            _write(live, "PUT", f"{item}/scale", query, body, content_type=content_type,
                   what="scale")  # fmt: skip
        else:
            patch_type = data.draw(st.sampled_from(kube_fuzz.PATCH_TYPES))
            body = data.draw(kube_fuzz.patches(scale, patch_type, _SCALE_KEYS))
            _write(live, "PATCH", f"{item}/scale", query, body, content_type=patch_type,
                   what="scale")  # fmt: skip
    elif operation == "list":
        fields = data.draw(_field_selectors_for(target.served))
        list_query = urllib.parse.urlencode({"fieldSelector": fields})
        note(f"GET {target.collection}?{list_query} (Table)")
        check_answer(live.request("GET", target.collection, list_query, accept=TABLE_ACCEPT))
    else:
        accept = data.draw(st.sampled_from(["application/json", TABLE_ACCEPT]))
        check_item_answer(live.request("GET", item, accept=accept), "")


LEAVES_FOR_REPLICAS = st.one_of(
    st.integers(0, 5), st.sampled_from([-1, 2**31 - 1, 2**31, 1.5, "3", None, True])
)


def _delete_custom(live: LiveServer, item: str) -> None:
    """Delete an object a test created, finalizers (a fuzzed body may set some) included,
    so the next example starts from the seeded state."""
    live.request("DELETE", item)
    if live.request("GET", item).status == 200:
        cleared = b'{"metadata":{"finalizers":null}}'
        live.request("PATCH", item, body=cleared, content_type=MERGE_PATCH)
        live.request("DELETE", item)
    _wait_for(lambda: live.request("GET", item).status == 404, 10, f"{item} deleted")


@fuzz
@given(st.sampled_from(CUSTOM_TARGETS), st.data())
def test_fuzz_custom_object_writes_answer_2xx_or_4xx(
    live: LiveServer, target: CustomTarget, data: st.DataObject
) -> None:
    """Creates of custom objects drawn against the fixture CRDs' schemas (values at and
    past enum, pattern, format, bound, required, list-type and embedded-resource rules),
    edited as trees, in JSON or YAML (protobuf: 415), edited as bytes; then up to three
    requests on the created object (or a dry run on a seeded one): PUT, ``/status``,
    patches of every type (strategic: 415; server-side apply mostly of a well-formed
    configuration, with or without a field manager and force), ``/scale`` read, PUT
    with a Scale body in any media type, and patched; Table lists with ``spec.*`` field
    selectors. Everything answers a 2xx object or a 4xx Status; an accepted object reads
    back; created objects are deleted at the end."""
    INPUTS["http-custom"] += 1
    dry_run = data.draw(st.integers(0, 4)) == 0
    obj = data.draw(kube_fuzz.custom_objects(target.schema, target.api_version, target.kind))
    body, content_type = data.draw(
        _bodies(obj, target.api_version, target.kind, kube_fuzz.OBJECT_KEYS, protobuf=False)
    )
    query = _write_query(data, dry_run)
    created = _write(live, "POST", target.collection, query, body, content_type=content_type,
                     what="custom")  # fmt: skip
    name = (created or {}).get("metadata", {}).get("name")
    if created is None or dry_run or not isinstance(name, str):
        # Go on with a seeded object, without changing it.
        name, dry_run = data.draw(st.sampled_from(target.seeds)), True
        query = _write_query(data, dry_run)
    item = f"{target.collection}/{urllib.parse.quote(name, safe='')}"
    try:
        for operation in data.draw(st.lists(CUSTOM_OPERATIONS, min_size=1, max_size=3)):
            _custom_operation(live, data, target, item, operation, query=query)
            got = live.request("GET", item)
            assert got.status == 200 and json.loads(got.body)["metadata"]["name"] == name, got
    finally:
        if not dry_run:
            _delete_custom(live, item)


#: Examples of the CRD lifecycle test: each creates a CRD, waits for the controller,
#: writes an object, may update the CRD, deletes it and waits until it is gone (about a
#: second), so a tenth of the others'.
CRD_LIFECYCLE_EXAMPLES = max(10, EXAMPLES // 10)


def _conditions(crd: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status"))
        for c in (crd.get("status") or {}).get("conditions") or []
        if isinstance(c, dict)
    }


def _settled_crd(live: LiveServer, name: str) -> dict[str, Any] | None:
    """The CRD once the controller has decided its names and, if accepted, established
    it (None: gone). Kubernetes serves a new CRD within a second; 10 s on a loaded box."""
    found: list[dict[str, Any] | None] = [None]

    def settled() -> bool:
        found[0] = crd = _get_json(live, f"{CRDS}/{name}")
        if crd is None:
            return True
        conditions = _conditions(crd)
        return conditions.get("NamesAccepted") == "False" or conditions.get("Established") == "True"

    _wait_for(settled, 10, f"the CRD {name} established or its names refused")
    return found[0]


def _served_versions(crd: Mapping[str, Any]) -> list[CustomTarget]:
    """Each served version of a settled, established CRD, as the object tests address a
    kind: its collection in fuzz-a (or the cluster), schema, selectable fields."""
    spec = crd["spec"]
    names = crd["status"]["acceptedNames"]
    namespaced = spec["scope"] == "Namespaced"
    targets = []
    for version in spec["versions"]:
        if not version.get("served"):
            continue
        root = f"/apis/{spec['group']}/{version['name']}"
        fields = tuple(
            str(f.get("jsonPath", "")).lstrip(".") for f in version.get("selectableFields") or []
        )
        scope = ("metadata.name", "metadata.namespace") if namespaced else ("metadata.name",)
        values = ("", "a", "0", "1", "true", "A", "o-1")
        served = Served(
            root, names["plural"], namespaced, scope + fields, kube_fuzz.OBJECT_NAMES, values
        )
        targets.append(
            CustomTarget(
                f"{root}{'/namespaces/fuzz-a' if namespaced else ''}/{names['plural']}",
                f"{spec['group']}/{version['name']}",
                names["kind"],
                (version.get("schema") or {}).get("openAPIV3Schema") or {},
                served,
                (),
            )
        )
    return targets


def _served_again(live: LiveServer, name: str) -> dict[str, Any] | None:
    """After an update: the CRD once every version it now serves lists again (None: it is
    not established). The controller replaces the resources whose definition changed, and
    meanwhile answers 404 (test_crds.py::test_a_changed_crd_is_served_without_a_gap, a
    known gap), so this waits for the lists, up to 10 s."""
    found: list[dict[str, Any] | None] = [None]

    def serving() -> bool:
        found[0] = crd = _get_json(live, f"{CRDS}/{name}")
        conditions = _conditions(crd or {})
        if crd is None or conditions.get("Established") != "True":
            found[0] = None
            return conditions.get("NamesAccepted") != "True"
        return all(_lists(live, target.collection) for target in _served_versions(crd))

    _wait_for(serving, 10, f"the updated CRD {name} served")
    return found[0]


def _exercise_served_crd(live: LiveServer, data: st.DataObject, crd: Mapping[str, Any]) -> None:
    """What a served CRD must answer: each version's lists (JSON and Table, with field
    selectors over its selectable fields, and a watch), an object drawn against its schema
    (created for real) and a few requests on it (updates, ``/status`` and ``/scale`` when
    it has them, patches), then discovery and the OpenAPI documents that now include it.
    The objects go with the CRD when it is deleted."""
    for target in _served_versions(crd):
        listed = live.request("GET", target.collection, accept=TABLE_ACCEPT)
        note(f"GET {target.collection} (Table): {listed.status} {listed.body[:300]!r}")
        assert listed.status == 200, f"an established CRD's version is not served: {target}"
        check_answer(listed)
        obj = data.draw(kube_fuzz.custom_objects(target.schema, target.api_version, target.kind))
        # As drawn mostly (the object tests edit bodies): objects to serve, list and watch.
        body, content_type = kube_fuzz.to_json(obj), "application/json"
        if data.draw(st.integers(0, 3)) == 0:
            body, content_type = data.draw(
                _bodies(obj, target.api_version, target.kind, kube_fuzz.OBJECT_KEYS, protobuf=False)
            )
        query = _write_query(data, dry_run=False)
        made = _write(live, "POST", target.collection, query, body, content_type=content_type,
                      what="crd-object")  # fmt: skip
        name = (made or {}).get("metadata", {}).get("name")
        if isinstance(name, str):
            item = f"{target.collection}/{urllib.parse.quote(name, safe='')}"
            for operation in data.draw(st.lists(CUSTOM_OPERATIONS, min_size=1, max_size=2)):
                _custom_operation(live, data, target, item, operation, query=query)
        query = urllib.parse.urlencode(
            {"fieldSelector": data.draw(_field_selectors_for(target.served))}
        )
        check_answer(live.request("GET", target.collection, query, accept=TABLE_ACCEPT))
        check_answer(live.request("GET", target.collection, query + "&watch=1&timeoutSeconds=1"))
        gv = f"/openapi/v3/apis/{target.api_version}"
        check_discovery_answer(gv, "", live.request("GET", gv), None)
    for path, accept in (
        ("/apis", kube_fuzz.KUBECTL_DISCOVERY),
        ("/apis", "application/json"),
        (f"/apis/{crd['spec']['group']}", "application/json"),
        ("/openapi/v2", kube_fuzz.OPENAPI_V2_PROTOBUF),
        ("/openapi/v2", "application/json"),
        ("/openapi/v3", "application/json"),
    ):
        check_discovery_answer(path, "", live.request("GET", path, accept=accept), None)


def _delete_crd(live: LiveServer, name: str) -> None:
    """Delete a CRD the test created and wait until it is gone: the controller deletes its
    objects, then removes its finalizer."""
    deleted = live.request("DELETE", f"{CRDS}/{name}")
    check_write_answer(deleted, "crd-delete")
    left = _get_json(live, f"{CRDS}/{name}")
    if left is not None and _conditions(left).get("NamesAccepted") == "False":
        # A known bug (tests/integration/test_crds.py::
        # test_a_crd_whose_names_were_never_accepted_can_be_deleted, xfail): nothing
        # removes the cleanup finalizer of a CRD that was never established. Removed here
        # as an administrator would, so the next examples start clean.
        OUTCOMES["crd never established: finalizer removed by the test (known bug)"] += 1
        cleared = b'{"metadata":{"finalizers":null}}'
        live.request("PATCH", f"{CRDS}/{name}", body=cleared, content_type=MERGE_PATCH)

    def gone() -> bool:
        return live.request("GET", f"{CRDS}/{name}").status == 404

    try:
        _wait_for(gone, 15, f"the CRD {name} deleted")
    except AssertionError:
        left = _get_json(live, f"{CRDS}/{name}") or {}
        raise AssertionError(
            f"the CRD {name} was not deleted within 15 s: finalizers "
            f"{left.get('metadata', {}).get('finalizers')}, conditions {_conditions(left)}"
        ) from None


def check_server_serves(live: LiveServer, log_mark: int) -> None:
    """After any CRD write: the server is ready, serves a core list and the CRDs, its
    controllers still run, and nothing it logged since ``log_mark`` has a traceback."""
    assert live.request("GET", "/readyz").status == 200
    for path in ("/api/v1/namespaces/fuzz-a/configmaps", CRDS, THINGS):
        got = live.request("GET", path)
        assert got.status == 200, (path, got)
    for task in live.server._controllers:
        assert not task.done(), f"a controller stopped: {task}"
    tracebacks = live.log.tracebacks(log_mark)
    assert not tracebacks, "\n\n".join(tracebacks)


@fuzz_examples(CRD_LIFECYCLE_EXAMPLES)
@given(st.data())
def test_fuzz_crd_writes_keep_the_server_serving(live: LiveServer, data: st.DataObject) -> None:
    """Real writes of generated CRDs (valid mostly, or lightly edited), in JSON, YAML or
    protobuf: a 201 or a 4xx; an accepted one is served by the controller (its names
    accepted, or refused for a conflict), every served version lists, takes an object
    drawn against its schema and shows in discovery and OpenAPI; an edited update of it
    is a 200 or a 4xx and is served again; its delete completes. After each, the server
    still serves, its controllers run, and it logged no traceback."""
    INPUTS["http-crd-lifecycle"] += 1
    log_mark = len(live.log.records)
    crd = data.draw(kube_fuzz.crds(tame=True))
    if data.draw(st.integers(0, 3)) == 0:
        crd = data.draw(kube_fuzz.mutated_tree(crd, CRD_MUTATION_KEYS))
    body, content_type = data.draw(kube_fuzz.encoded(crd, CRD_API_VERSION, CRD_KIND))
    created = _write(live, "POST", CRDS, "", body, content_type=content_type, what="crd-create")
    name = (created or {}).get("metadata", {}).get("name")
    if created is not None and isinstance(name, str):
        try:
            settled = _settled_crd(live, name)
            OUTCOMES[f"crd {sorted(_conditions(settled or {}).items())}"] += 1
            if settled is not None and _conditions(settled).get("Established") == "True":
                _exercise_served_crd(live, data, settled)
            if settled is not None and data.draw(st.booleans()):
                update = data.draw(kube_fuzz.mutated_tree(settled, CRD_MUTATION_KEYS))
                body, content_type = data.draw(kube_fuzz.encoded(update, CRD_API_VERSION, CRD_KIND))
                path = f"{CRDS}/{name}"
                if _write(live, "PUT", path, "", body, content_type=content_type,
                          what="crd-update") is not None:  # fmt: skip
                    settled = _served_again(live, name)
                    if settled is not None:
                        _exercise_served_crd(live, data, settled)
        finally:
            _delete_crd(live, name)
    check_server_serves(live, log_mark)
