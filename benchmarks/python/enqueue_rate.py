"""Enqueue rates of the Python producer beside redis-py's bare EVALSHA floor (benchmarks/python-enqueue.ts runs it).

Prints one JSON line: events per second for each way, on the Redis of REDIS_URL."""

import json
import os
import sys
import time
import uuid

import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))
from reactive_delayed_events import DelayedEvents  # noqa: E402
from reactive_delayed_events.client import _TEXTS  # noqa: E402

N = int(os.environ.get("EVENTS", "5000"))
BATCH = 100


def rate(count, work):
    start = time.perf_counter()
    work()
    return count / (time.perf_counter() - start)


def main():
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    prefix = "b" + uuid.uuid4().hex[:8]
    events = DelayedEvents(client, prefix)
    payload = {"orderId": "A-17", "amountCents": 1250, "currency": "EUR"}
    results = {}

    results["producer, one at a time"] = rate(N, lambda: [events.enqueue("bench.py", "one-%d" % i, payload, delay_ms=60_000) for i in range(N)])

    def many():
        for start in range(0, N, BATCH):
            events.enqueue_many("bench.py", [{"id": "many-%d" % i, "payload": payload, "delay_ms": 60_000} for i in range(start, start + BATCH)])

    results["producer, enqueue_many of %d" % BATCH] = rate(N, many)

    # The floor: the same script, its arguments built beforehand, through redis-py alone.
    sha = client.script_load(_TEXTS["enqueue"])
    keys = ["%s:{bench.py}:%s" % (prefix, s) for s in ("m", "b", "i", "guard")]
    body = "[%d,%s]" % (int(time.time() * 1000), json.dumps(payload, separators=(",", ":")))
    args = lambda i, kind: ["", 0, prefix + ":wake", "bench.py", "%s-%d" % (kind, i), body, "+60000"]  # noqa: E731
    results["bare EVALSHA, one at a time"] = rate(N, lambda: [client.evalsha(sha, 4, *keys, *args(i, "bare")) for i in range(N)])

    def pipelined():
        for start in range(0, N, BATCH):
            pipe = client.pipeline(transaction=False)
            for i in range(start, start + BATCH):
                pipe.evalsha(sha, 4, *keys, *args(i, "pipe"))
            pipe.execute()

    results["bare EVALSHA, pipelines of %d" % BATCH] = rate(N, pipelined)
    stored = client.hlen(keys[0])
    assert stored == 4 * N, stored
    print(json.dumps(results))


main()
