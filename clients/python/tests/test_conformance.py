"""The shared vectors (clients/conformance): the Node suite holds its encoder to the same file."""

import ast
import json
import os
import re
from datetime import datetime, timezone

import pytest
import redis

from reactive_delayed_events import DelayedEvents, wire
from reactive_delayed_events.client import MANIFEST

HERE = os.path.dirname(__file__)
CONFORMANCE = os.path.join(HERE, "..", "..", "conformance")
with open(os.path.join(CONFORMANCE, "inputs.json"), encoding="utf-8") as f:
    INPUTS = json.load(f)
with open(os.path.join(CONFORMANCE, "vectors.json"), encoding="utf-8") as f:
    VECTORS = json.load(f)


def revive(value):
    if isinstance(value, list):
        return [revive(v) for v in value]
    if isinstance(value, dict):
        if list(value) == ["$date"]:
            return datetime.fromisoformat(value["$date"].replace("Z", "+00:00"))
        return {k: revive(v) for k, v in value.items()}
    return value


def at_of():
    return datetime.fromtimestamp(INPUTS["atMs"] / 1000, timezone.utc)


def producer(client=None, prefix=None):
    # No command is sent until a call needs Redis: encoding alone needs none.
    return DelayedEvents(client or redis.Redis(port=1), prefix or INPUTS["prefix"], clock=lambda: INPUTS["enqueuedAt"])


def prepared(events, vector):
    options = dict(vector.get("options", {}))
    return events._prepare(
        vector["type"], vector["id"], revive(vector["payload"]), vector.get("delay_ms", 0), at_of() if vector.get("at") else None,
        vector.get("context"), vector.get("replace", False), vector.get("version"), options, "enqueue",
    )


def test_vectors_match_the_node_file():
    assert VECTORS["wireFormat"] == INPUTS["wireFormat"] == MANIFEST["wireFormat"]
    assert sorted(VECTORS["results"]) == sorted(v["name"] for v in INPUTS["accepted"])


@pytest.mark.parametrize("vector", INPUTS["accepted"], ids=lambda v: v["name"])
def test_encodes_each_vector_as_node_does(vector):
    expected = VECTORS["results"][vector["name"]]
    events = producer()
    event_id, body, due, mode, mode_ms = prepared(events, vector)
    assert body == expected["body"]
    assert (mode, mode_ms) == (expected["mode"], expected["modeMs"])
    if vector.get("at"):
        assert due == expected["due"]
    else:
        assert due == "+%d" % vector.get("delay_ms", 0)
    tag = wire.queue_tag(vector["type"], vector.get("partitions", 1), event_id)
    assert tag == expected["tag"]
    for name, key in expected["keys"].items():
        assert wire.key_of(INPUTS["prefix"], tag, name) == key


@pytest.mark.parametrize("vector", INPUTS["refused"], ids=lambda v: v["name"])
def test_refuses_what_node_refuses_before_anything_is_sent(vector):
    # Port 1: were anything sent, the error would be a RedisConnectionError instead.
    events = producer()
    with pytest.raises(Exception) as raised:
        events.enqueue(vector["type"], vector["id"], revive(vector["payload"]), delay_ms=vector.get("delay_ms", 0), **vector.get("options", {}))
    assert type(raised.value).__name__ == vector["error"], str(raised.value)


def test_stores_each_vector_as_node_would(client, prefix):
    """The stored result: the envelope `0|<due>|<body>` in the key Node reads."""
    # A fresh prefix, so runs never meet: the vectors' keys under it.
    events = DelayedEvents(client, prefix, clock=lambda: INPUTS["enqueuedAt"])
    for vector in INPUTS["accepted"]:
        expected = VECTORS["results"][vector["name"]]
        options = dict(vector.get("options", {}))
        status = events.enqueue(
            vector["type"], vector["id"], revive(vector["payload"]), delay_ms=vector.get("delay_ms", 0), at=at_of() if vector.get("at") else None,
            context=vector.get("context"), replace=vector.get("replace", False), version=vector.get("version"), partitions=vector.get("partitions"), **options,
        )
        assert status == "scheduled", vector["name"]
        meta = expected["keys"]["meta"].replace(INPUTS["prefix"] + ":", prefix + ":", 1)
        stored = client.hget(meta, vector["id"])
        stored = stored.decode() if isinstance(stored, bytes) else stored
        attempt, due, body = stored.split("|", 2)
        if expected["mode"] in ("d", "l", "L"):
            # A debounce's enqueued-at is its burst's start, by Redis's clock (docs/wire-format.md).
            body = re.sub(r"^(\d+\|)?\[\d+,", lambda m: (m.group(1) or "") + "[%d," % INPUTS["enqueuedAt"], body)
        assert attempt == "0" and body == expected["body"], vector["name"]
        if vector.get("at"):
            assert due == str(INPUTS["atMs"])


def test_every_key_a_script_names_is_known_here():
    for spec in MANIFEST["scripts"].values():
        for name in spec["keys"]:
            assert name in wire.KEY_SUFFIXES


def test_the_package_parses_as_python_3_9():
    package = os.path.join(HERE, "..", "reactive_delayed_events")
    files = [os.path.join(package, f) for f in os.listdir(package) if f.endswith(".py")]
    files += [os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith(".py")]
    # What runs the producer from the Node suite and the benchmark, too.
    root = os.path.join(HERE, "..", "..", "..")
    files += [os.path.join(root, "test", "support", "python-producer.py"), os.path.join(root, "benchmarks", "python", "enqueue_rate.py")]
    assert len(files) >= 6
    for path in files:
        with open(path, encoding="utf-8") as f:
            ast.parse(f.read(), filename=path, feature_version=(3, 9))
