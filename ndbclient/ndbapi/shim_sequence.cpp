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
    reportError(ne, ndb_error, err, errlen);
    return -1;
  };
  DictCall dc(pool);
  const TableRecs *r = dc.table(pool, table_id, e);
  if (!r) return fail(e);
  // The sequence is keyed by the table object's id: one altered or dropped
  // since it was described may name another table's sequence. 241 makes the
  // driver describe it again (schema.go staleError).
  if (r->t->getObjectStatus() != NdbDictionary::Object::Retrieved) {
    shimError(e, 241, NdbError::SchemaError, "table changed in the NDB dictionary since it was described");
    return fail(e);
  }
  Uint64 v = 0;
  if (dc.ndb->getAutoIncrementValue(r->t, v, cache_size) != 0) {
    e = dc.ndb->getNdbError();
    if (e.code == 0) shimError(e, 4000, NdbError::InternalError, "getAutoIncrementValue failed without an NDB error");
    return fail(e);
  }
  *value = v;
  return 0;
}

}  // extern "C"
