"""Fixtures: a real redis-server (REDIS_URL from the Node suite, or one started here on a
free loopback port and stopped by its PID) and, when RDE_CLUSTER_NODES names one, a real Cluster."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url():
    url = os.environ.get("RDE_REDIS_URL")
    if url:
        yield url
        return
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server on PATH")
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="rde-py-")
    proc = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = "redis://127.0.0.1:%d" % port
    deadline = time.time() + 10
    while True:
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.exceptions.ConnectionError:
            if time.time() > deadline:
                proc.kill()
                raise
            time.sleep(0.02)
    yield url
    proc.kill()
    proc.wait()
    shutil.rmtree(workdir, ignore_errors=True)


def _cluster_nodes():
    nodes = os.environ.get("RDE_CLUSTER_NODES")
    if not nodes:
        return None
    return [ClusterNode(n.split(":")[0], int(n.split(":")[1])) for n in nodes.split(",")]


@pytest.fixture(params=["single", "single-decoded", "cluster"])
def client(request, redis_url):
    """A redis-py client of each kind the producer supports."""
    if request.param == "cluster":
        nodes = _cluster_nodes()
        if nodes is None:
            pytest.skip("RDE_CLUSTER_NODES names no cluster (the Node suite's cluster project sets it)")
        c = RedisCluster(startup_nodes=nodes, decode_responses=True)
    else:
        c = redis.Redis.from_url(redis_url, decode_responses=request.param == "single-decoded")
    yield c
    c.close()


@pytest.fixture
def prefix():
    return "py" + uuid.uuid4().hex[:10]
