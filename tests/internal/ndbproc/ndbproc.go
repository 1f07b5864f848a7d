// Package ndbproc finds and controls the processes of an NDB cluster running
// on this machine, for the fault tests: data nodes started with
// --ndb-nodeid=N (each with its angel, the parent of the same command line),
// and ndb_mgmd. It drives the management server through ndb_mgm, which must
// be on PATH.
package ndbproc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a running process as /proc shows it.
type Proc struct {
	PID, PPID int
	Args      []string
	Dir       string // its working directory
}

// Procs lists the processes whose program is name, in this process's
// network namespace: a cluster a test built in namespaces of its own (whose
// node ids may be the same) is not this one.
func Procs(name string) []Proc {
	var out []Proc
	netns, _ := os.Readlink("/proc/self/ns/net")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != name {
			continue
		}
		if ns, _ := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); ns != netns {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		ppid := 0
		if len(fields) > 1 {
			ppid, _ = strconv.Atoi(fields[1])
		}
		dir, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		out = append(out, Proc{PID: pid, PPID: ppid, Args: args, Dir: dir})
	}
	return out
}

// DataNode finds the data node process of node id (ndbd or ndbmtd) and its
// angel.
func DataNode(id int) (worker, angel Proc, err error) {
	for _, name := range []string{"ndbd", "ndbmtd"} {
		all := Procs(name)
		for _, p := range all {
			if !strings.Contains(strings.Join(p.Args, " "), fmt.Sprintf("--ndb-nodeid=%d", id)) {
				continue
			}
			for _, parent := range all {
				if parent.PID == p.PPID {
					return p, parent, nil
				}
			}
		}
	}
	return Proc{}, Proc{}, fmt.Errorf("no data node process of node %d found (start data nodes with --ndb-nodeid=N)", id)
}

// StartLike starts a process as p was started, without --initial, in its own
// session so that it outlives the test, and waits for the command to return
// (data nodes and ndb_mgmd daemonize).
func StartLike(p Proc) error {
	var args []string
	for _, a := range p.Args[1:] {
		if a != "--initial" {
			args = append(args, a)
		}
	}
	cmd := exec.Command(p.Args[0], args...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Run()
}

// Alive reports whether process pid exists.
func Alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// Mgm runs one ndb_mgm command against the management server at cs and
// returns what it printed.
func Mgm(cs, command string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "ndb_mgm", "-c", cs, "-e", command).CombinedOutput()
	return string(out)
}

// NodeStarted asks the management server whether data node id is started.
func NodeStarted(cs string, id int) bool {
	return strings.Contains(Mgm(cs, fmt.Sprintf("%d status", id)), ": started")
}

// AllStarted reports whether the management server says n data nodes are
// started and none is starting.
func AllStarted(cs string, n int) bool {
	s := Mgm(cs, "all status")
	return strings.Count(s, ": started") >= n && !strings.Contains(s, "starting") && !strings.Contains(s, "not connected")
}

// WaitRestarted waits until data node id, killed, is started again. Its
// angel starts it again (StopOnError=0) unless it counted too many start
// failures: then the angel is started here. An angel restarts a failed node
// with --nostart, so a node reported "not started" is told to start.
func WaitRestarted(cs string, id int, angel Proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	time.Sleep(3 * time.Second)
	if !Alive(angel.PID) {
		if err := StartLike(angel); err != nil {
			return fmt.Errorf("starting node %d again: %w", id, err)
		}
	}
	for !NodeStarted(cs, id) {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d did not come back within %v", id, timeout)
		}
		if strings.Contains(Mgm(cs, fmt.Sprintf("%d status", id)), "not started") {
			Mgm(cs, fmt.Sprintf("%d start", id))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil
}

// KillDataNode kills data node id with SIGKILL and waits until it is
// started again.
func KillDataNode(cs string, id int, timeout time.Duration) error {
	worker, angel, err := DataNode(id)
	if err != nil {
		return err
	}
	if err := syscall.Kill(worker.PID, syscall.SIGKILL); err != nil {
		return err
	}
	return WaitRestarted(cs, id, angel, timeout)
}

// Management is the one ndb_mgmd of this machine.
func Management() (Proc, error) {
	m := Procs("ndb_mgmd")
	if len(m) != 1 {
		return Proc{}, fmt.Errorf("want one ndb_mgmd on this machine, found %d", len(m))
	}
	return m[0], nil
}

// WaitManagement waits until the management server at cs answers.
func WaitManagement(cs string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(Mgm(cs, "show"), "Connected to Management Server") {
		if time.Now().After(deadline) {
			return fmt.Errorf("the management server at %s did not answer within %v", cs, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// RestartDataNode restarts data node id through the management server (a
// node restart, as in a rolling restart) and waits until it is started
// again. abort restarts it at once rather than after a graceful shutdown
// (ndb_mgm's "restart -a").
func RestartDataNode(cs string, id int, abort bool, timeout time.Duration) error {
	_, angel, err := DataNode(id)
	if err != nil {
		return err
	}
	// ndb_mgm returns once the node has shut down, which takes a while.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := fmt.Sprintf("%d restart", id)
	if abort {
		cmd += " -a"
	}
	out, err := exec.CommandContext(ctx, "ndb_mgm", "-c", cs, "-e", cmd).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "restart") {
		return fmt.Errorf("ndb_mgm %d restart: %v: %s", id, err, out)
	}
	return WaitRestarted(cs, id, angel, timeout)
}

// StartNewDataNode starts data node id for the first time (--initial), as
// the data node like, with its angel, was started.
func StartNewDataNode(like Proc, id int) error {
	p := like
	p.Args = nil
	for _, a := range like.Args {
		switch {
		case strings.HasPrefix(a, "--ndb-nodeid="):
			a = fmt.Sprintf("--ndb-nodeid=%d", id)
		case a == "--initial":
			continue
		}
		p.Args = append(p.Args, a)
	}
	cmd := exec.Command(p.Args[0], append(p.Args[1:], "--initial")...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd.Run()
}

// ReloadManagement restarts the management server m with the configuration
// file config (--reload: it takes the file's changes) and waits until it
// answers.
func ReloadManagement(cs string, m Proc, config string, timeout time.Duration) error {
	if err := syscall.Kill(m.PID, syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); Alive(m.PID); {
		if time.Now().After(deadline) {
			return fmt.Errorf("ndb_mgmd %d did not stop within %v", m.PID, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := m
	p.Args = []string{m.Args[0]}
	for i := 1; i < len(m.Args); i++ {
		a := m.Args[i]
		switch {
		case a == "-f" || a == "--config-file":
			i++ // and its value
			continue
		case strings.HasPrefix(a, "--config-file=") || a == "--reload" || a == "--initial":
			continue
		}
		p.Args = append(p.Args, a)
	}
	p.Args = append(p.Args, "--config-file="+config, "--reload")
	cmd := exec.Command(p.Args[0], p.Args[1:]...)
	cmd.Dir = p.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("starting ndb_mgmd with %s: %w", config, err)
	}
	return WaitManagement(cs, timeout)
}
