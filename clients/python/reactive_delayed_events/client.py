"""DelayedEvents: a producer of the Node service's events, from Python (docs/wire-format.md)."""

import json
import os
import re
import time
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import redis as redis_py
from redis.exceptions import (
    AuthenticationError,
    ConnectionError as RedisPyConnectionError,
    NoScriptError,
    RedisError,
    ResponseError,
    TimeoutError as RedisPyTimeoutError,
)

from . import wire
from .errors import (
    DelayedEventError,
    InvalidArgumentError,
    InvalidOptionError,
    NotReplicatedError,
    RedisCallTimeoutError,
    RedisConnectionError,
)

try:  # redis-py >= 4.1 has the cluster client
    from redis.cluster import RedisCluster
except ImportError:  # pragma: no cover
    RedisCluster = None  # type: ignore

_LUA_DIR = os.path.join(os.path.dirname(__file__), "lua")
_PREFIX = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")
_DIGITS = re.compile(r"[0-9]{1,16}\Z")
#: Events per script call, as the Node service sends them (src/service/enqueue-batcher.ts).
CHUNK = 250
#: A layout record read is used this long before it is read again.
DEFAULT_LAYOUT_TTL_MS = 60_000
DEFAULT_IDEMPOTENCY_WINDOW_MS = 300_000
MAX_IDEMPOTENCY_WINDOW_MS = 7 * wire.DAY_MS

CONSTRUCTOR_OPTIONS = ("prefix", "wait_replicas", "wait_timeout_ms", "idempotency_window_ms", "max_payload_bytes", "layout_ttl_ms", "outcomes_max_len", "clock")
ENQUEUE_KEYWORDS = ("delay_ms", "at", "context", "replace", "version", "partitions")
ENQUEUE_OPTIONS = ("priority", "max_attempts", "debounce", "throttle", "dedupe", "after")
ENTRY_KEYS = ("id", "payload", "delay_ms", "at", "context", "priority", "max_attempts", "debounce", "throttle", "dedupe")


def _load_scripts() -> Tuple[Dict[str, str], Dict[str, Any]]:
    with open(os.path.join(_LUA_DIR, "scripts.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    texts = {}
    for name in manifest["scripts"]:
        with open(os.path.join(_LUA_DIR, name + ".lua"), encoding="utf-8") as f:
            texts[name] = f.read()
    return texts, manifest


_TEXTS, MANIFEST = _load_scripts()
WIRE_FORMAT = MANIFEST["wireFormat"]


class DelayedEvents:
    """Enqueues, cancels and reschedules events that a Node ``DelayedEventService`` handles.

    ``redis`` is a redis-py ``Redis`` or ``RedisCluster`` (``decode_responses`` either way);
    ``prefix`` is the service's ``prefix`` option. With ``wait_replicas`` above 0, each enqueue
    waits until that many replicas confirmed it (the ``durableEnqueue`` option of Node) and
    raises NotReplicatedError when fewer did within ``wait_timeout_ms``.
    """

    def __init__(
        self,
        redis: Any,
        prefix: str = "dq",
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        *,
        idempotency_window_ms: int = DEFAULT_IDEMPOTENCY_WINDOW_MS,
        max_payload_bytes: int = wire.DEFAULT_MAX_PAYLOAD_BYTES,
        layout_ttl_ms: int = DEFAULT_LAYOUT_TTL_MS,
        outcomes_max_len: int = 0,
        clock: Optional[Callable[[], int]] = None,
        **unknown: Any,
    ) -> None:
        for key in unknown:
            raise InvalidOptionError(repr(key), wire.unknown_key_detail(key, CONSTRUCTOR_OPTIONS, "DelayedEvents"))
        if not isinstance(redis, redis_py.Redis) and not (RedisCluster is not None and isinstance(redis, RedisCluster)):
            raise InvalidOptionError("redis", "must be a redis.Redis or redis.cluster.RedisCluster, got %s" % type(redis).__name__)
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise InvalidOptionError("prefix", "must be 1-64 characters of letters, digits, '_', '.', ':' or '-'; got %r" % (prefix,))
        self._redis = redis
        self._cluster = RedisCluster is not None and isinstance(redis, RedisCluster)
        self.prefix = prefix
        self.wait_replicas = _option_int(wait_replicas, "wait_replicas", 0, 100)
        self.wait_timeout_ms = _option_int(wait_timeout_ms, "wait_timeout_ms", 1, 3_600_000)
        self.idempotency_window_ms = _option_int(idempotency_window_ms, "idempotency_window_ms", 0, MAX_IDEMPOTENCY_WINDOW_MS)
        self.max_payload_bytes = _option_int(max_payload_bytes, "max_payload_bytes", 64, 256 * 1024 * 1024)
        self.layout_ttl_ms = _option_int(layout_ttl_ms, "layout_ttl_ms", 0, 24 * 3_600_000)
        self.outcomes_max_len = _option_int(outcomes_max_len, "outcomes_max_len", 0, 10_000_000)
        if clock is not None and not callable(clock):
            raise InvalidOptionError("clock", "must be a function returning epoch milliseconds")
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._scripts = {name: redis.register_script(text) for name, text in _TEXTS.items()}
        self._layouts: Dict[str, Tuple[float, Dict[int, int], Optional[int]]] = {}
        self.wake_channel = "%s:wake" % prefix
        #: Type names seen valid: checked once each (their count is the app's types).
        self._type_names: Dict[str, bool] = {}
        #: Scripts loaded on every primary of a Cluster by this producer.
        self._loaded: set = set()

    # -- enqueue ------------------------------------------------------------------------------

    def enqueue(
        self,
        type_name: str,
        id: str,
        payload: Mapping[str, Any],
        delay_ms: float = 0,
        at: Optional[datetime] = None,
        context: Optional[Mapping[str, str]] = None,
        replace: bool = False,
        version: Optional[int] = None,
        partitions: Optional[int] = None,
        **options: Any,
    ) -> str:
        """Stores one event; returns 'scheduled', 'duplicate', 'replaced', 'debounced' or 'throttled'."""
        if not isinstance(type_name, str) or type_name not in self._type_names:
            if len(self._type_names) >= 1_000:
                self._type_names.clear()
            self._type_names[wire.check_type_name(type_name)] = True
        for key in options:
            if key not in ENQUEUE_OPTIONS:
                raise InvalidArgumentError("option %r" % (key,), wire.unknown_key_detail(key, ENQUEUE_KEYWORDS + ENQUEUE_OPTIONS, "enqueue"))
        if options.get("after") is not None:
            raise InvalidArgumentError(
                "after",
                "is not supported by the Python producer: store the parent from Node (enqueue with after, or enqueueFlow; docs/flows.md)",
            )
        if not isinstance(replace, bool):
            raise InvalidArgumentError("replace", "must be True or False, got %r" % (replace,))
        event = self._prepare(type_name, id, payload, delay_ms, at, context, replace, version, options, "enqueue")
        fixed = self._check_partitions(partitions)
        tag = wire.queue_tag(type_name, self._partitions(type_name, fixed), id)
        mode, mode_ms = event[3], event[4]
        reply = self._enqueue_call(tag, mode, mode_ms, [event[:3]])
        return wire.STATUSES[int(reply if not isinstance(reply, list) else reply[0])]

    def enqueue_many(
        self,
        type_name: str,
        entries: Sequence[Mapping[str, Any]],
        replace: bool = False,
        version: Optional[int] = None,
        partitions: Optional[int] = None,
        **unknown: Any,
    ) -> List[str]:
        """Stores many events of one type; their statuses in order. One bad entry raises before anything is sent."""
        _refuse_unknown(unknown, ("replace", "version", "partitions"), "enqueue_many")
        wire.check_type_name(type_name)
        if not isinstance(replace, bool):
            raise InvalidArgumentError("replace", "must be True or False, got %r" % (replace,))
        if isinstance(entries, (str, bytes, Mapping)) or not isinstance(entries, Iterable):
            raise InvalidArgumentError("entries of enqueue_many", "must be a list of dicts with id, payload and optional delay_ms, at, context, priority")
        prepared = []
        for i, entry in enumerate(entries):
            what = "enqueue_many entry %d" % i
            wire.check_keys(entry, ENTRY_KEYS, what)
            if "id" not in entry or "payload" not in entry:
                raise InvalidArgumentError(what, "needs id and payload")
            options = {k: entry[k] for k in ("priority", "max_attempts", "debounce", "throttle", "dedupe") if k in entry}
            prepared.append(
                self._prepare(type_name, entry["id"], entry["payload"], entry.get("delay_ms", 0), entry.get("at"), entry.get("context"), replace, version, options, what)
            )
        fixed = self._check_partitions(partitions)
        count = self._partitions(type_name, fixed) if prepared else 1
        # One call per queue and policy (each in one hash slot), at most CHUNK events each.
        groups: Dict[Tuple[str, str, int], List[int]] = {}
        for i, event in enumerate(prepared):
            groups.setdefault((wire.queue_tag(type_name, count, event[0]), event[3], event[4]), []).append(i)
        calls = [
            (tag, mode, mode_ms, indexes[start : start + CHUNK])
            for (tag, mode, mode_ms), indexes in groups.items()
            for start in range(0, len(indexes), CHUNK)
        ]
        statuses: List[str] = [""] * len(prepared)
        if len(calls) > 1 and not self._cluster and self.wait_replicas == 0:
            # Several queues (partitions, windows) on one server: their calls share one round trip.
            pipe = self._redis.pipeline(transaction=False)
            for tag, mode, mode_ms, chunk in calls:
                keys, args = self._enqueue_args(tag, mode, mode_ms, [prepared[i][:3] for i in chunk])
                self._scripts["enqueue"](keys=keys, args=args, client=pipe)
            replies_per_call = self._call(pipe.execute)
        else:
            # On a Cluster each call goes to its slot's master, one after another (redis-py 4.3 refuses EVALSHA in a cluster pipeline).
            replies_per_call = [self._enqueue_call(tag, mode, mode_ms, [prepared[i][:3] for i in chunk]) for tag, mode, mode_ms, chunk in calls]
        for (_, _, _, chunk), reply in zip(calls, replies_per_call):
            replies = reply if isinstance(reply, list) else [reply]
            for i, r in zip(chunk, replies):
                statuses[i] = wire.STATUSES[int(r)]
        return statuses

    def _prepare(
        self,
        type_name: str,
        event_id: Any,
        payload: Any,
        delay_ms: Any,
        at: Any,
        context: Any,
        replace: bool,
        version: Any,
        options: Mapping[str, Any],
        what: str,
    ) -> Tuple[str, str, str, str, int]:
        """(id, body, due, mode, mode_ms) of one event, every input checked."""
        wire.check_event_id(event_id, type_name)
        if version is None:
            version = 1
        version = wire.whole(version, "version", 1, wire.MAX_EVENT_VERSION)
        now = self._clock()
        due, delay = wire.due_of(delay_ms, at, now, what)
        mode, mode_ms, window_extras = wire.window_policy(replace, options.get("debounce"), options.get("throttle"), options.get("dedupe"), delay, what)
        max_attempts = options.get("max_attempts")
        if max_attempts is not None:
            wire.whole(max_attempts, "max_attempts of %s" % what, 1, wire.MOST_ATTEMPTS)
        priority = options.get("priority")
        if priority is not None:
            wire.whole(priority, "priority of %s" % what, 0, wire.WORST_PRIORITY)
        extras = wire.format_extras(
            max_wait_ms=window_extras.get("max_wait_ms"),
            dedupe_window_ms=window_extras.get("dedupe_window_ms"),
            max_attempts=max_attempts,
            priority=priority,
        )
        body = wire.encode_body(type_name, event_id, payload, context, now, version, extras, self.max_payload_bytes)
        return event_id, body, due, mode, mode_ms

    def _enqueue_args(self, tag: str, mode: str, mode_ms: int, events: List[Tuple[str, str, str]]) -> Tuple[List[str], List[Any]]:
        spec = MANIFEST["scripts"]["enqueue"]
        # A plain call names its first keys only (KEYS(plain) in lua/enqueue.lua's header).
        names = spec["variants"]["plain"] if mode == "" else spec["keys"]
        keys = [wire.key_of(self.prefix, tag, n) for n in names]
        args: List[Any] = [mode, mode_ms, self.wake_channel, tag]
        for event in events:
            args.extend(event)
        return keys, args

    def _enqueue_call(self, tag: str, mode: str, mode_ms: int, events: List[Tuple[str, str, str]]) -> Any:
        keys, args = self._enqueue_args(tag, mode, mode_ms, events)
        return self._run("enqueue", keys, args, durable=self.wait_replicas > 0)

    # -- cancel and reschedule -----------------------------------------------------------------

    def cancel(self, type_name: str, id: str, partitions: Optional[int] = None, **unknown: Any) -> bool:
        """Removes a stored event in any state; whether it existed. Its id stays marked for the idempotency window."""
        _refuse_unknown(unknown, ("partitions",), "cancel")
        wire.check_type_name(type_name)
        self._check_id(id)
        for tag in self._tags_of(type_name, id, self._check_partitions(partitions)):
            keys = [wire.key_of(self.prefix, tag, n) for n in MANIFEST["scripts"]["cancel"]["keys"]]
            if int(self._run("cancel", keys, [id, self.idempotency_window_ms, self.outcomes_max_len])) >= 1:
                return True
        return False

    def reschedule(self, type_name: str, id: str, delay_ms: Optional[float] = None, at: Optional[datetime] = None, partitions: Optional[int] = None, **unknown: Any) -> bool:
        """Moves a scheduled or ready event's due time; False when it is not stored, in flight or dead."""
        _refuse_unknown(unknown, ("delay_ms", "at", "partitions"), "reschedule")
        wire.check_type_name(type_name)
        self._check_id(id)
        if delay_ms is None and at is None:
            raise InvalidArgumentError("reschedule", "needs delay_ms or at")
        due, _ = wire.due_of(delay_ms, at, self._clock(), "reschedule")
        for tag in self._tags_of(type_name, id, self._check_partitions(partitions)):
            keys = [wire.key_of(self.prefix, tag, n) for n in MANIFEST["scripts"]["reschedule"]["keys"]]
            if int(self._run("reschedule", keys, [self.wake_channel, tag, id, due])) >= 0:
                return True
        return False

    # -- partitions ----------------------------------------------------------------------------

    def forget_layouts(self) -> None:
        """Reads each type's layout record again at its next call (it is cached layout_ttl_ms)."""
        self._layouts.clear()

    def _check_partitions(self, partitions: Any) -> Optional[int]:
        if partitions is None:
            return None
        return wire.whole(partitions, "partitions", 1, wire.MAX_PARTITIONS)

    def _layout(self, type_name: str) -> Tuple[Dict[int, int], Optional[int]]:
        """The type's layout record: partitions setting -> when announced, and the current setting."""
        cached = self._layouts.get(type_name)
        now = time.monotonic()
        if cached and now - cached[0] < self.layout_ttl_ms / 1000:
            return cached[1], cached[2]
        record = self._call(lambda: self._redis.hgetall("%s:{%s}:layout" % (self.prefix, type_name)))
        settings: Dict[int, int] = {}
        current: Optional[int] = None
        for field, value in record.items():
            field = field.decode() if isinstance(field, bytes) else field
            value = value.decode() if isinstance(value, bytes) else value
            # ASCII digits only, as Node's Number() reads them: '٤' or '²' is no setting.
            if not _DIGITS.match(value):
                continue
            if field == "current":
                current = int(value)
            elif _DIGITS.match(field):
                settings[int(field)] = int(value)
        self._layouts[type_name] = (now, settings, current)
        return settings, current

    def _partitions(self, type_name: str, fixed: Optional[int]) -> int:
        if fixed is not None:
            return fixed
        settings, current = self._layout(type_name)
        if current is not None and 1 <= current <= wire.MAX_PARTITIONS:
            return current
        if not settings or set(settings) == {1}:
            return 1
        raise InvalidArgumentError(
            "partitions",
            "type '%s' is partitioned (its layout record names %s) and says no current setting yet: pass partitions= as its Node class declares it"
            % (type_name, ", ".join(str(p) for p in sorted(settings))),
        )

    def _tags_of(self, type_name: str, event_id: str, fixed: Optional[int]) -> List[str]:
        """Where an id may be: its queue under the setting in use, then under the others a move may not have emptied yet."""
        settings, current = self._layout(type_name)
        try:
            counts = [self._partitions(type_name, fixed)]
        except InvalidArgumentError:
            # Partitioned, no current setting known yet: the id is under one of those named.
            counts = []
        counts += [p for p in sorted(settings) + ([current] if current else []) + [1] if p not in counts and 1 <= p <= wire.MAX_PARTITIONS]
        tags: List[str] = []
        for count in counts:
            tag = wire.queue_tag(type_name, count, event_id)
            if tag not in tags:
                tags.append(tag)
        return tags

    # -- Redis ---------------------------------------------------------------------------------

    def _check_id(self, event_id: Any) -> None:
        if not isinstance(event_id, str) or event_id == "":
            raise InvalidArgumentError("id", "must be a non-empty string; got %r" % (event_id,))
        if wire.has_surrogate(event_id):
            raise InvalidArgumentError("id", "holds a lone UTF-16 surrogate, which Redis would store as U+FFFD; got %r" % (event_id,))

    def _run(self, name: str, keys: List[str], args: List[Any], durable: bool = False) -> Any:
        script = self._scripts[name]
        if self._cluster and name not in self._loaded:
            # SCRIPT LOAD goes to every primary: redis-py 4.3 logs a traceback for each NOSCRIPT it recovers from.
            self._call(lambda: self._redis.script_load(script.script))
            self._loaded.add(name)
        if not durable:
            return self._call(lambda: script(keys=keys, args=args))
        return self._call(lambda: self._run_durably(script, keys, args))

    def _run_durably(self, script: Any, keys: List[str], args: List[Any]) -> Any:
        """The script and a WAIT in one pipeline, on the connection that took the write (its slot's master on a Cluster)."""
        for attempt in range(8):
            client = self._redis
            if self._cluster:
                client = self._redis.get_redis_connection(self._redis.get_node_from_key(keys[0]))
            pipe = client.pipeline(transaction=False)
            script(keys=keys, args=args, client=pipe)
            pipe.wait(self.wait_replicas, self.wait_timeout_ms)
            stored, waited = pipe.execute(raise_on_error=False)
            if isinstance(stored, NoScriptError):
                # A script flushed between load and call: nothing ran, so sending it again is safe.
                client.script_load(script.script)
                continue
            if isinstance(stored, ResponseError) and self._cluster and re.match(r"^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)", str(stored)):
                # The slot moved (or is moving): the script ran nowhere; ask the cluster again where it lives.
                self._redis.nodes_manager.initialize()
                time.sleep(min(0.05 * (attempt + 1), 0.5))
                continue
            if isinstance(stored, Exception):
                raise stored
            if isinstance(waited, Exception):
                raise waited
            if int(waited) < self.wait_replicas:
                raise NotReplicatedError(int(waited), self.wait_replicas, self.wait_timeout_ms)
            return stored
        raise RedisConnectionError("other", "the slot of %s kept moving while the enqueue was sent; sending it again is safe" % keys[0])

    def _call(self, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except DelayedEventError:
            raise
        except Exception as error:  # every failure of the connection or of Redis is typed
            raise _typed(error) from error


def _refuse_unknown(unknown: Mapping[str, Any], allowed: Tuple[str, ...], call: str) -> None:
    """A misspelt keyword is an InvalidArgumentError naming it and the closest one, not Python's TypeError."""
    for key in unknown:
        raise InvalidArgumentError("option %r" % (key,), wire.unknown_key_detail(key, allowed, call))


def _option_int(value: Any, option: str, least: int, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise InvalidOptionError(option, "must be a whole number from %s to %s, got %r" % (f"{least:,}", f"{most:,}", value))
    return value


def _typed(error: BaseException) -> DelayedEventError:
    message = str(error)
    if isinstance(error, AuthenticationError) or re.match(r"^(WRONGPASS|NOAUTH)\b", message) or "invalid username-password pair" in message:
        return RedisConnectionError("auth", "Redis refused the credentials (%s); check the user and password" % message.split(" ")[0], error)
    if re.match(r"^NOPERM\b", message) or type(error).__name__ == "NoPermissionError":
        return RedisConnectionError("permission", "the ACL user may not run a command the producer needs (%s)" % message, error)
    if isinstance(error, RedisPyTimeoutError):
        return RedisCallTimeoutError(message.rstrip(".") or "timed out", error)
    if isinstance(error, RedisPyConnectionError):
        if re.search(r"refused|Name or service not known|unreachable", message, re.I):
            return RedisConnectionError("refused", "%s; nothing was sent" % message.rstrip("."), error)
        return RedisConnectionError("other", "%s; an enqueue may still have been stored: sending it again is safe" % message.rstrip("."), error)
    if isinstance(error, (RedisError, OSError)):
        return RedisConnectionError("other", message or type(error).__name__, error)
    return RedisConnectionError("other", "%s: %s" % (type(error).__name__, message), error)
