//go:build ndbapi

// Following a cluster that changes while it serves:
//
//   - a table reorganised or altered online: DBDICT tells every API node
//     (ALTER_TABLE_REP), and the API marks its cached table object Altered;
//     ndbgate_table_altered reports it, and the driver describes the table
//     again (ndbgate_refresh), which brings the new partitions and primaries;
//   - data nodes added to the configuration: an NDB API connection learns the
//     cluster's nodes once, when it connects, which is why the NDB manual asks
//     for a rolling restart of every API node after adding data nodes.
//     ndbgate_config_data_nodes asks the management server how many data
//     nodes its configuration has, and ndbgate_roll_connection makes one
//     pooled connection again, the rolling restart done inside the process.

#include "shim_internal.h"

#include <mgmapi/mgmapi.h>

#include <cstdlib>

namespace shim {

// swapConn puts fresh, with its records for every table, in place of
// connection i, and returns the old connection and its records. Callers hold
// flightMu exclusively, dictMu and mu exclusively.
static Conn swapConn(ndbgate_pool *pool, size_t i, Conn &fresh, std::vector<TableRecs> &recs) {
  // Moved, not copied: parked transactions point into the old arena.
  Conn old = std::move(pool->conns[i]);
  pool->conns[i] = std::move(fresh);
  fresh = Conn();
  for (size_t id = 0; id < pool->tables.size(); id++) {
    if (i < pool->tables[id].size()) std::swap(pool->tables[id][i], recs[id]);
  }
  // The old Ndb object goes with the sections it owes: the executor learns
  // of them from the new connection (ndbgate_collect).
  Conn &now = pool->conns[i];
  now.lost = std::move(old.lost);
  old.lost.clear();
  for (Owed *o : old.owed) {
    for (const OwedSection &sec : o->sections) {
      if (!sec.reported) now.lost.push_back(sec.ticket);
    }
  }
  return old;
}

// dropConn lets go of a connection no flight or describe can reach any more.
static void dropConn(Conn &c, std::vector<TableRecs> &recs) {
  std::vector<TableRecs *> ptrs;
  for (TableRecs &r : recs) ptrs.push_back(&r);
  dropConnNdbs(c, ptrs);
  delete c.cluster;
  c.cluster = nullptr;
}

}  // namespace shim

using namespace shim;

extern "C" {

int ndbgate_table_altered(ndbgate_pool *pool, int table_id) {
  std::shared_lock<std::shared_mutex> rg(pool->flightMu);  // no refresh frees the table objects meanwhile
  std::shared_lock<std::shared_mutex> g(pool->mu);
  if (table_id < 0 || static_cast<size_t>(table_id) >= pool->tables.size()) return 0;
  for (const TableRecs &r : pool->tables[static_cast<size_t>(table_id)]) {
    // The API's cluster manager thread writes the status (GlobalDictCache::
    // alter_table_rep) without a lock any caller could take; a status read
    // a moment late only delays the refresh to the next look.
    if (r.t && r.t->getObjectStatus() != NdbDictionary::Object::Retrieved) return 1;
  }
  return 0;
}

int ndbgate_config_data_nodes(const char *connectstring, int timeout_ms, char *err, int errlen) {
  NdbMgmHandle h = ndb_mgm_create_handle();
  if (!h) { setErr(err, errlen, "out of memory"); return -1; }
  int n = -1;
  if (ndb_mgm_set_connectstring(h, connectstring) != 0 || ndb_mgm_set_timeout(h, static_cast<unsigned>(timeout_ms)) != 0 ||
      ndb_mgm_connect(h, 0, 0, 0) != 0) {
    setErr(err, errlen, std::string("management server ") + connectstring + ": " + ndb_mgm_get_latest_error_msg(h));
  } else if (ndb_mgm_cluster_state *st = ndb_mgm_get_status(h)) {
    // Every node of the configuration is listed, started or not.
    n = 0;
    for (int i = 0; i < st->no_of_nodes; i++) {
      if (st->node_states[i].node_type == NDB_MGM_NODE_TYPE_NDB) n++;
    }
    free(st);
  } else {
    setErr(err, errlen, std::string("management server status: ") + ndb_mgm_get_latest_error_msg(h));
  }
  ndb_mgm_disconnect(h);
  ndb_mgm_destroy_handle(&h);
  return n;
}

int ndbgate_conn_data_nodes(ndbgate_pool *pool, int conn) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size()) return 0;
  return static_cast<int>(pool->conns[static_cast<size_t>(conn)].cluster->no_db_nodes());
}

int ndbgate_roll_connection(ndbgate_pool *pool, int conn, const char *connectstring, int timeout_s, char *err,
                            int errlen) {
  if (conn < 0 || static_cast<size_t>(conn) >= pool->conns.size()) { setErr(err, errlen, "bad connection"); return -1; }
  const size_t i = static_cast<size_t>(conn);
  // Connect and describe with no lock held: flights go on meanwhile, on the
  // old connection too.
  Conn fresh;
  fresh.cluster = new Ndb_cluster_connection(connectstring);
  if (fresh.cluster->connect(timeout_s > 0 ? timeout_s : 1, 1, 0) != 0) {
    setErr(err, errlen, std::string("connect to management server ") + connectstring + ": " +
                            fresh.cluster->get_latest_error_msg());
    delete fresh.cluster;
    return -1;
  }
  // Every data node live, or a few seconds after the first: new data nodes
  // may be defined but not started yet.
  if (fresh.cluster->wait_until_ready(timeout_s, 3) < 0) {
    setErr(err, errlen, "no data node became ready on the new connection");
    delete fresh.cluster;
    return -1;
  }
  if (!makeNdbs(fresh, err, errlen)) {
    delete fresh.cluster;
    return -1;
  }
  std::vector<std::pair<std::string, std::string>> names;
  std::vector<Uint32> versions;
  {
    std::shared_lock<std::shared_mutex> rg(pool->flightMu);
    std::shared_lock<std::shared_mutex> g(pool->mu);
    names = pool->names;
    for (const std::vector<TableRecs> &byConn : pool->tables) {
      versions.push_back(!byConn.empty() && byConn[0].t ? static_cast<Uint32>(byConn[0].t->getObjectVersion()) : 0);
    }
  }
  std::vector<TableRecs> recs(names.size());
  for (size_t id = 0; id < names.size(); id++) {
    std::string msg;
    // A table the others no longer have (dropped: its id fails with 284)
    // stays without records here too.
    if (versions[id] == 0) continue;
    if (!describeOn(fresh, names[id].first.c_str(), names[id].second.c_str(), false, recs[id], msg) ||
        static_cast<Uint32>(recs[id].t->getObjectVersion()) != versions[id]) {
      setErr(err, errlen, msg.empty() ? names[id].first + "." + names[id].second + " changed meanwhile; try again" : msg);
      dropConn(fresh, recs);
      return -1;
    }
  }
  Conn old;
  {
    std::unique_lock<std::shared_mutex> rg(pool->flightMu);  // waits for the flights under way
    std::lock_guard<std::mutex> dg(pool->dictMu);
    std::unique_lock<std::shared_mutex> tg(pool->mu);
    // A refresh or a new table meanwhile makes the records above wrong.
    bool same = !pool->detached.load() && pool->tables.size() == names.size();
    for (size_t id = 0; same && id < pool->tables.size(); id++) {
      const std::vector<TableRecs> &byConn = pool->tables[id];
      same = static_cast<Uint32>(!byConn.empty() && byConn[0].t ? byConn[0].t->getObjectVersion() : 0) == versions[id];
    }
    if (!same) {
      setErr(err, errlen, "the tables changed meanwhile; try again");
    } else {
      old = swapConn(pool, i, fresh, recs);
    }
  }
  if (!old.cluster) {
    dropConn(fresh, recs);
    return -1;
  }
  // Out of every lock: nothing reaches the old connection now, and deleting
  // its cluster object waits for its threads.
  dropConn(old, recs);
  return 0;
}

}  // extern "C"
