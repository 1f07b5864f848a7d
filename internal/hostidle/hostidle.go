// Package hostidle tells how this host's CPUs go idle: whether Linux runs
// as a guest of a hypervisor, and whether anyone polls before an idle vCPU
// halts. A KVM guest's haltpoll cpuidle driver polls in the guest
// (guest_halt_poll_ns) and, once loaded, turns the host's own halt polling
// off for the guest (MSR_KVM_POLL_CONTROL); with guest_halt_poll_ns at 0
// nobody polls, and every thread woken on an idle vCPU waits for the
// hypervisor to run it again. That is the host memcache.halt_poll pays on
// (protocols/memcache/transport/runtime_linux.go, rule 8). A guest without
// the driver leaves polling to the host, as KVM does by default.
package hostidle

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Host is what Read found.
type Host struct {
	// Guest: /proc/cpuinfo's flags have "hypervisor".
	Guest bool
	// IdleDriver is the cpuidle driver in use ("haltpoll", "intel_idle",
	// "none", or "" where sysfs does not say).
	IdleDriver string
	// HaltPollNanos is the haltpoll driver's guest_halt_poll_ns, or 0.
	HaltPollNanos int64
}

// Read reads the host under root ("/" but in tests). What it cannot read
// it leaves zero: a host it knows nothing about is not a guest.
func Read(root string) Host {
	var h Host
	if b, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo")); err == nil {
		h.Guest = hasHypervisorFlag(b)
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/cpu/cpuidle/current_driver")); err == nil {
		h.IdleDriver = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(root, "sys/module/haltpoll/parameters/guest_halt_poll_ns")); err == nil {
		h.HaltPollNanos, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	return h
}

// HaltsAtOnce reports whether an idle vCPU halts with nobody polling
// first: a guest whose haltpoll driver is in use with guest_halt_poll_ns 0.
func (h Host) HaltsAtOnce() bool {
	return h.Guest && h.IdleDriver == "haltpoll" && h.HaltPollNanos == 0
}

// hasHypervisorFlag reports whether a "flags" line of cpuinfo lists
// "hypervisor".
func hasHypervisorFlag(cpuinfo []byte) bool {
	for line := range bytes.Lines(cpuinfo) {
		name, flags, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(name)) != "flags" {
			continue
		}
		for _, f := range bytes.Fields(flags) {
			if string(f) == "hypervisor" {
				return true
			}
		}
		return false
	}
	return false
}
