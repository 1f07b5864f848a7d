// The shim's end of the wire (format in wire.go): reading a request buffer,
// writing a response buffer, and parsing one op of a flight (parseOp) into
// WireOp, the part of an op that travels. Plain C++ with no NDB API header,
// so that testdata/shim_wire_test.cpp checks it against Go's encoding with g++
// alone (make shim-wire-test).
#ifndef NDBGATE_SHIM_WIRE_H
#define NDBGATE_SHIM_WIRE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shim_wire_consts.h"

namespace shim {

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

// WireOp is an op as the request gives it; Op (shim_internal.h) adds what
// running it needs.
struct WireOp {
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
  // fExpiry: the table's expire column and the time of the flight (unix s)
  uint16_t expireCol = 0;
  uint32_t now = 0;
};

inline Value readValue(Reader &r, bool withNull) {
  Value v;
  v.col = r.u16();
  if (withNull) v.null = r.u8() != 0;
  v.len = r.u32();
  v.data = r.bytes(v.len);
  return v;
}

inline bool parseOp(Reader &r, WireOp &op) {
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

}  // namespace shim

#endif  // NDBGATE_SHIM_WIRE_H
