//go:build ndbapi

// Reading a table whole: counting its rows (ndbgate_row_count) and scanning
// a small table's rows out (ndbgate_scan_rows).

#include "shim_internal.h"

using namespace shim;

namespace shim {

DictCall::DictCall(ndbgate_pool *pool)
    : rg(pool->flightMu), g(pool->dictMu), ndb(pool->conns.empty() ? nullptr : pool->conns[0].dict) {}

const TableRecs *DictCall::table(ndbgate_pool *pool, int table_id, NdbError &e) {
  if (pool->detached.load() || !ndb) {
    // Nothing is sent: 4009 so marked maps to Unavailable (wire.go).
    shimError(e, kErrClusterFail, NdbError::NodeRecoveryError, "cluster failure: no data node reachable; reconnecting");
    e.status = NdbError::TemporaryError;
    return nullptr;
  }
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r) shimError(e, 284, NdbError::SchemaError, "unknown table id in an ndbgate dictionary call");
  return r;
}

void reportError(const NdbError &e, int *ndb_error, char *err, int errlen) {
  ndb_error[0] = e.code;
  ndb_error[1] = static_cast<int>(e.status);
  ndb_error[2] = static_cast<int>(e.classification);
  setErr(err, errlen, e.message ? e.message : "");
}

}  // namespace shim

extern "C" {

int ndbgate_row_count(ndbgate_pool *pool, int table_id, unsigned long long *rows, char *err, int errlen) {
  // Each fragment answers with one row holding its row count (the
  // ROW_COUNT pseudo column, as ndb_select_count does), read dirty.
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);
  std::lock_guard<std::mutex> g(pool->dictMu);
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  Ndb *ndb = pool->conns.empty() ? nullptr : pool->conns[0].dict;
  if (!r || !ndb) { setErr(err, errlen, "table not described, or the cluster is unreachable"); return -1; }
  NdbTransaction *tx = ndb->startTransaction();
  if (!tx) { setErr(err, errlen, ndbErrText(ndb->getNdbError())); return -1; }
  Uint32 words[4];
  NdbInterpretedCode code(r->t, words, 4);
  NdbScanOperation *scan = tx->getNdbScanOperation(r->t);
  Uint64 count = 0;
  if (!scan || scan->readTuples(NdbOperation::LM_Dirty) != 0 || code.interpret_exit_last_row() != 0 ||
      code.finalise() != 0 || scan->setInterpretedCode(&code) != 0 ||
      !scan->getValue(NdbDictionary::Column::ROW_COUNT, reinterpret_cast<char *>(&count)) ||
      tx->execute(NdbTransaction::NoCommit) != 0) {
    setErr(err, errlen, ndbErrText(tx->getNdbError()));
    ndb->closeTransaction(tx);
    return -1;
  }
  unsigned long long sum = 0;
  int rc;
  while ((rc = scan->nextResult(true)) == 0) sum += count;
  if (rc != 1) {
    setErr(err, errlen, ndbErrText(tx->getNdbError()));
    ndb->closeTransaction(tx);
    return -1;
  }
  ndb->closeTransaction(tx);
  *rows = sum;
  return 0;
}

int ndbgate_scan_rows(ndbgate_pool *pool, int table_id, const unsigned short *cols, int ncols, int limit,
                      unsigned char *out, int outcap, int *outlen, int *nrows, int *ndb_error, char *err,
                      int errlen) {
  // A committed-read scan (no locks: each row as last committed) through the
  // table's row record, on the first connection's dictionary Ndb under
  // dictMu, as ndbgate_row_count: each executor's Ndb is its own thread's.
  *outlen = 0;
  *nrows = 0;
  ndb_error[0] = ndb_error[1] = ndb_error[2] = 0;
  NdbError e;
  auto fail = [&](const NdbError &ne) {
    reportError(ne, ndb_error, err, errlen);
    return NDBGATE_SCAN_ERROR;
  };
  DictCall dc(pool);
  Ndb *ndb = dc.ndb;
  const TableRecs *r = dc.table(pool, table_id, e);
  if (!r) return fail(e);
  const Layout &l = r->layout;
  if (ncols < 0 || (ncols > 0 && !cols)) {
    shimError(e, kErrBadValue, NdbError::ApplicationError, "malformed scan column list");
    return fail(e);
  }
  std::vector<unsigned char> mask(l.maskBytes, 0);
  for (int i = 0; i < ncols; i++) {
    if (!inRecord(l, cols[i])) {
      shimError(e, kErrBadValue, NdbError::ApplicationError, "scan column not in the table's row record");
      return fail(e);
    }
    setBit(mask.data(), cols[i]);
  }
  // A scan that returns no column still counts rows: it reads the first
  // primary-key column and writes nothing of it.
  if (ncols == 0 && !l.keyCols.empty()) setBit(mask.data(), l.keyCols[0]);
  NdbTransaction *tx = ndb->startTransaction();
  if (!tx) return fail(notSent(ndb->getNdbError()));
  NdbScanOperation *s = tx->scanTable(r->row, NdbOperation::LM_CommittedRead, mask.data());
  if (!s || tx->execute(NdbTransaction::NoCommit) != 0) {
    e = tx->getNdbError();
    ndb->closeTransaction(tx);
    return fail(e);
  }
  // Rows go out as a read's values do (writeValue); past outcap the writer
  // only counts, so the caller learns the size it needs.
  Writer w{out, out + (out && outcap > 0 ? outcap : 0)};
  const char *row = nullptr;
  int rows = 0;
  int rc;
  while ((rc = s->nextResult(&row, true, false)) == 0) {
    if (limit >= 0 && rows == limit) {  // one row more than allowed: stop here
      ndb->closeTransaction(tx);
      *nrows = rows;
      return NDBGATE_SCAN_TOO_MANY;
    }
    for (int i = 0; i < ncols; i++) writeValue(w, l, row, cols[i]);
    rows++;
    if (w.needed > static_cast<size_t>(INT32_MAX)) {
      // wire.go maps classification ApplicationError + code 1 to TooLarge
      shimError(e, 1, NdbError::ApplicationError, "scanned rows take more than 2 GiB");
      ndb->closeTransaction(tx);
      return fail(e);
    }
  }
  if (rc != 1) {
    e = s->getNdbError().code != 0 ? s->getNdbError() : tx->getNdbError();
    ndb->closeTransaction(tx);
    return fail(e);
  }
  ndb->closeTransaction(tx);  // read only: nothing to commit
  *nrows = rows;
  *outlen = static_cast<int>(w.needed);
  return w.p || w.needed == 0 ? NDBGATE_SCAN_OK : NDBGATE_SCAN_SHORT;
}

}  // extern "C"
