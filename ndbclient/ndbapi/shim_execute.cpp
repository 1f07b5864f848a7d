//go:build ndbapi

// Running a flight (ndbgate_execute): rows staged in the connection's arena,
// transactions started on the key's partition, operations defined and sent
// together, append/prepend and delete_all run alone, results written back,
// and transactions NDB never answered left behind (abandoned). Also the
// partition and primary node of a key (ndbgate_partition,
// ndbgate_primary_node).

#include "shim_internal.h"
#include <sched.h>

#include <algorithm>
#include <chrono>

namespace shim {

// expiryValid: the expire column is an INT, BIGINT or TIMESTAMP of the row
// record (wire.go checks the type).
static bool expiryValid(const Op &op) {
  const Layout &l = op.recs->layout;
  if (!inRecord(l, op.expireCol) || l.prefix[op.expireCol] != 0) return false;
  const uint32_t size = l.size[op.expireCol];
  if (expireIsTimestamp2(op)) return size >= 4 && size <= 8;
  return size == 4 || size == 8;
}

// expiredIn: row, the op's row as read, has expired: its expire column is
// neither NULL nor 0, and not after the flight's time. The rule of the
// interpreted expiry check (branchIfAlive) and of the embedded engine; the
// column compares as its type does, signed or not.
static bool expiredIn(const Op &op, const char *row) {
  const Layout &l = op.recs->layout;
  const uint16_t c = op.expireCol;
  if (isNullIn(l, row, c)) return false;
  const NdbDictionary::Column::Type type = op.recs->t->getColumn(c)->getType();
  uint64_t at = 0;
  if (type == NdbDictionary::Column::Timestamp2) {  // whole seconds, big endian; the fraction does not count
    const unsigned char *b = reinterpret_cast<const unsigned char *>(row + l.offset[c]);
    at = static_cast<uint64_t>(b[0]) << 24 | static_cast<uint64_t>(b[1]) << 16 | static_cast<uint64_t>(b[2]) << 8 | b[3];
  } else {
    memcpy(&at, row + l.offset[c], l.size[c]);  // little endian
  }
  if (at == 0) return false;
  if (type == NdbDictionary::Column::Int || type == NdbDictionary::Column::Bigint) {
    const int64_t v = l.size[c] == 4 ? static_cast<int32_t>(static_cast<uint32_t>(at)) : static_cast<int64_t>(at);
    return v <= static_cast<int64_t>(op.now);
  }
  return at <= op.now;
}

// fillRow writes the op's key (every primary-key column, nothing else) and
// the values it sets into op.in, marking the set columns in op.setMask, and
// checks the condition value.
bool fillRow(Op &op, NdbError &err) {
  const Layout &l = op.recs->layout;
  memset(op.in, 0, l.nullBytes);
  const char *bad = nullptr;
  // The Go side sends every primary-key column, in column order.
  if (op.key.size() != l.keyCols.size()) bad = "key does not give every primary-key column";
  for (size_t i = 0; i < op.key.size() && !bad; i++) {
    const Value &k = op.key[i];
    // Inserts and writes send the key columns as row data too (the kernel
    // stores them from there), so they go in the mask.
    unsigned char *mask = op.kind == kInsert || op.kind == kWrite ? op.setMask : nullptr;
    if (k.null || k.col != l.keyCols[i]) bad = "key values out of primary-key order";
    else bad = putValue(l, op.in, k, mask);
  }
  // A read's or delete's op.in holds only the key.
  if (!bad && (op.kind == kRead || op.kind == kDelete) && !op.set.empty()) bad = "reads and deletes set no values";
  for (const Value &v : op.set) {
    if (bad) break;
    if (v.col < l.isKey.size() && l.isKey[v.col]) bad = "a primary-key column cannot be set";
    else bad = putValue(l, op.in, v, op.setMask);
  }
  const bool hasCond = (op.flags & fHasCond) || op.kind == kCondUpdate;
  if (!bad && hasCond && !inRecord(l, op.cond.col)) bad = "condition column not in the table's row record";
  if (!bad && hasCond && !op.cond.null) bad = badValue(l, op.cond);  // NDB reads it by its own length
  if (!bad && (op.flags & fExpiry) && !expiryValid(op)) bad = "the expire column is not an INT, BIGINT or TIMESTAMP";
  if (bad) shimError(err, kErrBadValue, NdbError::ApplicationError, bad);
  return bad == nullptr;
}

// hashKey is Ndb::computeHash into a thread's own buffer: given none, NDB
// mallocs and frees one per call. NDB sizes its own at the key's length in
// words plus 8 bytes and never checks; this one holds four times NDB's
// largest key (a character key's transform may grow it).
static int hashKey(Uint32 *hash, const NdbRecord *keyRec, const char *keyRow) {
  thread_local Uint64 buf[(4 * 4 * NDB_MAX_KEYSIZE_IN_WORDS + 8) / sizeof(Uint64)];
  return Ndb::computeHash(hash, keyRec, keyRow, buf, sizeof(buf));
}

// startTx starts a transaction on the node holding the key's primary
// replica, as startTransaction(keyRecord, keyRow) does (Ndb.cpp): the API
// hashes the distribution-key columns of the key row (hashKey) and the table
// maps the hash to a partition. Done here, the key is hashed once and the partition is
// kept for the TC-on-primary count (onPrimary). fillRow has put every
// primary-key column in op.in (NDB tables always have a primary key, a
// hidden one if need be). On failure nothing was sent.
static bool partitionOf(Ndb *ndb, const Op &op, Uint32 &partition, NdbError &err) {
  if ((op.flags & fPartition) && op.partition < op.recs->t->getFragmentCount()) {
    // The dispatcher hashed the key to route the op (ndbgate_partition, the
    // same computation): the MD5 over the key is not done twice.
    partition = op.partition;
    return true;
  }
  Uint32 hash = 0;
  if (const int rc = hashKey(&hash, op.recs->key, op.in)) {
    err = notSent(ndb->getNdbError(rc));
    return false;
  }
  partition = op.recs->t->getPartitionId(hash);
  return true;
}

static NdbTransaction *startTx(Ndb *ndb, const Op &op, Uint32 &partition, NdbError &err) {
  if (!partitionOf(ndb, op, partition, err)) return nullptr;
  NdbTransaction *tx = ndb->startTransaction(op.recs->t, partition);
  if (!tx) err = notSent(ndb->getNdbError());
  return tx;
}

static NdbOperation::LockMode lockOf(uint8_t l) {
  switch (l) {
    case kLockShared: return NdbOperation::LM_Read;
    case kLockExclusive: return NdbOperation::LM_Exclusive;
    case kLockSimple: return NdbOperation::LM_SimpleRead;
    default: return NdbOperation::LM_CommittedRead;
  }
}

// readsRow: the op returns values in its result row (op.out): a read, or a
// write whose caller wants values back (the new counter, the new CAS).
static bool readsRow(const Op &op) {
  return op.kind == kRead || (op.kind != kAppend && op.kind != kDeleteAll && !op.read.empty());
}

// withAbort is operation options that give only the abort option.
static NdbOperation::OperationOptions withAbort(NdbOperation::AbortOption ao) {
  NdbOperation::OperationOptions o{};
  o.optionsPresent = NdbOperation::OperationOptions::OO_ABORTOPTION;
  o.abortOption = ao;
  return o;
}

// The two abort options of prepare's transactions, made once: building the
// options on the stack for each op, and copying them, was a fifth of
// ndbgate_execute's own samples in 100-key gets (store-forwarding stalls).
static const NdbOperation::OperationOptions kIgnoreErrorOpts = withAbort(NdbOperation::AO_IgnoreError);
static const NdbOperation::OperationOptions kAbortOnErrorOpts = withAbort(NdbOperation::AbortOnError);

static const NdbOperation::OperationOptions &abortOnly(NdbOperation::AbortOption ao) {
  return ao == NdbOperation::AbortOnError ? kAbortOnErrorOpts : kIgnoreErrorOpts;
}

// defineOp adds one operation of a plain transaction (no read-before-write).
// On a shim-made failure err is set; otherwise the transaction has the error.
//
// An update that returns values (the new counter of an incr) gets a second
// operation in its transaction: an exclusive read of the same key before it.
// NdbRecord updates take no extra getValues (error 4502), and a read placed
// after the update in the same batch would not see it: TC gives every
// operation of one execute the same savepoint, and a read sees the row as it
// was before its savepoint. The read's lock holds the row until commit, so
// finishReadBack computes the row after the update exactly (as ndbmemcache
// does for incr). A delete reads its row through its result row.
static bool defineOp(NdbTransaction *tx, Op &op, NdbOperation::AbortOption ao, NdbError &err) {
  // NDB forces AO_IgnoreError on committed reads, so one that fails would
  // not abort a linked run: inside a run reads take a shared lock.
  NdbOperation::LockMode lm = lockOf(op.lock);
  if (ao == NdbOperation::AbortOnError && lm == NdbOperation::LM_CommittedRead) lm = NdbOperation::LM_Read;
  const TableRecs &r = *op.recs;
  const Layout &l = r.layout;
  const NdbOperation::OperationOptions &plain = abortOnly(ao);
  const Uint32 optsSize = sizeof(plain);
  if (op.kind == kAdd && !addable(r.t->getColumn(op.addCol))) {
    shimError(err, kErrBadValue, NdbError::ApplicationError, "atomic add needs an INT or BIGINT column (signed or unsigned)");
    return false;
  }
  // A committed read checks its row's expiry once the row arrives
  // (collect), not in an interpreted program: building and sending the
  // program, and running it on the data node, cost more than reading one
  // more column. It locks nothing, so the answer is the same. A locking
  // read keeps the program: an expired row must fail it on the data node,
  // so that its linked run aborts as for a missing row.
  op.expiryAfter = op.kind == kRead && lm == NdbOperation::LM_CommittedRead && (op.flags & fExpiry);
  const NdbOperation::OperationOptions *opts = &plain;
  NdbOperation::OperationOptions programmed;
  if (hasProgram(op) && op.kind != kInsert && !op.expiryAfter) {
    programmed = plain;
    if (!attachProgram(op, programmed, err)) return false;
    opts = &programmed;
  }
  if (op.kind == kInsert && (op.flags & fExpiry)) {
    // An expired row still there would make the insert a duplicate: delete
    // it first, ignoring the delete's failure when the row is missing or
    // alive (the insert then answers for the row).
    NdbOperation::OperationOptions po{};
    po.optionsPresent = NdbOperation::OperationOptions::OO_ABORTOPTION;
    po.abortOption = NdbOperation::AO_IgnoreError;
    if (!attachPurge(op, po, err)) return false;
    op.purge = tx->deleteTuple(r.key, op.in, r.row, nullptr, nullptr, &po, sizeof(po));
    if (!op.purge) {
      err = tx->getNdbError();
      return false;
    }
  }
  const bool rows = readsRow(op);
  const bool readBack = rows && op.kind != kRead && op.kind != kDelete;
  if (readBack && op.kind != kUpdate && op.kind != kCondUpdate && op.kind != kAdd) {
    shimError(err, kErrBadValue, NdbError::ApplicationError, "only reads, deletes and updates return values");
    return false;
  }
  if (rows) {
    for (uint16_t c : op.read) {
      if (!inRecord(l, c)) {
        shimError(err, kErrBadValue, NdbError::ApplicationError, "read column not in the table's row record");
        return false;
      }
      setBit(op.readMask, c);
    }
    // A committed read completes when its row arrives; one that reads no
    // column gets nothing back and never completes. An existence check
    // reads the first key column, which writeResult does not return.
    if (op.kind == kRead && op.read.empty() && !l.keyCols.empty()) setBit(op.readMask, l.keyCols[0]);
    if (op.expiryAfter) setBit(op.readMask, op.expireCol);  // fillRow checked the column
  }
  if (readBack) {
    op.readBack = tx->readTuple(r.key, op.in, r.row, op.out, NdbOperation::LM_Exclusive, op.readMask, &plain, optsSize);
    if (!op.readBack) {
      err = tx->getNdbError();
      return false;
    }
  }
  switch (op.kind) {
    case kRead:
      op.nop = tx->readTuple(r.key, op.in, r.row, op.out, lm, op.readMask, opts, optsSize);
      break;
    case kInsert:
      op.nop = tx->insertTuple(r.key, op.in, r.row, op.in, op.setMask, opts, optsSize);
      break;
    case kUpdate:
    case kCondUpdate:
    case kAdd:
      op.nop = tx->updateTuple(r.key, op.in, r.row, op.in, op.setMask, opts, optsSize);
      break;
    case kWrite:
      op.nop = tx->writeTuple(r.key, op.in, r.row, op.in, op.setMask, opts, optsSize);
      break;
    case kDelete:
      op.nop = tx->deleteTuple(r.key, op.in, r.row, rows ? op.out : nullptr, rows ? op.readMask : nullptr, opts,
                               optsSize);
      break;
    default:
      shimError(err, kErrLinkedSync, NdbError::ApplicationError, "append and delete_all cannot be linked into a transaction");
      return false;
  }
  if (!op.nop) {
    err = tx->getNdbError();
    return false;
  }
  return true;
}

// finishReadBack turns the row read before an update (defineOp) into the row
// after it: the columns the update set take their new values, and an atomic
// add's column the value the kernel's program wrote. Registers are 64-bit and
// a 32-bit column is read zero-extended (DbtupExecQuery READ_ATTR_INTO_REG):
// incr wraps, decr clamps at 0 as unsigned, the result keeps the column's width.
static void finishReadBack(Op &op) {
  const Layout &l = op.recs->layout;
  for (const Value &v : op.set) {
    setNullIn(l, op.out, v.col, v.null);
    if (!v.null) memcpy(op.out + l.offset[v.col], op.in + l.offset[v.col], l.size[v.col]);
  }
  if (op.kind != kAdd || isNullIn(l, op.out, op.addCol)) return;
  const uint32_t width = l.size[op.addCol];  // 4 or 8: addable() refused the rest
  uint64_t old = 0;
  memcpy(&old, op.out + l.offset[op.addCol], width);  // little endian, zero-extended
  uint64_t now;
  if (op.flags & fSubtract) now = old >= op.delta ? old - op.delta : 0;
  else now = old + op.delta;
  memcpy(op.out + l.offset[op.addCol], &now, width);
}

// runAppend: exclusive read of the column, then an update of the joined
// value, in one transaction. The result goes to op.appended.
static bool runAppend(Ndb *ndb, Op &op, NdbError &err) {
  const TableRecs &r = *op.recs;
  const Layout &l = r.layout;
  const uint16_t ac = op.appendCol;
  const bool hasCond = (op.flags & fHasCond) != 0;
  if (!inRecord(l, ac) || l.isKey[ac] || l.prefix[ac] == 0) {
    shimError(err, kErrBadValue, NdbError::ApplicationError, "append needs a VARCHAR or VARBINARY column outside the key");
    return false;
  }
  if (!fillRow(op, err)) return false;
  const bool expiry = (op.flags & fExpiry) != 0;  // fillRow checked the column
  Uint32 partition = 0;
  NdbTransaction *tx = startTx(ndb, op, partition, err);
  if (!tx) return false;
  setBit(op.readMask, ac);
  if (expiry) setBit(op.readMask, op.expireCol);
  const NdbOperation *rd = tx->readTuple(r.key, op.in, r.row, op.out, NdbOperation::LM_Exclusive, op.readMask);
  // AbortOnError: a missing row (626) fails here, not at the update.
  if (!rd || tx->execute(NdbTransaction::NoCommit, NdbOperation::AbortOnError) != 0) {
    err = tx->getNdbError(); ndb->closeTransaction(tx); return false;
  }
  // The row is locked: its expiry cannot change before the update.
  if (expiry && expiredIn(op, op.out)) {
    shimError(err, kExitExpired, NdbError::NoDataFound, "Tuple expired");
    ndb->closeTransaction(tx);
    return false;
  }
  const uint32_t pre = l.prefix[ac];
  const unsigned char *old = nullptr;
  uint32_t oldLen = 0;
  if (!isNullIn(l, op.out, ac)) {
    old = reinterpret_cast<const unsigned char *>(op.out) + l.offset[ac] + pre;
    uint32_t n = valueLen(l, op.out, ac);
    oldLen = n >= pre ? n - pre : 0;
  }
  // Go encodes the data with the column's prefix.
  const uint32_t addLen = op.data && op.dataLen >= pre ? op.dataLen - pre : 0;
  const unsigned char *add = addLen > 0 ? op.data + pre : nullptr;
  const size_t total = static_cast<size_t>(oldLen) + addLen;
  // The slot holds the column's longest value with its prefix
  // (getSizeInBytesForRecord), so it alone bounds the joined value.
  if (pre + total > l.size[ac]) {
    // too large: wire.go maps classification ApplicationError + code 1 to TooLarge
    shimError(err, 1, NdbError::ApplicationError, "appended value longer than the column");
    ndb->closeTransaction(tx);
    return false;
  }
  op.appended.clear();
  op.appended.push_back(static_cast<unsigned char>(total & 0xff));
  if (pre == 2) op.appended.push_back(static_cast<unsigned char>((total >> 8) & 0xff));
  if (op.flags & fPrepend) {
    if (add) op.appended.insert(op.appended.end(), add, add + addLen);
    if (old) op.appended.insert(op.appended.end(), old, old + oldLen);
  } else {
    if (old) op.appended.insert(op.appended.end(), old, old + oldLen);
    if (add) op.appended.insert(op.appended.end(), add, add + addLen);
  }
  setNullIn(l, op.in, ac, false);
  memcpy(op.in + l.offset[ac], op.appended.data(), op.appended.size());
  setBit(op.setMask, ac);
  // The condition (CAS) is checked by the kernel, as for a CAS update, so
  // both compare the same way (character columns by their collation); the
  // row has been locked since the read. No read back: the transaction
  // closes below; the caller gets the written value itself (op.appended).
  NdbOperation::OperationOptions opts{};
  if (hasCond && !attachProgram(op, opts, err)) {
    ndb->closeTransaction(tx);
    return false;
  }
  const NdbOperation *up = tx->updateTuple(r.key, op.in, r.row, op.in, op.setMask, &opts, sizeof(opts));
  if (!up || tx->execute(NdbTransaction::Commit) != 0) { err = tx->getNdbError(); ndb->closeTransaction(tx); return false; }
  ndb->closeTransaction(tx);
  return true;
}

// runDeleteAll: an exclusive scan whose rows are deleted a batch at a time,
// each batch in a transaction of its own that takes the scan's locks over
// and commits (as ndbmemcache's flush does): one transaction for the whole
// table would hold an operation record and a lock per row. deleted counts
// the rows of committed batches, also when a later batch fails (the caller
// reports it with the error).
static bool runDeleteAll(Ndb *ndb, const TableRecs &r, NdbError &err, uint64_t &deleted) {
  NdbTransaction *tx = ndb->startTransaction();
  if (!tx) { err = notSent(ndb->getNdbError()); return false; }
  NdbScanOperation::ScanOptions so{};
  so.optionsPresent = NdbScanOperation::ScanOptions::SO_SCANFLAGS;
  so.scan_flags = NdbScanOperation::SF_KeyInfo;  // deleteCurrentTuple needs the keys
  NdbScanOperation *s = tx->scanTable(r.key, NdbOperation::LM_Exclusive, nullptr, &so, sizeof(so));
  if (!s || tx->execute(NdbTransaction::NoCommit) != 0) {
    err = tx->getNdbError(); ndb->closeTransaction(tx); return false;
  }
  const char *row = nullptr;
  int rc;
  while ((rc = s->nextResult(&row, true, false)) == 0) {
    NdbTransaction *del = ndb->startTransaction();
    if (!del) { err = notSent(ndb->getNdbError()); ndb->closeTransaction(tx); return false; }
    uint64_t batch = 0;
    do {
      if (!s->deleteCurrentTuple(del, r.key)) {
        err = s->getNdbError(); ndb->closeTransaction(del); ndb->closeTransaction(tx); return false;
      }
      batch++;
    } while ((rc = s->nextResult(&row, false, false)) == 0);
    if (del->execute(NdbTransaction::Commit) != 0) {
      err = del->getNdbError(); ndb->closeTransaction(del); ndb->closeTransaction(tx); return false;
    }
    ndb->closeTransaction(del);
    deleted += batch;
    if (rc != 2) break;  // 1: no more rows; -1: error
  }
  if (rc == -1) { err = tx->getNdbError(); ndb->closeTransaction(tx); return false; }
  ndb->closeTransaction(tx);  // the scan read only: nothing to commit
  return true;
}

// One transaction of a flight. Heap-allocated: a transaction NDB never
// completes is left open, and its callback may still fire later.
struct Txn {
  int first = 0, last = 0;  // ops [first, last]
  NdbTransaction *tx = nullptr;
  int node = -1;  // tx's TC node (opened)
  bool owedRead = false;   // counted in Conn.owedReadsOn
  bool owedWrite = false;  // counted in Conn.owedWrites
  int result = 0;
  bool done = false;
  bool sync = false;    // append/delete_all: run alone
  bool unsent = false;  // refused before it was prepared (notSentFull)
  bool shared = false;  // independent committed reads (sharedRead) in one transaction
};

// sharedRead: an op that may share its transaction with the committed reads
// next to it in the flight. Each read a transaction of its own costs the data
// node a TC record, a TCKEYREQ and a TCKEYCONF per key, and the API a
// start and a close: most of a multi-get's cost in NDB (flexAsynch reads 4x
// the keys per CPU second with 100 reads per transaction). Committed reads
// take no locks and NDB runs them with AO_IgnoreError, so one read's miss or
// program exit fails only that read; a failure of the transaction (a node
// failure, a timeout) fails them all, each with a retriable error.
static bool sharedRead(const Op &op) {
  return op.kind == kRead && lockOf(op.lock) == NdbOperation::LM_CommittedRead && !(op.flags & fTxnWithNext);
}

// The executor Ndb's transactions by TC node (Conn.openOn): opened counts
// one in, closeTx one out.
static void opened(Conn &c, Txn &t) {
  const Uint32 n = t.tx->getConnectedNodeId();
  if (n >= c.openOn.size()) return;
  t.node = static_cast<int>(n);
  if (++c.openOn[n] > c.pooledOn[n]) c.pooledOn[n] = c.openOn[n];
}

static void closeTx(Conn &c, Ndb *ndb, Txn &t) {
  if (t.node >= 0) c.openOn[static_cast<size_t>(t.node)]--;
  ndb->closeTransaction(t.tx);
  t.tx = nullptr;
}

// growPool seizes kPoolMargin connection records more from node n while it
// answers, so that a transaction on it seldom has to seize one: a node that
// stops answering then holds up no startTransaction until its records are
// all in use, by which time it owes answers, and stalled says so.
static void growPool(Conn &c, Ndb *ndb, const Op &op, Uint32 partition, Uint32 n) {
  NdbTransaction *extra[kPoolMargin];
  int got = 0;
  for (; got < kPoolMargin; got++) {
    extra[got] = ndb->startTransaction(op.recs->t, partition);
    if (!extra[got] || extra[got]->getConnectedNodeId() != n) break;
  }
  for (int k = 0; k < got; k++) ndb->closeTransaction(extra[k]);
  if (got < kPoolMargin && extra[got]) ndb->closeTransaction(extra[got]);
  c.pooledOn[n] += got;
}

// stalled: a transaction on the node holding partition's primary replica
// would have to seize a connection record from that node, waiting for its
// answer inside startTransaction (Ndb::NDB_connect, up to two minutes).
// It is not started when the node owes the connection reads (which need
// no other node: it has stopped answering), nor when the node owes the
// connection answers and has sent none for stall_us: waiting for a node
// that may have stopped would hold up the executor and every flight
// behind it. A node that owes nothing has not stopped answering, however
// long ago its last answer came: a connection idle for stall_us, then
// given a burst, must send it. Otherwise the pool grows while the node
// answers (growPool).
static bool stalled(Conn &c, Ndb *ndb, const Op &op, Uint32 partition, int stall_us) {
  if (stall_us <= 0) return false;
  Uint32 nodes[4];
  if (op.recs->t->getFragmentNodes(partition, nodes, 4) == 0 || nodes[0] >= c.openOn.size()) return false;
  const Uint32 n = nodes[0];
  if (c.openOn[n] < c.pooledOn[n]) return false;
  if (c.owedReadsOn[n] > 0) return true;
  if (c.owedOn[n] > 0 && std::chrono::steady_clock::now() - c.answeredOn[n] > std::chrono::microseconds(stall_us)) {
    return true;
  }
  growPool(c, ndb, op, partition, n);
  return false;
}

// readOnly: every op of t reads.
static bool readOnly(const std::vector<Op> &ops, const Txn &t) {
  for (int k = t.first; k <= t.last; k++) {
    if (ops[static_cast<size_t>(k)].kind != kRead) return false;
  }
  return true;
}

static void onTxnDone(int result, NdbTransaction *, void *arg) {
  Txn *t = static_cast<Txn *>(arg);
  t->result = result;
  t->done = true;
}

// reapAbandoned closes the abandoned transactions NDB has answered since they
// were left: their callback ran in a later poll of the same Ndb object, and a
// completed transaction may be closed (as every answered one is); NDB writes
// nothing more into its rows after that. An arena goes once none of its
// transactions is open.
static void reapAbandoned(Conn &c) {
  for (size_t i = 0; i < c.abandoned.size();) {
    std::vector<Txn *> &txns = c.abandoned[i].txns;
    size_t open = 0;
    for (Txn *t : txns) {
      if (t->done) {
        closeTx(c, c.ndb, *t);
        delete t;
        c.abandonedTxns--;
      } else {
        txns[open++] = t;
      }
    }
    txns.resize(open);
    if (open > 0) {
      i++;
    } else {
      if (i + 1 < c.abandoned.size()) c.abandoned[i] = std::move(c.abandoned.back());
      c.abandoned.pop_back();
    }
  }
}

// dropAbandoned forgets the abandoned transactions once their Ndb object has
// been deleted (which released them; no callback can run after that).
void dropAbandoned(Conn &c) {
  for (Parked &p : c.abandoned) {
    for (Txn *t : p.txns) delete t;
  }
  c.abandoned.clear();
  c.abandonedTxns = 0;
}

// loseOwed forgets the owed sections once their Ndb object has been deleted
// (which released their transactions): their tickets go to c.lost, for
// ndbgate_collect to report.
void loseOwed(Conn &c) {
  for (Owed *o : c.owed) {
    for (const OwedSection &sec : o->sections) {
      if (!sec.reported) c.lost.push_back(sec.ticket);
    }
    for (Txn *t : o->txns) delete t;
    delete o;
  }
  c.owed.clear();
  c.owedTxns = 0;
  std::fill(c.owedOn.begin(), c.owedOn.end(), 0);
  std::fill(c.owedReadsOn.begin(), c.owedReadsOn.end(), 0);
  c.owedWrites = 0;
}

// writeValue writes col of an NdbRecord row as a result value: u8 null,
// u32 len, the native bytes (length prefix included).
void writeValue(Writer &w, const Layout &l, const char *row, uint16_t col) {
  if (isNullIn(l, row, col)) {
    w.u8(1);
    w.u32(0);
    return;
  }
  const uint32_t n = valueLen(l, row, col);
  w.u8(0);
  w.u32(n);
  w.put(row + l.offset[col], n);
}

static void writeResult(Writer &w, Op &op, uint64_t affected) {
  w.i32(op.failed ? op.err.code : 0);
  w.u8(op.failed ? static_cast<uint8_t>(op.err.status) : 0);
  w.u8(op.failed ? static_cast<uint8_t>(op.err.classification) : 0);
  if (op.failed) {
    std::string msg = op.err.message ? op.err.message : "";
    if (msg.size() > kMaxMessage) msg.resize(kMaxMessage);
    w.u16(0);
    w.u32(static_cast<uint32_t>(msg.size()));
    w.put(msg.data(), msg.size());
    // A failed delete_all has still removed the rows of the batches it
    // committed; every other failed op changed nothing (0).
    w.u32(static_cast<uint32_t>(affected));
    return;
  }
  if (readsRow(op)) {
    const Layout &l = op.recs->layout;
    w.u16(static_cast<uint16_t>(op.read.size()));
    for (uint16_t c : op.read) writeValue(w, l, op.out, c);
  } else {  // append and delete_all return no row (append: the value written, below)
    w.u16(0);
  }
  w.u32(static_cast<uint32_t>(affected));
  if (op.kind == kAppend) {  // the value written, for the caller's size
    w.u32(static_cast<uint32_t>(op.appended.size()));
    w.put(op.appended.data(), op.appended.size());
  }
}

static void failOps(std::vector<Op> &ops, const Txn &t, const NdbError &e) {
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    op.failed = true;
    op.err = e;
  }
}

// onPrimary: the transaction's TC runs on the node that the dictionary lists
// first for the key's partition, its primary replica. That list is what
// startTransaction's hint chooses by, and what the dispatcher's lanes use.
static bool onPrimary(NdbTransaction *tx, const Op &op, Uint32 partition) {
  // A table reorganised since it was described: its partitions and primaries
  // here are the old ones, so the hint may well have missed. Not counted as
  // on the primary until the driver describes it again.
  if (op.recs->t->getObjectStatus() != NdbDictionary::Object::Retrieved) return false;
  Uint32 nodes[4];
  if (op.recs->t->getFragmentNodes(partition, nodes, 4) == 0) return false;
  return nodes[0] == tx->getConnectedNodeId();
}

// HintCount accumulates a flight's onPrimary counts for ndbgate_hint_stats.
struct HintCount {
  uint64_t hinted = 0, primary = 0;
};

// pollFor sends the prepared transactions and polls NDB's sockets without
// sleeping (NdbWaitGroup::wait with a zero timeout) until one of them has
// its answer or poll_us have passed, and collects what has answered (their
// callbacks run); the flight then waits for the rest with pollNdb, as any
// flight does. A data node answers in about 100 µs: sleeping for it costs
// a wake-up, which on a VM is most of a lone request's time. The group
// never waits with a timeout: NDB 7.5's MultiNdbWakeupHandler leaves its
// `woken` flag uninitialised and never clears it, so once it is set (by
// whatever the heap held) every wait returns at once, and a flight that
// waited through the group for a slow answer spun through its last resort
// in a millisecond and failed with 4012 (8.0 clears the flag after a wait,
// but still never initialises it). Returns false, with nothing sent, when
// the connection cannot make its wait group.
static bool pollFor(Conn &cn, Ndb *ndb, int poll_us) {
  if (!cn.pollGroup) cn.pollGroup = cn.cluster->create_ndb_wait_group(kPollGroupSize);
  if (!cn.pollGroup || cn.pollGroup->push(ndb) != 0) return false;
  ndb->sendPreparedTransactions(1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(poll_us);
  int ready = cn.pollGroup->wait(0, 100);
  while (ready == 0 && std::chrono::steady_clock::now() < until) {
    // Offer the CPU between polls, as the epoll loops do: the data node's
    // thread that owes the answer may be waiting for this very CPU, all
    // the more with memcache.halt_poll, whose loops leave no CPU idle.
    sched_yield();
    ready = cn.pollGroup->wait(0, 100);
  }
  while (cn.pollGroup->pop() != nullptr) {
  }
  ndb->pollNdb(0, 1);
  return true;
}

// notSentStalled fails t's ops, not sent: their node has stopped answering
// (stalled). Nothing was applied, so the dispatcher may try them again.
static void notSentStalled(std::vector<Op> &ops, const Txn &t) {
  NdbError e;
  shimError(e, 4012, NdbError::TimeoutExpired, "not sent: the data node has stopped answering");
  e.status = NdbError::TemporaryError;
  failOps(ops, t, e);
}

// prepare defines a plain transaction and hands it to executeAsynchPrepare.
// false when nothing was prepared (the ops then carry the error).
static bool prepare(Conn &cn, std::vector<Op> &ops, Txn &t, HintCount &hints, int stall_us) {
  Ndb *ndb = cn.ndb;
  NdbError e;
  int head = -1;  // the first op that will run: its key is the hint
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    bool ok = op.recs != nullptr;
    if (!ok) shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate request");
    else ok = fillRow(op, e);
    if (!ok && !t.shared) { failOps(ops, t, e); return false; }
    if (!ok) {  // shared reads are independent: only this one fails
      op.failed = true;
      op.err = e;
    } else if (head < 0) {
      head = k;
    }
  }
  if (head < 0) return false;  // every shared read failed
  Uint32 partition = 0;
  const Op &hint = ops[static_cast<size_t>(head)];
  NdbError pe;  // e may hold a shared read's refusal
  if (!partitionOf(ndb, hint, partition, pe)) {
    failOps(ops, t, pe);
    return false;
  }
  if (stalled(cn, ndb, hint, partition, stall_us)) {
    notSentStalled(ops, t);
    return false;
  }
  t.tx = ndb->startTransaction(hint.recs->t, partition);
  if (!t.tx) {
    failOps(ops, t, notSent(ndb->getNdbError()));
    return false;
  }
  opened(cn, t);
  hints.hinted++;
  if (onPrimary(t.tx, ops[static_cast<size_t>(head)], partition)) hints.primary++;
  // A transaction of one op, or of shared reads, ignores each op's own
  // failure; a linked run aborts as a whole.
  const NdbOperation::AbortOption ao =
      t.first == t.last || t.shared ? NdbOperation::AO_IgnoreError : NdbOperation::AbortOnError;
  bool ok = true;
  int defined = 0;
  e = NdbError();  // a shared read's refusal above must not pass for a later op's
  for (int k = t.first; k <= t.last && ok; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    if (op.failed) continue;
    ok = defineOp(t.tx, op, ao, e);
    if (ok) {
      defined++;
    } else if (t.shared && e.code != 0) {  // a shim-made refusal of one read
      op.failed = true;
      op.err = e;
      e = NdbError();
      ok = true;
    }
  }
  if (ok && defined == 0) {
    closeTx(cn, ndb, t);
    return false;
  }
  if (!ok) {
    failOps(ops, t, e.code != 0 ? e : t.tx->getNdbError());
    closeTx(cn, ndb, t);
    return false;
  }
  t.tx->executeAsynchPrepare(NdbTransaction::Commit, onTxnDone, &t, ao);
  return true;
}

// collect sets the results of a completed transaction's ops. expired counts
// the ops that found their row expired: a program's or collect's own miss,
// and an insert whose purge deleted the row (memcached counts a store over
// an expired item in get_expired too).
static void collect(std::vector<Op> &ops, const Txn &t, std::vector<uint64_t> &affected, uint64_t &expired) {
  const NdbError &te = t.tx->getNdbError();
  // A purge's failure is ignored by design; the transaction then commits
  // with an error recorded, so its ops stand if it committed.
  bool purged = false;
  for (int k = t.first; k <= t.last; k++) purged = purged || ops[static_cast<size_t>(k)].purge;
  const bool committed = t.tx->commitStatus() == NdbTransaction::Committed;
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    if (op.failed) continue;  // a shared read refused before it was sent
    if (op.purge && committed && op.purge->getNdbError().code == 0) expired++;
    if (op.nop && op.nop->getNdbError().code != 0) {
      op.failed = true;
      op.err = op.nop->getNdbError();
      if (op.err.code == static_cast<int>(kExitExpired)) expired++;
    } else if (op.readBack && op.readBack->getNdbError().code != 0) {
      op.failed = true;
      op.err = op.readBack->getNdbError();
    } else if (t.result != 0 && !(purged && committed)) {
      op.failed = true;
      op.err = te;
    } else if (op.expiryAfter && expiredIn(op, op.out)) {
      op.failed = true;  // a miss, as the program's exit would have made it
      shimError(op.err, kExitExpired, NdbError::NoDataFound, "Tuple expired");
      expired++;
    } else {
      if (op.readBack) finishReadBack(op);
      affected[static_cast<size_t>(k)] = op.kind == kRead ? 0 : 1;
    }
  }
}

static void unknownResult(std::vector<Op> &ops, const Txn &t) {
  NdbError e;
  shimError(e, 4012, NdbError::UnknownResultError, "no answer from NDB for this transaction");
  e.status = NdbError::UnknownResult;  // it may or may not have committed
  failOps(ops, t, e);
}

// SectionMarks writes each section's status byte (0: its results follow)
// before its first op's result, for flights that wait for every answer.
struct SectionMarks {
  const unsigned int *sections;
  size_t n;
  size_t next = 0;
  uint32_t at = 0;  // the op where section next starts
  void before(Writer &w, uint32_t op) {
    if (next < n && op == at) {
      w.u8(0);
      at = sections[kSectionWords * next + 1];
      next++;
    }
  }
};

// sectionsMayWait: the flight may return before NDB answers some of its
// sections (runSections): it has sections and a wait, and only plain
// transactions, all in one batch.
static bool sectionsMayWait(const std::vector<Txn *> &txns, size_t ns, int wait_us) {
  if (ns == 0 || wait_us <= 0 || txns.size() > kMaxInFlight) return false;
  for (const Txn *t : txns) {
    if (t->sync) return false;
  }
  return true;
}

// answered: every transaction of txns [from, to) that was sent has its answer.
static bool answered(const std::vector<Txn *> &txns, size_t from, size_t to) {
  for (size_t k = from; k < to; k++) {
    if (txns[k]->tx && !txns[k]->done) return false;
  }
  return true;
}

// notSentFull fails t's ops, not sent: the connection owes too many
// unanswered transactions already. Nothing was applied, so the dispatcher
// may try them again.
static void notSentFull(std::vector<Op> &ops, Txn &t) {
  NdbError e;
  shimError(e, 4012, NdbError::TimeoutExpired, "not sent: the data nodes have not answered this connection's earlier transactions");
  e.status = NdbError::TemporaryError;
  failOps(ops, t, e);
  t.unsent = true;
}

// runSections runs a flight of sections (ndbgate_execute) as one batch: one
// send, then polls until NDB has answered every section or its wait has
// passed (a section's third number, in microseconds). Each answered
// section's results go out after a 0; each other one gets a 1, and its
// transactions and ops go to the connection's owed flights, for
// ndbgate_collect. A data node that stops answering so holds up only the
// sections with keys on it, not the flight's other ones.
static void runSections(ndbgate_pool *pool, Conn &cn, std::vector<Op> &ops, std::vector<uint64_t> &affected,
                        std::vector<Txn *> &txns, const unsigned int *sections, size_t ns, int poll_us,
                        int stall_us, Writer &w) {
  Ndb *ndb = cn.ndb;
  HintCount hints;
  uint64_t expired = 0;
  const auto begin = std::chrono::steady_clock::now();
  // sectionEnd[k]: the end of section k's transactions in txns.
  std::vector<size_t> sectionEnd(ns);
  for (size_t k = 0, t = 0; k < ns; k++) {
    while (t < txns.size() && static_cast<uint32_t>(txns[t]->first) < sections[kSectionWords * k + 1]) t++;
    sectionEnd[k] = t;
  }
  // Every transaction sent must be owable, should NDB not answer it in
  // time: one that is neither answered nor owed could not be closed. Writes
  // may owe at most half the room (a stopped node holds up every write to
  // its node group, the other node's too), so that reads, which the other
  // node still answers, keep the rest; past that a flight's writes, and if
  // need be all of it, are not sent.
  int writes = 0;
  for (const Txn *t : txns) writes += readOnly(ops, *t) ? 0 : 1;
  if (writes > 0 && cn.owedWrites + writes > kMaxOwedWrites) {
    for (Txn *t : txns) {
      if (!readOnly(ops, *t)) notSentFull(ops, *t);
    }
  }
  int sending = 0;
  for (const Txn *t : txns) sending += t->unsent ? 0 : 1;
  if (sending > kMaxOwedTxns - cn.owedTxns) {
    for (Txn *t : txns) {
      if (!t->unsent) notSentFull(ops, *t);
    }
  }
  int prepared = 0;
  for (Txn *t : txns) {
    if (!t->unsent && prepare(cn, ops, *t, hints, stall_us)) prepared++;
  }
  // waiting: the open transactions of the sections whose wait has not
  // passed; *ms, the wait left, in whole milliseconds, of the nearest.
  auto waiting = [&](int *ms) {
    const auto now = std::chrono::steady_clock::now();
    int open = 0;
    long long nearest = -1;
    for (size_t k = 0, t = 0; k < ns; k++) {
      const long long until = static_cast<long long>(sections[kSectionWords * k + 2]);
      const long long left = until - std::chrono::duration_cast<std::chrono::microseconds>(now - begin).count();
      int sectionOpen = 0;
      for (; t < sectionEnd[k]; t++) {
        if (txns[t]->tx && !txns[t]->done) sectionOpen++;
      }
      if (sectionOpen > 0 && left > 0) {
        open += sectionOpen;
        if (nearest < 0 || left < nearest) nearest = left;
      }
    }
    *ms = static_cast<int>(std::min<long long>(kPollMs, std::max<long long>(1, (nearest + 999) / 1000)));
    return open;
  };
  bool sent = prepared > 0 && poll_us > 0 && pollFor(cn, ndb, poll_us);
  if (sent) pool->polledFlights.fetch_add(1, std::memory_order_relaxed);
  for (int polls = 0; polls < kMaxPolls; polls++) {
    int ms = 0;
    const int remaining = waiting(&ms);
    if (remaining == 0) break;
    const int got = sent ? ndb->pollNdb(ms, remaining) : ndb->sendPollNdb(ms, remaining, 1);
    sent = true;
    if (got < 0) break;
  }
  if (!sent && prepared > 0) ndb->sendPreparedTransactions(1);
  const auto now = std::chrono::steady_clock::now();

  Owed *owed = nullptr;
  for (size_t k = 0, t0 = 0; k < ns; k++) {
    const size_t t1 = sectionEnd[k];
    const int firstOp = k == 0 ? 0 : static_cast<int>(sections[kSectionWords * (k - 1) + 1]);
    const int endOp = static_cast<int>(sections[kSectionWords * k + 1]);
    if (answered(txns, t0, t1)) {
      w.u8(0);
      for (size_t t = t0; t < t1; t++) {
        if (txns[t]->tx && txns[t]->done) collect(ops, *txns[t], affected, expired);
      }
      for (int o = firstOp; o < endOp; o++) writeResult(w, ops[static_cast<size_t>(o)], affected[static_cast<size_t>(o)]);
      for (size_t t = t0; t < t1; t++) {
        Txn *tx = txns[t];
        txns[t] = nullptr;
        if (tx->tx) {
          if (tx->node >= 0) cn.answeredOn[static_cast<size_t>(tx->node)] = now;
          closeTx(cn, ndb, *tx);
        }
        delete tx;
      }
    } else {
      w.u8(1);
      if (!owed) owed = new Owed();
      OwedSection sec;
      sec.ticket = sections[kSectionWords * k];
      sec.firstOp = firstOp;
      sec.endOp = endOp;
      sec.firstTxn = owed->txns.size();
      for (size_t t = t0; t < t1; t++) {
        if (txns[t]->tx) {
          cn.owedTxns++;
          if (txns[t]->node >= 0) {
            const size_t n = static_cast<size_t>(txns[t]->node);
            // A node that owed nothing has been quiet only since this
            // flight began, however long ago it last answered (stalled).
            if (cn.owedOn[n]++ == 0 && cn.answeredOn[n] < begin) cn.answeredOn[n] = begin;
            // A read that waited the whole flight wait says its node has
            // stopped answering; one a shorter wait left owed does not.
            if (readOnly(ops, *txns[t]) && static_cast<int>(sections[kSectionWords * k + 2]) >= stall_us) {
              txns[t]->owedRead = true;
              cn.owedReadsOn[n]++;
            }
          }
          if (!readOnly(ops, *txns[t])) {
            txns[t]->owedWrite = true;
            cn.owedWrites++;
          }
        }
        owed->txns.push_back(txns[t]);
        txns[t] = nullptr;
      }
      sec.endTxn = owed->txns.size();
      owed->sections.push_back(sec);
    }
    t0 = t1;
  }
  pool->hintedTxns.fetch_add(hints.hinted, std::memory_order_relaxed);
  pool->primaryTxns.fetch_add(hints.primary, std::memory_order_relaxed);
  if (expired) pool->expiredFound.fetch_add(expired, std::memory_order_relaxed);
  if (owed) {
    // NDB writes the owed answers into these rows: they move, with the ops
    // that point into them, where no later flight reuses them.
    owed->arena = std::move(cn.arena);
    cn.arena = std::vector<char>();
    owed->ops = std::move(ops);
    owed->affected = std::move(affected);
    cn.owed.push_back(owed);
  }
}

// readAnswers reads what NDB has sent the connection's executor Ndb, without
// sleeping, and runs the callbacks of the transactions it answers: through
// the wait group (pollFor), or else a poll of at most a millisecond.
static void readAnswers(Conn &cn, Ndb *ndb) {
  if (!cn.pollGroup) cn.pollGroup = cn.cluster->create_ndb_wait_group(kPollGroupSize);
  if (cn.pollGroup && cn.pollGroup->push(ndb) == 0) {
    cn.pollGroup->wait(0, 100);
    while (cn.pollGroup->pop() != nullptr) {
    }
    ndb->pollNdb(0, 1);
    return;
  }
  ndb->pollNdb(1, 1);
}

// collectOwed writes the owed sections NDB has answered: u32 ticket, u8 0,
// the results of its ops; or u8 2 when they cannot be read (stale). A
// section that does not fit is left for the next call (*more). Returns the
// sections written.
static uint32_t collectOwed(ndbgate_pool *pool, Conn &cn, Writer &w, int *more) {
  const auto now = std::chrono::steady_clock::now();
  uint32_t count = 0;
  uint64_t expired = 0;
  for (size_t i = 0; i < cn.owed.size();) {
    Owed &o = *cn.owed[i];
    bool left = false;
    for (OwedSection &sec : o.sections) {
      if (sec.reported) continue;
      if (!answered(o.txns, sec.firstTxn, sec.endTxn)) {
        left = true;
        continue;
      }
      if (!sec.collected && !o.stale) {
        for (size_t t = sec.firstTxn; t < sec.endTxn; t++) {
          if (o.txns[t]->tx) collect(o.ops, *o.txns[t], o.affected, expired);
        }
      }
      sec.collected = true;
      Writer one = w;
      one.u32(sec.ticket);
      one.u8(o.stale ? 2 : 0);
      if (!o.stale) {
        for (int op = sec.firstOp; op < sec.endOp; op++) {
          writeResult(one, o.ops[static_cast<size_t>(op)], o.affected[static_cast<size_t>(op)]);
        }
      }
      if (!one.p) {  // no room: the next call
        *more = 1;
        left = true;
        break;
      }
      w = one;
      count++;
      sec.reported = true;
      for (size_t t = sec.firstTxn; t < sec.endTxn; t++) {
        Txn *tx = o.txns[t];
        if (tx->tx) {
          if (tx->node >= 0) {
            cn.owedOn[static_cast<size_t>(tx->node)]--;
            if (tx->owedRead) cn.owedReadsOn[static_cast<size_t>(tx->node)]--;
            cn.answeredOn[static_cast<size_t>(tx->node)] = now;
          }
          if (tx->owedWrite) cn.owedWrites--;
          closeTx(cn, cn.ndb, *tx);
          cn.owedTxns--;
        }
        delete tx;
        o.txns[t] = nullptr;
      }
    }
    if (!left) {
      delete cn.owed[i];
      if (i + 1 < cn.owed.size()) cn.owed[i] = cn.owed.back();
      cn.owed.pop_back();
    } else {
      i++;
    }
    if (*more) break;
  }
  if (expired) pool->expiredFound.fetch_add(expired, std::memory_order_relaxed);
  return count;
}

// Staging: an op's share of the arena. Every size is a multiple of 8.
struct Staged {
  uint32_t in = 0, out = 0, masks = 0, code = 0;
};

static Staged stagedSizes(const Op &op) {
  const Layout &l = op.recs->layout;
  Staged z;
  // Reads and deletes name only the key; the rest write values.
  z.in = op.kind == kRead || op.kind == kDelete ? l.keyLen : l.rowLen;
  z.out = readsRow(op) || op.kind == kAppend ? l.rowLen : 0;
  z.masks = align8(2 * l.maskBytes);
  if (hasProgram(op)) z.code = kCodeObjBytes + align8(programWords(op) * 4);
  return z;
}

// stageRows finds each op's records and gives it rows in the connection's
// arena: a key row (reads and deletes need only the key columns), a result
// row for ops that return values and for appends, its two column masks, and
// room for its interpreted program if it has one.
// Ops of unknown tables keep recs null.
void stageRows(ndbgate_pool *pool, size_t conn, std::vector<Op> &ops) {
  size_t total = 0;
  // A flight's ops mostly share a table: look it up (under mu) only when the
  // table id changes. The records stay put while the caller holds flightMu.
  const TableRecs *recs = nullptr;
  uint32_t recsId = 0;
  bool looked = false;
  for (Op &op : ops) {
    if (!looked || op.table != recsId) {
      recs = tableOf(pool, op.table, conn);
      recsId = op.table;
      looked = true;
    }
    op.recs = recs;
    if (!op.recs || op.kind == kDeleteAll) continue;
    const Staged z = stagedSizes(op);
    total += size_t{z.in} + z.out + z.masks + z.code;
  }
  std::vector<char> &arena = pool->conns[conn].arena;
  if (arena.size() < total) arena.resize(total);
  char *p = arena.data();
  for (Op &op : ops) {
    if (!op.recs || op.kind == kDeleteAll) continue;
    const Staged z = stagedSizes(op);
    op.in = p;
    p += z.in;
    if (z.out > 0) {
      op.out = p;
      p += z.out;
    }
    const uint32_t mb = op.recs->layout.maskBytes;
    op.setMask = reinterpret_cast<unsigned char *>(p);
    op.readMask = op.setMask + mb;
    memset(op.setMask, 0, 2 * size_t{mb});
    p += z.masks;
    if (z.code > 0) {
      op.codeMem = p;
      op.codeWords = programWords(op);
      p += z.code;
    }
  }
}

}  // namespace shim

using namespace shim;

extern "C" {

int ndbgate_partition(ndbgate_pool *pool, int table_id, const unsigned char *key, const int *key_lens, int nparts) {
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // no refresh frees the records meanwhile
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r || nparts <= 0 || static_cast<size_t>(nparts) != r->layout.keyCols.size()) return -1;
  // key holds the primary-key values in column order. They go into a key
  // row that NDB hashes through the key record, as startTransaction(keyRecord,
  // keyRow) does for a transaction's hint (computeHash, then getPartitionId):
  // the partition the Go side batches by is the one the hint picks.
  const Layout &l = r->layout;
  thread_local std::vector<char> row;
  row.assign(l.keyLen, 0);
  const unsigned char *p = key;
  for (size_t j = 0; j < l.keyCols.size(); j++) {
    if (key_lens[j] < 0) return -1;
    Value v;
    v.col = l.keyCols[j];
    v.data = p;
    v.len = static_cast<uint32_t>(key_lens[j]);
    if (putValue(l, row.data(), v, nullptr) != nullptr) return -1;
    p += key_lens[j];
  }
  Uint32 hash = 0;
  if (hashKey(&hash, r->key, row.data()) != 0) return -1;
  return static_cast<int>(r->t->getPartitionId(hash));
}

int ndbgate_primary_node(ndbgate_pool *pool, int table_id, int partition) {
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // no refresh frees t meanwhile
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r || partition < 0) return -1;
  Uint32 nodes[4];
  if (r->t->getFragmentNodes(static_cast<Uint32>(partition), nodes, 4) == 0) return -1;
  return static_cast<int>(nodes[0]);  // the primary replica comes first
}

int ndbgate_execute(ndbgate_pool *pool, int conn, const unsigned char *req, int reqlen, unsigned char *resp,
                    int resplen, int poll_us, int wait_us, const unsigned int *sections, int nsections, char *err,
                    int errlen) {
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size()) { setErr(err, errlen, "bad connection"); return -1; }
  const size_t ci = static_cast<size_t>(conn);
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // records stay alive for the flight
  Conn &cn = pool->conns[ci];
  const bool detached = pool->detached.load() || !cn.ndb;
  if (!detached) reapAbandoned(cn);
  if (!detached && cn.abandonedTxns >= kMaxAbandoned) {
    // Too many slots held by transactions NDB never answered: start over
    // with a new Ndb object. Deleting the old one releases the transactions
    // it still has (Ndb::doDisconnect), after which no late result can
    // arrive into the abandoned rows.
    Ndb *fresh = new (std::nothrow) Ndb(cn.cluster);
    if (fresh && fresh->init(kNdbTransactions) == 0) {
      dropPollGroup(cn);  // it may hold the old Ndb
      delete cn.ndb;
      cn.ndb = fresh;
      dropAbandoned(cn);
      loseOwed(cn);
      resetNodeBook(cn);
    } else {
      delete fresh;
    }
  }
  if (!detached && cn.abandonedTxns == 0 && cn.owedTxns == 0 && !cn.retired.empty()) {
    // No transaction that could unpack through them is left. dict belongs
    // to describes: if one holds dictMu, try again next flight.
    std::unique_lock<std::mutex> dg(pool->dictMu, std::try_to_lock);
    if (dg.owns_lock()) releaseRetired(cn);
  }
  Ndb *ndb = cn.ndb;
  Reader r{req, req + reqlen};
  uint32_t n = r.u32();
  if (!r.ok || n > static_cast<uint32_t>(reqlen)) { setErr(err, errlen, "malformed request"); return -1; }
  std::vector<Op> ops(n);
  LentVectors lent(ops, cn.spare);
  for (uint32_t i = 0; i < n; i++) {
    if (!parseOp(r, ops[i])) { setErr(err, errlen, "malformed request"); return -1; }
  }
  uint32_t needed = r.u32();  // the caller's bound on the response size
  if (!r.ok) { setErr(err, errlen, "malformed request"); return -1; }
  // Sections: contiguous op ranges from op 0 to the last, each ending where
  // the next begins; each one's results follow a status byte.
  const size_t ns = nsections > 0 && sections ? static_cast<size_t>(nsections) : 0;
  for (size_t k = 0; k < ns; k++) {
    const uint32_t end = sections[kSectionWords * k + 1];
    if (end <= (k == 0 ? 0 : sections[kSectionWords * (k - 1) + 1]) || end > n || (k == ns - 1 && end != n)) {
      setErr(err, errlen, "malformed sections");
      return -1;
    }
  }
  if (uint64_t{needed} + ns > static_cast<uint64_t>(resplen)) return -static_cast<int>(needed + ns);
  SectionMarks marks{sections, ns};
  if (detached) {
    // Nothing is sent: 4009 so marked maps to Unavailable (wire.go).
    NdbError e;
    shimError(e, kErrClusterFail, NdbError::NodeRecoveryError, "cluster failure: no data node reachable; reconnecting");
    e.status = NdbError::TemporaryError;
    Writer w{resp, resp + resplen};
    for (uint32_t k = 0; k < n; k++) {
      Op &op = ops[k];
      op.failed = true;
      op.err = e;
      marks.before(w, k);
      writeResult(w, op, 0);
    }
    return static_cast<int>(w.needed);
  }
  stageRows(pool, ci, ops);

  // Cut the flight into transactions, none across a section's start.
  std::vector<Txn *> txns;
  std::vector<uint64_t> affected(n, 0);
  size_t sec = 0;
  for (uint32_t i = 0; i < n;) {
    while (sec < ns && sections[kSectionWords * sec + 1] <= i) sec++;
    const uint32_t limit = ns > 0 ? sections[kSectionWords * sec + 1] : n;  // i's section ends here
    uint32_t j = i;
    while (j + 1 < n && (ops[j].flags & fTxnWithNext)) j++;
    if (j >= limit) {
      for (Txn *t : txns) delete t;
      setErr(err, errlen, "a transaction crosses sections");
      return -1;
    }
    Txn *t = new Txn();
    if (j == i && sharedRead(ops[i])) {
      while (j + 1 < limit && j + 1 - i < kMaxSharedReads && sharedRead(ops[j + 1]) && !(ops[j + 1].flags & fNodeStart)) j++;
      t->shared = j > i;
    }
    t->first = static_cast<int>(i);
    t->last = static_cast<int>(j);
    for (uint32_t k = i; k <= j; k++) t->sync = t->sync || ops[k].kind == kAppend || ops[k].kind == kDeleteAll;
    txns.push_back(t);
    i = j + 1;
  }

  Writer w{resp, resp + resplen};
  if (sectionsMayWait(txns, ns, wait_us)) {
    runSections(pool, cn, ops, affected, txns, sections, ns, poll_us, wait_us, w);
    if (!w.p) {
      setErr(err, errlen, "response larger than its bound");
      return -1;
    }
    return static_cast<int>(w.needed);
  }

  // Results go out in op order, a batch of transactions at a time, before
  // the batch's transactions close (read-back values live until then).
  std::vector<Txn *> leftOpen;
  HintCount hints;
  uint64_t expired = 0;
  size_t i = 0;
  while (i < txns.size()) {
    if (txns[i]->sync) {
      Txn &t = *txns[i];
      Op &head = ops[static_cast<size_t>(t.first)];
      NdbError e;
      if (t.first != t.last) {
        shimError(e, kErrLinkedSync, NdbError::ApplicationError, "append and delete_all cannot be linked into a transaction");
        failOps(ops, t, e);
      } else if (!head.recs) {
        shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate request");
        failOps(ops, t, e);
      } else {
        bool ok = head.kind == kAppend ? runAppend(ndb, head, e)
                                       : runDeleteAll(ndb, *head.recs, e, affected[static_cast<size_t>(t.first)]);
        if (!ok) {
          failOps(ops, t, e);
          if (e.code == static_cast<int>(kExitExpired)) expired++;
        } else if (head.kind == kAppend) {
          affected[static_cast<size_t>(t.first)] = 1;
        }
      }
      for (int k = t.first; k <= t.last; k++) {
        marks.before(w, static_cast<uint32_t>(k));
        writeResult(w, ops[static_cast<size_t>(k)], affected[static_cast<size_t>(k)]);
      }
      delete txns[i];
      txns[i] = nullptr;
      i++;
      continue;
    }
    // A batch: plain transactions up to the next synchronous one.
    size_t end = i;
    int prepared = 0;
    while (end < txns.size() && !txns[end]->sync && end - i < kMaxInFlight) {
      if (prepare(cn, ops, *txns[end], hints, wait_us)) prepared++;
      end++;
    }
    // One send, then polls until NDB has answered every transaction.
    int remaining = prepared;
    const bool polled = remaining > 0 && poll_us > 0 && pollFor(cn, ndb, poll_us);
    if (polled) pool->polledFlights.fetch_add(1, std::memory_order_relaxed);
    for (int polls = 0; polls < kMaxPolls; polls++) {
      if (polls > 0 || polled) {
        remaining = 0;
        for (size_t k = i; k < end; k++) remaining += (txns[k]->tx && !txns[k]->done) ? 1 : 0;
      }
      if (remaining == 0) break;
      int got = polls == 0 && !polled ? ndb->sendPollNdb(kPollMs, remaining, 1) : ndb->pollNdb(kPollMs, remaining);
      if (got < 0) break;
    }
    for (size_t k = i; k < end; k++) {
      Txn &t = *txns[k];
      if (t.tx && t.done) collect(ops, t, affected, expired);
      else if (t.tx) unknownResult(ops, t);
      for (int o = t.first; o <= t.last; o++) {
        marks.before(w, static_cast<uint32_t>(o));
        writeResult(w, ops[static_cast<size_t>(o)], affected[static_cast<size_t>(o)]);
      }
    }
    const auto answeredAt = std::chrono::steady_clock::now();
    for (size_t k = i; k < end; k++) {
      Txn *t = txns[k];
      if (t->tx && !t->done) {
        // Still outstanding: closing it is not allowed yet. Keep it, its
        // Txn (the callback's argument) and its rows, where no later flight
        // reuses them, until NDB answers (reapAbandoned).
        leftOpen.push_back(t);
        continue;
      }
      if (t->tx) {
        if (t->node >= 0) cn.answeredOn[static_cast<size_t>(t->node)] = answeredAt;
        closeTx(cn, ndb, *t);
      }
      delete t;
      txns[k] = nullptr;
    }
    i = end;
  }
  pool->hintedTxns.fetch_add(hints.hinted, std::memory_order_relaxed);
  pool->primaryTxns.fetch_add(hints.primary, std::memory_order_relaxed);
  if (expired) pool->expiredFound.fetch_add(expired, std::memory_order_relaxed);
  if (!leftOpen.empty()) {
    cn.abandonedTxns += static_cast<int>(leftOpen.size());
    cn.abandoned.push_back(Parked{std::move(cn.arena), std::move(leftOpen)});
    cn.arena = std::vector<char>();
  }
  if (!w.p) {  // cannot happen within the caller's bound; never ask to run again
    setErr(err, errlen, "response larger than its bound");
    return -1;
  }
  return static_cast<int>(w.needed);
}

int ndbgate_collect(ndbgate_pool *pool, int conn, int poll, unsigned char *resp, int resplen, int *more) {
  *more = 0;
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size() || resplen < 4) return -1;
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // as a flight: records stay alive
  Conn &cn = pool->conns[static_cast<size_t>(conn)];
  Writer w{resp + 4, resp + resplen};
  uint32_t count = 0;
  while (!cn.lost.empty()) {
    Writer one = w;
    one.u32(cn.lost.back());
    one.u8(3);
    if (!one.p) {
      *more = 1;
      break;
    }
    w = one;
    cn.lost.pop_back();
    count++;
  }
  if (!*more && cn.ndb && !cn.owed.empty()) {
    if (poll) readAnswers(cn, cn.ndb);
    count += collectOwed(pool, cn, w, more);
  }
  memcpy(resp, &count, 4);
  return static_cast<int>(w.needed) + 4;
}

}  // extern "C"
