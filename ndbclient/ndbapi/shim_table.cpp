//go:build ndbapi

// Tables: describing one (its shape, for wire.go decodeDescribe, and its
// records on every connection), a refresh after a schema change, and
// creating, dropping and altering tables through NdbDictionary.

#include "shim_internal.h"

namespace shim {

// describeOn looks the table up in connection c's dictionary (dropping the
// cached copy first when invalidate is set) and makes c's records for it
// into r. On failure err says why, and r holds what must still be freed
// (freeRecs). Callers hold dictMu, or own c alone.
bool describeOn(Conn &c, const char *db, const char *table, bool invalidate, TableRecs &r, std::string &err) {
  if (!c.dict) {
    err = "the cluster is unreachable: every data node was lost";
    return false;
  }
  c.dict->setDatabaseName(db);
  NdbDictionary::Dictionary *dict = c.dict->getDictionary();
  if (invalidate) dict->invalidateTable(table);
  r.t = dict->getTable(table);
  if (!r.t) {
    err = std::string(db) + "." + table + ": " + ndbErrText(dict->getNdbError());
    return false;
  }
  if (!buildLayout(r.t, r.layout)) {
    err = std::string(db) + "." + table + ": no columns, or more than NDB allows";
    return false;
  }
  r.key = makeRecord(dict, r.t, r.layout, true);
  r.row = makeRecord(dict, r.t, r.layout, false);
  if (!r.key || !r.row) {
    err = std::string(db) + "." + table + ": createRecord: " + ndbErrText(dict->getNdbError());
    return false;
  }
  return true;
}

// describeInto describes the table on every connection (describeOn), writes
// its shape into out and returns the records; empty on error. Called with
// dictMu held.
static std::vector<TableRecs> describeInto(ndbgate_pool *pool, const char *db, const char *table, bool invalidate,
                                           unsigned char *out, int outlen, char *err, int errlen) {
  std::vector<TableRecs> byConn;
  auto fail = [&](const std::string &msg) {
    setErr(err, errlen, msg);
    // No flight has seen these records, so no abandoned transaction uses them.
    for (size_t i = 0; i < byConn.size(); i++) freeRecs(pool->conns[i], byConn[i]);
    return std::vector<TableRecs>();
  };
  for (Conn &c : pool->conns) {
    byConn.emplace_back();
    std::string msg;
    if (!describeOn(c, db, table, invalidate, byConn.back(), msg)) return fail(msg);
    if (byConn.size() > 1 && byConn.back().t->getObjectVersion() != byConn[0].t->getObjectVersion()) {
      return fail(std::string(db) + "." + table + " changed while it was being described; try again");
    }
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
    w.u8(static_cast<uint8_t>((c->getPrimaryKey() ? 1 : 0) | (c->getPartitionKey() ? 2 : 0) |
                              (c->getAutoIncrement() ? 8 : 0)));
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
static NdbDictionary::Dictionary *dictOn(ndbgate_pool *pool, const char *db, char *err, int errlen) {
  Ndb *ndb = pool->conns[0].dict;
  if (!ndb) {
    setErr(err, errlen, "the cluster is unreachable");
    return nullptr;
  }
  ndb->setDatabaseName(db);
  return ndb->getDictionary();
}

}  // namespace shim

using namespace shim;

extern "C" {

int ndbgate_describe(ndbgate_pool *pool, const char *db, const char *table, unsigned char *out, int outlen,
                     char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::lock_guard<std::mutex> g(pool->dictMu);
  std::vector<TableRecs> byConn = describeInto(pool, db, table, false, out, outlen, err, errlen);
  if (byConn.empty()) return -1;
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->tables.push_back(std::move(byConn));
  pool->names.emplace_back(db, table);
  return static_cast<int>(pool->tables.size() - 1);
}

int ndbgate_refresh(ndbgate_pool *pool, int table_id, const char *db, const char *table, unsigned char *out,
                    int outlen, char *err, int errlen) {
  if (pool->conns.empty()) { setErr(err, errlen, "no connection"); return -1; }
  std::unique_lock<std::shared_mutex> rg(pool->flightMu);
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
    if (keyFlags & 8) {
      // NDB makes the table's sequence (SYSTAB_0) with the table, as for
      // mysqld's AUTO_INCREMENT.
      c.setAutoIncrement(true);
      c.setAutoIncrementInitialValue(1);
    }
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

}  // extern "C"
