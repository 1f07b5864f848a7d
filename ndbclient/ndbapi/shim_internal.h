// What the shim's .cpp files share (shim.cpp lists them): the pool, its
// connections and their tables' records, an op as it runs, the shim's own
// constants, and the functions one file defines for another. Not part of the
// C surface (shim.h).
#ifndef NDBGATE_SHIM_INTERNAL_H
#define NDBGATE_SHIM_INTERNAL_H

#include "shim.h"
#include "shim_wire.h"

#include <NdbApi.hpp>
#include <ndb_version.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

// NdbWaitGroup (Ndb_cluster_connection::create_ndb_wait_group) is in
// libndbclient, and its wait reads the transporter's sockets with the
// caller's timeout, zero included: the one way through the NDB API to poll
// for an answer without sleeping (pollNdb(0) only collects what another
// thread read). Its header is not among those an install ships (in 7.5 and
// 8.x it is in storage/ndb/src/ndbapi), so these are the public
// members the shim calls, and wakeup for a test (ndbgate_wake_poll_groups),
// as 7.5 and 8.x declare them. The object is only ever handled by pointer.
class NdbWaitGroup {
 public:
  int push(Ndb *ndb);
  int wait(Uint32 timeout_millis, int pct_ready);
  Ndb *pop();
  void wakeup();

 private:
  NdbWaitGroup() = delete;
  ~NdbWaitGroup() = delete;
};

namespace shim {

// partitionCount: getPartitionCount came with fully replicated tables
// (7.5.2); before it a table's partitions are its fragments.
inline Uint32 partitionCount(const NdbDictionary::Table *t) {
#if NDB_VERSION_D >= NDB_MAKE_VERSION(7, 5, 2)
  return t->getPartitionCount();
#else
  return t->getFragmentCount();
#endif
}

// The wire's numbers (op kinds, lock codes, flags, program exits, the shim's
// own error codes, kMaxMessage) are in shim_wire_consts.h.

// kMaxInFlight bounds the transactions prepared at once on one Ndb object
// (Ndb::init allows at most 1024 NdbTransaction objects).
const size_t kMaxInFlight = 512;
// kMaxSharedReads bounds the committed reads that share one transaction
// (sharedRead): past about a hundred, flexAsynch gains little per key.
const uint32_t kMaxSharedReads = 128;
const int kNdbTransactions = 1024;
// A flight polls in kPollMs steps; NDB completes every sent transaction itself
// (error 4012 after its own timeout), so the cap is a last resort.
const int kPollMs = 1000;
const int kMaxPolls = 600;
const int kMaxAbandoned = 256;
// kMaxOwedTxns bounds the open transactions of owed sections on one Ndb
// object, so that with kMaxAbandoned they fit in its kNdbTransactions: a
// flight that would pass it waits for all its answers instead.
const int kMaxOwedTxns = kNdbTransactions - kMaxAbandoned;
const int kMaxOwedWrites = kMaxOwedTxns / 2;
// kPoolMargin: the connection records an executor Ndb seizes beyond those
// in use when it needs more from a node (growPool).
const int kPoolMargin = 16;
// A section of ndbgate_execute: ticket, end op, wait (µs).
const size_t kSectionWords = 3;
// A connection's wait group (pollFor) holds one Ndb at a time; NDB grows
// its list if ever needed.
const int kPollGroupSize = 4;

// The arena room of a program (shim_program.cpp, staged by shim_execute.cpp): the NdbInterpretedCode object, then its words.
// Without the condition's value, attachProgram's longest program (a
// condition, then a decrement) takes about 32 words with its label
// records; kProgramWords leaves room to spare.
static_assert(alignof(NdbInterpretedCode) <= 8, "the arena aligns to 8 bytes");
const uint32_t kCodeObjBytes = (sizeof(NdbInterpretedCode) + 7) & ~size_t{7};
const uint32_t kProgramWords = 64;

// Layout places a table's columns in an NdbRecord row: the null bitmap
// first, then the primary-key columns (so a key row is short), then the
// rest, each 8-byte aligned. Values are in native format, length prefix
// included, as the Go side encodes them.
struct Layout {
  std::vector<uint32_t> offset, size;  // by attribute id
  std::vector<int> nullBit;            // -1: NOT NULL
  std::vector<uint8_t> prefix;         // length-prefix bytes of var columns
  std::vector<bool> isKey;
  std::vector<uint16_t> keyCols;  // primary-key columns in column order
  uint32_t nullBytes = 0, keyLen = 0, rowLen = 0;
  uint32_t maskBytes = 0;  // a column mask: one bit per column
};

// TableRecs is one connection's dictionary objects for a table.
struct TableRecs {
  const NdbDictionary::Table *t = nullptr;
  NdbRecord *key = nullptr;  // the primary-key columns
  NdbRecord *row = nullptr;  // every column but BLOB/TEXT, the same offsets
  Layout layout;
};

// Values in their row slots (Layout): called for every value of a flight, so
// inline here rather than in shim_layout.cpp.
inline uint32_t align8(uint32_t n) { return (n + 7) & ~7u; }

inline void setBit(unsigned char *mask, uint16_t col) { mask[col >> 3] |= static_cast<unsigned char>(1u << (col & 7)); }

inline bool isNullIn(const Layout &l, const char *row, uint16_t col) {
  const int b = l.nullBit[col];
  return b >= 0 && ((static_cast<unsigned char>(row[b >> 3]) >> (b & 7)) & 1) != 0;
}

inline void setNullIn(const Layout &l, char *row, uint16_t col, bool null) {
  const int b = l.nullBit[col];
  if (b < 0) return;
  unsigned char &byte = reinterpret_cast<unsigned char &>(row[b >> 3]);
  if (null) byte = static_cast<unsigned char>(byte | (1u << (b & 7)));
  else byte = static_cast<unsigned char>(byte & ~(1u << (b & 7)));
}

// valueLen: the bytes of col's native value in row, length prefix included.
inline uint32_t valueLen(const Layout &l, const char *row, uint16_t col) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(row) + l.offset[col];
  uint32_t n = l.size[col];
  if (l.prefix[col] == 1) n = 1u + p[0];
  if (l.prefix[col] == 2) n = 2u + (p[0] | (static_cast<uint32_t>(p[1]) << 8));
  return n < l.size[col] ? n : l.size[col];
}

// inRecord: col is a column of the table with a slot in the row record
// (BLOB/TEXT have none).
inline bool inRecord(const Layout &l, uint16_t col) { return col < l.size.size() && l.size[col] > 0; }

// badValue says why a non-NULL value in native format does not fit its
// column's row slot, or returns null. NDB reads a value's length from its
// prefix, so the prefix must match the bytes that came. Callers have checked
// inRecord(l, v.col).
inline const char *badValue(const Layout &l, const Value &v) {
  const uint8_t pre = l.prefix[v.col];
  if (!v.data || v.len > l.size[v.col]) return "value longer than its column";
  if (pre == 0 && v.len != l.size[v.col]) return "value of the wrong size for its column";
  if (pre > 0) {
    if (v.len < pre) return "value without its length prefix";
    uint32_t declared = pre == 1 ? v.data[0] : (v.data[0] | (static_cast<uint32_t>(v.data[1]) << 8));
    if (declared + pre != v.len) return "length prefix does not match the value";
  }
  return nullptr;
}

// putValue copies v into its column's slot of row and marks the column in
// mask (when given). The message says why a value does not fit.
inline const char *putValue(const Layout &l, char *row, const Value &v, unsigned char *mask) {
  if (!inRecord(l, v.col)) return "column not in the table's row record";
  if (v.null) {
    if (l.nullBit[v.col] < 0) return "NULL for a NOT NULL column";
    setNullIn(l, row, v.col, true);
  } else {
    if (const char *bad = badValue(l, v)) return bad;
    setNullIn(l, row, v.col, false);
    memcpy(row + l.offset[v.col], v.data, v.len);
  }
  if (mask) setBit(mask, v.col);
  return nullptr;
}

// Op is one op of a flight: what the request gives (WireOp), and what running
// it needs and yields.
struct Op : WireOp {
  // execution: rows in the flight's arena, valid until the flight ends
  const TableRecs *recs = nullptr;
  char *in = nullptr;   // key and the values to write
  char *out = nullptr;  // a read's result row
  // NdbRecord column masks, one bit per attribute id, zeroed: NDB reads only
  // the bits of its record's columns (NdbRecord::copyMask), so they take
  // Layout::maskBytes, not NDB_MAX_ATTRIBUTES_IN_TABLE bits.
  unsigned char *setMask = nullptr;
  unsigned char *readMask = nullptr;
  // An op with a program (hasProgram) gets room in the arena for the
  // NdbInterpretedCode and codeWords words of program after it, so neither
  // is a heap allocation; attachProgram constructs code there.
  char *codeMem = nullptr;
  uint32_t codeWords = 0;
  NdbInterpretedCode *code = nullptr;
  bool expiryAfter = false;  // a committed read: collect checks its expiry
  // valid until the transaction closes: the op, and the read after a write
  // that returns values
  const NdbOperation *nop = nullptr, *readBack = nullptr;
  const NdbOperation *purge = nullptr;  // an insert's delete of an expired row
  // results
  NdbError err;
  bool failed = false;
  std::vector<unsigned char> appended;  // append: the value written

  Op() = default;
  Op(const Op &) = delete;
  Op &operator=(const Op &) = delete;
  ~Op() {
    if (code) code->~NdbInterpretedCode();  // its words are the arena's: nothing is freed
  }
};

struct Txn;

// Parked: the arena of a flight that left transactions NDB had not answered,
// and those transactions (still open).
struct Parked {
  std::vector<char> arena;
  std::vector<Txn *> txns;
};

// OwedSection: a section of a flight (ndbgate_execute's sections) whose
// results the flight returned without: its ops [firstOp, endOp) and their
// transactions, txns [firstTxn, endTxn) of its Owed.
struct OwedSection {
  uint32_t ticket = 0;
  int firstOp = 0, endOp = 0;
  size_t firstTxn = 0, endTxn = 0;
  bool collected = false;  // its results are set in the ops (collect)
  bool reported = false;   // ndbgate_collect returned them
};

// Owed: what a flight that returned before NDB answered some of its sections
// keeps for ndbgate_collect: its arena (NDB writes the rows there), its ops
// and their affected counts, and the owed sections' transactions, open until
// collected.
struct Owed {
  std::vector<char> arena;
  std::vector<Op> ops;
  std::vector<uint64_t> affected;
  std::vector<Txn *> txns;
  std::vector<OwedSection> sections;
  // stale: a refresh let go of the table records the ops point to; the
  // sections are reported lost when answered.
  bool stale = false;
};

// OpVectors keeps one op's lists between flights: each flight's ops borrow a
// connection's (LentVectors), so that parsing fills lists that already have
// room. A malloc and a free per list and op were 5 % of the gateway's CPU
// in 100-key gets on NDB 7.5.0.
struct OpVectors {
  std::vector<Value> key, set;
  std::vector<uint16_t> read;
};

// An Ndb object is used by one thread at a time: ndb by the connection's
// executor, dict by describes (under ndbgate_pool::dictMu). arena holds the
// executor's rows for a flight. A flight that leaves a transaction NDB never
// answered moves its arena to abandoned: NDB may still write a late result
// into it. When the answer comes (its callback runs in a later flight's
// poll), the next flight closes the transaction, and frees the arena once
// none of its transactions is open; otherwise both live until the Ndb object
// is gone. An abandoned transaction keeps one of the Ndb object's 1024
// transaction slots, so after kMaxAbandoned open ones the executor replaces
// its Ndb object. abandonedTxns (the open ones) is written by the executor
// under flightMu shared and read by refreshes under flightMu exclusive.
//
// A late answer is unpacked through the table's records, so records a
// refresh lets go of while abandonedTxns > 0 go to retired (under flightMu
// exclusive) instead of being released. They are released through dict, the
// dictionary that made them (releaseRecord drops the global table reference
// createRecord took), once no abandoned transaction is left (all answered
// and closed, or ndb replaced): at the start of a flight, under dictMu, or in
// ndbgate_close after ndb is deleted and before dict is.
struct Conn {
  Ndb_cluster_connection *cluster = nullptr;
  // pollGroup: made at the first lone flight with a busy poll (pollFor),
  // let go of with ndb (dropPollGroup), which it may hold.
  NdbWaitGroup *pollGroup = nullptr;
  Ndb *ndb = nullptr;
  Ndb *dict = nullptr;
  std::vector<char> arena;
  std::vector<Parked> abandoned;
  int abandonedTxns = 0;
  // owed: flights that returned without some sections' answers; owedTxns
  // counts their open transactions. lost: the tickets of owed sections
  // whose Ndb object went before NDB answered (ndbgate_collect reports them).
  std::vector<Owed *> owed;
  int owedTxns = 0, owedWrites = 0;
  std::vector<uint32_t> lost;
  // The executor Ndb's transactions by TC node id (resetNodeBook): open
  // now, at most ever open at once (NDB keeps a connection record for each,
  // and seizes another from the node past that), owed, and when one last
  // answered (or began to be owed, if later: stalled measures the node's
  // silence from there).
  std::vector<int> openOn, pooledOn, owedOn, owedReadsOn;
  std::vector<std::chrono::steady_clock::time_point> answeredOn;
  std::vector<NdbRecord *> retired;
  std::vector<OpVectors> spare;  // the executor's, lent to its flights' ops
};

// LentVectors lends spare's lists to ops for one flight and takes them back,
// emptied, when the flight returns.
class LentVectors {
 public:
  LentVectors(std::vector<Op> &ops, std::vector<OpVectors> &spare) : ops_(ops), spare_(spare) {
    if (spare_.size() < ops_.size()) spare_.resize(ops_.size());
    for (size_t i = 0; i < ops_.size(); i++) swap(i);
  }
  ~LentVectors() {
    for (size_t i = 0; i < ops_.size(); i++) {
      swap(i);
      OpVectors &v = spare_[i];
      v.key.clear();
      v.set.clear();
      v.read.clear();
    }
  }
  LentVectors(const LentVectors &) = delete;
  LentVectors &operator=(const LentVectors &) = delete;

 private:
  void swap(size_t i) {
    ops_[i].key.swap(spare_[i].key);
    ops_[i].set.swap(spare_[i].set);
    ops_[i].read.swap(spare_[i].read);
  }
  std::vector<Op> &ops_;
  std::vector<OpVectors> &spare_;
};

}  // namespace shim

// Lock order: flightMu, then dictMu, then mu. A connection's cluster object
// is replaced (ndbgate_roll_connection) under all three: rounds, describes
// and the readers of its node counts (under mu) never see it go.
struct ndbgate_pool {
  std::vector<shim::Conn> conns;
  // detached: every data node was lost and the Ndb objects, table objects and
  // records were let go (ndbgate_detach), so that the API's global dictionary
  // cache empties; it will not reconnect before. Flights fail at once with
  // 4009 until ndbgate_resume. Written under flightMu exclusive.
  std::atomic<bool> detached{false};
  // Transactions started with a key hint, and those of them whose TC runs on
  // the node holding the key's primary replica (ndbgate_hint_stats).
  std::atomic<uint64_t> hintedTxns{0}, primaryTxns{0};
  std::atomic<uint64_t> polledFlights{0};  // round trips that polled (pollFor)
  std::atomic<uint64_t> expiredFound{0};   // ops that found their row expired (collect)
  // Flights hold flightMu shared while they use table objects and records; a
  // refresh holds it exclusively, so it never frees what a flight still uses.
  std::shared_mutex flightMu;
  std::mutex dictMu;      // serialises describes (the dict Ndb objects)
  std::shared_mutex mu;  // guards tables
  // tables[id][conn]: each connection uses the table object and records of
  // its own dictionary (held by that connection's dict Ndb). An inner vector
  // is replaced only under flightMu held exclusively.
  std::vector<std::vector<shim::TableRecs>> tables;
  // names[id]: the database and table name of tables[id], for describing it
  // on a connection made again (ndbgate_roll_connection). Guarded by mu.
  std::vector<std::pair<std::string, std::string>> names;
};

namespace shim {

// Defined in one file, used in another.

// shim.cpp
void setErr(char *err, int errlen, const std::string &msg);
std::string ndbErrText(const NdbError &e);
const TableRecs *tableOf(ndbgate_pool *pool, uint32_t id, size_t conn);
void shimError(NdbError &err, int code, NdbError::Classification cl, const char *msg);
NdbError notSent(const NdbError &in);

// shim_layout.cpp
bool buildLayout(const NdbDictionary::Table *t, Layout &l);
NdbRecord *makeRecord(NdbDictionary::Dictionary *dict, const NdbDictionary::Table *t, const Layout &l, bool keyOnly);
void freeRecs(Conn &c, TableRecs &r);
void releaseRecs(Conn &c, TableRecs &r);
void releaseRetired(Conn &c);

// shim_scan.cpp

// DictCall is a call on the first connection's dictionary Ndb, outside any
// flight (a scan, a sequence): while it lives it holds flightMu shared, so
// that no refresh frees the table objects, and dictMu, since each executor's
// Ndb is its own thread's.
struct DictCall {
  std::shared_lock<std::shared_mutex> rg;
  std::lock_guard<std::mutex> g;
  Ndb *ndb;
  explicit DictCall(ndbgate_pool *pool);
  // table is table_id's records, or null with e set, nothing sent, when no
  // data node is reachable or the id was never described.
  const TableRecs *table(ndbgate_pool *pool, int table_id, NdbError &e);
};
// reportError gives a C caller e: code, status and classification in
// ndb_error[3], the message in err.
void reportError(const NdbError &e, int *ndb_error, char *err, int errlen);

// shim_program.cpp
bool addable(const NdbDictionary::Column *c);
bool hasProgram(const Op &op);
uint32_t programWords(const Op &op);
bool expireIsTimestamp2(const Op &op);
bool attachPurge(Op &op, NdbOperation::OperationOptions &opts, NdbError &err);
bool attachProgram(Op &op, NdbOperation::OperationOptions &opts, NdbError &err);

// shim_conn.cpp
bool makeNdbs(Conn &c, char *err, int errlen);
// resetNodeBook empties c's book of transactions by node, for a new
// executor Ndb object.
void resetNodeBook(Conn &c);
void dropConnNdbs(Conn &c, const std::vector<TableRecs *> &recs);
// dropPollGroup lets go of c's wait group, if it has one. Its caller owns
// c's executor Ndb: no flight is polling through the group.
void dropPollGroup(Conn &c);

// shim_table.cpp
bool describeOn(Conn &c, const char *db, const char *table, bool invalidate, TableRecs &r, std::string &err);

// shim_execute.cpp
bool fillRow(Op &op, NdbError &err);
void dropAbandoned(Conn &c);
// loseOwed forgets c's owed sections once their Ndb object is deleted, their
// tickets kept in c.lost.
void loseOwed(Conn &c);
void writeValue(Writer &w, const Layout &l, const char *row, uint16_t col);
void stageRows(ndbgate_pool *pool, size_t conn, std::vector<Op> &ops);

}  // namespace shim

#endif  // NDBGATE_SHIM_INTERNAL_H
