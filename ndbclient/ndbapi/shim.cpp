//go:build ndbapi

// ndbgate's NDB API shim: a thin C++ layer that turns one flat request buffer
// (a round of operations, format in wire.go) into NDB API transactions and
// writes their results into a flat response buffer.
//
// Execution: each Go executor goroutine owns one connection's Ndb object and
// makes one call per round. Plain transactions of a round are prepared with
// executeAsynchPrepare and sent with sendPollNdb, at most kMaxInFlight at a
// time; append/prepend and delete_all read before they write and run alone,
// synchronously, with nothing else outstanding on the Ndb object. Each
// transaction starts with its distribution-key values as the TC hint.
//
// Compiled only with the ndbapi build tag. Compile-checked against headers of
// mysql/mysql-server (see README.md); never run against a live cluster.

#include "shim.h"

#include <NdbApi.hpp>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <vector>

namespace {

// Operation kinds, lock modes and flags: the same numbers as wire.go.
enum OpKind : uint8_t {
  kRead = 1, kInsert, kUpdate, kWrite, kDelete, kCondUpdate, kAdd, kAppend, kDeleteAll
};
enum Flag : uint8_t {
  fTxnWithNext = 1, fHasCond = 2, fSubtract = 4, fCreate = 8, fPrepend = 16
};

// Interpreted-program exits (NdbOperation.hpp: applications use 626 or
// 6000-6999) and shim-made codes, mapped back to canonical errors in wire.go.
const Uint32 kExitCondFailed = 6000;
const Uint32 kExitNotNumeric = 6001;
const int kErrLinkedSync = 6002;  // append/delete_all linked into a transaction

// kMaxInFlight bounds the transactions prepared at once on one Ndb object
// (Ndb::init allows at most 1024 NdbTransaction objects).
const size_t kMaxInFlight = 512;
const int kNdbTransactions = 1024;
// A round polls in kPollMs steps; NDB completes every sent transaction itself
// (error 4012 after its own timeout), so the cap is a last resort.
const int kPollMs = 1000;
const int kMaxPolls = 600;

// kMaxMessage bounds an error message in a response (wire.go counts on it).
const size_t kMaxMessage = 200;

struct Reader {
  const unsigned char *p, *end;
  bool ok = true;
  bool need(size_t n) {
    if (static_cast<size_t>(end - p) < n) ok = false;
    return ok;
  }
  uint8_t u8() { if (!need(1)) return 0; return *p++; }
  uint16_t u16() { if (!need(2)) return 0; uint16_t v; memcpy(&v, p, 2); p += 2; return v; }
  uint32_t u32() { if (!need(4)) return 0; uint32_t v; memcpy(&v, p, 4); p += 4; return v; }
  uint64_t u64() { if (!need(8)) return 0; uint64_t v; memcpy(&v, p, 8); p += 8; return v; }
  const unsigned char *bytes(uint32_t n) {
    if (!need(n)) return nullptr;
    const unsigned char *b = p; p += n; return b;
  }
};

struct Writer {
  unsigned char *p, *end;
  size_t needed = 0;  // bytes wanted, even past end
  void put(const void *b, size_t n) {
    if (p && static_cast<size_t>(end - p) >= n) { memcpy(p, b, n); p += n; } else { p = nullptr; }
    needed += n;
  }
  void u8(uint8_t v) { put(&v, 1); }
  void u16(uint16_t v) { put(&v, 2); }
  void u32(uint32_t v) { put(&v, 4); }
  void i32(int32_t v) { put(&v, 4); }
};

struct Value {
  uint16_t col = 0;
  bool null = false;
  const unsigned char *data = nullptr;
  uint32_t len = 0;
};

struct Op {
  uint8_t kind = 0, lock = 0, flags = 0;
  uint32_t table = 0;
  std::vector<Value> key;
  std::vector<uint16_t> read;
  std::vector<Value> set;
  Value cond;
  uint16_t addCol = 0;
  uint64_t delta = 0, initial = 0;
  uint16_t appendCol = 0;
  const unsigned char *data = nullptr;
  uint32_t dataLen = 0;
  // results
  NdbOperation *nop = nullptr;  // valid until its transaction closes
  std::vector<NdbRecAttr *> attrs;
  NdbError err;
  bool failed = false;
  std::vector<unsigned char> appended;  // append: the value written
};

Value readValue(Reader &r, bool withNull) {
  Value v;
  v.col = r.u16();
  if (withNull) v.null = r.u8() != 0;
  v.len = r.u32();
  v.data = r.bytes(v.len);
  return v;
}

bool parseOp(Reader &r, Op &op) {
  op.kind = r.u8();
  op.lock = r.u8();
  op.flags = r.u8();
  r.u8();
  op.table = r.u32();
  uint16_t n = r.u16();
  for (uint16_t i = 0; i < n && r.ok; i++) op.key.push_back(readValue(r, false));
  n = r.u16();
  for (uint16_t i = 0; i < n && r.ok; i++) op.read.push_back(r.u16());
  n = r.u16();
  for (uint16_t i = 0; i < n && r.ok; i++) op.set.push_back(readValue(r, true));
  if ((op.flags & fHasCond) || op.kind == kCondUpdate) op.cond = readValue(r, true);
  if (op.kind == kAdd) {
    op.addCol = r.u16();
    op.delta = r.u64();
    op.initial = r.u64();
  }
  if (op.kind == kAppend) {
    op.appendCol = r.u16();
    op.dataLen = r.u32();
    op.data = r.bytes(op.dataLen);
  }
  return r.ok;
}

// An Ndb object is used by one thread at a time: ndb by the connection's
// executor, dict by describes (under ndbgate_pool::dictMu).
struct Conn {
  Ndb_cluster_connection *cluster = nullptr;
  Ndb *ndb = nullptr;
  Ndb *dict = nullptr;
};

}  // namespace

// Lock order: roundMu, then dictMu, then mu.
struct ndbgate_pool {
  std::vector<Conn> conns;
  // Rounds hold roundMu shared while they use table objects; a refresh holds
  // it exclusively, so it never frees a table object a round still uses.
  std::shared_mutex roundMu;
  std::mutex dictMu;      // serialises describes (the dict Ndb objects)
  std::shared_mutex mu;  // guards tables
  // tables[id][conn]: each connection uses the table object of its own
  // dictionary (held by that connection's dict Ndb).
  std::vector<std::vector<const NdbDictionary::Table *>> tables;
};

namespace {

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

const NdbDictionary::Table *tableOf(ndbgate_pool *pool, uint32_t id, size_t conn) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  return id < pool->tables.size() && conn < pool->tables[id].size() ? pool->tables[id][conn] : nullptr;
}

// distParts points parts at the key values of distribution-key columns, in
// column order (the Go side sends keys in column order), ends the list with a
// null pointer and returns the count. Values are in native format, length
// bytes included, as Ndb::computeHash and startTransaction expect.
int distParts(const NdbDictionary::Table *t, const std::vector<Value> &key, Ndb::Key_part_ptr *parts) {
  int n = 0;
  for (const Value &k : key) {
    const NdbDictionary::Column *c = t->getColumn(static_cast<int>(k.col));
    if (c && c->getPartitionKey() && n < NDB_MAX_NO_OF_ATTRIBUTES_IN_KEY) {
      parts[n].ptr = k.data;
      parts[n].len = k.len;
      n++;
    }
  }
  parts[n].ptr = nullptr;
  parts[n].len = 0;
  return n;
}

// startTx starts a transaction on the node holding the key's primary replica.
// Ndb.hpp: the (keyData, keyLen) hint only works for 4-byte aligned,
// non-character keys, so the Key_part_ptr form is used. A null xfrmbuf lets
// the API allocate one when a character column needs it.
NdbTransaction *startTx(Ndb *ndb, const NdbDictionary::Table *t, const std::vector<Value> &key) {
  Ndb::Key_part_ptr parts[NDB_MAX_NO_OF_ATTRIBUTES_IN_KEY + 1];
  if (key.empty() || distParts(t, key, parts) == 0) return ndb->startTransaction();
  return ndb->startTransaction(t, parts);
}

NdbOperation::LockMode lockOf(uint8_t l) {
  switch (l) {
    case 1: return NdbOperation::LM_Read;
    case 2: return NdbOperation::LM_Exclusive;
    default: return NdbOperation::LM_CommittedRead;
  }
}

bool setKey(NdbOperation *o, const Op &op) {
  for (const Value &k : op.key) {
    if (o->equal(static_cast<Uint32>(k.col), reinterpret_cast<const char *>(k.data)) != 0) return false;
  }
  return true;
}

bool setValues(NdbOperation *o, const Op &op) {
  for (const Value &v : op.set) {
    const char *p = v.null ? nullptr : reinterpret_cast<const char *>(v.data);
    if (o->setValue(static_cast<Uint32>(v.col), p) != 0) return false;
  }
  return true;
}

bool getValues(NdbOperation *o, Op &op) {
  for (uint16_t c : op.read) {
    NdbRecAttr *a = o->getValue(static_cast<Uint32>(c), nullptr);
    if (!a) return false;
    op.attrs.push_back(a);
  }
  return true;
}

// condition: exit with kExitCondFailed unless column == value (NULL == NULL).
bool addCondition(NdbOperation *o, const Value &c, Uint32 okLabel) {
  if (c.null) {
    if (o->branch_col_eq_null(static_cast<Uint32>(c.col), okLabel) != 0) return false;
  } else if (o->branch_col_eq(static_cast<Uint32>(c.col), c.data, c.len, false, okLabel) != 0) {
    return false;
  }
  return o->interpret_exit_nok(kExitCondFailed) == 0 && o->def_label(static_cast<int>(okLabel)) == 0;
}

// defineOp adds one operation of a plain transaction (no read-before-write).
bool defineOp(NdbTransaction *tx, const NdbDictionary::Table *t, Op &op) {
  NdbOperation *o = tx->getNdbOperation(t);
  if (!o) return false;
  op.nop = o;
  switch (op.kind) {
    case kRead:
      return o->readTuple(lockOf(op.lock)) == 0 && setKey(o, op) && getValues(o, op);
    case kInsert:
      return o->insertTuple() == 0 && setKey(o, op) && setValues(o, op);
    case kUpdate:
      return o->updateTuple() == 0 && setKey(o, op) && setValues(o, op);
    case kWrite:
      return o->writeTuple() == 0 && setKey(o, op) && setValues(o, op);
    case kDelete:
      if (!(op.flags & fHasCond)) return o->deleteTuple() == 0 && setKey(o, op);
      return o->interpretedDeleteTuple() == 0 && setKey(o, op) && addCondition(o, op.cond, 0) &&
             o->interpret_exit_ok() == 0;
    case kCondUpdate:
      return o->interpretedUpdateTuple() == 0 && setKey(o, op) && addCondition(o, op.cond, 0) &&
             o->interpret_exit_ok() == 0 && setValues(o, op) && getValues(o, op);
    case kAdd: {
      // Interpreted add: NULL -> NotNumeric; incr wraps, decr clamps at 0.
      // Registers: R1 = column, R2 = delta, R3 = result. Labels are defined
      // in order from 0, as NdbOperation::def_label expects.
      const Uint32 col = op.addCol;
      Uint32 label = 0;
      bool ok = o->interpretedUpdateTuple() == 0 && setKey(o, op);
      if (ok && (op.flags & fHasCond)) ok = addCondition(o, op.cond, label++);
      const Uint32 notNull = label++, sub = label++, end = label++;
      ok = ok && o->branch_col_ne_null(col, notNull) == 0 && o->interpret_exit_nok(kExitNotNumeric) == 0 &&
           o->def_label(static_cast<int>(notNull)) == 0 && o->read_attr(col, 1) == 0 &&
           o->load_const_u64(2, op.delta) == 0;
      if (!ok) return false;
      if (op.flags & fSubtract) {
        // branch_ge(L, R) jumps when R >= L: here when R1 >= R2.
        ok = o->branch_ge(2, 1, sub) == 0 && o->load_const_u64(3, 0) == 0 && o->branch_label(end) == 0 &&
             o->def_label(static_cast<int>(sub)) == 0 && o->sub_reg(1, 2, 3) == 0 &&
             o->def_label(static_cast<int>(end)) == 0;
      } else {
        ok = o->add_reg(1, 2, 3) == 0;  // wraps at 2^64
      }
      return ok && o->write_attr(col, 3) == 0 && o->interpret_exit_ok() == 0 && setValues(o, op) &&
             getValues(o, op);
    }
    case kAppend:
    case kDeleteAll:
      return false;  // read-before-write: run alone by ndbgate_execute
  }
  return false;
}

// varPrefix is the length-prefix size of a column's native format.
int varPrefix(const NdbDictionary::Column *c) {
  switch (c->getArrayType()) {
    case NdbDictionary::Column::ArrayTypeShortVar: return 1;
    case NdbDictionary::Column::ArrayTypeMediumVar: return 2;
    default: return 0;
  }
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

// runAppend: exclusive read of the column, then an update of the joined
// value, in one transaction. The result goes to op.appended.
bool runAppend(Ndb *ndb, const NdbDictionary::Table *t, Op &op, NdbError &err) {
  const NdbDictionary::Column *c = t->getColumn(static_cast<int>(op.appendCol));
  if (!c) { shimError(err, 4004, NdbError::SchemaError, "append column not in table"); return false; }
  NdbTransaction *tx = startTx(ndb, t, op.key);
  if (!tx) { err = notSent(ndb->getNdbError()); return false; }
  NdbOperation *r = tx->getNdbOperation(t);
  NdbRecAttr *cur = nullptr, *cas = nullptr;
  bool ok = r && r->readTuple(NdbOperation::LM_Exclusive) == 0 && setKey(r, op) &&
            (cur = r->getValue(static_cast<Uint32>(op.appendCol), nullptr)) != nullptr;
  if (ok && (op.flags & fHasCond)) ok = (cas = r->getValue(static_cast<Uint32>(op.cond.col), nullptr)) != nullptr;
  // AbortOnError: a missing row (626) fails here, not at the update.
  if (ok && tx->execute(NdbTransaction::NoCommit, NdbOperation::AbortOnError) != 0) {
    err = tx->getNdbError(); ndb->closeTransaction(tx); return false;
  }
  if (!ok) { err = tx->getNdbError(); ndb->closeTransaction(tx); return false; }
  if (cas && (cas->isNULL() != (op.cond.null ? 1 : 0) ||
              (!op.cond.null && (cas->get_size_in_bytes() != op.cond.len || memcmp(cas->aRef(), op.cond.data, op.cond.len) != 0)))) {
    shimError(err, static_cast<int>(kExitCondFailed), NdbError::ApplicationError, "condition failed");
    ndb->closeTransaction(tx);
    return false;
  }
  const int pre = varPrefix(c);
  std::vector<unsigned char> oldv;
  if (cur->isNULL() == 0) {
    const unsigned char *b = reinterpret_cast<const unsigned char *>(cur->aRef());
    uint32_t n = cur->get_size_in_bytes();
    if (n >= static_cast<uint32_t>(pre)) oldv.assign(b + pre, b + n);
  }
  const unsigned char *add = op.data + pre;  // Go encodes the data with the column's prefix
  uint32_t addLen = op.dataLen >= static_cast<uint32_t>(pre) ? op.dataLen - pre : 0;
  std::vector<unsigned char> joined;
  if (op.flags & fPrepend) { joined.assign(add, add + addLen); joined.insert(joined.end(), oldv.begin(), oldv.end()); }
  else { joined = oldv; joined.insert(joined.end(), add, add + addLen); }
  if (joined.size() > static_cast<size_t>(c->getLength())) {
    // too large: wire.go maps classification ApplicationError + code 1 to TooLarge
    shimError(err, 1, NdbError::ApplicationError, "appended value longer than the column");
    ndb->closeTransaction(tx);
    return false;
  }
  op.appended.clear();
  if (pre == 1) op.appended.push_back(static_cast<unsigned char>(joined.size()));
  if (pre == 2) { op.appended.push_back(joined.size() & 0xff); op.appended.push_back((joined.size() >> 8) & 0xff); }
  op.appended.insert(op.appended.end(), joined.begin(), joined.end());
  NdbOperation *u = tx->getNdbOperation(t);
  // No getValue here: the transaction closes below; the caller gets the
  // written value itself (op.appended).
  ok = u && u->updateTuple() == 0 && setKey(u, op) &&
       u->setValue(static_cast<Uint32>(op.appendCol), reinterpret_cast<const char *>(op.appended.data())) == 0 &&
       setValues(u, op);
  if (!ok || tx->execute(NdbTransaction::Commit) != 0) { err = tx->getNdbError(); ndb->closeTransaction(tx); return false; }
  ndb->closeTransaction(tx);
  return true;
}

// runDeleteAll: an exclusive scan deleting every row, committed in batches.
bool runDeleteAll(Ndb *ndb, const NdbDictionary::Table *t, NdbError &err, uint64_t &deleted) {
  NdbTransaction *tx = ndb->startTransaction();
  if (!tx) { err = notSent(ndb->getNdbError()); return false; }
  NdbScanOperation *s = tx->getNdbScanOperation(t);
  if (!s || s->readTuples(NdbOperation::LM_Exclusive) != 0 || tx->execute(NdbTransaction::NoCommit) != 0) {
    err = tx->getNdbError(); ndb->closeTransaction(tx); return false;
  }
  int rc;
  while ((rc = s->nextResult(true)) == 0) {
    do {
      if (s->deleteCurrentTuple() != 0) { err = s->getNdbError(); ndb->closeTransaction(tx); return false; }
      deleted++;
    } while ((rc = s->nextResult(false)) == 0);
    if (rc != 2 || tx->execute(NdbTransaction::NoCommit) != 0) break;
  }
  if (rc == -1 || tx->execute(NdbTransaction::Commit) != 0) {
    err = tx->getNdbError(); ndb->closeTransaction(tx); return false;
  }
  ndb->closeTransaction(tx);
  return true;
}

// One transaction of a round. Heap-allocated: a transaction NDB never
// completes is left open, and its callback may still fire later.
struct Txn {
  int first = 0, last = 0;  // ops [first, last]
  NdbTransaction *tx = nullptr;
  int result = 0;
  bool done = false;
  bool sync = false;  // append/delete_all: run alone
};

void onTxnDone(int result, NdbTransaction *, void *arg) {
  Txn *t = static_cast<Txn *>(arg);
  t->result = result;
  t->done = true;
}

void writeResult(Writer &w, Op &op, uint64_t affected) {
  w.i32(op.failed ? op.err.code : 0);
  w.u8(op.failed ? static_cast<uint8_t>(op.err.status) : 0);
  w.u8(op.failed ? static_cast<uint8_t>(op.err.classification) : 0);
  if (op.failed) {
    std::string msg = op.err.message ? op.err.message : "";
    if (msg.size() > kMaxMessage) msg.resize(kMaxMessage);
    w.u16(0);
    w.u32(static_cast<uint32_t>(msg.size()));
    w.put(msg.data(), msg.size());
    return;
  }
  w.u16(static_cast<uint16_t>(op.attrs.size()));
  for (NdbRecAttr *a : op.attrs) {
    if (a->isNULL() != 0) { w.u8(1); w.u32(0); continue; }
    w.u8(0);
    w.u32(a->get_size_in_bytes());
    w.put(a->aRef(), a->get_size_in_bytes());
  }
  w.u32(static_cast<uint32_t>(affected));
  if (op.kind == kAppend) {  // the value written, for the caller's size
    w.u32(static_cast<uint32_t>(op.appended.size()));
    w.put(op.appended.data(), op.appended.size());
  }
}

void failOps(std::vector<Op> &ops, const Txn &t, const NdbError &e) {
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    op.failed = true;
    op.err = e;
  }
}

// prepare defines a plain transaction and hands it to executeAsynchPrepare.
// false when nothing was prepared (the ops then carry the error).
bool prepare(ndbgate_pool *pool, size_t conn, Ndb *ndb, std::vector<Op> &ops, Txn &t) {
  Op &head = ops[static_cast<size_t>(t.first)];
  const NdbDictionary::Table *tbl = tableOf(pool, head.table, conn);
  if (!tbl) {
    NdbError e;
    shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate request");
    failOps(ops, t, e);
    return false;
  }
  t.tx = startTx(ndb, tbl, head.key);
  if (!t.tx) {
    failOps(ops, t, notSent(ndb->getNdbError()));
    return false;
  }
  bool ok = true;
  for (int k = t.first; k <= t.last && ok; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    const NdbDictionary::Table *ot = tableOf(pool, op.table, conn);
    ok = ot && defineOp(t.tx, ot, op);
  }
  if (!ok) {
    failOps(ops, t, t.tx->getNdbError());
    ndb->closeTransaction(t.tx);
    t.tx = nullptr;
    return false;
  }
  // A transaction of one op ignores nothing; a linked run aborts as a whole.
  t.tx->executeAsynchPrepare(NdbTransaction::Commit, onTxnDone, &t,
                             t.first == t.last ? NdbOperation::AO_IgnoreError : NdbOperation::AbortOnError);
  return true;
}

// collect sets the results of a completed transaction's ops.
void collect(std::vector<Op> &ops, const Txn &t, std::vector<uint64_t> &affected) {
  const NdbError &te = t.tx->getNdbError();
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    if (op.nop && op.nop->getNdbError().code != 0) {
      op.failed = true;
      op.err = op.nop->getNdbError();
    } else if (t.result != 0) {
      op.failed = true;
      op.err = te;
    } else {
      affected[static_cast<size_t>(k)] = op.kind == kRead ? 0 : 1;
    }
  }
}

void unknownResult(std::vector<Op> &ops, const Txn &t) {
  NdbError e;
  shimError(e, 4012, NdbError::UnknownResultError, "no answer from NDB for this transaction");
  e.status = NdbError::UnknownResult;  // it may or may not have committed
  failOps(ops, t, e);
}

}  // namespace

extern "C" {

ndbgate_pool *ndbgate_open(const char *connectstring, int connections, int timeout_s, char *err, int errlen) {
  static std::once_flag initOnce;
  std::call_once(initOnce, [] { ndb_init(); });
  ndbgate_pool *pool = new (std::nothrow) ndbgate_pool();
  if (!pool) { setErr(err, errlen, "out of memory"); return nullptr; }
  for (int i = 0; i < connections; i++) {
    Conn c;
    c.cluster = new Ndb_cluster_connection(connectstring);  // no fixed node id: any free API slot
    // connect(retries, delay_s, verbose): about timeout_s seconds in all.
    if (c.cluster->connect(timeout_s > 0 ? timeout_s : 1, 1, 0) != 0) {
      setErr(err, errlen, std::string("connect to management server ") + connectstring + ": " + c.cluster->get_latest_error_msg());
      delete c.cluster;
      ndbgate_close(pool);
      return nullptr;
    }
    if (c.cluster->wait_until_ready(timeout_s, timeout_s) < 0) {
      setErr(err, errlen, "no data node became ready");
      delete c.cluster;
      ndbgate_close(pool);
      return nullptr;
    }
    c.ndb = new Ndb(c.cluster);
    c.dict = new Ndb(c.cluster);
    if (c.ndb->init(kNdbTransactions) != 0 || c.dict->init(4) != 0) {
      setErr(err, errlen, ndbErrText(c.ndb->getNdbError().code != 0 ? c.ndb->getNdbError() : c.dict->getNdbError()));
      delete c.dict;
      delete c.ndb;
      delete c.cluster;
      ndbgate_close(pool);
      return nullptr;
    }
    pool->conns.push_back(c);
  }
  return pool;
}

void ndbgate_close(ndbgate_pool *pool) {
  if (!pool) return;
  for (Conn &c : pool->conns) {
    delete c.dict;  // releases the table objects
    delete c.ndb;
    delete c.cluster;
  }
  delete pool;
}

int ndbgate_ready(ndbgate_pool *pool, char *err, int errlen) {
  for (Conn &c : pool->conns) {
    // wait_until_ready: 0 all nodes live, > 0 at least one, < 0 none.
    if (c.cluster->wait_until_ready(0, 0) < 0) {
      setErr(err, errlen, "no data node reachable");
      return -1;
    }
  }
  return 0;
}

void ndbgate_pool_state(ndbgate_pool *pool, int *live_nodes, unsigned long long *connects) {
  // The fewest live nodes any connection sees, and every connection's
  // connect count (it grows on each reconnect after a loss).
  int live = -1;
  unsigned long long n = 0;
  for (Conn &c : pool->conns) {
    int r = c.cluster->get_no_ready();
    if (live < 0 || r < live) live = r;
    n += c.cluster->get_connect_count();
  }
  *live_nodes = live < 0 ? 0 : live;
  *connects = n;
}

int ndbgate_data_nodes(ndbgate_pool *pool) {
  return pool->conns.empty() ? 0 : static_cast<int>(pool->conns[0].cluster->no_db_nodes());
}

namespace {

// describeInto looks the table up in every connection's dictionary (dropping
// the cached copy first when invalidate is set), writes its shape into out
// and returns the per-connection table objects; empty on error. Called with
// dictMu held.
std::vector<const NdbDictionary::Table *> describeInto(ndbgate_pool *pool, const char *db, const char *table,
                                                       bool invalidate, unsigned char *out, int outlen, char *err,
                                                       int errlen) {
  std::vector<const NdbDictionary::Table *> byConn;
  for (Conn &c : pool->conns) {
    c.dict->setDatabaseName(db);
    NdbDictionary::Dictionary *dict = c.dict->getDictionary();
    if (invalidate) dict->invalidateTable(table);
    const NdbDictionary::Table *t = dict->getTable(table);
    if (!t) {
      setErr(err, errlen, std::string(db) + "." + table + ": " + ndbErrText(dict->getNdbError()));
      return {};
    }
    byConn.push_back(t);
  }
  const NdbDictionary::Table *t = byConn[0];
  Writer w{out, out + outlen};
  w.u32(t->getPartitionCount());  // == fragment count except for fully replicated tables
  w.u16(static_cast<uint16_t>(t->getNoOfColumns()));
  for (int i = 0; i < t->getNoOfColumns(); i++) {
    const NdbDictionary::Column *c = t->getColumn(i);
    std::string name = c->getName();
    w.u16(static_cast<uint16_t>(name.size()));
    w.put(name.data(), name.size());
    w.u8(static_cast<uint8_t>(c->getType()));
    w.u32(static_cast<uint32_t>(c->getLength()));
    w.u8(c->getNullable() ? 1 : 0);
    w.u8(static_cast<uint8_t>((c->getPrimaryKey() ? 1 : 0) | (c->getPartitionKey() ? 2 : 0)));
    w.u8(static_cast<uint8_t>(c->getArrayType()));
    w.u16(static_cast<uint16_t>(c->getPrecision()));
    w.u16(static_cast<uint16_t>(c->getScale()));
    w.u32(static_cast<uint32_t>(c->getSize() * c->getLength()));
  }
  if (!w.p) {
    setErr(err, errlen, "describe buffer too small");
    return {};
  }
  return byConn;
}

}  // namespace

int ndbgate_describe(ndbgate_pool *pool, const char *db, const char *table, unsigned char *out, int outlen,
                     char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::lock_guard<std::mutex> g(pool->dictMu);
  std::vector<const NdbDictionary::Table *> byConn = describeInto(pool, db, table, false, out, outlen, err, errlen);
  if (byConn.empty()) return -1;
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->tables.push_back(byConn);
  return static_cast<int>(pool->tables.size() - 1);
}

int ndbgate_refresh(ndbgate_pool *pool, int table_id, const char *db, const char *table, unsigned char *out,
                    int outlen, char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::unique_lock<std::shared_mutex> rg(pool->roundMu);
  std::lock_guard<std::mutex> g(pool->dictMu);
  {
    std::shared_lock<std::shared_mutex> tg(pool->mu);
    if (table_id < 0 || static_cast<size_t>(table_id) >= pool->tables.size()) {
      setErr(err, errlen, "bad table id");
      return -1;
    }
  }
  std::vector<const NdbDictionary::Table *> byConn = describeInto(pool, db, table, true, out, outlen, err, errlen);
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  if (byConn.empty()) {
    // The cached objects were let go: later requests for the id get error
    // 284 (unknown table) instead of a freed object.
    pool->tables[static_cast<size_t>(table_id)].assign(pool->conns.size(), nullptr);
    return -1;
  }
  pool->tables[static_cast<size_t>(table_id)] = byConn;
  return table_id;
}

int ndbgate_partition(ndbgate_pool *pool, int table_id, const unsigned char *key, const int *key_lens, int nparts) {
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // no refresh frees t meanwhile
  const NdbDictionary::Table *t = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!t || nparts <= 0 || nparts > NDB_MAX_NO_OF_ATTRIBUTES_IN_KEY) return -1;
  // key holds the primary-key values in column order; hash only those of
  // distribution-key columns (Ndb::computeHash wants exactly those).
  Ndb::Key_part_ptr parts[NDB_MAX_NO_OF_ATTRIBUTES_IN_KEY + 1];
  const unsigned char *p = key;
  int j = 0, n = 0;
  for (int i = 0; i < t->getNoOfColumns() && j < nparts; i++) {
    const NdbDictionary::Column *c = t->getColumn(i);
    if (!c->getPrimaryKey()) continue;
    if (c->getPartitionKey()) {
      parts[n].ptr = p;
      parts[n].len = static_cast<unsigned>(key_lens[j]);
      n++;
    }
    p += key_lens[j];
    j++;
  }
  if (n == 0) return -1;
  parts[n].ptr = nullptr;
  parts[n].len = 0;
  Uint32 hash = 0;
  if (Ndb::computeHash(&hash, t, parts, nullptr, 0) != 0) return -1;
  return static_cast<int>(t->getPartitionId(hash));
}

int ndbgate_primary_node(ndbgate_pool *pool, int table_id, int partition) {
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // no refresh frees t meanwhile
  const NdbDictionary::Table *t = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!t || partition < 0) return -1;
  Uint32 nodes[4];
  if (t->getFragmentNodes(static_cast<Uint32>(partition), nodes, 4) == 0) return -1;
  return static_cast<int>(nodes[0]);  // the primary replica comes first
}

int ndbgate_execute(ndbgate_pool *pool, int conn, const unsigned char *req, int reqlen, unsigned char *resp,
                    int resplen, char *err, int errlen) {
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size()) { setErr(err, errlen, "bad connection"); return -1; }
  const size_t ci = static_cast<size_t>(conn);
  Ndb *ndb = pool->conns[ci].ndb;
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // table objects stay alive for the round
  Reader r{req, req + reqlen};
  uint32_t n = r.u32();
  if (!r.ok || n > static_cast<uint32_t>(reqlen)) { setErr(err, errlen, "malformed request"); return -1; }
  std::vector<Op> ops(n);
  for (uint32_t i = 0; i < n; i++) {
    if (!parseOp(r, ops[i])) { setErr(err, errlen, "malformed request"); return -1; }
  }
  uint32_t needed = r.u32();  // the caller's bound on the response size
  if (!r.ok) { setErr(err, errlen, "malformed request"); return -1; }
  if (needed > static_cast<uint32_t>(resplen)) return -static_cast<int>(needed);

  // Cut the round into transactions.
  std::vector<Txn *> txns;
  std::vector<uint64_t> affected(n, 0);
  for (uint32_t i = 0; i < n;) {
    uint32_t j = i;
    while (j + 1 < n && (ops[j].flags & fTxnWithNext)) j++;
    Txn *t = new Txn();
    t->first = static_cast<int>(i);
    t->last = static_cast<int>(j);
    for (uint32_t k = i; k <= j; k++) t->sync = t->sync || ops[k].kind == kAppend || ops[k].kind == kDeleteAll;
    txns.push_back(t);
    i = j + 1;
  }

  // Results go out in op order, a batch of transactions at a time, before
  // the batch's transactions close (NdbRecAttr values live until then).
  Writer w{resp, resp + resplen};
  size_t i = 0;
  while (i < txns.size()) {
    if (txns[i]->sync) {
      Txn &t = *txns[i];
      Op &head = ops[static_cast<size_t>(t.first)];
      const NdbDictionary::Table *tbl = tableOf(pool, head.table, ci);
      NdbError e;
      if (t.first != t.last) {
        shimError(e, kErrLinkedSync, NdbError::ApplicationError, "append and delete_all cannot be linked into a transaction");
        failOps(ops, t, e);
      } else if (!tbl) {
        shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate request");
        failOps(ops, t, e);
      } else {
        bool ok = head.kind == kAppend ? runAppend(ndb, tbl, head, e)
                                       : runDeleteAll(ndb, tbl, e, affected[static_cast<size_t>(t.first)]);
        if (!ok) failOps(ops, t, e);
        else if (head.kind == kAppend) affected[static_cast<size_t>(t.first)] = 1;
      }
      for (int k = t.first; k <= t.last; k++) writeResult(w, ops[static_cast<size_t>(k)], affected[static_cast<size_t>(k)]);
      delete txns[i];
      txns[i] = nullptr;
      i++;
      continue;
    }
    // A batch: plain transactions up to the next synchronous one.
    size_t end = i;
    int prepared = 0;
    while (end < txns.size() && !txns[end]->sync && end - i < kMaxInFlight) {
      if (prepare(pool, ci, ndb, ops, *txns[end])) prepared++;
      end++;
    }
    // One send, then polls until NDB has answered every transaction.
    int remaining = prepared;
    for (int polls = 0; remaining > 0 && polls < kMaxPolls; polls++) {
      int got = polls == 0 ? ndb->sendPollNdb(kPollMs, remaining, 1) : ndb->pollNdb(kPollMs, remaining);
      if (got < 0) break;
      remaining = 0;
      for (size_t k = i; k < end; k++) remaining += (txns[k]->tx && !txns[k]->done) ? 1 : 0;
    }
    for (size_t k = i; k < end; k++) {
      Txn &t = *txns[k];
      if (t.tx && t.done) collect(ops, t, affected);
      else if (t.tx) unknownResult(ops, t);
      for (int o = t.first; o <= t.last; o++) writeResult(w, ops[static_cast<size_t>(o)], affected[static_cast<size_t>(o)]);
    }
    for (size_t k = i; k < end; k++) {
      Txn *t = txns[k];
      if (t->tx && !t->done) continue;  // still outstanding: closing it is not allowed; leak it and its Txn
      if (t->tx) ndb->closeTransaction(t->tx);
      delete t;
      txns[k] = nullptr;
    }
    i = end;
  }
  if (!w.p) {  // cannot happen within the caller's bound; never ask to run again
    setErr(err, errlen, "response larger than its bound");
    return -1;
  }
  return static_cast<int>(w.needed);
}

}  // extern "C"
