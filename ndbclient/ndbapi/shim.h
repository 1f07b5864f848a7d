// C surface of ndbgate's NDB API shim (shim*.cpp; shim.cpp lists the
// files). One call per flight: the request and the results travel in flat
// little-endian buffers (format in wire.go); C keeps no Go pointer after a
// call returns.
#ifndef NDBGATE_SHIM_H
#define NDBGATE_SHIM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ndbgate_pool ndbgate_pool;

// ndbgate_open connects `connections` cluster connections (each takes a free
// API node slot) and waits up to timeout_s for the data nodes. NULL on
// failure, with the reason in err.
ndbgate_pool *ndbgate_open(const char *connectstring, int connections,
                           int timeout_s, char *err, int errlen);
void ndbgate_close(ndbgate_pool *pool);

// ndbgate_ready: 0 when every connection sees a live data node.
int ndbgate_ready(ndbgate_pool *pool, char *err, int errlen);
int ndbgate_data_nodes(ndbgate_pool *pool);
// ndbgate_node_id: the node id of the first connection (an API node); 0 when
// there is none.
int ndbgate_node_id(ndbgate_pool *pool);
// ndbgate_hint_stats: transactions started with a key hint, and those whose
// TC ran on the node holding the key's primary replica.
void ndbgate_hint_stats(ndbgate_pool *pool, unsigned long long *hinted,
                        unsigned long long *on_primary);
// ndbgate_live_nodes: the fewest data nodes any pooled connection reaches.

// Losing every data node. The NDB API reconnects only once its global
// dictionary cache is empty, so the driver lets go of everything it holds:
// ndbgate_detach deletes the Ndb objects, table objects and records (flights
// then fail at once with 4009, nothing sent); once data nodes are back,
// ndbgate_reattach makes new Ndb objects (-1 while none is reachable),
// ndbgate_refresh describes each table again under its id, and
// ndbgate_resume lets flights run.
int ndbgate_live_nodes(ndbgate_pool *pool);
void ndbgate_detach(ndbgate_pool *pool);
int ndbgate_reattach(ndbgate_pool *pool, char *err, int errlen);
void ndbgate_resume(ndbgate_pool *pool);

// Following a changing cluster (shim_follow.cpp). ndbgate_table_altered: 1
// when NDB has told the API that table_id was altered or reorganised since
// it was described (describe it again: ndbgate_refresh). ndbgate_config_data_nodes:
// the data nodes in the management server's configuration, or -1 with the
// reason in err. ndbgate_conn_data_nodes: the data nodes connection conn
// knows (its configuration when it connected). ndbgate_roll_connection
// replaces connection conn with a new one (a new API node id, the current
// configuration) with the same tables, waiting only for the flights under way
// when it swaps them; 0, or -1 with the reason in err (the old one stays).
int ndbgate_table_altered(ndbgate_pool *pool, int table_id);
int ndbgate_config_data_nodes(const char *connectstring, int timeout_ms, char *err, int errlen);
int ndbgate_conn_data_nodes(ndbgate_pool *pool, int conn);
int ndbgate_roll_connection(ndbgate_pool *pool, int conn, const char *connectstring, int timeout_s, char *err,
                            int errlen);

// ndbgate_describe writes a table's shape into out (wire.go: describe
// format) and returns its id for later calls; negative on error.
int ndbgate_describe(ndbgate_pool *pool, const char *db, const char *table,
                     unsigned char *out, int outlen, char *err, int errlen);

// ndbgate_refresh drops table_id's cached dictionary objects (after NDB
// reported the schema changed), looks db.table up again under the same id and
// writes its new shape into out; it waits for the flights under way. Returns
// table_id, or negative with the reason in err (the table is gone).
int ndbgate_refresh(ndbgate_pool *pool, int table_id, const char *db,
                    const char *table, unsigned char *out, int outlen,
                    char *err, int errlen);

// ndbgate_create_table creates db.table through NdbDictionary, for clusters
// without a MySQL server (tests; the ndb-create-tables command). spec is in
// describe's format (wire.go encodeCreate). 0: created, 1: it already
// existed (its shape is not compared), -1: error in err.
int ndbgate_create_table(ndbgate_pool *pool, const char *db, const char *table,
                         const unsigned char *spec, int speclen, char *err,
                         int errlen);

// ndbgate_drop_table drops db.table (tests of schema changes). 0: dropped,
// 1: there was no such table, -1: error in err.
int ndbgate_drop_table(ndbgate_pool *pool, const char *db, const char *table,
                       char *err, int errlen);

// ndbgate_add_column adds a nullable column of NdbDictionary type `type` to
// db.table online (tests of schema changes while serving). 0: added.
int ndbgate_add_column(ndbgate_pool *pool, const char *db, const char *table,
                       const char *column, int type, char *err, int errlen);

// ndbgate_row_count: the rows of a described table, summed from each
// fragment's count (a dirty scan returning one row per fragment).
int ndbgate_row_count(ndbgate_pool *pool, int table_id, unsigned long long *rows,
                      char *err, int errlen);

// ndbgate_scan_rows reads every row of a described table with a
// committed-read scan: per row, per column of cols (ncols of them, in that
// order), u8 null, u32 len, the native bytes (a read's values in
// ndbgate_execute's response). More than limit rows (limit >= 0) stops the
// scan. Returns NDBGATE_SCAN_OK with *outlen bytes of *nrows rows in out;
// NDBGATE_SCAN_TOO_MANY; NDBGATE_SCAN_SHORT when outcap is too small, with
// the bytes needed in *outlen (nothing usable in out: scan again); or
// NDBGATE_SCAN_ERROR with the NdbError's code, status and classification in
// ndb_error[0..2] and its message in err.
#define NDBGATE_SCAN_OK 0
#define NDBGATE_SCAN_TOO_MANY 1
#define NDBGATE_SCAN_SHORT 2
#define NDBGATE_SCAN_ERROR (-1)
int ndbgate_scan_rows(ndbgate_pool *pool, int table_id, const unsigned short *cols,
                      int ncols, int limit, unsigned char *out, int outcap,
                      int *outlen, int *nrows, int *ndb_error, char *err,
                      int errlen);

// ndbgate_next_auto_increment takes the next value of a described table's
// auto-increment sequence (Ndb::getAutoIncrementValue, reserving cache_size
// values at a time) into *value: 0, or -1 with the NdbError's code, status
// and classification in ndb_error[0..2] and its message in err.
int ndbgate_next_auto_increment(ndbgate_pool *pool, int table_id,
                                unsigned int cache_size,
                                unsigned long long *value, int *ndb_error,
                                char *err, int errlen);

// ndbgate_partition: the partition of a key (every primary-key column in
// native format, in column order, concatenated as nparts of key_lens), as
// the TC hint of a transaction on that key computes it; or -1.
int ndbgate_partition(ndbgate_pool *pool, int table_id,
                      const unsigned char *key, const int *key_lens,
                      int nparts);
// ndbgate_primary_node: the data node holding a partition's primary replica.
int ndbgate_primary_node(ndbgate_pool *pool, int table_id, int partition);

// ndbgate_polled_flights: the round trips of ndbgate_execute that polled
// for their answer (poll_us) before sleeping.
unsigned long long ndbgate_polled_flights(ndbgate_pool *pool);
// ndbgate_expired_found: the ops that found their row there but expired,
// and so missed (memcached's get_expired).
unsigned long long ndbgate_expired_found(ndbgate_pool *pool);
// ndbgate_wake_poll_groups, for tests: NdbWaitGroup::wakeup on each
// connection's wait group that exists (pollFor), which NDB 7.5 never clears;
// returns how many it woke.
int ndbgate_wake_poll_groups(ndbgate_pool *pool);

// ndbgate_execute runs one flight's ops, or the item-state reads before or
// updates after one (state.go), on connection conn (each connection is used
// by one executor thread at a time). With poll_us > 0 it polls up to that
// many microseconds for NDB's first answer before it sleeps (a lone
// flight, ndb.busy_poll). Returns the bytes written to resp, or -needed
// when resp is too small (nothing was executed then), or -1 with err.
//
// sections (nsections of them, or none) cut the ops into parts answered
// apart, three numbers each: a ticket, the op the section ends before, and
// how long the flight waits for it, in microseconds. Each section's
// results then follow a status byte: 0, or 1 when the flight returned
// without them. With wait_us > 0 (ndb.flight_wait), a flight of sections
// and only plain transactions, one batch of them, waits no longer than
// each section's wait: a section NDB has not answered by then is owed, and
// ndbgate_collect returns its results later. Transactions that could not
// be owed, or would wait in startTransaction for a node that has stopped
// answering, are not sent (a temporary error each).
int ndbgate_execute(ndbgate_pool *pool, int conn, const unsigned char *req,
                    int reqlen, unsigned char *resp, int resplen, int poll_us,
                    int wait_us, const unsigned int *sections, int nsections,
                    char *err, int errlen);

// ndbgate_collect returns the owed sections of connection conn that NDB has
// answered since (reading its sockets first, without sleeping, when poll is
// set): u32 count, then per section u32 ticket, u8 status (0: the results
// of its ops follow, as ndbgate_execute writes them; 2: a refresh let go of
// its table's records, 3: its Ndb object was let go of, and in both cases
// the outcome is unknown). *more is set when some did not fit in resp.
// The caller holds the connection as for a flight. -1 on a bad argument.
int ndbgate_collect(ndbgate_pool *pool, int conn, int poll, unsigned char *resp,
                    int resplen, int *more);

#ifdef __cplusplus
}
#endif
#endif
