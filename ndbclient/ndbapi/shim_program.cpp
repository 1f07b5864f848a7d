//go:build ndbapi

// Interpreted programs (NdbInterpretedCode): the CAS condition, incr/decr's
// add, and the expiry check that makes an expired row a miss; built in the
// flight's arena and attached to an operation's options.

#include "shim_internal.h"

namespace shim {

// condition: exit with kExitCondFailed unless column == value (NULL == NULL).
// branch_col_eq takes the value in column format, length prefix included.
static bool addCondition(NdbInterpretedCode &code, const Value &c, Uint32 okLabel) {
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

// hasProgram: the op may run an interpreted program (attachProgram), and
// stageRows gives it room for one: a CAS update, an atomic add, a delete or
// append with a condition, or an op that checks expiry. A committed read
// checks expiry from its row instead (defineOp), and leaves the room unused.
bool hasProgram(const Op &op) {
  return op.kind == kCondUpdate || op.kind == kAdd ||
         ((op.kind == kDelete || op.kind == kAppend) && (op.flags & fHasCond)) ||
         ((op.flags & fExpiry) && op.kind != kAppend);  // append checks expiry itself
}

uint32_t programWords(const Op &op) {
  const bool hasCond = (op.flags & fHasCond) || op.kind == kCondUpdate;
  // branch_col_* copy their values; the expiry check's three branches take
  // 2 + 2 + 2 + 2 + 2 words (two 8-byte values at most), its exit 1.
  return kProgramWords + (hasCond ? (op.cond.len + 3) / 4 : 0) + ((op.flags & fExpiry) ? 16 : 0);
}

// expireIsTimestamp2: op's expire column is a TIMESTAMP of MySQL 5.6 or later,
// whole seconds in 4 big-endian bytes and then 0-3 bytes of fraction. Every
// other expire column (INT, BIGINT, the old TIMESTAMP) is little endian.
bool expireIsTimestamp2(const Op &op) {
  return op.recs->t->getColumn(op.expireCol)->getType() == NdbDictionary::Column::Timestamp2;
}

// branchIfAlive jumps to alive unless the row has expired: its expire column
// is NULL, 0, or after now, as memcached's items (the embedded engine's rule).
// branch_col_lt(v, col) jumps when v < the column's value. A TIMESTAMP2
// compares as bytes, fraction included; its whole seconds alone decide, as
// for ndbmemcache, so it is alive when at least now + 1 with no fraction.
static bool branchIfAlive(NdbInterpretedCode &c, const Op &op, Uint32 alive) {
  const uint32_t width = op.recs->layout.size[op.expireCol];
  unsigned char zero[8] = {0}, now[8] = {0};
  if (expireIsTimestamp2(op)) {
    const uint32_t n = op.now + 1;
    now[0] = static_cast<unsigned char>(n >> 24);
    now[1] = static_cast<unsigned char>(n >> 16);
    now[2] = static_cast<unsigned char>(n >> 8);
    now[3] = static_cast<unsigned char>(n);
    return c.branch_col_eq_null(op.expireCol, alive) == 0 && c.branch_col_eq(zero, width, op.expireCol, alive) == 0 &&
           c.branch_col_le(now, width, op.expireCol, alive) == 0;
  }
  const uint64_t n = op.now;
  memcpy(now, &n, width);  // little endian
  return c.branch_col_eq_null(op.expireCol, alive) == 0 && c.branch_col_eq(zero, width, op.expireCol, alive) == 0 &&
         c.branch_col_lt(now, width, op.expireCol, alive) == 0;
}

// newProgram makes op's interpreted program in the room stageRows gave it
// (null, with err set, when there is none or it is taken).
static NdbInterpretedCode *newProgram(Op &op, NdbError &err) {
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
  if (ok && op.kind == kAdd) {
    // NULL -> NotNumeric, before the condition: the gateway then reads the
    // value, and memcached finds an empty one non-numeric before it
    // compares the cas.
    const Uint32 notNull = label++;
    ok = c.branch_col_ne_null(op.addCol, notNull) == 0 && c.interpret_exit_nok(kExitNotNumeric) == 0 &&
         c.def_label(static_cast<int>(notNull)) == 0;
  }
  if (ok && ((op.flags & fHasCond) || op.kind == kCondUpdate)) ok = addCondition(c, op.cond, label++);
  if (ok && op.kind == kAdd) {
    // incr wraps at the column's width, decr clamps at 0.
    // Registers: R1 = column, R2 = delta, R3 = result.
    const Uint32 col = op.addCol;
    const Uint32 sub = label++, end = label++;
    ok = c.read_attr(1, col) == 0 && c.load_const_u64(2, op.delta) == 0;
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

}  // namespace shim
