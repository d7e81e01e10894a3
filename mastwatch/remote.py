"""What `mastwatch top` and `show` read from a running server, when that server holds the store.

chDB lets one process open a data directory: while `mastwatch serve` or `demo` writes the store, another process
cannot read it. The server answers the same queries on its metrics port instead (with its bearer token check):
`GET /v1/top/<query>?<filters>` (the rows, as JSON) and `GET /v1/runs/<trace id>` (the run as the store holds it),
and takes `mastwatch review`'s reviews, `POST /v1/reviews` with a JSON object (`Review.from_json`), and `mastwatch
mute`'s and `unmute`'s, `POST /v1/mutes` (`Mute.from_json`), and `mastwatch resolve`'s and `reopen`'s, `POST
/v1/resolutions` (`Resolution.from_json`).
A reader names the store it means (`store=<absolute path>`): the server at the configured endpoint may be another
one, holding another store, and answers it 409 rather than with rows that are not the store's.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from mastwatch.config import Config
from mastwatch.exporter.store.chdb_engine import StoreInUse
from mastwatch.exporter.store.engine import Engine
from mastwatch.exporter.store.mutes import Mute, SignatureNotStored, set_mute
from mastwatch.exporter.store.queries import QUERIES, Filters, StoredRun, TableMissing, run, stored_run, trace_id_of
from mastwatch.exporter.store.resolutions import Resolution, set_resolution
from mastwatch.exporter.store.reviews import REVIEWS_PATH, Review, ReviewRefused, RunNotStored, add_review

T = TypeVar("T")

TOP_PATH = "/v1/top/"
RUN_PATH = "/v1/runs/"
TIMEOUT_S = 30.0


class Unreachable(OSError):
    """No server answered at the configured metrics endpoint."""


def held_and_unreachable(held: StoreInUse, unreachable: OSError) -> str:
    """The line saying neither the store nor a server holding it could be read."""
    return (f"the store in {held.path} is held by another process (a running mastwatch serve or "
            f"demo), and {unreachable}: run this with the configuration that server runs with (--config, or --set "
            "exporters.prometheus.endpoint=HOST:PORT)")


def other_store(store_path: str | None, query: Mapping[str, str]) -> tuple[int, Any] | None:
    """409 and the store held, when the reader names another chDB store than `store_path` (None: a server's)."""
    wanted = query.get("store")
    own = os.path.realpath(store_path) if store_path is not None else None
    if wanted and own is not None and os.path.realpath(wanted) != own:
        return 409, {"error": f"it holds the store in {own}"}
    return None


def answers(engine: Engine, database: str, steps_setting: str, store_path: str | None) -> dict[
        str, Callable[[str, Mapping[str, str]], tuple[int, Any]]]:
    """The server's side: path prefix -> (status, JSON body) of a GET under it. `store_path`: the chDB store's
    directory (None: a ClickHouse server's)."""
    def top(path: str, query: Mapping[str, str]) -> tuple[int, Any]:
        refused = other_store(store_path, query)
        if refused is not None:
            return refused
        name = path[len(TOP_PATH):]
        if name not in QUERIES:
            return 404, {"error": f"no query {name!r}; one of {', '.join(QUERIES)}"}
        try:
            filters = Filters.from_query(dict(query))
        except ValueError as e:
            return 400, {"error": str(e)}
        return 200, run(engine, database, name, filters)

    def one_run(path: str, query: Mapping[str, str]) -> tuple[int, Any]:
        refused = other_store(store_path, query)
        if refused is not None:
            return refused
        try:
            trace_id = trace_id_of(path[len(RUN_PATH):])
        except ValueError as e:
            return 400, {"error": str(e)}
        stored = stored_run(engine, database, trace_id, steps_setting)
        if stored is None:
            return 404, {"error": f"trace {trace_id} is not in the store"}
        body = asdict(stored)
        body.pop("marks")  # made again from the findings
        return 200, body

    return {TOP_PATH: top, RUN_PATH: one_run}


Reply = tuple[int, Any, dict[str, str]]  # status, body (JSON, or an HTML page as text), headers


def write_review(engine: Engine, database: str, review: Review) -> tuple[int, list[str] | str]:
    """Write `review`: (200, the bases of the finding reviewed), or (the HTTP status, why it was not written)."""
    try:
        return 200, add_review(engine, database, review)
    except RunNotStored as e:
        return 404, str(e)
    except ReviewRefused as e:
        return 409, str(e)
    except TableMissing as e:
        return 503, str(e)


def take_review(engine: Engine, database: str, store_path: str | None,
                form: Callable[[bytes, Mapping[str, str]], Reply] | None = None) -> Callable[
        [str, Mapping[str, str], bytes, Mapping[str, str]], Reply]:
    """The server's side of `POST /v1/reviews`: a JSON review (what `mastwatch review` sends), or a form, answered
    by `form` (the run page's: dashboards/trace_page.py)."""
    def take(body: Any) -> tuple[int, Any]:
        review = Review.from_json(body)
        status, written = write_review(engine, database, review)
        return (200, {**asdict(review), "bases": written}) if status == 200 else (status, written)

    return _taking(store_path, "review", take, form)


def write_decision(write: Callable[[], object]) -> tuple[int, str]:
    """Run `write` (a mute's or a resolution's): (200, ""), or (the HTTP status, why it was not written)."""
    try:
        write()
    except SignatureNotStored as e:
        return 404, str(e)
    except TableMissing as e:
        return 503, str(e)
    return 200, ""


def write_mute(engine: Engine, database: str, mute: Mute) -> tuple[int, str]:
    return write_decision(lambda: set_mute(engine, database, mute))


def write_resolution(engine: Engine, database: str, resolution: Resolution) -> tuple[int, str]:
    return write_decision(lambda: set_resolution(engine, database, resolution))


Decision = TypeVar("Decision", Mute, Resolution)


def take_decision(store_path: str | None, what: str, parse: Callable[[Any], Decision],
                  write: Callable[[Decision], tuple[int, str]], applied: Callable[[], object],
                  form: Callable[[bytes, Mapping[str, str]], Reply] | None = None) -> Callable[
        [str, Mapping[str, str], bytes, Mapping[str, str]], Reply]:
    """The server's side of `POST /v1/mutes` or `/v1/resolutions`: a JSON object (what `mastwatch mute`, `unmute`,
    `resolve` and `reopen` send) that `parse` reads, or the run page's form (`form`); `applied` is called after each
    one written (the server reads the store's decisions again)."""
    def take(body: Any) -> tuple[int, Any]:
        decision = parse(body)
        status, why = write(decision)
        if status != 200:
            return status, why
        applied()
        return 200, decision.to_json()

    return _taking(store_path, what, take, form)


def _taking(store_path: str | None, what: str, take: Callable[[Any], tuple[int, Any]],
            form: Callable[[bytes, Mapping[str, str]], Reply] | None) -> Callable[
        [str, Mapping[str, str], bytes, Mapping[str, str]], Reply]:
    """A POST handler, for a request's query, body and headers: a JSON object given to `take` (ValueError: 400;
    else its status and reply, an error's as {"error": ...}), or a form given to `form`."""
    def post(path: str, query: Mapping[str, str], data: bytes, headers: Mapping[str, str]) -> Reply:
        refused = other_store(store_path, query)
        if refused is not None:
            return (*refused, {})
        kind = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind == "application/x-www-form-urlencoded" and form is not None:
            return form(data, headers)
        if kind != "application/json":  # a cross-site form cannot send this type: nothing forged is taken
            return 415, {"error": f"send the {what} as application/json"}, {}
        try:
            status, reply = take(json.loads(data or b"null"))
        except ValueError as e:  # JSONDecodeError included
            return 400, {"error": str(e)}, {}
        return (status, reply, {}) if status == 200 else (status, {"error": reply}, {})

    return post


def send_review(config: Config, review: Review) -> dict[str, Any]:
    """Post `review` to the server at the configured metrics endpoint (it holds the store); its reply."""
    query = urllib.parse.urlencode({"store": _store(config)})
    return _request(config, f"{REVIEWS_PATH}?{query}", json.dumps(asdict(review)).encode())


def send_decision(config: Config, path: str, decision: Mute | Resolution) -> dict[str, Any]:
    """Post a mute or a resolution to `path` of the server at the configured metrics endpoint (it holds the store);
    its reply."""
    query = urllib.parse.urlencode({"store": _store(config)})
    return _request(config, f"{path}?{query}", json.dumps(decision.to_json()).encode())


def on_store(config: Config, command: str, local: Callable[[Engine], T], ask: Callable[[], T],
             expected: tuple[type[Exception], ...] = ()) -> tuple[int, T | None]:
    """`local` on the configured store, or, while a running server holds its chDB directory, `ask` of that server:
    (0, the answer), or (exit status 1, None) after one line on stderr saying what went wrong (an answer may be None
    too: look at the status). `expected`: errors of `local` whose message says it all (others are printed as a
    failed query)."""
    from mastwatch.exporter.store import open_engine

    def fail(message: str) -> tuple[int, None]:
        print(f"mastwatch {command}: {message}", file=sys.stderr)
        return 1, None

    try:
        engine = open_engine(config.exporters.store, create=False)
    except StoreInUse as e:
        try:
            return 0, ask()
        except urllib.error.HTTPError as refused:  # the server's answer: what is wrong with the request
            return fail(str(refused.reason))
        except OSError as unreachable:
            return fail(held_and_unreachable(e, unreachable))
    except OSError as e:  # no store there
        return fail(str(e))
    try:
        return 0, local(engine)
    except expected as e:
        return fail(str(e))
    except Exception as e:
        return fail(f"query failed: {e}")
    finally:
        engine.close()


def ask_top(config: Config, name: str, filters: Filters) -> list[dict[str, Any]]:
    """The rows of `top` query `name` from the server at the configured metrics endpoint."""
    query = {**filters.query(), "store": _store(config)}
    return _request(config, f"{TOP_PATH}{name}?{urllib.parse.urlencode(query)}")


def ask_run(config: Config, trace_id: str) -> StoredRun | None:
    """The run from the server at the configured metrics endpoint; None when its store has no row of it."""
    try:
        body = _request(config, f"{RUN_PATH}{trace_id}?{urllib.parse.urlencode({'store': _store(config)})}")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    return StoredRun(**body)


def _store(config: Config) -> str:
    return os.path.realpath(config.exporters.store.path)


def endpoint_url(config: Config) -> str:
    prometheus = config.exporters.prometheus
    return f"{'https' if prometheus.tls else 'http'}://{prometheus.endpoint}"


def _request(config: Config, path: str, body: bytes | None = None) -> Any:
    """GET `path`, or POST `body` as JSON to it, with the configured token; the reply's JSON."""
    prometheus = config.exporters.prometheus
    request = urllib.request.Request(endpoint_url(config) + path, data=body,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    auth = prometheus.auth
    if auth is not None:
        token = auth.token.get_secret_value() if auth.token is not None else \
            Path(auth.filename).read_text(encoding="utf-8").strip() if auth.filename else ""
        request.add_header("Authorization", f"Bearer {token}")
    # the server's own certificate is trusted: it is this configuration's (mostly self-signed)
    context = ssl.create_default_context(cafile=prometheus.tls.cert_file) if prometheus.tls is not None else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as e:
        try:
            reason = json.loads(e.read()).get("error", e.reason)
        except (ValueError, AttributeError):
            reason = e.reason
        if e.code == 409:  # another server than the one holding the store
            raise Unreachable(f"the mastwatch at {endpoint_url(config)} answers for another store ({reason})") \
                from None
        raise urllib.error.HTTPError(e.url, e.code, str(reason), e.headers, None) from None
    except (urllib.error.URLError, OSError) as e:
        raise Unreachable(f"no mastwatch answers at {endpoint_url(config)} "
                          f"({getattr(e, 'reason', e)})") from None
