//go:build ndbapi

// ndbgate's NDB API shim: a thin C++ layer that turns one flat request buffer
// (a flight of operations, format in wire.go) into NDB API transactions and
// writes their results into a flat response buffer. Its C surface is shim.h;
// its files, by concern, share shim_internal.h:
//
//   shim_wire.h         the wire: reading a request, writing a response (plain
//                       C++, tested without NDB: testdata/shim_wire_test.cpp)
//   shim_wire_consts.h  the wire's numbers, generated with wire_consts.go
//                       (internal/wiregen)
//   shim_layout.cpp     NdbRecord layouts and records (values in row slots:
//                       inline in shim_internal.h)
//   shim_program.cpp    interpreted programs: CAS, incr/decr, expiry
//   shim_execute.cpp    running a flight: transactions, sync ops, results
//   shim_conn.cpp       the pool's connections, detach and reattach
//   shim_follow.cpp     following a changing cluster: tables reorganised,
//                       data nodes added (a connection made again)
//   shim_table.cpp      describing, creating, dropping and altering tables
//   shim_scan.cpp       counting and scanning a table's rows
//   shim_sequence.cpp   a table's auto-increment sequence
//   shim.cpp            this overview, and helpers they all use (errors, tableOf)
//
// Operations use the NdbRecord interface: each described table gets, per
// connection, a key record (the primary-key columns) and a row record (every
// column) over one row layout, so one buffer carries a key and the values to
// write. Interpreted programs (CAS, incr/decr) are NdbInterpretedCode objects
// passed in OperationOptions.
//
// Execution: each Go executor goroutine owns one connection's Ndb object and
// makes one call per flight. Plain transactions of a flight are prepared with
// executeAsynchPrepare and sent with sendPollNdb, at most kMaxInFlight at a
// time; append/prepend and delete_all read before they write and run alone,
// synchronously, with nothing else outstanding on the Ndb object. Each
// transaction starts with its key row as the TC hint.
//
// Compiled only with the ndbapi build tag (make build-ndb). Built against NDB
// 7.5.0 and run against a live 7.5.0 cluster (the driver suite, the e2e
// suites in live mode, fault tests: README.md, tests/ndb); compile-checked
// against NDB 8.0 API headers (make check-ndb-shim).

#include "shim_internal.h"

namespace shim {

void setErr(char *err, int errlen, const std::string &msg) {
  if (err && errlen > 0) {
    size_t n = msg.size() < static_cast<size_t>(errlen - 1) ? msg.size() : static_cast<size_t>(errlen - 1);
    memcpy(err, msg.data(), n);
    err[n] = 0;
  }
}

std::string ndbErrText(const NdbError &e) {
  return std::to_string(e.code) + ": " + (e.message ? e.message : "");
}

// tableOf: the connection's records for a table id; null when unknown or
// let go by a failed refresh. Callers hold flightMu.
const TableRecs *tableOf(ndbgate_pool *pool, uint32_t id, size_t conn) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  if (id >= pool->tables.size() || conn >= pool->tables[id].size()) return nullptr;
  const TableRecs *r = &pool->tables[id][conn];
  return r->t && r->key && r->row ? r : nullptr;
}

// shimError sets a permanent error made by the shim (codes mapped in wire.go).
void shimError(NdbError &err, int code, NdbError::Classification cl, const char *msg) {
  err.code = code;
  err.status = NdbError::PermanentError;
  err.classification = cl;
  err.message = msg;
}

// notSent is an error of startTransaction: nothing reached NDB, so nothing
// was done, even where NDB classifies the code as unknown result (4009
// cluster failure). wire.go maps 4009 so marked to Unavailable.
NdbError notSent(const NdbError &in) {
  NdbError e = in;
  if (e.status == NdbError::UnknownResult) e.status = NdbError::TemporaryError;
  return e;
}

}  // namespace shim
