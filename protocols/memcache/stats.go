package memcache

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// appendStats renders "stats" and its sub-commands in memcached's format.
func (s *Server) appendStats(dst []byte, arg []byte) []byte {
	switch string(arg) {
	case "":
		return append(s.appendGeneralStats(dst), replyEnd...)
	case "settings":
		return append(s.appendSettings(dst), replyEnd...)
	case "items", "slabs", "sizes", "conns", "extstore":
		return append(dst, replyEnd...) // no slab allocator to describe
	case "reset":
		s.svc.ResetCounters()
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
	c := s.svc.Counters()
	ds := s.svc.DriverStats()
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
	dst = AppendStat(dst, "cmd_get", c.CmdGet.Load())
	dst = AppendStat(dst, "cmd_set", c.CmdSet.Load())
	dst = AppendStat(dst, "cmd_flush", c.CmdFlush.Load())
	dst = AppendStat(dst, "cmd_touch", c.CmdTouch.Load())
	dst = AppendStat(dst, "get_hits", c.GetHits.Load())
	dst = AppendStat(dst, "get_misses", c.GetMisses.Load())
	dst = AppendStat(dst, "get_expired", 0)
	dst = AppendStat(dst, "delete_misses", c.DeleteMisses.Load())
	dst = AppendStat(dst, "delete_hits", c.DeleteHits.Load())
	dst = AppendStat(dst, "incr_misses", c.IncrMisses.Load())
	dst = AppendStat(dst, "incr_hits", c.IncrHits.Load())
	dst = AppendStat(dst, "decr_misses", c.DecrMisses.Load())
	dst = AppendStat(dst, "decr_hits", c.DecrHits.Load())
	dst = AppendStat(dst, "cas_misses", c.CasMisses.Load())
	dst = AppendStat(dst, "cas_hits", c.CasHits.Load())
	dst = AppendStat(dst, "cas_badval", c.CasBadval.Load())
	dst = AppendStat(dst, "touch_hits", c.TouchHits.Load())
	dst = AppendStat(dst, "touch_misses", c.TouchMisses.Load())
	dst = AppendStat(dst, "bytes_read", s.m.stats.Value(statBytesRead))
	dst = AppendStat(dst, "bytes_written", s.m.stats.Value(statBytesWritten))
	dst = AppendStat(dst, "limit_maxbytes", ds.LimitBytes)
	dst = AppendStat(dst, "threads", uint64(runtime.GOMAXPROCS(0)))
	dst = AppendStat(dst, "bytes", ds.Bytes)
	dst = AppendStat(dst, "curr_items", ds.Items)
	dst = AppendStat(dst, "total_items", c.TotalItems.Load())
	dst = AppendStat(dst, "evictions", ds.Evictions)
	dst = AppendStat(dst, "reclaimed", ds.Expired)
	dst = AppendStat(dst, "meta_cmds", s.m.stats.Value(dialectMeta))
	dst = AppendStat(dst, "auth_cmds", s.m.authN[authOK].Load()+s.m.authN[authFailure].Load())
	dst = AppendStat(dst, "auth_errors", s.m.authN[authFailure].Load())
	// ndbgate's own counters.
	dst = AppendStat(dst, "ndbgate_text_cmds", s.m.stats.Value(dialectText))
	dst = AppendStat(dst, "ndbgate_binary_cmds", s.m.stats.Value(dialectBinary))
	dst = AppendStat(dst, "ndbgate_auth_refused", s.m.authN[authRefused].Load())
	dst = AppendStat(dst, "ndbgate_backend_errors", c.BackendErrors.Load())
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
	dst = AppendStat(dst, "verbosity", uint64(s.verbosity.Load()))
	dst = AppendStat(dst, "num_threads", uint64(runtime.GOMAXPROCS(0)))
	dst = AppendStatString(dst, "cas_enabled", "yes")
	dst = AppendStat(dst, "item_size_max", uint64(s.cfg.ItemSizeMax))
	dst = AppendStat(dst, "ndbgate_max_pending_per_conn", uint64(s.cfg.MaxPending))
	for _, kv := range s.cfg.Settings {
		dst = AppendStatString(dst, kv[0], kv[1])
	}
	return dst
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
