package ndbmemcache

import (
	"slices"
	"strings"
)

// The allow-list: the known differences, each with why it is accepted. A
// difference not in it fails the test. Keys are "ROLE/SEQUENCE/STEP":
// ROLE is a role, "ndb" (the roles whose keys live in demo_table: db-only,
// default_role, ndb-caching) or "*" (every role); STEP may be "*" (every
// step of the sequence). The most specific key wins: role, then ndb, then *.
//
// A difference in which ndbgate crashed or stopped answering is never
// allowed, whatever the list says. Sources cited: ndbmemcache's
// storage/ndb/memcache/src (src/), its bundled memcached
// extra/memcached/daemon/memcached.c (memcached.c, a 2011 1.6.0-beta engine
// branch), and today's memcached (memcached/proto_parser.c, proto_text.c).
// README.md has every difference with both replies.
var known = []struct {
	why  string
	keys []string
}{
	{"incr or decr that the policy refuses (ndb-read-only: sets disabled): ndbmemcache's ENGINE_NOT_STORED (src/ndb_engine.c:647-651) reaches its memcached, which writes it for incr as SERVER_ERROR failed to store item; ndbgate answers NOT_STORED, as for the refused set. memcached's text incr has neither reply, and clients treat both as errors",
		[]string{policiesRole + "/policy-read-only/incr via ro:"}},
	// --- ndbmemcache's bundled memcached against today's memcached ---------
	{"ndbmemcache's memcached has no text touch command (memcached.c:4520-4610 dispatches none): ERROR; memcached >= 1.4.8 and ndbgate answer TOUCHED/NOT_FOUND",
		[]string{"*/misses/touch", "*/key-length/touch 251-byte key", "*/touch/touch to 1 s", "*/touch/touch to 0 (never expires)",
			"*/touch/touch noreply", "*/touch/get after 2.1 s", "*/touch/touch expired",
			policiesRole + "/large-values-expiry/touch live", policiesRole + "/large-values-expiry/get after touch and 2.1 s"}},
	{"after CLIENT_ERROR bad command line format (key over 250 bytes, bad flags or cas unique) ndbmemcache's memcached does not swallow the data block (memcached.c:4236-4254 return at once), so the data line answers ERROR; today's memcached swallows it (process_update_command: conn_swallow, sbytes = vlen), as ndbgate does",
		[]string{"*/set-get/set negative flags", "*/cas/cas bad unique", "*/key-length/set 251-byte key", "*/key-length/add 251-byte key"}},
	{"ndbmemcache's memcached parses flags with safe_strtoul into 32 bits (memcached.c:4244) and stores 4294967296 as 0; today's memcached (safe_strtoflags) and ndbgate refuse it; the get that follows shows the stored item",
		[]string{"*/set-get/set flags 2^32", "mc-only/set-get/get two, one missing"}},
	{"ndbmemcache's memcached does not check the data block's \\r\\n (complete_update_ascii swallows any 2 bytes, memcached.c:1059): it stores \"abc\"; today's memcached and ndbgate answer CLIENT_ERROR bad data chunk",
		[]string{"*/set-get/set bad data chunk", "*/set-get/get after bad chunk"}},
	{"binary error texts: ndbmemcache's memcached says \"Data exists for key\" / \"Too large\" (memcached.c:1387-1391), today's memcached and ndbgate \"Data exists for key.\" / \"Too large.\"",
		[]string{"*/binary-basics/add existing", "*/binary-basics/set with stale cas", "*/binary-pipelined/set get add delete", "*/binary-pipelined/quiet writes",
			"mc-only/binary-basics/delete with stale cas", "mc-only/binary-over-1mb/set 1048577 bytes"}},
	{"an unknown binary opcode goes to the engine's unknown_command (ndb_engine.c:694), which answers status 0x81 with no text; memcached and ndbgate add \"Unknown command\"",
		[]string{"*/binary-limits/unknown opcode"}},
	{"ndbmemcache's binary TOUCH is the default engine's (extra/memcached/engines/default_engine/default_engine.c:642-678, reached through ndb_unknown_command): it sees only the local cache (NOT_FOUND for an item in NDB alone) and sends no flags; memcached and ndbgate touch the item and return its flags",
		[]string{"*/binary-basics/touch"}},
	{"mc-only: a negative exptime never expires in ndbmemcache's memcached (the engine API's exptime is rel_time_t, engine.h:240, so -1 becomes 2^32-1, an absolute time in 2106); today's memcached (EXPTIME_TO_POSITIVE_TIME) and ndbgate expire it at once",
		[]string{"mc-only/flags-expiry/get at once", "mc-only/flags-expiry/get after 2.1 s", "mc-only/flags-expiry/append expired", "mc-only/flags-expiry/incr expired"}},
	{"ndb-caching: ndbmemcache's local cache keeps an item set with a negative exptime (rel_time_t, as for mc-only above), so under the caching policy its gets answer the item from the cache, at once and after 2.1 s, and replace finds it; through NDB alone (db-only, default_role) ndbmemcache expires it at once, as memcached and ndbgate do",
		[]string{"ndb-caching/tabs-expiry/get at once", "ndb-caching/tabs-expiry/get after 2.1 s", "ndb-caching/tabs-expiry/replace expired"}},
	{"mc-only: memcached rewrites a shorter incr/decr result in place, padded with spaces to the old length (\"99 \"; memcached do_add_delta: memset ' '), as ndbmemcache's default engine does; ndbgate stores the bare number, as ndbmemcache does for NDB. ndbgate differs from memcached here, harmlessly for clients that parse numbers",
		[]string{"mc-only/incr-decr/get 0", "mc-only/incr-decr/get wrapped", "mc-only/incr-decr/get 99", "mc-only/incr-decr/get 8", "mc-only/incr-decr/incr noreply",
			"mc-only/binary-basics/get incremented", "mc-only/binary-pipelined/counters", "mc-only/binary-pipelined/many gets"}},
	{"mc-only: memcached counts the item header in its 1 MB item size, so a 1048576-byte value is too large; ndbgate's item-size-max bounds the value alone and stores it. ndbgate differs from memcached here",
		[]string{"mc-only/value-over-1mb/set 1048576 bytes", "mc-only/value-over-1mb/get 1048576 bytes"}},

	// --- ndbmemcache's NDB engine (ndb_engine.so) --------------------------
	{"ndbmemcache refuses an empty value with CLIENT_ERROR value too big: Operation::setColumn treats an encoded length of 0 as failure (include/Operation.h:198-200, do_write returns op_overflow, ndb_worker.cc:415-420); memcached and ndbgate store it. The replies after it show the old value",
		[]string{"ndb/set-get/set empty value with flags", "ndb/set-get/get empty", "ndb/set-get/gets two", "ndb/set-get/get two, one missing", "ndb/set-get/get after bad chunk",
			"ndb/incr-non-numeric/set empty", "ndb/incr-non-numeric/incr empty", "ndb/incr-non-numeric/get empty"}},
	{"ndbmemcache counts on demo_table's math_value column (dup_numbers, QueryPlan.cc:233-236): set writes it for a numeric value (ndb_worker.cc:429-448), append/prepend do not, incr/decr update it alone and NULL string_value (ndb_worker.cc:657-661). So incr after append uses the number before the append; ndbgate increments the value the client sees",
		[]string{"ndb/append-prepend/incr appended number", "ndb/append-prepend/get incremented", "ndb/noreply/incr noreply", "ndb/noreply/decr noreply"}},
	{"incr/decr of a non-numeric value: ndbmemcache's math_value is NULL, its interpreted update still succeeds and callback_incr returns the unread math buffer + delta (ndb_worker.cc:873 reads COL_STORE_MATH without a NULL check), so the reply is a stale or arbitrary number and the value becomes it; memcached and ndbgate answer CLIENT_ERROR cannot increment or decrement non-numeric value (binary: status 0x0006). A value with a leading space (\" 5\") counts as non-numeric (ndb_worker.cc:430 isdigit of the first byte) though memcached's strtoull reads it",
		[]string{"ndb/incr-non-numeric/*", "ndb/incr-decr/incr 2^64", "ndb/incr-decr/incr spaces", "ndb/flags-expiry/incr expired",
			"ndb/binary-basics/incr non-numeric", "ndb/binary-basics/getq hit", "ndb/mc-prefix/incr non-numeric"}},
	{"ndbmemcache keeps an incr/decr delta in a uint32_t (workitem.h:57 math_flags, set at workitem.c:161): incr by 2^64-1 adds 2^32-1",
		[]string{"ndb/incr-decr/incr by 2^64-1"}},
	{"ndbmemcache returns cas 0 for an item last written by incr/decr: with string_value NULL the read builds a new hash item (ndb_worker.cc:1069-1085, build_hash_item) that never gets the row's cas_value, though the row has one",
		[]string{"ndb/cas/incr changes cas", "ndb/incr-decr/gets after incr", "ndb/binary-basics/get incremented", "ndb/binary-pipelined/counters", "ndb/binary-pipelined/many gets"}},
	{"ndbmemcache's binary INCR that finds no item still carries a cas: do_math makes one first (worker_set_cas, ndb_worker.cc:596); memcached and ndbgate send 0",
		[]string{"ndb/binary-basics/incr missing, no create"}},
	{"ndbmemcache ignores the cas of a binary DELETE for NDB (ndb_worker.cc:345-348: \"we could also support op.deleteTupleCAS\"): it deletes the item; memcached and ndbgate answer EEXISTS and keep it",
		[]string{"ndb/binary-basics/delete with stale cas", "ndb/binary-basics/get after stale delete"}},
	{"ndbmemcache CRASHES (SIGSEGV in memmove/memcpy) on append/prepend to a row whose string_value is NULL, which incr/decr leave (worker_append: getStringValueNoCopy gives a NULL pointer, ndb_worker.cc:971, 986-995)",
		[]string{"ndb/prepend-after-incr/prepend to the incremented number"}},
	{"a value longer than demo_table's VARBINARY(13500): ndbmemcache answers CLIENT_ERROR value too big (ENGINE_E2BIG, memcached.c:1123-1124; binary: status 0x0005 Not stored with a cas); ndbgate answers memcached's SERVER_ERROR object too large for cache (binary: 0x0003 Too large.)",
		[]string{"ndb/value-size/set 13501 bytes", "ndb/value-size/set 13501 bytes over it", "ndb/value-size/set 100000 bytes", "ndb/binary-limits/set 13501 bytes", "ndb/mc-prefix/set 13501 bytes"}},
	{"a set refused as too long for demo_table's VARBINARY(13500): ndbmemcache keeps the old value (its store fails after memcached's allocate succeeded, so memcached.c's remove of a refused SET never runs); ndbgate drops it, as memcached drops the item a refused set would replace, so a read after it misses and a delete finds nothing",
		[]string{"ndb/value-size/get after the refused set", "ndb/mc-prefix/delete"}},
	{"append past demo_table's VARBINARY(13500): ndbmemcache's worker_append caps the length but copies the affix past the read buffer (ndb_worker.cc:986-990) and ignores setColumn's failure, answers STORED and stores an empty or arbitrary value (its heap is then corrupt: the test restarts it); ndbgate refuses with SERVER_ERROR object too large for cache and keeps the value",
		[]string{"ndb/append-past-column/append past 13500", "ndb/append-past-column/get after append past 13500"}},
	{"a value too large for memcached's 1 MB items (1048576 bytes or more: the item header counts) on an NDB prefix: memcached.c:4302-4316 answers SERVER_ERROR and calls the engine's remove, which ndbmemcache runs asynchronously (EWOULDBLOCK) while memcached goes on; the workitem left on the connection is taken for the next command's callback (ndb_engine.c:366-369, 452-460), and ndbmemcache CRASHES (SIGSEGV in ndb_get/ndb_remove) at that set or a later command. Its binary error text is read from a stack buffer gone by then (write_bin_packet, memcached.c:1366, 1434-1436): arbitrary bytes instead of \"Too large\"",
		[]string{"ndb/value-over-1mb/*", "ndb/binary-over-1mb/*"}},

	// --- ndbmemcache's large values (demo_ext, external_values) --------------
	{"a value in parts read by ndbmemcache carries cas 0: ExternalValue::build_hash_item (src/ExternalValue.cc:813-846) makes the item without the row's cas_value; ndbgate answers the row's cas, as memcached answers the item's. So ndbmemcache's cas of such a value never matches (EXISTS), and ndbgate's stores",
		[]string{"ndb/large-values/gets", "ndb/large-values/cas good"}},
	{"append or prepend to a value in parts: ndbmemcache writes the row's flags from the append's own item (ExternalValue::setMiscColumns, src/ExternalValue.cc:576-597, hash_item_get_flags of the affix: 0); memcached and ndbgate keep the item's flags",
		[]string{"ndb/large-values/append across a part", "ndb/large-values/prepend"}},
	{"incr on demo_ext, which has no increment column: ndbmemcache refuses all arithmetic there (src/ndb_engine.c:647-651, ENGINE_NOT_STORED: SERVER_ERROR failed to store item); ndbgate reads the value as memcached does and finds it not a number",
		[]string{"ndb/large-values/incr of a large value"}},
	{"ndb-caching: after a set of a value short enough for the row, ndbmemcache's append out of the row reads the affix alone (its local cache is not kept consistent, as in ndb-caching/append-prepend), and stores the affix as the whole value; ndbgate appends to the stored value",
		[]string{"ndb-caching/large-values/append out of the row", "ndb-caching/large-values/add new, large", "ndb-caching/large-values-binary/binary append"}},
	{"binary GET of a value in parts: ndbmemcache answers a cas other than the one its SET or APPEND returned, since build_hash_item (src/ExternalValue.cc:813-846) makes a new item without the row's cas_value, which its memcached gives a cas of its own; after APPEND the flags are the affix's 0 too (ExternalValue::setMiscColumns). memcached and ndbgate answer the cas the write returned, and keep the flags",
		[]string{"ndb/large-values-binary/binary append", "ndb-caching/large-values-binary/binary set and get"}},

	// --- ndbmemcache's caching policy (ndb-caching) --------------------------
	{"ndb-caching: ndbmemcache's local cache is not kept consistent with NDB (ndb_worker.cc:1093-1101: \"Memcapable INCR/DECR/APPEND/PREPEND tests fail when local caching is enabled\"): after append/prepend the cache holds the affix alone, after incr/decr the old value; a cached item has another cas than the row (so a cas from gets is EXISTS), and values cached after a read have the wrong length (ndb_worker.cc:1176 \"fixme: probably nbytes is wrong\": trailing NUL bytes). ndbgate's caching keeps the cache and NDB alike",
		[]string{"ndb-caching/append-prepend/*", "ndb-caching/prepend-after-incr/get incremented", "ndb-caching/cas/*", "ndb-caching/incr-decr/*",
			"ndb-caching/noreply/*", "ndb-caching/flags-expiry/get after 2.1 s", "ndb-caching/flags-expiry/get re-added", "ndb-caching/text-pipelined/*",
			"ndb-caching/binary-basics/get", "ndb-caching/binary-basics/getk", "ndb-caching/binary-basics/get replaced", "ndb-caching/binary-basics/set with good cas",
			"ndb-caching/binary-basics/get appended", "ndb-caching/binary-basics/getq hit", "ndb-caching/binary-pipelined/*"}},
}

// ndbRoles are the roles whose keys live in demo_table (the "ndb" group).
var ndbRoles = []string{"db-only", "default_role", "ndb-caching", policiesRole}

var allowList = func() map[string]string {
	m := map[string]string{}
	for _, k := range known {
		for _, key := range k.keys {
			m[key] = k.why
		}
	}
	return m
}()

// allowKey is the allow-list key that matches d, or "" for none.
func allowKey(d difference) string {
	roles := []string{d.role}
	if slices.Contains(ndbRoles, d.role) {
		roles = append(roles, "ndb")
	}
	roles = append(roles, "*")
	for _, r := range roles {
		for _, step := range []string{d.step, "*"} {
			if k := r + "/" + d.seq + "/" + step; allowList[k] != "" {
				return k
			}
		}
	}
	return ""
}

// allowed is the reason d is allowed, or "".
func allowed(d difference) string {
	if slices.ContainsFunc(d.gw, func(r string) bool { return strings.HasPrefix(r, "\"<") }) {
		return "" // ndbgate lost the connection or stopped answering: never allowed
	}
	return allowList[allowKey(d)]
}
