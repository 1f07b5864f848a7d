package hostidle

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot writes files under a temporary root, by path.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	cpuinfoGuest = "processor\t: 0\nflags\t\t: fpu vme de pse hypervisor lahf_lm\nbogomips\t: 4000\n\nprocessor\t: 1\nflags\t\t: fpu vme de pse hypervisor lahf_lm\n"
	cpuinfoBare  = "processor\t: 0\nflags\t\t: fpu vme de pse lahf_lm\nmodel name\t: hypervisor-free box\n"
	driverPath   = "sys/devices/system/cpu/cpuidle/current_driver"
	haltPollPath = "sys/module/haltpoll/parameters/guest_halt_poll_ns"
)

func TestHaltsAtOnce(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  Host
		halts bool
	}{
		{"a guest without a cpuidle driver (the host polls)", map[string]string{"proc/cpuinfo": cpuinfoGuest, driverPath: "none\n", haltPollPath: "200000\n"},
			Host{Guest: true, IdleDriver: "none", HaltPollNanos: 200000}, false},
		{"a guest whose haltpoll polls", map[string]string{"proc/cpuinfo": cpuinfoGuest, driverPath: "haltpoll\n", haltPollPath: "200000\n"},
			Host{Guest: true, IdleDriver: "haltpoll", HaltPollNanos: 200000}, false},
		{"a guest whose haltpoll is set to 0", map[string]string{"proc/cpuinfo": cpuinfoGuest, driverPath: "haltpoll\n", haltPollPath: "0\n"},
			Host{Guest: true, IdleDriver: "haltpoll"}, true},
		{"bare metal (hypervisor only in a model name)", map[string]string{"proc/cpuinfo": cpuinfoBare, driverPath: "intel_idle\n"},
			Host{IdleDriver: "intel_idle"}, false},
		{"nothing readable", map[string]string{}, Host{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Read(fakeRoot(t, c.files))
			if h != c.want {
				t.Fatalf("Read = %+v, want %+v", h, c.want)
			}
			if h.HaltsAtOnce() != c.halts {
				t.Fatalf("HaltsAtOnce = %v, want %v", h.HaltsAtOnce(), c.halts)
			}
		})
	}
}
