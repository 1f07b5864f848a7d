"""What tests/e2e tells these suites about the server under test."""

import os

# "embedded", or "ndb" when the server runs on a live NDB cluster.
BACKEND = os.environ.get("NDBGATE_TEST_BACKEND", "embedded")
# The largest value the server stores: memcached's 1 MiB item, less on NDB.
VALUE_MAX = int(os.environ.get("NDBGATE_TEST_VALUE_MAX", str(1 << 20)))
