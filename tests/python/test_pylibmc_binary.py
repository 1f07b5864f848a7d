"""pylibmc (libmemcached) with binary=True against the server: the binary
protocol as Python, PHP and C apps reach it through libmemcached."""

import os

import pylibmc
import pytest
from server_env import VALUE_MAX


@pytest.fixture
def bclient():
    addr = os.environ.get("NDBGATE_MEMCACHE", "")
    if not addr:
        pytest.skip("NDBGATE_MEMCACHE not set")
    c = pylibmc.Client([addr], binary=True, behaviors={"cas": True})
    c.flush_all()
    yield c
    c.disconnect_all()


def test_binary_set_get_delete(bclient):
    assert bclient.get("pl:none") is None
    assert bclient.set("pl:a", b"hello") is True
    assert bclient.get("pl:a") == b"hello"
    assert bclient.delete("pl:a") is True
    assert bclient.get("pl:a") is None
    assert bclient.delete("pl:a") is False


def test_binary_add_replace_append_prepend(bclient):
    assert bclient.add("pl:b", b"1") is True
    assert bclient.add("pl:b", b"2") is False
    assert bclient.replace("pl:b", b"3") is True
    # Binary replace of a missing key answers "not found", which pylibmc raises.
    with pytest.raises(pylibmc.NotFound):
        bclient.replace("pl:missing", b"x")
    assert bclient.append("pl:b", b">") is True
    assert bclient.prepend("pl:b", b"<") is True
    assert bclient.get("pl:b") == b"<3>"


def test_binary_multi_get_is_served(bclient):
    values = {"pl:m:%02d" % i: ("v%d" % i).encode() for i in range(50) if i % 3}
    assert bclient.set_multi(values) == []
    got = bclient.get_multi(["pl:m:%02d" % i for i in range(50)])
    assert got == values


def test_binary_set_multi_is_stored_key_by_key(bclient):
    # libmemcached sends set_multi as pipelined SETQs: the server stores them
    # as one batch, and each key keeps its own flags (pylibmc's marks for
    # an int and for bytes); a later set_multi of the same keys wins.
    first = {"pl:sm:%03d" % i: ("a%d" % i).encode() for i in range(300)}
    assert bclient.set_multi(first) == []
    second = {k: i for i, k in enumerate(sorted(first)) if i % 2}
    assert bclient.set_multi(second) == []
    got = bclient.get_multi(sorted(first))
    for i, k in enumerate(sorted(first)):
        assert got[k] == (i if i % 2 else first[k]), k


def test_binary_incr_decr(bclient):
    assert bclient.set("pl:n", b"10") is True
    assert bclient.incr("pl:n", 5) == 15
    assert bclient.decr("pl:n", 20) == 0
    with pytest.raises(pylibmc.NotFound):
        bclient.incr("pl:nokey", 1)


def test_binary_cas(bclient):
    assert bclient.set("pl:c", b"one") is True
    value, cas = bclient.gets("pl:c")
    assert value == b"one" and cas
    assert bclient.cas("pl:c", b"two", cas) is True
    assert bclient.cas("pl:c", b"three", cas) is False
    assert bclient.get("pl:c") == b"two"


def test_binary_touch_and_large_value(bclient):
    assert bclient.set("pl:t", b"x") is True
    assert bclient.touch("pl:t", 100) is True
    assert bclient.touch("pl:none", 100) is False
    big = os.urandom(min(512 * 1024, VALUE_MAX - 100))
    assert bclient.set("pl:big", big) is True
    assert bclient.get("pl:big") == big
    with pytest.raises(pylibmc.Error):
        bclient.set("pl:huge", b"z" * (2 * 1024 * 1024))


def test_binary_stats_and_version(bclient):
    stats = bclient.get_stats()
    assert len(stats) == 1
    _, s = stats[0]
    assert "curr_items" in s and "version" in s
