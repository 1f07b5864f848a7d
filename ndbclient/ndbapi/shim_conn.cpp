//go:build ndbapi

// The pool's cluster connections: opening and closing them, readiness and
// node counts, and letting go of every Ndb object when all data nodes are
// lost (ndbgate_detach) and making them again (ndbgate_reattach).

#include "shim_internal.h"

namespace shim {

// dropConnNdbs deletes c's Ndb objects and the records in recs, made through
// them. First the executor's Ndb: deleting it releases the transactions it
// still has (abandoned ones too), so nothing can unpack through the records
// or write into c.abandoned after this. Then every record, through the
// dictionary of the still-alive dict that made them, and only then dict
// itself (which drops the table objects). Callers hold flightMu exclusively
// and dictMu, or own c alone (ndbgate_close, a replaced connection).
void dropConnNdbs(Conn &c, const std::vector<TableRecs *> &recs) {
  dropPollGroup(c);
  delete c.ndb;
  c.ndb = nullptr;
  dropAbandoned(c);
  loseOwed(c);
  if (!c.dict) return;
  for (TableRecs *r : recs) freeRecs(c, *r);
  releaseRetired(c);
  delete c.dict;
  c.dict = nullptr;
}

// dropNdbs deletes connection i's Ndb objects and everything made through
// them.
static void dropNdbs(ndbgate_pool *pool, size_t i) {
  std::vector<TableRecs *> recs;
  for (std::vector<TableRecs> &byConn : pool->tables) {
    if (i < byConn.size()) recs.push_back(&byConn[i]);
  }
  dropConnNdbs(pool->conns[i], recs);
}

void dropPollGroup(Conn &c) {
  if (c.pollGroup) c.cluster->release_ndb_wait_group(c.pollGroup);
  c.pollGroup = nullptr;
}

// kNodeIds bounds NDB node ids (MAX_NODES).
const size_t kNodeIds = 256;

void resetNodeBook(Conn &c) {
  c.openOn.assign(kNodeIds, 0);
  c.pooledOn.assign(kNodeIds, 0);
  c.owedOn.assign(kNodeIds, 0);
  c.owedReadsOn.assign(kNodeIds, 0);
  c.answeredOn.assign(kNodeIds, std::chrono::steady_clock::time_point());
}

// makeNdbs gives connection c a new executor Ndb and dictionary Ndb.
bool makeNdbs(Conn &c, char *err, int errlen) {
  resetNodeBook(c);
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

}  // namespace shim

using namespace shim;

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

unsigned long long ndbgate_polled_flights(ndbgate_pool *pool) {
  return pool->polledFlights.load(std::memory_order_relaxed);
}

unsigned long long ndbgate_expired_found(ndbgate_pool *pool) {
  return pool->expiredFound.load(std::memory_order_relaxed);
}

int ndbgate_wake_poll_groups(ndbgate_pool *pool) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  int woke = 0;
  for (Conn &c : pool->conns) {
    if (c.pollGroup) {
      c.pollGroup->wakeup();  // a wake-up from another thread is what it is for
      woke++;
    }
  }
  return woke;
}

void ndbgate_hint_stats(ndbgate_pool *pool, unsigned long long *hinted, unsigned long long *on_primary) {
  *hinted = pool->hintedTxns.load(std::memory_order_relaxed);
  *on_primary = pool->primaryTxns.load(std::memory_order_relaxed);
}

int ndbgate_live_nodes(ndbgate_pool *pool) {
  std::shared_lock<std::shared_mutex> g(pool->mu);  // no roll replaces a cluster object meanwhile
  int live = -1;
  for (Conn &c : pool->conns) {
    const int r = c.cluster->get_no_ready();
    if (live < 0 || r < live) live = r;
  }
  return live < 0 ? 0 : live;
}

void ndbgate_detach(ndbgate_pool *pool) {
  std::unique_lock<std::shared_mutex> rg(pool->flightMu);  // waits for the flights under way
  std::lock_guard<std::mutex> g(pool->dictMu);
  std::unique_lock<std::shared_mutex> tg(pool->mu);
  pool->detached.store(true);
  for (size_t i = 0; i < pool->conns.size(); i++) dropNdbs(pool, i);
}

int ndbgate_reattach(ndbgate_pool *pool, char *err, int errlen) {
  std::unique_lock<std::shared_mutex> rg(pool->flightMu);
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
  std::unique_lock<std::shared_mutex> rg(pool->flightMu);
  pool->detached.store(false);
}

int ndbgate_ready(ndbgate_pool *pool, char *err, int errlen) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
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
  std::shared_lock<std::shared_mutex> g(pool->mu);
  return pool->conns.empty() ? 0 : static_cast<int>(pool->conns[0].cluster->no_db_nodes());
}

int ndbgate_node_id(ndbgate_pool *pool) {
  std::shared_lock<std::shared_mutex> g(pool->mu);
  return pool->conns.empty() ? 0 : static_cast<int>(pool->conns[0].cluster->node_id());
}

}  // extern "C"
