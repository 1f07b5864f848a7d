package memcache

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/ndbgate/ndbgate/gateway"
	"github.com/ndbgate/ndbgate/ndbclient"
)

// appendStats renders "stats" and its sub-commands in memcached's format;
// arg2 is the word after the sub-command.
func (s *Server) appendStats(dst, arg, arg2 []byte) []byte {
	switch string(arg) {
	case "":
		return append(s.appendGeneralStats(dst), replyEnd...)
	case "settings":
		return append(s.appendSettings(dst), replyEnd...)
	case "items", "slabs", "sizes", "conns", "extstore":
		return append(dst, replyEnd...) // no slab allocator to describe
	case "detail":
		return s.prefix.detailText(dst, arg2)
	case "reset":
		s.prefix.reset()
		s.svc.ResetStats()
		ds := s.svc.DriverStats()
		s.resetBase.Store(&ds)
		s.m.stats.Reset()
		s.totalConns.Store(0)
		s.rejectedConns.Store(0)
		for i := range s.m.authN {
			s.m.authN[i].Store(0)
		}
		return append(dst, replyReset...)
	default:
		return append(dst, replyError...)
	}
}

func (s *Server) appendGeneralStats(dst []byte) []byte {
	now := time.Now()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	ds := s.svc.DriverStats()
	// The driver's counters run from its start; memcached's from the last
	// "stats reset".
	base := s.resetBase.Load()
	if base == nil {
		base = &ndbclient.DriverStats{}
	}
	dst = AppendStat(dst, "pid", uint64(os.Getpid()))
	dst = AppendStat(dst, "uptime", uint64(now.Sub(s.svc.Started())/time.Second))
	dst = AppendStat(dst, "time", uint64(now.Unix()))
	dst = AppendStatString(dst, "version", s.cfg.Version)
	dst = AppendStat(dst, "pointer_size", 64)
	dst = AppendStatString(dst, "rusage_user", rusage(ru.Utime))
	dst = AppendStatString(dst, "rusage_system", rusage(ru.Stime))
	dst = AppendStat(dst, "max_connections", uint64(s.cfg.MaxConnections))
	dst = AppendStat(dst, "curr_connections", uint64(s.currConns.Load()))
	dst = AppendStat(dst, "total_connections", uint64(s.totalConns.Load()))
	dst = AppendStat(dst, "rejected_connections", uint64(s.rejectedConns.Load()))
	dst = AppendStat(dst, "cmd_get", s.svc.Stat(gateway.StatCmdGet))
	dst = AppendStat(dst, "cmd_set", s.svc.Stat(gateway.StatCmdSet))
	dst = AppendStat(dst, "cmd_flush", s.svc.Stat(gateway.StatCmdFlush))
	dst = AppendStat(dst, "cmd_touch", s.svc.Stat(gateway.StatCmdTouch))
	dst = AppendStat(dst, "get_hits", s.svc.Stat(gateway.StatGetHits))
	dst = AppendStat(dst, "get_misses", s.svc.Stat(gateway.StatGetMisses))
	dst = AppendStat(dst, "get_expired", since(ds.ExpiredOnAccess, base.ExpiredOnAccess))
	dst = AppendStat(dst, "get_flushed", 0) // a flush deletes: no flushed item is ever read
	dst = AppendStat(dst, "delete_misses", s.svc.Stat(gateway.StatDeleteMisses))
	dst = AppendStat(dst, "delete_hits", s.svc.Stat(gateway.StatDeleteHits))
	dst = AppendStat(dst, "incr_misses", s.svc.Stat(gateway.StatIncrMisses))
	dst = AppendStat(dst, "incr_hits", s.svc.Stat(gateway.StatIncrHits))
	dst = AppendStat(dst, "decr_misses", s.svc.Stat(gateway.StatDecrMisses))
	dst = AppendStat(dst, "decr_hits", s.svc.Stat(gateway.StatDecrHits))
	dst = AppendStat(dst, "cas_misses", s.svc.Stat(gateway.StatCasMisses))
	dst = AppendStat(dst, "cas_hits", s.svc.Stat(gateway.StatCasHits))
	dst = AppendStat(dst, "cas_badval", s.svc.Stat(gateway.StatCasBadval))
	dst = AppendStat(dst, "touch_hits", s.svc.Stat(gateway.StatTouchHits))
	dst = AppendStat(dst, "touch_misses", s.svc.Stat(gateway.StatTouchMisses))
	dst = AppendStat(dst, "bytes_read", s.m.stats.Value(statBytesRead))
	dst = AppendStat(dst, "bytes_written", s.m.stats.Value(statBytesWritten))
	dst = AppendStat(dst, "limit_maxbytes", ds.LimitBytes)
	dst = AppendStat(dst, "threads", uint64(runtime.GOMAXPROCS(0)))
	dst = AppendStat(dst, "bytes", ds.Bytes)
	dst = AppendStat(dst, "curr_items", ds.Items)
	dst = AppendStat(dst, "total_items", s.svc.Stat(gateway.StatTotalItems))
	dst = AppendStat(dst, "evictions", since(ds.Evictions, base.Evictions))
	// memcached's reclaimed counts expired items freed in the background or
	// to make room; one a command finds expired counts in get_expired alone.
	dst = AppendStat(dst, "reclaimed", since(ds.Expired-ds.ExpiredOnAccess, base.Expired-base.ExpiredOnAccess))
	dst = AppendStat(dst, "cmd_meta", s.m.stats.Value(statMetaDebug))
	dst = AppendStat(dst, "store_too_large", s.m.stats.Value(statStoreTooLarge))
	dst = AppendStat(dst, "store_no_memory", since(ds.OutOfMemory, base.OutOfMemory)+s.m.stats.Value(statStoreNoMemory))
	dst = AppendStat(dst, "accepting_conns", 1) // past max_connections a connection is refused alone
	dst = AppendStat(dst, "listen_disabled_num", 0)
	dst = AppendStat(dst, "time_in_listen_disabled_us", 0)
	dst = AppendStat(dst, "lrutail_reflocked", 0) // no item is reference-locked
	dst = AppendStat(dst, "auth_cmds", s.m.authN[authOK].Load()+s.m.authN[authFailure].Load())
	dst = AppendStat(dst, "auth_errors", s.m.authN[authFailure].Load())
	// ndbgate's own counters.
	dst = AppendStat(dst, "ndbgate_text_cmds", s.m.stats.Value(int(dialectText)))
	dst = AppendStat(dst, "ndbgate_meta_cmds", s.m.stats.Value(int(dialectMeta)))
	dst = AppendStat(dst, "ndbgate_binary_cmds", s.m.stats.Value(int(dialectBinary)))
	dst = AppendStat(dst, "ndbgate_auth_refused", s.m.authN[authRefused].Load())
	dst = AppendStat(dst, "ndbgate_backend_errors", s.svc.Stat(gateway.StatBackendErrors))
	dst = AppendStat(dst, "ndbgate_out_of_memory", ds.OutOfMemory)
	dst = AppendStat(dst, "ndbgate_partitions", uint64(ds.Partitions))
	dst = AppendStat(dst, "ndbgate_nodes", uint64(ds.Nodes))
	dst = AppendStat(dst, "ndbgate_tables", uint64(ds.Tables))
	return dst
}

func (s *Server) appendSettings(dst []byte) []byte {
	ds := s.svc.DriverStats()
	dst = AppendStat(dst, "maxbytes", ds.LimitBytes)
	dst = AppendStat(dst, "maxconns", uint64(s.cfg.MaxConnections))
	dst = AppendStatString(dst, "tcpport", portOf(s.cfg.Addr))
	dst = AppendStat(dst, "udpport", 0)
	dst = AppendStat(dst, "verbosity", uint64(s.verbosity.Load()))
	dst = AppendStatString(dst, "evictions", onOff(s.cfg.Evictions))
	dst = AppendStatString(dst, "domain_socket", orNULL(s.cfg.Socket))
	dst = AppendStat(dst, "num_threads", uint64(runtime.GOMAXPROCS(0)))
	dst = AppendStatString(dst, "stat_key_prefix", string(rune(prefixDelimiter)))
	dst = AppendStatString(dst, "detail_enabled", yesNo(s.prefix.on.Load()))
	dst = AppendStatString(dst, "cas_enabled", "yes")
	dst = AppendStatString(dst, "auth_enabled_sasl", yesNo(s.cfg.Credentials != nil))
	dst = AppendStat(dst, "item_size_max", uint64(s.cfg.ItemSizeMax))
	dst = AppendStatString(dst, "flush_enabled", "yes")
	dst = AppendStatString(dst, "dump_enabled", "yes")
	dst = AppendStat(dst, "ndbgate_max_pending_per_conn", uint64(s.cfg.MaxPending))
	dst = AppendStat(dst, "ndbgate_max_pending_keys_per_conn", uint64(s.cfg.MaxPendingKeys))
	for _, kv := range s.cfg.Settings {
		dst = AppendStatString(dst, kv[0], kv[1])
	}
	return dst
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orNULL(s string) string {
	if s == "" {
		return "NULL"
	}
	return s
}

func rusage(tv syscall.Timeval) string {
	return strconv.FormatInt(int64(tv.Sec), 10) + "." + leftPad6(int64(tv.Usec))
}

func leftPad6(n int64) string {
	s := strconv.FormatInt(n, 10)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

// since is a driver counter's count from base, or all of it if the counter
// went back (a driver whose counters started again).
func since(now, base uint64) uint64 {
	if now < base {
		return now
	}
	return now - base
}
