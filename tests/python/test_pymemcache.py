"""pymemcache against ndbgate: every text-protocol command a Python app uses."""

import time

import pytest
from server_env import VALUE_MAX
from pymemcache.exceptions import MemcacheClientError, MemcacheIllegalInputError
from pymemcache.serde import pickle_serde
from pymemcache.client.base import Client


def test_set_get(client):
    assert client.get(b"py:none") is None
    assert client.set(b"py:a", b"hello") is True
    assert client.get(b"py:a") == b"hello"
    assert client.set(b"py:a", b"") is True
    assert client.get(b"py:a") == b""
    binary = bytes(range(256)) * 4
    assert client.set(b"py:bin", binary) is True
    assert client.get(b"py:bin") == binary
    assert client.get(b"py:none", default=b"dflt") == b"dflt"


def test_flags_round_trip_with_serde(client):
    host, port = client.server
    c = Client((host, port), serde=pickle_serde, default_noreply=False, connect_timeout=5, timeout=5)
    try:
        values = {b"py:int": 42, b"py:str": "text", b"py:dict": {"a": [1, 2, 3]}, b"py:bytes": b"raw"}
        for k, v in values.items():
            assert c.set(k, v) is True
        for k, v in values.items():
            assert c.get(k) == v
    finally:
        c.close()


def test_set_many_get_many(client):
    values = {("py:m:%03d" % i).encode(): ("v%d" % i).encode() for i in range(100) if i % 4}
    assert client.set_many(values) == []
    keys = [("py:m:%03d" % i).encode() for i in range(100)]
    got = client.get_many(keys)
    assert got == values
    assert client.get_many([]) == {}


def test_add_replace(client):
    assert client.add(b"py:ar", b"first") is True
    assert client.add(b"py:ar", b"second") is False
    assert client.get(b"py:ar") == b"first"
    assert client.replace(b"py:ar", b"third") is True
    assert client.replace(b"py:ar-none", b"x") is False
    assert client.get(b"py:ar") == b"third"
    assert client.get(b"py:ar-none") is None


def test_append_prepend(client):
    assert client.append(b"py:ap", b"x") is False
    assert client.prepend(b"py:ap", b"x") is False
    assert client.set(b"py:ap", b"mid") is True
    assert client.append(b"py:ap", b">>") is True
    assert client.prepend(b"py:ap", b"<<") is True
    assert client.get(b"py:ap") == b"<<mid>>"


def test_gets_cas(client):
    assert client.gets(b"py:cas") == (None, None)
    assert client.cas(b"py:cas", b"x", b"1") is None  # NOT_FOUND
    assert client.set(b"py:cas", b"v1") is True
    value, cas = client.gets(b"py:cas")
    assert value == b"v1"
    assert cas is not None and int(cas) > 0
    assert client.cas(b"py:cas", b"v2", cas) is True
    assert client.get(b"py:cas") == b"v2"
    assert client.cas(b"py:cas", b"v3", cas) is False  # EXISTS: stale unique
    assert client.get(b"py:cas") == b"v2"
    value, cas2 = client.gets(b"py:cas")
    assert value == b"v2" and cas2 != cas
    many = client.gets_many([b"py:cas", b"py:none"])
    assert list(many) == [b"py:cas"]
    assert many[b"py:cas"] == (b"v2", cas2)


def test_delete(client):
    assert client.set(b"py:del", b"x") is True
    assert client.delete(b"py:del") is True
    assert client.delete(b"py:del") is False
    assert client.get(b"py:del") is None
    assert client.set_many({b"py:d1": b"1", b"py:d2": b"2"}) == []
    assert client.delete_many([b"py:d1", b"py:d2", b"py:d3"]) is True
    assert client.get_many([b"py:d1", b"py:d2"]) == {}


def test_incr_decr(client):
    assert client.incr(b"py:n", 1) is None
    assert client.decr(b"py:n", 1) is None
    assert client.set(b"py:n", b"10") is True
    assert client.incr(b"py:n", 5) == 15
    assert client.decr(b"py:n", 3) == 12
    assert client.decr(b"py:n", 100) == 0
    assert client.incr(b"py:n", 18446744073709551615) == 18446744073709551615
    assert client.incr(b"py:n", 2) == 1
    assert client.set(b"py:n", b"99") is True
    assert client.incr(b"py:n", 1) == 100
    assert client.get(b"py:n") == b"100"
    assert client.set(b"py:text", b"abc") is True
    with pytest.raises(MemcacheClientError, match="cannot increment or decrement non-numeric value"):
        client.incr(b"py:text", 1)
    assert client.get(b"py:text") == b"abc"


def test_touch_and_expiry(client):
    assert client.touch(b"py:t-none", 10) is False
    assert client.set(b"py:t", b"x", expire=1) is True
    assert client.set(b"py:t-kept", b"y", expire=1) is True
    assert client.touch(b"py:t-kept", 100) is True
    assert client.get(b"py:t") == b"x"
    time.sleep(2.5)
    assert client.get(b"py:t") is None
    assert client.get(b"py:t-kept") == b"y"


def test_noreply(client, noreply_client):
    # Replies are not awaited, so read back on the same connection: the server
    # answers the get only after it has processed what came before it.
    assert noreply_client.set(b"py:nr", b"1") is True
    assert noreply_client.add(b"py:nr", b"2") is True  # noreply: always True
    assert noreply_client.append(b"py:nr", b"0") is True
    assert noreply_client.get(b"py:nr") == b"10"
    noreply_client.delete(b"py:nr")
    assert noreply_client.get(b"py:nr") is None
    assert client.get(b"py:nr") is None


def test_flush_all(client):
    assert client.set_many({b"py:f1": b"1", b"py:f2": b"2"}) == []
    assert client.flush_all() is True
    assert client.get_many([b"py:f1", b"py:f2"]) == {}
    assert client.set(b"py:f1", b"again") is True
    assert client.get(b"py:f1") == b"again"


def test_stats(client):
    assert client.set(b"py:s", b"x") is True
    assert client.get(b"py:s") == b"x"
    stats = client.stats()
    for name in (b"pid", b"uptime", b"curr_items", b"get_hits", b"get_misses", b"cmd_get", b"cmd_set"):
        assert name in stats, name
    assert stats[b"curr_items"] >= 1
    assert stats[b"get_hits"] >= 1
    settings = client.stats("settings")
    assert settings[b"item_size_max"] == 1048576


def test_version(client):
    version = client.version()
    assert isinstance(version, bytes)
    assert version.split(b".")[0].isdigit(), version


def test_key_validation(client):
    assert client.set(b"k" * 250, b"ok") is True
    assert client.get(b"k" * 250) == b"ok"
    with pytest.raises(MemcacheIllegalInputError):
        client.set(b"k" * 251, b"too long")


def test_large_value(client):
    # 1047552 bytes, just under 1 MiB, or under the server's largest value
    big = bytes(range(256)) * min(4092, (VALUE_MAX - 100) // 256)
    assert client.set(b"py:big", big) is True
    assert client.get(b"py:big") == big
