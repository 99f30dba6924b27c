"""Runs the calls given on stdin (JSON) through the Python producer, printing each result.

Used by test/python-producer.test.ts: {"prefix": ..., "calls": [{"op": "enqueue", "args": {...}}]}.
Reaches the Redis of REDIS_URL, or the Cluster of REDIS_CLUSTER_NODES; a value {"$date": iso} is a datetime."""

import json
import os
import sys
from datetime import datetime

import redis
from redis.cluster import ClusterNode, RedisCluster

from reactive_delayed_events import DelayedEventError, DelayedEvents


def revive(value):
    if isinstance(value, list):
        return [revive(v) for v in value]
    if isinstance(value, dict):
        if list(value) == ["$date"]:
            return datetime.fromisoformat(value["$date"].replace("Z", "+00:00"))
        return {k: revive(v) for k, v in value.items()}
    return value


def main():
    request = json.load(sys.stdin)
    nodes = os.environ.get("REDIS_CLUSTER_NODES")
    if nodes:
        client = RedisCluster(startup_nodes=[ClusterNode(n.split(":")[0], int(n.split(":")[1])) for n in nodes.split(",")], decode_responses=True)
    else:
        client = redis.Redis.from_url(os.environ["REDIS_URL"])
    events = DelayedEvents(client, request["prefix"])
    results = []
    for call in request["calls"]:
        try:
            results.append({"ok": getattr(events, call["op"])(**revive(call["args"]))})
        except DelayedEventError as error:
            results.append({"error": type(error).__name__, "code": error.code, "message": str(error)})
    print(json.dumps(results))


main()
