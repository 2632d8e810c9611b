"""Fuzzing what clients control: continue tokens, selectors, query strings, and all three
end to end through the apiserver.

The contract under test: every input yields a valid result or a ``StatusError`` with a
message and a 4xx code — 400 BadRequest for what cannot be parsed, 422 Invalid for option
combinations Kubernetes' validation forbids — and never another exception, a 500, a crash
or a hang. End to end (the ASGI app in-process over a real one-member etcd), a response is
200 with a valid body or a ``metav1.Status`` with a 4xx code; the only 5xx allowed is
Kubernetes' own answer to a resourceVersion the store has not reached,
``504 Timeout: Too large resource version`` (a fuzzed rv is usually in the future).

Inputs are mostly near-valid: valid tokens, selectors and queries (some minted by the
real server) put through a few random edits (insert, delete, replace, truncate, duplicate,
swap), because random noise alone dies in the first check of each parser. Pure noise is
mixed in too.

How many: ``WATCHCACHE_FUZZ_EXAMPLES`` examples per test (default 250: the module runs
in about half a minute); ``make fuzz-long`` runs 21,000 per test, over 100,000 inputs in
all. The count of inputs each target ran is printed at the end of the module.
Reproducible: without ``WATCHCACHE_FUZZ_SEED`` the run is derandomized (the same inputs
every time, from the test's name); ``make fuzz-long`` picks a random seed, prints it, and
``WATCHCACHE_FUZZ_SEED=<seed>`` replays that run. A failure also prints hypothesis'
``@reproduce_failure`` blob.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import threading
import urllib.parse
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from watchcache import _core
from watchcache.apiserver.app import ApiServer
from watchcache.etcd.client import EtcdClient
from watchcache.etcd.process import EtcdCluster
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


@dataclass
class LiveServer:
    """An ApiServer started in an event loop of its own thread, so that hypothesis (which
    is synchronous) can call it; its caches keep syncing between examples."""

    loop: asyncio.AbstractEventLoop
    server: ApiServer
    app: Any
    tokens: list[str] = field(default_factory=list)

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
        ],
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
            headers = {k.decode(): v.decode() for k, v in started.get("headers", [])}
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
                _seed(live)
                yield live
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
