// The shim's request parser (shim_wire.h) against Go's encoder: reads the
// golden flight that wire_golden_test.go keeps (flight.golden, written by
// encodeFlight) and prints every field as it parses it, in the format of
// flight.golden.txt, which the Go test writes from the ops themselves.
// `make shim-wire-test` builds this with g++ alone (no NDB) and diffs the
// two.
//
// Usage: shim_wire_test flight.golden > got.txt
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "../shim_wire.h"

namespace {

void hex(const unsigned char *p, uint32_t n) {
  if (n == 0 || p == nullptr) {
    std::printf("-");
    return;
  }
  for (uint32_t i = 0; i < n; i++) std::printf("%02x", p[i]);
}

void value(const char *what, const shim::Value &v, bool withNull) {
  std::printf("%s %u ", what, static_cast<unsigned>(v.col));
  if (withNull) std::printf("%d ", v.null ? 1 : 0);
  std::printf("%u ", static_cast<unsigned>(v.len));
  hex(v.data, v.len);
  std::printf("\n");
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s flight.golden\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  const std::vector<unsigned char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // As ndbgate_execute reads a request: the op count, the ops, the bound.
  shim::Reader r{buf.data(), buf.data() + buf.size()};
  const uint32_t n = r.u32();
  std::printf("nops %u\n", static_cast<unsigned>(n));
  for (uint32_t i = 0; i < n; i++) {
    shim::WireOp op;
    if (!shim::parseOp(r, op)) {
      std::printf("op %u: malformed\n", static_cast<unsigned>(i));
      return 1;
    }
    std::printf("op %u\nkind %u\nlock %u\nflags %u\ntable %u\n", static_cast<unsigned>(i),
                static_cast<unsigned>(op.kind), static_cast<unsigned>(op.lock), static_cast<unsigned>(op.flags),
                static_cast<unsigned>(op.table));
    if (op.flags & shim::fPartition) std::printf("partition %u\n", static_cast<unsigned>(op.partition));
    for (const shim::Value &k : op.key) value("key", k, false);
    for (uint16_t c : op.read) std::printf("read %u\n", static_cast<unsigned>(c));
    for (const shim::Value &s : op.set) value("set", s, true);
    if ((op.flags & shim::fHasCond) || op.kind == shim::kCondUpdate) value("cond", op.cond, true);
    if (op.kind == shim::kAdd) {
      std::printf("add %u %llu %llu\n", static_cast<unsigned>(op.addCol), static_cast<unsigned long long>(op.delta),
                  static_cast<unsigned long long>(op.initial));
    }
    if (op.kind == shim::kAppend) {
      std::printf("append %u %u ", static_cast<unsigned>(op.appendCol), static_cast<unsigned>(op.dataLen));
      hex(op.data, op.dataLen);
      std::printf("\n");
    }
    if (op.flags & shim::fExpiry) {
      std::printf("expiry %u %u\n", static_cast<unsigned>(op.expireCol), static_cast<unsigned>(op.now));
    }
  }
  const uint32_t bound = r.u32();
  if (!r.ok) {
    std::printf("malformed: no response bound\n");
    return 1;
  }
  std::printf("bound %u\n", static_cast<unsigned>(bound));
  if (r.p != r.end) {
    std::printf("%zu bytes after the bound\n", static_cast<size_t>(r.end - r.p));
    return 1;
  }
  std::printf("end\n");
  return 0;
}
