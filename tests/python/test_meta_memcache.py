"""meta-memcache (Python, meta protocol only) against the server: mg/ms/md/ma
with leases and stale-while-revalidate, as a current meta client uses them."""

import os
import socket

import pytest
from server_env import BACKEND
from meta_memcache import (
    CacheClient,
    Key,
    LeasePolicy,
    ServerAddress,
    SetMode,
    StalePolicy,
    connection_pool_factory_builder,
)


@pytest.fixture
def mclient():
    addr = os.environ.get("NDBGATE_MEMCACHE", "")
    if not addr:
        pytest.skip("NDBGATE_MEMCACHE not set")
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"flush_all\r\n")
        assert s.recv(16) == b"OK\r\n"
    c = CacheClient.cache_client_from_servers(
        servers=[ServerAddress(host=host, port=int(port))],
        connection_pool_factory_fn=connection_pool_factory_builder(),
    )
    yield c


def test_meta_set_get_delete(mclient):
    assert mclient.get("mm:none") is None
    assert mclient.set("mm:a", "hello", ttl=60) is True
    assert mclient.get("mm:a") == "hello"
    assert mclient.set(Key("mm:obj"), {"a": [1, 2]}, ttl=60) is True
    assert mclient.get(Key("mm:obj")) == {"a": [1, 2]}
    assert mclient.delete("mm:a") is True
    assert mclient.get("mm:a") is None


def test_meta_binary_and_unicode_keys(mclient):
    key = Key("mm:ключ-\u00e9")  # not ASCII: the client sends it base64 (b)
    assert mclient.set(key, b"\x00\x01bin", ttl=60) is True
    assert mclient.get(key) == b"\x00\x01bin"
    long_key = Key("mm:" + "x" * 400)  # over 250 bytes: the client hashes it
    assert mclient.set(long_key, 7, ttl=60) is True
    assert mclient.get(long_key) == 7


def test_meta_multi_get_and_modes(mclient):
    for i in range(5):
        assert mclient.set(f"mm:m{i}", i, ttl=60) is True
    got = mclient.multi_get([f"mm:m{i}" for i in range(7)])
    assert {k.key: v for k, v in got.items()} == {
        **{f"mm:m{i}": i for i in range(5)},
        "mm:m5": None,
        "mm:m6": None,
    }
    assert mclient.set("mm:m0", 100, ttl=60, set_mode=SetMode.ADD) is False
    assert mclient.set("mm:new", 1, ttl=60, set_mode=SetMode.REPLACE) is False
    assert mclient.set("mm:new", 1, ttl=60, set_mode=SetMode.ADD) is True


@pytest.mark.skipif(
    BACKEND == "ndb",
    reason="meta-memcache-socket parses cas tokens as 32-bit; on NDB ndbgate's cas starts at the clock in microseconds (unique across restarts)",
)
def test_meta_cas(mclient):
    assert mclient.set("mm:c", "v1", ttl=60) is True
    value, cas = mclient.get_cas("mm:c")
    assert value == "v1" and cas
    assert mclient.set("mm:c", "v2", ttl=60, cas_token=cas) is True
    assert mclient.set("mm:c", "v3", ttl=60, cas_token=cas) is False
    assert mclient.get("mm:c") == "v2"


def test_meta_counters(mclient):
    assert mclient.delta("mm:n", 1) is False  # missing, no autovivify
    assert mclient.delta_initialize("mm:n", 1, initial_value=10, initial_ttl=60) is True
    assert mclient.delta_and_get("mm:n", 5) == 15
    assert mclient.delta_and_get("mm:n", -20) == 0  # decrement clamps at 0


def test_meta_lease_on_miss(mclient):
    # The first reader of a missing key vivifies it (mg N) and wins the lease:
    # it sees a miss and refills; everyone after it sees the refilled value.
    policy = LeasePolicy(ttl=30, miss_retries=1, miss_retry_wait=0.01)
    assert mclient.get_or_lease("mm:l", lease_policy=policy) is None
    # refill is an add: the lease's placeholder exists, so it does not store.
    assert mclient.refill("mm:l", "filled", ttl=60) is False
    assert mclient.set("mm:l", "filled", ttl=60) is True
    assert mclient.get_or_lease("mm:l", lease_policy=policy) == "filled"


def test_meta_invalidate_serves_stale(mclient):
    # Invalidation with a stale TTL (md I T) keeps the old value: the first
    # reader wins the recache (sees a miss), later readers get the stale value
    # until the winner stores a fresh one.
    stale = StalePolicy(mark_stale_on_deletion_ttl=30)
    assert mclient.set("mm:s", "old", ttl=60) is True
    assert mclient.invalidate("mm:s", stale_policy=stale) is True
    assert mclient.get("mm:s") is None
    assert mclient.get("mm:s") == "old"
    assert mclient.set("mm:s", "new", ttl=60, stale_policy=stale) is True
    assert mclient.get("mm:s") == "new"
    assert mclient.invalidate("mm:s") is True  # a plain invalidation deletes
    assert mclient.get("mm:s") is None
