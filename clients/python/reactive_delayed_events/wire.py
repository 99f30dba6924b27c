"""What an enqueue stores, byte for byte as the Node service writes it
(docs/wire-format.md): the body, its extras, the keys and the partition.

Pure functions, no Redis: the conformance vectors (clients/conformance/)
check them against the Node package's own encoder."""

import json
import math
import re
import unicodedata
from datetime import date, datetime, timezone
from decimal import Decimal
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .errors import InvalidArgumentError, InvalidDelayError, InvalidEventError, PayloadTooLargeError, SerializationError

#: What a type name may hold (src/core/names.ts): no braces, '|', '#', glob characters, whitespace,
#: control or invisible characters; 1-200 characters.
TYPE_MAX = 200
_TYPE_FORBIDDEN_CHARS = set("{}|#*?[]\\")
_INVISIBLE = ("Cc", "Cf", "Cs", "Co", "Cn")
#: An id of this shape is a recurring schedule's occurrence's: refused, as Node refuses it.
_OCCURRENCE_SHAPE = re.compile(r"^[^\s@{}|#]{1,100}@\d{12,16}\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Object.prototype's own names: class-transformer drops or misreads keys so named (src/core/event-codec.ts).
LOSSY_KEYS = frozenset(
    [
        "constructor", "__defineGetter__", "__defineSetter__", "hasOwnProperty", "__lookupGetter__",
        "__lookupSetter__", "isPrototypeOf", "propertyIsEnumerable", "toString", "valueOf",
        "__proto__", "toLocaleString",
    ]
)

MAX_SAFE_INTEGER = 2 ** 53 - 1
MAX_EVENT_VERSION = 1_000_000
MAX_PARTITIONS = 1_024
MOST_ATTEMPTS = 100_000
WORST_PRIORITY = 1_000_000
DAY_MS = 86_400_000
MAX_DELAY_MS = 100 * 365 * DAY_MS
MOST_WINDOW_MS = 30 * DAY_MS
MOST_DEDUPE_MS = 7 * DAY_MS
DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: Each script's status numbers (lua/enqueue.lua, REPLY) as the Node service names them.
STATUSES = {0: "duplicate", 1: "scheduled", 2: "replaced", 3: "debounced", 4: "throttled"}

#: The key of each name a script's header uses (src/redis/redis-layout.ts, RedisLayout.forType):
#: ``<prefix>:{<tag>}:<suffix>``.
KEY_SUFFIXES = {
    "meta": "m",
    "schedule": "b",
    "recent": "i",
    "slotGuard": "guard",
    "ready": "r",
    "inFlight": "f",
    "dead": "d",
    "errors": "e",
    "legacySchedule": "s",
    "groups": "groups",
    "pending": "n",
    "errorLog": "el",
    "outcomes": "o",
}


def utf16_length(text: str) -> int:
    """The length JavaScript gives ``text``: a character beyond the BMP counts two."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def is_type_name(name: Any) -> bool:
    if not isinstance(name, str) or not 0 < utf16_length(name) <= TYPE_MAX:
        return False
    for ch in name:
        if ch in _TYPE_FORBIDDEN_CHARS or ch.isspace() or unicodedata.category(ch) in _INVISIBLE:
            return False
    return True


def check_type_name(name: Any) -> str:
    if not is_type_name(name):
        raise InvalidArgumentError(
            "type_name",
            "a type name is 1-%d characters without braces, '|', '#', '*', '?', '[', ']', '\\', "
            "whitespace, control or invisible characters; got %r" % (TYPE_MAX, name),
        )
    return name


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point, which UTF-8 cannot carry."""
    return _SURROGATE.search(text) is not None


def check_event_id(event_id: Any, type_name: str) -> str:
    if not isinstance(event_id, str) or event_id == "":
        raise InvalidEventError(
            "id %r of type '%s' is not a non-empty string; every event needs one, unique within its type"
            % (event_id, type_name)
        )
    if _SURROGATE.search(event_id):
        raise InvalidEventError(
            "id %r of type '%s' holds a lone UTF-16 surrogate, which Redis would store as U+FFFD "
            "(another id could then be the same event); choose another id" % (event_id, type_name)
        )
    if _OCCURRENCE_SHAPE.match(event_id):
        raise InvalidEventError(
            "id %r of type '%s' has the shape '<name>@<epoch ms>' that ids of recurring schedules' "
            "occurrences have; choose another id" % (event_id, type_name)
        )
    return event_id


def js_number(value: float) -> str:
    """``value`` as JavaScript's JSON.stringify prints it (ECMAScript Number::toString)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr gives the shortest digits that read back as the same double, as JavaScript does.
    digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()[1:]
    digits = "".join(map(str, digits_tuple)).lstrip("0")
    trimmed = digits.rstrip("0")
    exponent += len(digits) - len(trimmed)
    digits = trimmed
    k = len(digits)
    n = k + exponent  # value = 0.<digits> * 10^n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = mantissa + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + text


def js_string(text: str) -> str:
    """``text`` as JSON.stringify writes a string: UTF-8 left as it is, a lone surrogate escaped."""
    quoted = encode_basestring(text)
    if text.isascii() or not _SURROGATE.search(quoted):
        return quoted
    return _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), quoted)


def iso_millis(moment: datetime, what: str, type_name: str) -> str:
    """An aware datetime as JavaScript's Date#toISOString writes it: UTC, milliseconds, 'Z'."""
    if moment.tzinfo is None or moment.tzinfo.utcoffset(moment) is None:
        raise SerializationError(
            type_name,
            "%s is a naive datetime; give it a timezone (datetime.now(timezone.utc)) so it means one instant" % what,
        )
    try:
        utc = moment.astimezone(timezone.utc)
    except OverflowError:
        raise SerializationError(type_name, "%s (%s) is out of the range a JavaScript Date holds in UTC" % (what, moment.isoformat())) from None
    return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond // 1000,
    )


def to_json(value: Any, type_name: str, path: str = "payload") -> str:
    """JSON text of ``value`` as the Node service would write the same plain value: no spaces, keys in order."""
    out: List[str] = []
    try:
        _write(value, type_name, path, out, set())
    except RecursionError:
        raise SerializationError(type_name, "%s is nested too deep for this producer (a few hundred levels at most); flatten it" % path) from None
    return "".join(out)


def context_json(context: Mapping[str, str]) -> str:
    """A context as JSON.stringify writes it: it never goes through class-transformer, so any key is kept."""
    return "{" + ",".join(js_string(k) + ":" + js_string(v) for k, v in context.items()) + "}"


def _write(value: Any, type_name: str, path: str, out: List[str], open_ids: set) -> None:
    if type(value) is str:  # the most common leaf first
        out.append(js_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise SerializationError(
                type_name,
                "%s is %d, beyond what a JavaScript number holds exactly (2^53 - 1); send it as a string" % (path, value),
            )
        out.append(str(int(value)))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(type_name, "%s is %r, which JSON cannot hold" % (path, value))
        out.append(js_number(value))
    elif isinstance(value, str):
        out.append(js_string(value))
    elif isinstance(value, datetime):
        out.append('"' + iso_millis(value, path, type_name) + '"')
    elif isinstance(value, date):
        raise SerializationError(
            type_name, "%s is a date without a time; pass a timezone-aware datetime, or its ISO text" % path
        )
    elif isinstance(value, Mapping):
        if id(value) in open_ids:
            raise SerializationError(type_name, "%s refers to itself (a circular structure)" % path)
        open_ids.add(id(value))
        out.append("{")
        first = True
        for key, item in value.items():
            if not isinstance(key, str):
                raise SerializationError(type_name, "%s has the key %r; JSON keys are strings" % (path, key))
            if key in LOSSY_KEYS:
                raise SerializationError(
                    type_name,
                    "key %s.%s would be dropped by class-transformer when stored or read back; rename it" % (path, key),
                )
            if not first:
                out.append(",")
            first = False
            out.append(js_string(key))
            out.append(":")
            _write(item, type_name, "%s.%s" % (path, key), out, open_ids)
        out.append("}")
        open_ids.discard(id(value))
    elif isinstance(value, (list, tuple)):
        if id(value) in open_ids:
            raise SerializationError(type_name, "%s refers to itself (a circular structure)" % path)
        open_ids.add(id(value))
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, type_name, "%s[%d]" % (path, i), out, open_ids)
        out.append("]")
        open_ids.discard(id(value))
    else:
        raise SerializationError(
            type_name,
            "%s is a %s, which the Node service cannot read back; convert it (str(), float(), a dict)"
            % (path, type(value).__name__),
        )


def format_extras(
    max_wait_ms: Optional[int] = None,
    dedupe_window_ms: Optional[int] = None,
    max_attempts: Optional[int] = None,
    priority: Optional[int] = None,
) -> Optional[str]:
    """The body's fourth element (src/core/body-extras.ts), or None when there is nothing to store."""
    text = "rde"
    # The window fields first: the scripts read a and p within the body's last 48 characters.
    if max_wait_ms is not None:
        text += ";w=%d" % max_wait_ms
    if dedupe_window_ms is not None:
        text += ";i=%d" % dedupe_window_ms
    if max_attempts is not None:
        text += ";a=%d" % max_attempts
    if priority:
        text += ";p=%d" % priority
    return None if text == "rde" else text


def encode_body(
    type_name: str,
    event_id: str,
    payload: Any,
    context: Optional[Mapping[str, str]],
    enqueued_at_ms: int,
    version: int = 1,
    extras: Optional[str] = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> str:
    """The body: ``[enqueued at ms, payload without its id, context?, extras?]``, after ``<version>|`` from version 2."""
    if not isinstance(payload, Mapping):
        raise InvalidEventError(
            "payload of type '%s' is a %s; pass a dict of the event's fields" % (type_name, type(payload).__name__)
        )
    if "id" in payload:
        if payload["id"] != event_id:
            raise InvalidEventError(
                "payload id %r of type '%s' differs from the id argument %r; leave it out or make them equal"
                % (payload["id"], type_name, event_id)
            )
        # The hash field holds the id: the body leaves it out, as Node's encoder does.
        payload = {k: v for k, v in payload.items() if k != "id"}
    if context is not None:
        check_context(context)
    parts = [str(int(enqueued_at_ms)), to_json(payload, type_name)]
    if extras is not None:
        parts.append(context_json(context or {}))
        parts.append(js_string(extras))
    elif context:
        parts.append(context_json(context))
    body = "[" + ",".join(parts) + "]"
    if version != 1:
        body = "%d|%s" % (version, body)
    # A code point is at most 4 bytes of UTF-8: most bodies need no count.
    if len(body) * 4 > max_payload_bytes:
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > max_payload_bytes:
            raise PayloadTooLargeError(type_name, size, max_payload_bytes)
    return body


def check_context(context: Any) -> Mapping[str, str]:
    if not isinstance(context, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in context.items()):
        raise InvalidEventError("context must be a dict whose keys and values are all strings")
    return context


def partition_of(event_id: str, partitions: int) -> int:
    """FNV-1a over the id's UTF-16 code units, as src/redis/redis-layout.ts computes it."""
    h = 0x811C9DC5
    units = event_id.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(units), 2):
        h ^= units[i] | (units[i + 1] << 8)
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h % partitions


def queue_tag(type_name: str, partitions: int, event_id: str) -> str:
    """The hash tag of the queue an id lives in: the type, or ``type#partition``."""
    return type_name if partitions == 1 else "%s#%d" % (type_name, partition_of(event_id, partitions))


def key_of(prefix: str, tag: str, name: str) -> str:
    """The key a script header's name stands for (docs/wire-format.md, "Keys")."""
    suffix = KEY_SUFFIXES.get(name)
    if suffix is None:
        raise KeyError("no key named %r is known to this producer: update reactive_delayed_events" % name)
    return "%s:{%s}:%s" % (prefix, tag, suffix)


def whole(value: Any, what: str, least: int, most: int, unit: str = "") -> int:
    # 3.0 is a whole number, as for Node (a value read from JSON config often is a float).
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise InvalidArgumentError(what, "must be a whole number%s from %s to %s, got %r" % (unit, f"{least:,}", f"{most:,}", value))
    return value


def flag(value: Any, what: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgumentError(what, "must be True or False, got %r" % (value,))
    return value


def check_keys(options: Any, allowed: Tuple[str, ...], what: str) -> Mapping[str, Any]:
    """An options mapping whose every key ``allowed`` lists, or an InvalidArgumentError naming the closest."""
    if not isinstance(options, Mapping):
        raise InvalidArgumentError(what, "must be a dict such as {%s}, got %r" % (", ".join(allowed), options))
    for key in options:
        if key not in allowed:
            raise InvalidArgumentError("option %r" % (key,), unknown_key_detail(str(key), allowed, what))
    return options


def unknown_key_detail(key: str, allowed: Tuple[str, ...], what: str) -> str:
    import difflib

    near = [k for k in allowed if k.lower() == key.lower()] or difflib.get_close_matches(key, allowed, n=1, cutoff=0.75)
    hint = " (did you mean %s?)" % near[0] if near else ""
    return "%s has no option %r%s; its options are %s" % (what, key, hint, ", ".join(allowed))


def window_policy(
    replace: bool, debounce: Any, throttle: Any, dedupe: Any, delay_ms: int, what: str
) -> Tuple[str, int, Dict[str, int]]:
    """(mode, mode_ms, extras) of lua/enqueue.lua for one event's replace and window options."""
    given = [n for n, v in (("replace", replace), ("debounce", debounce), ("throttle", throttle), ("dedupe", dedupe)) if v not in (None, False)]
    if len(given) > 1:
        raise InvalidArgumentError(
            what, "takes at most one of replace, debounce, throttle and dedupe, got %s: keep the one you mean" % " and ".join(given)
        )
    if debounce is not None:
        d = check_keys(debounce, ("max_wait_ms", "leading", "trailing"), "debounce of %s" % what)
        leading = flag(d.get("leading"), "debounce of %s: leading" % what, False)
        trailing = flag(d.get("trailing"), "debounce of %s: trailing" % what, True)
        if not leading and not trailing:
            raise InvalidArgumentError("debounce of %s: trailing" % what, "may be False only with leading=True; with neither, no call would ever run")
        max_wait = 0
        if d.get("max_wait_ms") is not None:
            max_wait = whole(d["max_wait_ms"], "debounce of %s: max_wait_ms" % what, 1, MOST_WINDOW_MS, " of ms")
            if max_wait < delay_ms:
                raise InvalidArgumentError(
                    "debounce of %s: max_wait_ms" % what,
                    "is %d ms, below the delay (%d ms): raise it to the delay or more, or shorten the delay" % (max_wait, delay_ms),
                )
        return ("l" if trailing else "L") if leading else "d", max_wait, {"max_wait_ms": max_wait}
    if throttle is not None:
        t = check_keys(throttle, ("window_ms",), "throttle of %s" % what)
        return "t", whole(t.get("window_ms"), "throttle.window_ms of %s" % what, 1, MOST_WINDOW_MS, " of ms"), {}
    if dedupe is not None:
        d = check_keys(dedupe, ("window_ms", "keep_last"), "dedupe of %s" % what)
        window = whole(d.get("window_ms"), "dedupe.window_ms of %s" % what, 0, MOST_DEDUPE_MS, " of ms")
        keep_last = flag(d.get("keep_last"), "dedupe.keep_last of %s" % what, False)
        return "k" if keep_last else "i", 0, {"dedupe_window_ms": window}
    if replace not in (None, False, True):
        raise InvalidArgumentError("replace of %s" % what, "must be True or False, got %r" % (replace,))
    return ("r" if replace else ""), 0, {}


def due_of(delay_ms: Any, at: Any, now_ms: int, what: str) -> Tuple[str, int]:
    """The script's due argument ('+<ms from Redis's now>' or '<absolute ms>') and the delay it means."""
    if at is not None:
        if not isinstance(at, datetime):
            raise InvalidDelayError("at of %s is a %s, not a datetime" % (what, type(at).__name__))
        if at.tzinfo is None or at.tzinfo.utcoffset(at) is None:
            raise InvalidDelayError("at of %s is a naive datetime; give it a timezone so it means one instant" % what)
        try:
            delta = at - _EPOCH
        except OverflowError:
            raise InvalidDelayError("at of %s (%s) is out of range" % (what, at.isoformat())) from None
        ms = -(-(delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds) // 1000)
        if ms < 0 or ms > now_ms + MAX_DELAY_MS:
            raise InvalidDelayError("at of %s (%s) is out of range" % (what, at.isoformat()))
        return str(ms), max(0, ms - now_ms)
    if delay_ms is None:
        delay_ms = 0
    if isinstance(delay_ms, int) and not isinstance(delay_ms, bool) and delay_ms > MAX_DELAY_MS:
        raise InvalidDelayError("delay_ms of %s is %d ms, more than 100 years" % (what, delay_ms))
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, (int, float)) or not math.isfinite(delay_ms):
        raise InvalidDelayError("delay_ms of %s is %r, not a finite number" % (what, delay_ms))
    if delay_ms < 0:
        raise InvalidDelayError("delay_ms of %s is negative (%r)" % (what, delay_ms))
    if delay_ms > MAX_DELAY_MS:
        raise InvalidDelayError("delay_ms of %s is %r ms, more than 100 years" % (what, delay_ms))
    ms = int(math.ceil(delay_ms))
    return "+%d" % ms, ms
