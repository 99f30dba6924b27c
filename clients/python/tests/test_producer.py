"""The producer against a real Redis (a single server, decoded or not, and a Cluster)."""

import time
from datetime import datetime, timedelta, timezone

import pytest
import redis

from reactive_delayed_events import (
    DelayedEventError,
    DelayedEvents,
    InvalidArgumentError,
    InvalidEventError,
    InvalidOptionError,
    NotReplicatedError,
    RedisConnectionError,
)
from reactive_delayed_events import wire


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def stored(client, prefix, tag, event_id):
    value = client.hget("%s:{%s}:m" % (prefix, tag), event_id)
    return None if value is None else text(value).split("|", 2)


def test_enqueue_answers_as_node_does(client, prefix):
    events = DelayedEvents(client, prefix)
    assert events.enqueue("py.order", "o-1", {"total": 5}, delay_ms=60_000) == "scheduled"
    assert events.enqueue("py.order", "o-1", {"total": 6}, delay_ms=60_000) == "duplicate"
    assert stored(client, prefix, "py.order", "o-1")[2].endswith('{"total":5}]')
    assert events.enqueue("py.order", "o-1", {"total": 7}, delay_ms=60_000, replace=True) == "replaced"
    assert stored(client, prefix, "py.order", "o-1")[2].endswith('{"total":7}]')
    # The due time is Redis's now plus the delay.
    due = int(stored(client, prefix, "py.order", "o-1")[1])
    assert abs(due - (time.time() * 1000 + 60_000)) < 5_000


def test_windows_answer_debounced_and_throttled(client, prefix):
    events = DelayedEvents(client, prefix)
    assert events.enqueue("py.search", "s-1", {"q": "a"}, delay_ms=10_000, debounce={"max_wait_ms": 60_000}) == "scheduled"
    assert events.enqueue("py.search", "s-1", {"q": "ab"}, delay_ms=10_000, debounce={"max_wait_ms": 60_000}) == "debounced"
    assert '"q":"ab"' in stored(client, prefix, "py.search", "s-1")[2]
    assert events.enqueue("py.mail", "m-1", {}, throttle={"window_ms": 60_000}) == "scheduled"
    assert events.enqueue("py.mail", "m-1", {}, throttle={"window_ms": 60_000}) == "throttled"


def test_enqueue_many_keeps_the_order_of_its_statuses(client, prefix):
    events = DelayedEvents(client, prefix)
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    statuses = events.enqueue_many(
        "py.parted",
        [
            {"id": "a", "payload": {"n": 1}},
            {"id": "b", "payload": {"n": 2}, "at": at, "priority": 3},
            {"id": "a", "payload": {"n": 3}},
            {"id": "c", "payload": {"n": 4}, "delay_ms": 500, "context": {"t": "1"}},
        ],
        partitions=4,
    )
    assert statuses == ["scheduled", "scheduled", "duplicate", "scheduled"]
    for event_id in "abc":
        assert stored(client, prefix, wire.queue_tag("py.parted", 4, event_id), event_id) is not None
    assert events.enqueue_many("py.parted", [{"id": "a", "payload": {"n": 9}}], replace=True, partitions=4) == ["replaced"]
    assert events.enqueue_many("py.parted", []) == []


def test_one_bad_entry_stores_nothing(client, prefix):
    events = DelayedEvents(client, prefix)
    with pytest.raises(InvalidArgumentError, match="entry 1.*priorty"):
        events.enqueue_many("py.batch", [{"id": "x", "payload": {}}, {"id": "y", "payload": {}, "priorty": 1}])
    assert stored(client, prefix, "py.batch", "x") is None


def test_cancel_and_reschedule(client, prefix):
    events = DelayedEvents(client, prefix)
    events.enqueue("py.job", "j-1", {}, delay_ms=60_000)
    at = datetime.now(timezone.utc) + timedelta(days=2)
    assert events.reschedule("py.job", "j-1", at=at) is True
    assert int(stored(client, prefix, "py.job", "j-1")[1]) == int(at.timestamp() * 1000) + (1 if at.microsecond % 1000 else 0)
    assert events.reschedule("py.job", "j-1", delay_ms=5_000) is True
    assert events.reschedule("py.job", "nope", delay_ms=5_000) is False
    assert events.cancel("py.job", "j-1") is True
    assert events.cancel("py.job", "j-1") is False
    assert stored(client, prefix, "py.job", "j-1") is None
    # Marked for the idempotency window: a late re-send does not bring it back.
    assert events.enqueue("py.job", "j-1", {}) == "duplicate"


def test_partitions_come_from_the_layout_record(client, prefix):
    events = DelayedEvents(client, prefix, layout_ttl_ms=0)
    layout = "%s:{py.lay}:layout" % prefix
    client.hset(layout, mapping={"4": str(int(time.time() * 1000))})
    with pytest.raises(InvalidArgumentError, match="partitions="):
        events.enqueue("py.lay", "e-1", {})
    client.hset(layout, "current", "4")
    assert events.enqueue("py.lay", "e-1", {}) == "scheduled"
    assert stored(client, prefix, wire.queue_tag("py.lay", 4, "e-1"), "e-1") is not None
    # During a move to 8 partitions, cancel finds the id where the old setting put it.
    client.hset(layout, mapping={"current": "8", "8": str(int(time.time() * 1000))})
    assert events.cancel("py.lay", "e-1") is True
    # A type never partitioned has no layout record: one queue.
    assert events.enqueue("py.flat", "e-2", {}) == "scheduled"
    assert stored(client, prefix, "py.flat", "e-2") is not None


def test_durable_enqueue_says_when_too_few_replicas_confirmed(client, prefix):
    events = DelayedEvents(client, prefix, wait_replicas=3, wait_timeout_ms=50)
    with pytest.raises(NotReplicatedError) as raised:
        events.enqueue("py.durable", "d-1", {"n": 1})
    assert raised.value.code == "NOT_REPLICATED" and raised.value.required == 3
    # Stored on the master all the same; sending it again is safe.
    assert stored(client, prefix, "py.durable", "d-1") is not None
    with pytest.raises(NotReplicatedError):
        events.enqueue("py.durable", "d-1", {"n": 1})
    assert DelayedEvents(client, prefix, wait_replicas=0).enqueue("py.durable", "d-1", {"n": 1}) == "duplicate"


def test_durable_enqueue_runs_the_script_again_after_a_flush(redis_url, prefix):
    client = redis.Redis.from_url(redis_url)
    events = DelayedEvents(client, prefix, wait_replicas=1, wait_timeout_ms=20)
    client.script_flush()
    with pytest.raises(NotReplicatedError):
        events.enqueue("py.durable", "d-2", {})
    assert stored(client, prefix, "py.durable", "d-2") is not None


def test_bad_input_is_refused_before_redis_is_asked():
    events = DelayedEvents(redis.Redis(port=1), "px")
    with pytest.raises(InvalidArgumentError, match="did you mean priority"):
        events.enqueue("py.t", "x", {}, priorty=1)
    with pytest.raises(InvalidArgumentError, match="after"):
        events.enqueue("py.t", "x", {}, after=[{"type": "a", "id": "b"}])
    with pytest.raises(InvalidEventError):
        events.enqueue("py.t", "", {})
    with pytest.raises(InvalidArgumentError, match="type_name"):
        events.enqueue("py{t}", "x", {})
    with pytest.raises(DelayedEventError, match="naive"):
        events.enqueue("py.t", "x", {"at": datetime(2026, 1, 1)})
    with pytest.raises(DelayedEventError, match="naive"):
        events.enqueue("py.t", "x", {}, at=datetime(2026, 1, 1))
    with pytest.raises(InvalidArgumentError, match="replace"):
        events.enqueue("py.t", "x", {}, replace="yes")
    with pytest.raises(InvalidArgumentError, match="version"):
        events.enqueue("py.t", "x", {}, version=0)
    with pytest.raises(InvalidArgumentError, match="partitions"):
        events.enqueue("py.t", "x", {}, partitions=0)
    with pytest.raises(InvalidArgumentError, match="delay_ms or at"):
        events.reschedule("py.t", "x")


def test_constructor_options_are_checked():
    with pytest.raises(InvalidOptionError, match="prefix"):
        DelayedEvents(redis.Redis(port=1), "bad prefix")
    with pytest.raises(InvalidOptionError, match="wait_replicas"):
        DelayedEvents(redis.Redis(port=1), wait_replicas=-1)
    with pytest.raises(InvalidOptionError, match="redis"):
        DelayedEvents("redis://localhost")


def test_an_outage_is_a_typed_error():
    events = DelayedEvents(redis.Redis(port=1, socket_connect_timeout=0.5), "px")
    for call in (
        lambda: events.enqueue("py.t", "x", {}),
        lambda: events.enqueue_many("py.t", [{"id": "x", "payload": {}}]),
        lambda: events.cancel("py.t", "x"),
        lambda: events.reschedule("py.t", "x", delay_ms=1),
    ):
        with pytest.raises(RedisConnectionError) as raised:
            call()
        assert raised.value.code == "REDIS_CONNECTION" and raised.value.reason in ("refused", "other")


def test_hostile_input_gets_a_typed_error_and_nothing_is_sent():
    from reactive_delayed_events import InvalidDelayError, PayloadTooLargeError, SerializationError

    events = DelayedEvents(redis.Redis(port=1), "px", max_payload_bytes=1024)
    # Four bytes of UTF-8 each: 300 of them are over 1 KiB, though 300 characters are not.
    with pytest.raises(PayloadTooLargeError):
        events.enqueue("py.t", "x", {"s": "\U0001F600" * 300})
    with pytest.raises(InvalidArgumentError, match="surrogate"):
        events.cancel("py.t", "a\ud800")
    with pytest.raises(InvalidArgumentError, match="surrogate"):
        events.reschedule("py.t", "a\ud800", delay_ms=1)
    with pytest.raises(SerializationError, match="out of the range"):
        events.enqueue("py.t", "x", {"at": datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))})
    with pytest.raises(InvalidDelayError):
        events.enqueue("py.t", "x", {}, delay_ms=10 ** 400)
    with pytest.raises(InvalidDelayError):
        events.enqueue("py.t", "x", {}, at=datetime.min.replace(tzinfo=timezone(timedelta(hours=5))))
    deep = {}
    for _ in range(5_000):
        deep = {"d": deep}
    with pytest.raises(SerializationError, match="nested too deep"):
        events.enqueue("py.t", "x", deep)
    with pytest.raises(InvalidArgumentError, match="type_name"):
        events.enqueue(["py.t"], "x", {})
    # 101 characters beyond the BMP are 202 UTF-16 units: over the 200 a type name may hold, as for Node.
    with pytest.raises(InvalidArgumentError, match="type_name"):
        events.enqueue("\U0001F600" * 101, "x", {})


def test_lenient_where_node_is(client, prefix):
    events = DelayedEvents(client, prefix)
    # A whole number read from JSON config as a float, and a context key class-transformer would drop in a payload.
    assert events.enqueue("py.lenient", "l-1", {}, priority=3.0, max_attempts=2.0, context={"constructor": "c"}) == "scheduled"
    body = stored(client, prefix, "py.lenient", "l-1")[2]
    assert body.endswith(',{"constructor":"c"},"rde;a=2;p=3"]')


def test_a_junk_layout_record_is_no_setting(client, prefix):
    events = DelayedEvents(client, prefix, layout_ttl_ms=0)
    client.hset("%s:{py.junk}:layout" % prefix, mapping={"current": "\u00b2", "\u0664": "1"})
    assert events.enqueue("py.junk", "j-1", {}) == "scheduled"
    assert stored(client, prefix, "py.junk", "j-1") is not None


def test_cancel_finds_an_id_under_every_setting_named_when_none_is_current(client, prefix):
    events = DelayedEvents(client, prefix, layout_ttl_ms=0)
    assert events.enqueue("py.moving", "m-1", {}, partitions=4) == "scheduled"
    client.hset("%s:{py.moving}:layout" % prefix, mapping={"4": str(int(time.time() * 1000)), "8": str(int(time.time() * 1000))})
    assert events.reschedule("py.moving", "m-1", delay_ms=60_000) is True
    assert events.cancel("py.moving", "m-1") is True


def test_every_refused_event_is_an_invalid_event_error_with_node_s_code():
    from reactive_delayed_events import InvalidEventError, PayloadTooLargeError, SerializationError

    events = DelayedEvents(redis.Redis(port=1), "px", max_payload_bytes=64)
    with pytest.raises(InvalidEventError) as naive:
        events.enqueue("py.t", "x", {"at": datetime(2026, 1, 1)})
    assert isinstance(naive.value, SerializationError) and naive.value.code == "SERIALIZATION_FAILED"
    with pytest.raises(InvalidEventError) as large:
        events.enqueue("py.t", "x", {"s": "x" * 100})
    assert isinstance(large.value, PayloadTooLargeError) and large.value.code == "PAYLOAD_TOO_LARGE"


def test_a_misspelt_keyword_anywhere_is_a_typed_error_naming_it():
    with pytest.raises(InvalidOptionError, match="did you mean wait_replicas"):
        DelayedEvents(redis.Redis(port=1), "px", wait_replica=1)
    events = DelayedEvents(redis.Redis(port=1), "px")
    with pytest.raises(InvalidArgumentError, match="did you mean partitions"):
        events.enqueue_many("py.t", [{"id": "x", "payload": {}}], partition=2)
    with pytest.raises(InvalidArgumentError, match="did you mean partitions"):
        events.cancel("py.t", "x", partiton=2)
    with pytest.raises(InvalidArgumentError, match="did you mean delay_ms"):
        events.reschedule("py.t", "x", delay=5)
    with pytest.raises(InvalidArgumentError, match="did you mean delay_ms"):
        events.enqueue("py.t", "x", {}, delayms=5)
