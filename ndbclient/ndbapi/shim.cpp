//go:build ndbapi

// ndbgate's NDB API shim: a thin C++ layer that turns one flat request buffer
// (a round of operations, format in wire.go) into NDB API transactions and
// writes their results into a flat response buffer.
//
// Operations use the NdbRecord interface: each described table gets, per
// connection, a key record (the primary-key columns) and a row record (every
// column) over one row layout, so one buffer carries a key and the values to
// write. Interpreted programs (CAS, incr/decr) are NdbInterpretedCode objects
// passed in OperationOptions.
//
// Execution: each Go executor goroutine owns one connection's Ndb object and
// makes one call per round. Plain transactions of a round are prepared with
// executeAsynchPrepare and sent with sendPollNdb, at most kMaxInFlight at a
// time; append/prepend and delete_all read before they write and run alone,
// synchronously, with nothing else outstanding on the Ndb object. Each
// transaction starts with its key row as the TC hint.
//
// Compiled only with the ndbapi build tag. Compile-checked against headers of
// mysql/mysql-server (see README.md); never run against a live cluster.

#include "shim.h"

#include <NdbApi.hpp>
#include <ndb_version.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <vector>

namespace {

// partitionCount: getPartitionCount came with fully replicated tables
// (7.5.2); before it a table's partitions are its fragments.
Uint32 partitionCount(const NdbDictionary::Table *t) {
#if NDB_VERSION_D >= NDB_MAKE_VERSION(7, 5, 2)
  return t->getPartitionCount();
#else
  return t->getFragmentCount();
#endif
}

// Operation kinds, lock modes and flags: the same numbers as wire.go.
enum OpKind : uint8_t {
  kRead = 1, kInsert, kUpdate, kWrite, kDelete, kCondUpdate, kAdd, kAppend, kDeleteAll
};
enum Flag : uint8_t {
  fTxnWithNext = 1, fHasCond = 2, fSubtract = 4, fCreate = 8, fPrepend = 16, fExpiry = 32,
  fPartition = 64
};

// Interpreted-program exits (NdbOperation.hpp: applications use 626 or
// 6000-6999) and shim-made codes, mapped back to canonical errors in wire.go.
const Uint32 kExitCondFailed = 6000;
const Uint32 kExitNotNumeric = 6001;
const int kErrLinkedSync = 6002;  // append/delete_all linked into a transaction
const int kErrBadValue = 6003;    // a value that does not fit its column's row slot
const Uint32 kExitAlive = 6004;   // an insert's purge found the row not expired
const Uint32 kExitExpired = 626;  // an expired row is a miss, as a missing one

// kMaxInFlight bounds the transactions prepared at once on one Ndb object
// (Ndb::init allows at most 1024 NdbTransaction objects).
const size_t kMaxInFlight = 512;
// kMaxSharedReads bounds the committed reads that share one transaction
// (sharedRead): past about a hundred, flexAsynch gains little per key.
const uint32_t kMaxSharedReads = 128;
const int kNdbTransactions = 1024;
// A round polls in kPollMs steps; NDB completes every sent transaction itself
// (error 4012 after its own timeout), so the cap is a last resort.
const int kPollMs = 1000;
const int kMaxPolls = 600;
const int kMaxAbandoned = 256;

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

struct Op {
  uint8_t kind = 0, lock = 0, flags = 0;
  uint32_t table = 0;
  uint32_t partition = 0;  // fPartition: the key's partition, hashed by the Go side
  std::vector<Value> key;
  std::vector<uint16_t> read;
  std::vector<Value> set;
  Value cond;
  uint16_t addCol = 0;
  uint64_t delta = 0, initial = 0;
  uint16_t appendCol = 0;
  const unsigned char *data = nullptr;
  uint32_t dataLen = 0;
  // fExpiry: the table's expire column and the time of the round (unix s)
  uint16_t expireCol = 0;
  uint32_t now = 0;
  // execution: rows in the round's arena, valid until the round ends
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
  if (op.flags & fPartition) op.partition = r.u32();
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
  if (op.flags & fExpiry) {
    op.expireCol = r.u16();
    op.now = r.u32();
  }
  return r.ok;
}

struct Txn;

// Parked: the arena of a round that left transactions NDB had not answered,
// and those transactions (still open).
struct Parked {
  std::vector<char> arena;
  std::vector<Txn *> txns;
};

// OpVectors keeps one op's lists between rounds: each round's ops borrow a
// connection's (LentVectors), so that parsing fills lists that already have
// room. A malloc and a free per list and op were 5 % of the gateway's CPU
// in 100-key gets on NDB 7.5.0.
struct OpVectors {
  std::vector<Value> key, set;
  std::vector<uint16_t> read;
};

// An Ndb object is used by one thread at a time: ndb by the connection's
// executor, dict by describes (under ndbgate_pool::dictMu). arena holds the
// executor's rows for a round. A round that leaves a transaction NDB never
// answered moves its arena to abandoned: NDB may still write a late result
// into it. When the answer comes (its callback runs in a later round's
// poll), the next round closes the transaction, and frees the arena once
// none of its transactions is open; otherwise both live until the Ndb object
// is gone. An abandoned transaction keeps one of the Ndb object's 1024
// transaction slots, so after kMaxAbandoned open ones the executor replaces
// its Ndb object. abandonedTxns (the open ones) is written by the executor
// under roundMu shared and read by refreshes under roundMu exclusive.
//
// A late answer is unpacked through the table's records, so records a
// refresh lets go of while abandonedTxns > 0 go to retired (under roundMu
// exclusive) instead of being released. They are released through dict, the
// dictionary that made them (releaseRecord drops the global table reference
// createRecord took), once no abandoned transaction is left (all answered
// and closed, or ndb replaced): at the start of a round, under dictMu, or in
// ndbgate_close after ndb is deleted and before dict is.
struct Conn {
  Ndb_cluster_connection *cluster = nullptr;
  Ndb *ndb = nullptr;
  Ndb *dict = nullptr;
  std::vector<char> arena;
  std::vector<Parked> abandoned;
  int abandonedTxns = 0;
  std::vector<NdbRecord *> retired;
  std::vector<OpVectors> spare;  // the executor's, lent to its rounds' ops
};

// LentVectors lends spare's lists to ops for one round and takes them back,
// emptied, when the round returns.
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

}  // namespace

// Lock order: roundMu, then dictMu, then mu.
struct ndbgate_pool {
  std::vector<Conn> conns;
  // detached: every data node was lost and the Ndb objects, table objects and
  // records were let go (ndbgate_detach), so that the API's global dictionary
  // cache empties; it will not reconnect before. Rounds fail at once with
  // 4009 until ndbgate_resume. Written under roundMu exclusive.
  std::atomic<bool> detached{false};
  // Transactions started with a key hint, and those of them whose TC runs on
  // the node holding the key's primary replica (ndbgate_hint_stats).
  std::atomic<uint64_t> hintedTxns{0}, primaryTxns{0};
  // Rounds hold roundMu shared while they use table objects and records; a
  // refresh holds it exclusively, so it never frees what a round still uses.
  std::shared_mutex roundMu;
  std::mutex dictMu;      // serialises describes (the dict Ndb objects)
  std::shared_mutex mu;  // guards tables
  // tables[id][conn]: each connection uses the table object and records of
  // its own dictionary (held by that connection's dict Ndb). An inner vector
  // is replaced only under roundMu held exclusively.
  std::vector<std::vector<TableRecs>> tables;
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

// tableOf: the connection's records for a table id; null when unknown or
// let go by a failed refresh. Callers hold roundMu.
const TableRecs *tableOf(ndbgate_pool *pool, uint32_t id, size_t conn) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  if (id >= pool->tables.size() || conn >= pool->tables[id].size()) return nullptr;
  const TableRecs *r = &pool->tables[id][conn];
  return r->t && r->key && r->row ? r : nullptr;
}

// varPrefix is the length-prefix size of a column's native format.
int varPrefix(const NdbDictionary::Column *c) {
  switch (c->getArrayType()) {
    case NdbDictionary::Column::ArrayTypeShortVar: return 1;
    case NdbDictionary::Column::ArrayTypeMediumVar: return 2;
    default: return 0;
  }
}

bool isBlob(const NdbDictionary::Column *c) {
  return c->getType() == NdbDictionary::Column::Blob || c->getType() == NdbDictionary::Column::Text;
}

uint32_t align8(uint32_t n) { return (n + 7) & ~7u; }

bool buildLayout(const NdbDictionary::Table *t, Layout &l) {
  const int n = t->getNoOfColumns();
  if (n <= 0 || n > NDB_MAX_ATTRIBUTES_IN_TABLE) return false;
  l = Layout();
  const size_t cols = static_cast<size_t>(n);
  l.offset.assign(cols, 0);
  l.size.assign(cols, 0);
  l.nullBit.assign(cols, -1);
  l.prefix.assign(cols, 0);
  l.isKey.assign(cols, false);
  int nullable = 0;
  for (int i = 0; i < n; i++) {
    const NdbDictionary::Column *c = t->getColumn(i);
    if (!c || c->getColumnNo() != i) return false;  // attribute ids are column numbers
    const size_t k = static_cast<size_t>(i);
    if (c->getNullable()) l.nullBit[k] = nullable++;
    l.prefix[k] = static_cast<uint8_t>(varPrefix(c));
    l.isKey[k] = c->getPrimaryKey();
    if (l.isKey[k]) l.keyCols.push_back(static_cast<uint16_t>(i));
    l.size[k] = isBlob(c) ? 0 : static_cast<uint32_t>(c->getSizeInBytesForRecord());
  }
  l.nullBytes = static_cast<uint32_t>((nullable + 7) / 8);
  uint32_t off = l.nullBytes;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t k = 0; k < cols; k++) {
      if (l.isKey[k] != (pass == 0) || l.size[k] == 0) continue;
      off = align8(off);
      l.offset[k] = off;
      off += l.size[k];
    }
    if (pass == 0) l.keyLen = align8(off);
  }
  l.rowLen = align8(off);
  l.maskBytes = static_cast<uint32_t>((cols + 7) / 8);
  return true;
}

NdbRecord *makeRecord(NdbDictionary::Dictionary *dict, const NdbDictionary::Table *t, const Layout &l, bool keyOnly) {
  std::vector<NdbDictionary::RecordSpecification> spec;
  for (int i = 0; i < t->getNoOfColumns(); i++) {
    const size_t k = static_cast<size_t>(i);
    // BLOB/TEXT are not mapped. wire.go refuses a table that has them, so
    // no operation runs on one: NdbBlob's part handling runs only inside a
    // synchronous execute(), and an async delete would orphan the parts.
    if ((keyOnly && !l.isKey[k]) || l.size[k] == 0) continue;
    NdbDictionary::RecordSpecification s{};
    s.column = t->getColumn(i);
    s.offset = l.offset[k];
    if (l.nullBit[k] >= 0) {
      s.nullbit_byte_offset = static_cast<Uint32>(l.nullBit[k] >> 3);
      s.nullbit_bit_in_byte = static_cast<Uint32>(l.nullBit[k] & 7);
    }
    spec.push_back(s);
  }
  if (spec.empty()) return nullptr;
  return dict->createRecord(t, spec.data(), static_cast<Uint32>(spec.size()), sizeof(spec[0]));
}

// freeRecs releases r's records through c.dict, whose dictionary made them.
// For records no transaction of c.ndb can still unpack through: never used
// by a round, or no abandoned transaction left. Callers hold dictMu, or are
// ndbgate_close.
void freeRecs(Conn &c, TableRecs &r) {
  if (!c.dict) {  // detached: deleting dict released them
    r = TableRecs();
    return;
  }
  NdbDictionary::Dictionary *dict = c.dict->getDictionary();
  if (r.key) dict->releaseRecord(r.key);
  if (r.row) dict->releaseRecord(r.row);
  r = TableRecs();
}

// releaseRecs lets go of records rounds may have used: released at once, or
// retired while abandoned transactions may still unpack through them (see
// Conn). Callers hold roundMu exclusively and dictMu.
void releaseRecs(Conn &c, TableRecs &r) {
  if (c.abandonedTxns == 0) {
    freeRecs(c, r);
    return;
  }
  if (r.key) c.retired.push_back(r.key);
  if (r.row) c.retired.push_back(r.row);
  r = TableRecs();
}

// releaseRetired releases c's retired records. Only once c.abandonedTxns is 0;
// callers hold dictMu, or are ndbgate_close.
void releaseRetired(Conn &c) {
  if (!c.dict) return;
  NdbDictionary::Dictionary *dict = c.dict->getDictionary();
  for (NdbRecord *rec : c.retired) dict->releaseRecord(rec);
  c.retired.clear();
}

void setBit(unsigned char *mask, uint16_t col) { mask[col >> 3] |= static_cast<unsigned char>(1u << (col & 7)); }

bool isNullIn(const Layout &l, const char *row, uint16_t col) {
  const int b = l.nullBit[col];
  return b >= 0 && ((static_cast<unsigned char>(row[b >> 3]) >> (b & 7)) & 1) != 0;
}

void setNullIn(const Layout &l, char *row, uint16_t col, bool null) {
  const int b = l.nullBit[col];
  if (b < 0) return;
  unsigned char &byte = reinterpret_cast<unsigned char &>(row[b >> 3]);
  if (null) byte = static_cast<unsigned char>(byte | (1u << (b & 7)));
  else byte = static_cast<unsigned char>(byte & ~(1u << (b & 7)));
}

// valueLen: the bytes of col's native value in row, length prefix included.
uint32_t valueLen(const Layout &l, const char *row, uint16_t col) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(row) + l.offset[col];
  uint32_t n = l.size[col];
  if (l.prefix[col] == 1) n = 1u + p[0];
  if (l.prefix[col] == 2) n = 2u + (p[0] | (static_cast<uint32_t>(p[1]) << 8));
  return n < l.size[col] ? n : l.size[col];
}

// inRecord: col is a column of the table with a slot in the row record
// (BLOB/TEXT have none).
bool inRecord(const Layout &l, uint16_t col) { return col < l.size.size() && l.size[col] > 0; }

// badValue says why a non-NULL value in native format does not fit its
// column's row slot, or returns null. NDB reads a value's length from its
// prefix, so the prefix must match the bytes that came. Callers have checked
// inRecord(l, v.col).
const char *badValue(const Layout &l, const Value &v) {
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
const char *putValue(const Layout &l, char *row, const Value &v, unsigned char *mask) {
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

// shimError sets a permanent error made by the shim (codes mapped in wire.go).
void shimError(NdbError &err, int code, NdbError::Classification cl, const char *msg) {
  err.code = code;
  err.status = NdbError::PermanentError;
  err.classification = cl;
  err.message = msg;
}

// expiryValid: the expire column is an INT or BIGINT of the row record
// (wire.go checks the type).
bool expiryValid(const Op &op) {
  const Layout &l = op.recs->layout;
  return inRecord(l, op.expireCol) && l.prefix[op.expireCol] == 0 &&
         (l.size[op.expireCol] == 4 || l.size[op.expireCol] == 8);
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
  if (!bad && (op.flags & fExpiry) && !expiryValid(op)) bad = "the expire column is not an INT or BIGINT";
  if (bad) shimError(err, kErrBadValue, NdbError::ApplicationError, bad);
  return bad == nullptr;
}

// notSent is an error of startTransaction: nothing reached NDB, so nothing
// was done, even where NDB classifies the code as unknown result (4009
// cluster failure). wire.go maps 4009 so marked to Unavailable.
NdbError notSent(const NdbError &in) {
  NdbError e = in;
  if (e.status == NdbError::UnknownResult) e.status = NdbError::TemporaryError;
  return e;
}

// hashKey is Ndb::computeHash into a thread's own buffer: given none, NDB
// mallocs and frees one per call. NDB sizes its own at the key's length in
// words plus 8 bytes and never checks; this one holds four times NDB's
// largest key (a character key's transform may grow it).
int hashKey(Uint32 *hash, const NdbRecord *keyRec, const char *keyRow) {
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
NdbTransaction *startTx(Ndb *ndb, const Op &op, Uint32 &partition, NdbError &err) {
  if ((op.flags & fPartition) && op.partition < op.recs->t->getFragmentCount()) {
    // The dispatcher hashed the key to route the op (ndbgate_partition, the
    // same computation): the MD5 over the key is not done twice.
    partition = op.partition;
  } else {
    Uint32 hash = 0;
    if (const int rc = hashKey(&hash, op.recs->key, op.in)) {
      err = notSent(ndb->getNdbError(rc));
      return nullptr;
    }
    partition = op.recs->t->getPartitionId(hash);
  }
  NdbTransaction *tx = ndb->startTransaction(op.recs->t, partition);
  if (!tx) err = notSent(ndb->getNdbError());
  return tx;
}

NdbOperation::LockMode lockOf(uint8_t l) {
  switch (l) {
    case 1: return NdbOperation::LM_Read;
    case 2: return NdbOperation::LM_Exclusive;
    default: return NdbOperation::LM_CommittedRead;
  }
}

// condition: exit with kExitCondFailed unless column == value (NULL == NULL).
// branch_col_eq takes the value in column format, length prefix included.
bool addCondition(NdbInterpretedCode &code, const Value &c, Uint32 okLabel) {
  if (c.null) {
    if (code.branch_col_eq_null(c.col, okLabel) != 0) return false;
  } else if (code.branch_col_eq(c.data, c.len, c.col, okLabel) != 0) {
    return false;
  }
  return code.interpret_exit_nok(kExitCondFailed) == 0 && code.def_label(static_cast<int>(okLabel)) == 0;
}

// addable: atomic add works on 32- and 64-bit integer columns only:
// WRITE_ATTR_FROM_REG writes whole 32-bit words, so a narrower column would
// take bytes that are not its own.
bool addable(const NdbDictionary::Column *c) {
  switch (c ? c->getType() : NdbDictionary::Column::Undefined) {
    case NdbDictionary::Column::Int:
    case NdbDictionary::Column::Unsigned:
    case NdbDictionary::Column::Bigint:
    case NdbDictionary::Column::Bigunsigned:
      return true;
    default:
      return false;
  }
}

// hasProgram: the op runs an interpreted program (attachProgram): a CAS
// update, an atomic add, or a delete or append with a condition.
bool hasProgram(const Op &op) {
  return op.kind == kCondUpdate || op.kind == kAdd ||
         ((op.kind == kDelete || op.kind == kAppend) && (op.flags & fHasCond)) ||
         ((op.flags & fExpiry) && op.kind != kAppend);  // append checks expiry itself
}

// The arena room of a program: the NdbInterpretedCode object, then its words.
// Without the condition's value, attachProgram's longest program (a
// condition, then a decrement) takes about 32 words with its label
// records; kProgramWords leaves room to spare.
static_assert(alignof(NdbInterpretedCode) <= 8, "the arena aligns to 8 bytes");
const uint32_t kCodeObjBytes = (sizeof(NdbInterpretedCode) + 7) & ~size_t{7};
const uint32_t kProgramWords = 64;

uint32_t programWords(const Op &op) {
  const bool hasCond = (op.flags & fHasCond) || op.kind == kCondUpdate;
  // branch_col_* copy their values; the expiry check's three branches take
  // 2 + 2 + 2 + 2 + 2 words (two 8-byte values at most), its exit 1.
  return kProgramWords + (hasCond ? (op.cond.len + 3) / 4 : 0) + ((op.flags & fExpiry) ? 16 : 0);
}

// branchIfAlive jumps to alive unless the row has expired: its expire column
// is NULL, 0, or after now, as memcached's items (the embedded engine's rule).
// branch_col_lt(v, col) jumps when v < the column's value.
bool branchIfAlive(NdbInterpretedCode &c, const Op &op, Uint32 alive) {
  const uint32_t width = op.recs->layout.size[op.expireCol];
  unsigned char zero[8] = {0}, now[8] = {0};
  const uint64_t n = op.now;
  memcpy(now, &n, width);  // little endian
  return c.branch_col_eq_null(op.expireCol, alive) == 0 && c.branch_col_eq(zero, width, op.expireCol, alive) == 0 &&
         c.branch_col_lt(now, width, op.expireCol, alive) == 0;
}

// newProgram makes op's interpreted program in the room stageRows gave it
// (null, with err set, when there is none or it is taken).
NdbInterpretedCode *newProgram(Op &op, NdbError &err) {
  if (!op.codeMem || op.code) {
    shimError(err, 4000, NdbError::InternalError, "no room staged for the interpreted program");
    return nullptr;
  }
  op.code = new (op.codeMem)
      NdbInterpretedCode(op.recs->t, reinterpret_cast<Uint32 *>(op.codeMem + kCodeObjBytes), op.codeWords);
  return op.code;
}

// attachPurge makes an insert's purge program: delete the row only if it has
// expired (else exit kExitAlive), so the insert after it in the same
// transaction finds no row, as it would on the embedded engine.
bool attachPurge(Op &op, NdbOperation::OperationOptions &opts, NdbError &err) {
  NdbInterpretedCode *code = newProgram(op, err);
  if (!code) return false;
  NdbInterpretedCode &c = *code;
  const Uint32 alive = 0;
  if (!(branchIfAlive(c, op, alive) && c.interpret_exit_ok() == 0 && c.def_label(static_cast<int>(alive)) == 0 &&
        c.interpret_exit_nok(kExitAlive) == 0 && c.finalise() == 0)) {
    err = c.getNdbError();
    return false;
  }
  opts.optionsPresent |= NdbOperation::OperationOptions::OO_INTERPRETED;
  opts.interpretedCode = &c;
  return true;
}

// attachProgram makes the interpreted program of a conditional delete, a CAS
// update, an atomic add or a conditional append, and puts it in opts; on
// failure err says why. Labels are numbered in order from 0, as
// NdbInterpretedCode::finalise expects. The program goes in the room
// stageRows gave the op; a buffer given to NdbInterpretedCode cannot grow,
// so a program longer than programWords would fail with 4518.
bool attachProgram(Op &op, NdbOperation::OperationOptions &opts, NdbError &err) {
  NdbInterpretedCode *code = newProgram(op, err);
  if (!code) return false;
  NdbInterpretedCode &c = *code;
  Uint32 label = 0;
  bool ok = true;
  if (op.flags & fExpiry) {  // fillRow checked the column
    const Uint32 alive = label++;
    ok = branchIfAlive(c, op, alive) && c.interpret_exit_nok(kExitExpired) == 0 &&
         c.def_label(static_cast<int>(alive)) == 0;
  }
  if (ok && ((op.flags & fHasCond) || op.kind == kCondUpdate)) ok = addCondition(c, op.cond, label++);
  if (ok && op.kind == kAdd) {
    // NULL -> NotNumeric; incr wraps at the column's width, decr clamps at 0.
    // Registers: R1 = column, R2 = delta, R3 = result.
    const Uint32 col = op.addCol;
    const Uint32 notNull = label++, sub = label++, end = label++;
    ok = c.branch_col_ne_null(col, notNull) == 0 && c.interpret_exit_nok(kExitNotNumeric) == 0 &&
         c.def_label(static_cast<int>(notNull)) == 0 && c.read_attr(1, col) == 0 && c.load_const_u64(2, op.delta) == 0;
    if (ok && (op.flags & fSubtract)) {
      // The kernel compares registers as signed 64-bit numbers, so both
      // sides are biased by 2^63 (R5 = R1 + 2^63, R6 = R2 + 2^63; the add
      // wraps) to compare them as unsigned. NdbInterpretedCode::branch_ge(L,
      // R) jumps when L >= R.
      ok = c.load_const_u64(4, 1ULL << 63) == 0 && c.add_reg(5, 1, 4) == 0 && c.add_reg(6, 2, 4) == 0 &&
           c.branch_ge(5, 6, sub) == 0 && c.load_const_u64(3, 0) == 0 && c.branch_label(end) == 0 &&
           c.def_label(static_cast<int>(sub)) == 0 && c.sub_reg(3, 1, 2) == 0 &&
           c.def_label(static_cast<int>(end)) == 0;
    } else if (ok) {
      ok = c.add_reg(3, 1, 2) == 0;
    }
    ok = ok && c.write_attr(col, 3) == 0;
  }
  if (!(ok && c.interpret_exit_ok() == 0 && c.finalise() == 0)) {
    err = c.getNdbError();
    return false;
  }
  opts.optionsPresent |= NdbOperation::OperationOptions::OO_INTERPRETED;
  opts.interpretedCode = &c;
  return true;
}

// readsRow: the op returns values in its result row (op.out): a read, or a
// write whose caller wants values back (the new counter, the new CAS).
bool readsRow(const Op &op) {
  return op.kind == kRead || (op.kind != kAppend && op.kind != kDeleteAll && !op.read.empty());
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
bool defineOp(NdbTransaction *tx, Op &op, NdbOperation::AbortOption ao, NdbError &err) {
  // NDB forces AO_IgnoreError on committed reads, so one that fails would
  // not abort a linked run: inside a run reads take a shared lock.
  NdbOperation::LockMode lm = lockOf(op.lock);
  if (ao == NdbOperation::AbortOnError && lm == NdbOperation::LM_CommittedRead) lm = NdbOperation::LM_Read;
  const TableRecs &r = *op.recs;
  const Layout &l = r.layout;
  NdbOperation::OperationOptions opts{};
  opts.optionsPresent = NdbOperation::OperationOptions::OO_ABORTOPTION;
  opts.abortOption = ao;
  const NdbOperation::OperationOptions plain = opts;
  const Uint32 optsSize = sizeof(opts);
  if (op.kind == kAdd && !addable(r.t->getColumn(op.addCol))) {
    shimError(err, kErrBadValue, NdbError::ApplicationError, "atomic add needs an INT or BIGINT column (signed or unsigned)");
    return false;
  }
  if (hasProgram(op) && op.kind != kInsert && !attachProgram(op, opts, err)) return false;
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
      op.nop = tx->readTuple(r.key, op.in, r.row, op.out, lm, op.readMask, &opts, optsSize);
      break;
    case kInsert:
      op.nop = tx->insertTuple(r.key, op.in, r.row, op.in, op.setMask, &opts, optsSize);
      break;
    case kUpdate:
    case kCondUpdate:
    case kAdd:
      op.nop = tx->updateTuple(r.key, op.in, r.row, op.in, op.setMask, &opts, optsSize);
      break;
    case kWrite:
      op.nop = tx->writeTuple(r.key, op.in, r.row, op.in, op.setMask, &opts, optsSize);
      break;
    case kDelete:
      op.nop = tx->deleteTuple(r.key, op.in, r.row, rows ? op.out : nullptr, rows ? op.readMask : nullptr, &opts,
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
void finishReadBack(Op &op) {
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
bool runAppend(Ndb *ndb, Op &op, NdbError &err) {
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
  if (expiry && !isNullIn(l, op.out, op.expireCol)) {
    // The row is locked: its expiry cannot change before the update.
    uint64_t at = 0;
    memcpy(&at, op.out + l.offset[op.expireCol], l.size[op.expireCol]);
    if (at != 0 && at <= op.now) {
      shimError(err, 626, NdbError::NoDataFound, "Tuple did not exist");
      ndb->closeTransaction(tx);
      return false;
    }
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
bool runDeleteAll(Ndb *ndb, const TableRecs &r, NdbError &err, uint64_t &deleted) {
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

// One transaction of a round. Heap-allocated: a transaction NDB never
// completes is left open, and its callback may still fire later.
struct Txn {
  int first = 0, last = 0;  // ops [first, last]
  NdbTransaction *tx = nullptr;
  int result = 0;
  bool done = false;
  bool sync = false;    // append/delete_all: run alone
  bool shared = false;  // independent committed reads (sharedRead) in one transaction
};

// sharedRead: an op that may share its transaction with the committed reads
// next to it in the round. Each read a transaction of its own costs the data
// node a TC record, a TCKEYREQ and a TCKEYCONF per key, and the API a
// start and a close: most of a multi-get's cost in NDB (flexAsynch reads 4x
// the keys per CPU second with 100 reads per transaction). Committed reads
// take no locks and NDB runs them with AO_IgnoreError, so one read's miss or
// program exit fails only that read; a failure of the transaction (a node
// failure, a timeout) fails them all, each with a retriable error.
bool sharedRead(const Op &op) {
  return op.kind == kRead && lockOf(op.lock) == NdbOperation::LM_CommittedRead && !(op.flags & fTxnWithNext);
}

void onTxnDone(int result, NdbTransaction *, void *arg) {
  Txn *t = static_cast<Txn *>(arg);
  t->result = result;
  t->done = true;
}

// reapAbandoned closes the abandoned transactions NDB has answered since they
// were left: their callback ran in a later poll of the same Ndb object, and a
// completed transaction may be closed (as every answered one is); NDB writes
// nothing more into its rows after that. An arena goes once none of its
// transactions is open.
void reapAbandoned(Conn &c) {
  for (size_t i = 0; i < c.abandoned.size();) {
    std::vector<Txn *> &txns = c.abandoned[i].txns;
    size_t open = 0;
    for (Txn *t : txns) {
      if (t->done) {
        c.ndb->closeTransaction(t->tx);
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

void failOps(std::vector<Op> &ops, const Txn &t, const NdbError &e) {
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    op.failed = true;
    op.err = e;
  }
}

// onPrimary: the transaction's TC runs on the node that the dictionary lists
// first for the key's partition, its primary replica. That list is what
// startTransaction's hint chooses by, and what the dispatcher's lanes use.
bool onPrimary(NdbTransaction *tx, const Op &op, Uint32 partition) {
  Uint32 nodes[4];
  if (op.recs->t->getFragmentNodes(partition, nodes, 4) == 0) return false;
  return nodes[0] == tx->getConnectedNodeId();
}

// HintCount accumulates a round's onPrimary counts for ndbgate_hint_stats.
struct HintCount {
  uint64_t hinted = 0, primary = 0;
};

// prepare defines a plain transaction and hands it to executeAsynchPrepare.
// false when nothing was prepared (the ops then carry the error).
bool prepare(Ndb *ndb, std::vector<Op> &ops, Txn &t, HintCount &hints) {
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
  t.tx = startTx(ndb, ops[static_cast<size_t>(head)], partition, e);
  if (!t.tx) {
    failOps(ops, t, e);
    return false;
  }
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
    ndb->closeTransaction(t.tx);
    t.tx = nullptr;
    return false;
  }
  if (!ok) {
    failOps(ops, t, e.code != 0 ? e : t.tx->getNdbError());
    ndb->closeTransaction(t.tx);
    t.tx = nullptr;
    return false;
  }
  t.tx->executeAsynchPrepare(NdbTransaction::Commit, onTxnDone, &t, ao);
  return true;
}

// collect sets the results of a completed transaction's ops.
void collect(std::vector<Op> &ops, const Txn &t, std::vector<uint64_t> &affected) {
  const NdbError &te = t.tx->getNdbError();
  // A purge's failure is ignored by design; the transaction then commits
  // with an error recorded, so its ops stand if it committed.
  bool purged = false;
  for (int k = t.first; k <= t.last; k++) purged = purged || ops[static_cast<size_t>(k)].purge;
  const bool committed = t.tx->commitStatus() == NdbTransaction::Committed;
  for (int k = t.first; k <= t.last; k++) {
    Op &op = ops[static_cast<size_t>(k)];
    if (op.failed) continue;  // a shared read refused before it was sent
    if (op.nop && op.nop->getNdbError().code != 0) {
      op.failed = true;
      op.err = op.nop->getNdbError();
    } else if (op.readBack && op.readBack->getNdbError().code != 0) {
      op.failed = true;
      op.err = op.readBack->getNdbError();
    } else if (t.result != 0 && !(purged && committed)) {
      op.failed = true;
      op.err = te;
    } else {
      if (op.readBack) finishReadBack(op);
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

// Staging: an op's share of the arena. Every size is a multiple of 8.
struct Staged {
  uint32_t in = 0, out = 0, masks = 0, code = 0;
};

Staged stagedSizes(const Op &op) {
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
  // A round's ops mostly share a table: look it up (under mu) only when the
  // table id changes. The records stay put while the caller holds roundMu.
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


// dropNdbs deletes connection i's Ndb objects and everything made through
// them. Callers hold roundMu exclusively and dictMu, or are ndbgate_close.
void dropNdbs(ndbgate_pool *pool, size_t i) {
  Conn &c = pool->conns[i];
  // First the executor's Ndb: deleting it releases the transactions it
  // still has (abandoned ones too), so nothing can unpack through the
  // records or write into c.abandoned after this.
  delete c.ndb;
  c.ndb = nullptr;
  dropAbandoned(c);
  if (!c.dict) return;
  // Then every record, through the dictionary of the still-alive dict that
  // made them, and only then dict itself (which drops the table objects).
  for (std::vector<TableRecs> &byConn : pool->tables) {
    if (i < byConn.size()) freeRecs(c, byConn[i]);
  }
  releaseRetired(c);
  delete c.dict;
  c.dict = nullptr;
}

// makeNdbs gives connection c a new executor Ndb and dictionary Ndb.
bool makeNdbs(Conn &c, char *err, int errlen) {
  c.ndb = new Ndb(c.cluster);
  c.dict = new Ndb(c.cluster);
  if (c.ndb->init(kNdbTransactions) == 0 && c.dict->init(4) == 0) return true;
  setErr(err, errlen, ndbErrText(c.ndb->getNdbError().code != 0 ? c.ndb->getNdbError() : c.dict->getNdbError()));
  delete c.dict;
  delete c.ndb;
  c.dict = nullptr;
  c.ndb = nullptr;
  return false;
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
    if (!makeNdbs(c, err, errlen)) {
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
  for (size_t i = 0; i < pool->conns.size(); i++) {
    dropNdbs(pool, i);
    delete pool->conns[i].cluster;
  }
  delete pool;
}

void ndbgate_hint_stats(ndbgate_pool *pool, unsigned long long *hinted, unsigned long long *on_primary) {
  *hinted = pool->hintedTxns.load(std::memory_order_relaxed);
  *on_primary = pool->primaryTxns.load(std::memory_order_relaxed);
}

int ndbgate_live_nodes(ndbgate_pool *pool) {
  int live = -1;
  for (Conn &c : pool->conns) {
    const int r = c.cluster->get_no_ready();
    if (live < 0 || r < live) live = r;
  }
  return live < 0 ? 0 : live;
}

void ndbgate_detach(ndbgate_pool *pool) {
  std::unique_lock<std::shared_mutex> rg(pool->roundMu);  // waits for rounds in flight
  std::lock_guard<std::mutex> g(pool->dictMu);
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->detached.store(true);
  for (size_t i = 0; i < pool->conns.size(); i++) dropNdbs(pool, i);
}

int ndbgate_reattach(ndbgate_pool *pool, char *err, int errlen) {
  std::unique_lock<std::shared_mutex> rg(pool->roundMu);
  std::lock_guard<std::mutex> g(pool->dictMu);
  for (Conn &c : pool->conns) {
    if (c.cluster->get_no_ready() <= 0) {
      setErr(err, errlen, "no data node reachable yet");
      return -1;
    }
  }
  for (Conn &c : pool->conns) {
    if (c.ndb) continue;  // a reattach that failed part way
    if (!makeNdbs(c, err, errlen)) return -1;
  }
  return 0;
}

void ndbgate_resume(ndbgate_pool *pool) {
  std::unique_lock<std::shared_mutex> rg(pool->roundMu);
  pool->detached.store(false);
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

int ndbgate_data_nodes(ndbgate_pool *pool) {
  return pool->conns.empty() ? 0 : static_cast<int>(pool->conns[0].cluster->no_db_nodes());
}

int ndbgate_node_id(ndbgate_pool *pool) {
  return pool->conns.empty() ? 0 : static_cast<int>(pool->conns[0].cluster->node_id());
}

namespace {

// describeInto looks the table up in every connection's dictionary (dropping
// the cached copy first when invalidate is set), makes each connection's
// records, writes the table's shape into out and returns the records; empty
// on error. Called with dictMu held.
std::vector<TableRecs> describeInto(ndbgate_pool *pool, const char *db, const char *table, bool invalidate,
                                    unsigned char *out, int outlen, char *err, int errlen) {
  std::vector<TableRecs> byConn;
  auto fail = [&](const std::string &msg) {
    setErr(err, errlen, msg);
    // No round has seen these records, so no abandoned transaction uses them.
    for (size_t i = 0; i < byConn.size(); i++) freeRecs(pool->conns[i], byConn[i]);
    return std::vector<TableRecs>();
  };
  for (Conn &c : pool->conns) {
    if (!c.dict) return fail("the cluster is unreachable: every data node was lost");
    c.dict->setDatabaseName(db);
    NdbDictionary::Dictionary *dict = c.dict->getDictionary();
    if (invalidate) dict->invalidateTable(table);
    TableRecs r;
    r.t = dict->getTable(table);
    if (!r.t) return fail(std::string(db) + "." + table + ": " + ndbErrText(dict->getNdbError()));
    if (!byConn.empty() && r.t->getObjectVersion() != byConn[0].t->getObjectVersion()) {
      return fail(std::string(db) + "." + table + " changed while it was being described; try again");
    }
    if (!buildLayout(r.t, r.layout)) return fail(std::string(db) + "." + table + ": no columns, or more than NDB allows");
    r.key = makeRecord(dict, r.t, r.layout, true);
    r.row = makeRecord(dict, r.t, r.layout, false);
    byConn.push_back(r);
    if (!r.key || !r.row) return fail(std::string(db) + "." + table + ": createRecord: " + ndbErrText(dict->getNdbError()));
  }
  const NdbDictionary::Table *t = byConn[0].t;
  Writer w{out, out + outlen};
  w.u32(partitionCount(t));
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
    // The row slot the shim checks values against, so the Go side sizes
    // values (BIT's 4 or 8 bytes) and result bounds from the same number.
    w.u32(byConn[0].layout.size[static_cast<size_t>(i)]);
    // getCharsetNumber dereferences the character set: only ask columns
    // that have one.
    const int cs = c->getCharset() ? c->getCharsetNumber() : 0;
    w.u16(static_cast<uint16_t>(cs > 0 ? cs : 0));
  }
  // mysqld's packed .frm (none for tables made through the NDB API): the
  // names of ENUM and SET values live only there. NDB caps it at 6000
  // bytes; one that does not fit is reported as 0xFFFFFFFF, with no bytes.
  const void *frm = t->getFrmData();
  const uint32_t frmLen = frm ? t->getFrmLength() : 0;
  if (w.p && static_cast<size_t>(w.end - w.p) >= 4 + static_cast<size_t>(frmLen)) {
    w.u32(frmLen);
    if (frmLen > 0) w.put(frm, frmLen);
  } else {
    w.u32(0xFFFFFFFFu);
  }
  if (!w.p) return fail("describe buffer too small");
  return byConn;
}
// dictOn is the dictionary of the pool's dictionary Ndb, on database db, for
// the create, drop and alter calls; the caller holds dictMu. Null, with err
// set, while the cluster is unreachable (detached).
NdbDictionary::Dictionary *dictOn(ndbgate_pool *pool, const char *db, char *err, int errlen) {
  Ndb *ndb = pool->conns[0].dict;
  if (!ndb) {
    setErr(err, errlen, "the cluster is unreachable");
    return nullptr;
  }
  ndb->setDatabaseName(db);
  return ndb->getDictionary();
}

}  // namespace

int ndbgate_describe(ndbgate_pool *pool, const char *db, const char *table, unsigned char *out, int outlen,
                     char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::lock_guard<std::mutex> g(pool->dictMu);
  std::vector<TableRecs> byConn = describeInto(pool, db, table, false, out, outlen, err, errlen);
  if (byConn.empty()) return -1;
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->tables.push_back(std::move(byConn));
  return static_cast<int>(pool->tables.size() - 1);
}

int ndbgate_refresh(ndbgate_pool *pool, int table_id, const char *db, const char *table, unsigned char *out,
                    int outlen, char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::unique_lock<std::shared_mutex> rg(pool->roundMu);
  std::lock_guard<std::mutex> g(pool->dictMu);
  {
    std::unique_lock<std::shared_mutex> tg(pool->mu);
    if (table_id < 0 || static_cast<size_t>(table_id) >= pool->tables.size()) {
      setErr(err, errlen, "bad table id");
      return -1;
    }
    // Let the old records go before the dictionary drops the table objects
    // they were made from. Until the lookup below succeeds, requests for the
    // id get error 284 (unknown table).
    std::vector<TableRecs> &old = pool->tables[static_cast<size_t>(table_id)];
    for (size_t i = 0; i < old.size() && i < pool->conns.size(); i++) releaseRecs(pool->conns[i], old[i]);
  }
  std::vector<TableRecs> byConn = describeInto(pool, db, table, true, out, outlen, err, errlen);
  if (byConn.empty()) return -1;
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->tables[static_cast<size_t>(table_id)] = std::move(byConn);
  return table_id;
}

int ndbgate_create_table(ndbgate_pool *pool, const char *db, const char *table, const unsigned char *spec,
                         int speclen, char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  // The spec is in describe's format (wire.go encodeCreate).
  Reader r{spec, spec + speclen};
  NdbDictionary::Table tab(table);
  std::vector<std::string> ordered;  // key flag 4: the ordered index PRIMARY's columns
  const Uint32 partitions = r.u32();
  const uint16_t n = r.u16();
  for (uint16_t i = 0; i < n && r.ok; i++) {
    const uint16_t nameLen = r.u16();
    const unsigned char *name = r.bytes(nameLen);
    const uint8_t type = r.u8();
    const uint32_t length = r.u32();
    const bool nullable = r.u8() != 0;
    const uint8_t keyFlags = r.u8();
    r.u8();  // array type: NDB derives it from the type and length
    const uint16_t precision = r.u16(), scale = r.u16();
    r.u32();  // row slot: describe output only
    r.u16();  // character set: not applied; strings get NDB's default (binary)
    if (!r.ok) break;
    NdbDictionary::Column c(std::string(reinterpret_cast<const char *>(name), nameLen).c_str());
    c.setType(static_cast<NdbDictionary::Column::Type>(type));
    switch (type) {
      case NdbDictionary::Column::Decimal:
      case NdbDictionary::Column::Decimalunsigned:
        c.setPrecision(precision);
        c.setScale(scale);
        break;
      case NdbDictionary::Column::Time2:
      case NdbDictionary::Column::Datetime2:
      case NdbDictionary::Column::Timestamp2:
        c.setPrecision(precision);  // fractional-second digits
        break;
      case NdbDictionary::Column::Blob:
      case NdbDictionary::Column::Text:
        c.setInlineSize(256);
        c.setPartSize(2000);
        c.setStripeSize(0);
        break;
      case NdbDictionary::Column::Char:
      case NdbDictionary::Column::Varchar:
      case NdbDictionary::Column::Longvarchar:
      case NdbDictionary::Column::Binary:
      case NdbDictionary::Column::Varbinary:
      case NdbDictionary::Column::Longvarbinary:
      case NdbDictionary::Column::Bit:
        c.setLength(static_cast<int>(length));
        break;
      default:
        break;
    }
    c.setPrimaryKey((keyFlags & 1) != 0);
    if (keyFlags & 2) c.setPartitionKey(true);
    if (keyFlags & 4) ordered.emplace_back(reinterpret_cast<const char *>(name), nameLen);
    c.setNullable(nullable);
    tab.addColumn(c);
  }
  if (!r.ok || n == 0) { setErr(err, errlen, "malformed table spec"); return -1; }
  if (partitions > 0) {
    tab.setFragmentCount(partitions);
  }
  std::lock_guard<std::mutex> g(pool->dictMu);
  NdbDictionary::Dictionary *dict = dictOn(pool, db, err, errlen);
  if (!dict) return -1;
  if (dict->createTable(tab) != 0) {
    const NdbError &e = dict->getNdbError();
    if (e.code == 721 || e.code == 746) return 1;  // exists
    setErr(err, errlen, std::string(db) + "." + table + ": " + ndbErrText(e));
    return -1;
  }
  if (!ordered.empty()) {
    // MySQL gives a primary key not declared USING HASH an ordered index
    // named PRIMARY too; NDB API applications scan by it.
    NdbDictionary::Index idx("PRIMARY");
    idx.setTable(table);
    idx.setType(NdbDictionary::Index::OrderedIndex);
    idx.setLogging(false);
    for (const std::string &col : ordered) idx.addColumnName(col.c_str());
    if (dict->createIndex(idx) != 0) {
      const std::string msg = std::string(db) + "." + table + " index PRIMARY: " + ndbErrText(dict->getNdbError());
      dict->dropTable(table);
      setErr(err, errlen, msg);
      return -1;
    }
  }
  return 0;
}

int ndbgate_drop_table(ndbgate_pool *pool, const char *db, const char *table, char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::lock_guard<std::mutex> g(pool->dictMu);
  NdbDictionary::Dictionary *dict = dictOn(pool, db, err, errlen);
  if (!dict) return -1;
  if (dict->dropTable(table) != 0) {
    const NdbError &e = dict->getNdbError();
    if (e.code == 709 || e.code == 723) return 1;  // no such table
    setErr(err, errlen, std::string(db) + "." + table + ": " + ndbErrText(e));
    return -1;
  }
  return 0;
}

int ndbgate_add_column(ndbgate_pool *pool, const char *db, const char *table, const char *column, int type,
                       char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::lock_guard<std::mutex> g(pool->dictMu);
  NdbDictionary::Dictionary *dict = dictOn(pool, db, err, errlen);
  if (!dict) return -1;
  const NdbDictionary::Table *old = dict->getTable(table);
  if (!old) {
    setErr(err, errlen, std::string(db) + "." + table + ": " + ndbErrText(dict->getNdbError()));
    return -1;
  }
  NdbDictionary::Table altered(*old);
  NdbDictionary::Column c(column);
  c.setType(static_cast<NdbDictionary::Column::Type>(type));
  c.setNullable(true);
  c.setDynamic(true);  // a column added online is dynamic (COLUMN_FORMAT DYNAMIC)
  altered.addColumn(c);
  if (!dict->supportedAlterTable(*old, altered)) {
    setErr(err, errlen, std::string(db) + "." + table + ": NDB cannot add column " + column + " online");
    return -1;
  }
  if (dict->alterTable(*old, altered) != 0) {
    setErr(err, errlen, std::string(db) + "." + table + ": " + ndbErrText(dict->getNdbError()));
    return -1;
  }
  return 0;
}

int ndbgate_row_count(ndbgate_pool *pool, int table_id, unsigned long long *rows, char *err, int errlen) {
  // Each fragment answers with one row holding its row count (the
  // ROW_COUNT pseudo column, as ndb_select_count does), read dirty.
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);
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
    ndb_error[0] = ne.code;
    ndb_error[1] = static_cast<int>(ne.status);
    ndb_error[2] = static_cast<int>(ne.classification);
    setErr(err, errlen, ne.message ? ne.message : "");
    return NDBGATE_SCAN_ERROR;
  };
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // no refresh frees the records meanwhile
  std::lock_guard<std::mutex> g(pool->dictMu);
  Ndb *ndb = pool->conns.empty() ? nullptr : pool->conns[0].dict;
  if (pool->detached.load() || !ndb) {
    // Nothing is sent: 4009 so marked maps to Unavailable (wire.go).
    shimError(e, 4009, NdbError::NodeRecoveryError, "cluster failure: no data node reachable; reconnecting");
    e.status = NdbError::TemporaryError;
    return fail(e);
  }
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r) {
    shimError(e, 284, NdbError::SchemaError, "unknown table id in ndbgate scan");
    return fail(e);
  }
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

int ndbgate_partition(ndbgate_pool *pool, int table_id, const unsigned char *key, const int *key_lens, int nparts) {
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // no refresh frees the records meanwhile
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
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // no refresh frees t meanwhile
  const TableRecs *r = tableOf(pool, static_cast<uint32_t>(table_id), 0);
  if (!r || partition < 0) return -1;
  Uint32 nodes[4];
  if (r->t->getFragmentNodes(static_cast<Uint32>(partition), nodes, 4) == 0) return -1;
  return static_cast<int>(nodes[0]);  // the primary replica comes first
}

int ndbgate_execute(ndbgate_pool *pool, int conn, const unsigned char *req, int reqlen, unsigned char *resp,
                    int resplen, char *err, int errlen) {
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size()) { setErr(err, errlen, "bad connection"); return -1; }
  const size_t ci = static_cast<size_t>(conn);
  std::shared_lock<std::shared_mutex> rg(pool->roundMu);  // records stay alive for the round
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
      delete cn.ndb;
      cn.ndb = fresh;
      dropAbandoned(cn);
    } else {
      delete fresh;
    }
  }
  if (!detached && cn.abandonedTxns == 0 && !cn.retired.empty()) {
    // No transaction that could unpack through them is left. dict belongs
    // to describes: if one holds dictMu, try again next round.
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
  if (needed > static_cast<uint32_t>(resplen)) return -static_cast<int>(needed);
  if (detached) {
    // Nothing is sent: 4009 so marked maps to Unavailable (wire.go).
    NdbError e;
    shimError(e, 4009, NdbError::NodeRecoveryError, "cluster failure: no data node reachable; reconnecting");
    e.status = NdbError::TemporaryError;
    Writer w{resp, resp + resplen};
    for (Op &op : ops) {
      op.failed = true;
      op.err = e;
      writeResult(w, op, 0);
    }
    return static_cast<int>(w.needed);
  }
  stageRows(pool, ci, ops);

  // Cut the round into transactions.
  std::vector<Txn *> txns;
  std::vector<uint64_t> affected(n, 0);
  for (uint32_t i = 0; i < n;) {
    uint32_t j = i;
    while (j + 1 < n && (ops[j].flags & fTxnWithNext)) j++;
    Txn *t = new Txn();
    if (j == i && sharedRead(ops[i])) {
      while (j + 1 < n && j + 1 - i < kMaxSharedReads && sharedRead(ops[j + 1])) j++;
      t->shared = j > i;
    }
    t->first = static_cast<int>(i);
    t->last = static_cast<int>(j);
    for (uint32_t k = i; k <= j; k++) t->sync = t->sync || ops[k].kind == kAppend || ops[k].kind == kDeleteAll;
    txns.push_back(t);
    i = j + 1;
  }

  // Results go out in op order, a batch of transactions at a time, before
  // the batch's transactions close (read-back values live until then).
  Writer w{resp, resp + resplen};
  std::vector<Txn *> leftOpen;
  HintCount hints;
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
      if (prepare(ndb, ops, *txns[end], hints)) prepared++;
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
      if (t->tx && !t->done) {
        // Still outstanding: closing it is not allowed yet. Keep it, its
        // Txn (the callback's argument) and its rows, where no later round
        // reuses them, until NDB answers (reapAbandoned).
        leftOpen.push_back(t);
        continue;
      }
      if (t->tx) ndb->closeTransaction(t->tx);
      delete t;
      txns[k] = nullptr;
    }
    i = end;
  }
  pool->hintedTxns.fetch_add(hints.hinted, std::memory_order_relaxed);
  pool->primaryTxns.fetch_add(hints.primary, std::memory_order_relaxed);
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

}  // extern "C"
