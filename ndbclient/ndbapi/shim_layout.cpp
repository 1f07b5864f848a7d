//go:build ndbapi

// NdbRecord layouts: where each column of a table sits in the shim's rows
// (Layout), the key and row records made over it, and letting go of records.
// Putting values into row slots is inline in shim_internal.h.

#include "shim_internal.h"

namespace shim {

// varPrefix is the length-prefix size of a column's native format.
static int varPrefix(const NdbDictionary::Column *c) {
  switch (c->getArrayType()) {
    case NdbDictionary::Column::ArrayTypeShortVar: return 1;
    case NdbDictionary::Column::ArrayTypeMediumVar: return 2;
    default: return 0;
  }
}

static bool isBlob(const NdbDictionary::Column *c) {
  return c->getType() == NdbDictionary::Column::Blob || c->getType() == NdbDictionary::Column::Text;
}

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
// by a flight, or no abandoned transaction left. Callers hold dictMu, or are
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

// releaseRecs lets go of records flights may have used: released at once, or
// retired while abandoned transactions may still unpack through them (see
// Conn). Callers hold flightMu exclusively and dictMu.
void releaseRecs(Conn &c, TableRecs &r) {
  for (Owed *o : c.owed) o->stale = true;  // their ops point into r
  if (c.abandonedTxns == 0 && c.owedTxns == 0) {
    freeRecs(c, r);
    return;
  }
  if (r.key) c.retired.push_back(r.key);
  if (r.row) c.retired.push_back(r.row);
  r = TableRecs();
}

// releaseRetired releases c's retired records. Only once c.abandonedTxns and
// c.owedTxns are 0;
// callers hold dictMu, or are ndbgate_close.
void releaseRetired(Conn &c) {
  if (!c.dict) return;
  NdbDictionary::Dictionary *dict = c.dict->getDictionary();
  for (NdbRecord *rec : c.retired) dict->releaseRecord(rec);
  c.retired.clear();
}

}  // namespace shim
