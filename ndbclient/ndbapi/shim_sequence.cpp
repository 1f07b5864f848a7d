//go:build ndbapi

// A table's auto-increment sequence (ndbgate_next_auto_increment): the
// values mysqld's AUTO_INCREMENT column and ndbmemcache draw from.

#include "shim_internal.h"

using namespace shim;

extern "C" {

int ndbgate_next_auto_increment(ndbgate_pool *pool, int table_id, unsigned int cache_size, unsigned long long *value,
                                int *ndb_error, char *err, int errlen) {
  // On the first connection's dictionary Ndb under dictMu, as
  // ndbgate_scan_rows: each executor's Ndb is its own thread's. That Ndb
  // keeps the range of values it reserved, by table.
  *value = 0;
  ndb_error[0] = ndb_error[1] = ndb_error[2] = 0;
  NdbError e;
  auto fail = [&](const NdbError &ne) {
    ndb_error[0] = ne.code;
    ndb_error[1] = static_cast<int>(ne.status);
    ndb_error[2] = static_cast<int>(ne.classification);
    setErr(err, errlen, ne.message ? ne.message : "");
    return -1;
  };
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // no refresh frees the table object meanwhile
  std::lock_guard<std::mutex> g(pool->dictMu);
  Ndb *ndb = pool->conns.empty() ? nullptr : pool->conns[0].dict;
  if (pool->detached.load() || !ndb) {
    // Nothing is sent: 4009 so marked maps to Unavailable (wire.go).
    shimError(e, kErrClusterFail, NdbError::NodeRecoveryError, "cluster failure: no data node reachable; reconnecting");
    e.status = NdbError::TemporaryError;
    return fail(e);
  }
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r) {
    shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate sequence");
    return fail(e);
  }
  // The sequence is keyed by the table object's id: one altered or dropped
  // since it was described may name another table's sequence. 241 makes the
  // driver describe it again (schema.go staleError).
  if (r->t->getObjectStatus() != NdbDictionary::Object::Retrieved) {
    shimError(e, 241, NdbError::SchemaError, "table changed in the NDB dictionary since it was described");
    return fail(e);
  }
  Uint64 v = 0;
  if (ndb->getAutoIncrementValue(r->t, v, cache_size) != 0) {
    e = ndb->getNdbError();
    if (e.code == 0) shimError(e, 4000, NdbError::InternalError, "getAutoIncrementValue failed without an NDB error");
    return fail(e);
  }
  *value = v;
  return 0;
}

}  // extern "C"
