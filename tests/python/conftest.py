"""Fixtures for the pymemcache end-to-end tests.

The server address comes from NDBGATE_MEMCACHE (host:port). tests/e2e starts
ndbgate and runs pytest with it set; without it every test is skipped.
"""

import os

import pytest
from pymemcache.client.base import Client


def _address():
    addr = os.environ.get("NDBGATE_MEMCACHE", "")
    if not addr:
        pytest.skip("NDBGATE_MEMCACHE not set: run through `go test ./tests/e2e -run TestPymemcache`")
    host, _, port = addr.rpartition(":")
    return host, int(port)


@pytest.fixture
def client():
    c = Client(_address(), default_noreply=False, connect_timeout=5, timeout=5)
    assert c.flush_all() is True
    yield c
    c.close()


@pytest.fixture
def noreply_client():
    c = Client(_address(), default_noreply=True, connect_timeout=5, timeout=5)
    yield c
    c.close()
