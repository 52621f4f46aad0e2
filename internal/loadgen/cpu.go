package loadgen

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUSample is a reading of CPU time counters.
type CPUSample struct {
	// At is when the sample was taken.
	At time.Time
	// Process is the CPU time of the sampled process (0 without one).
	Process time.Duration
	// Self is the CPU time of this process (the load generator).
	Self time.Duration
	// Busy and Total are ticks of all CPUs, from /proc/stat: busy ones (all
	// but idle and iowait) and all of them.
	Busy, Total float64
}

// clockTick is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTick = 10 * time.Millisecond

// SampleCPU reads the CPU time of process pid (none when 0), of this process
// and of the whole machine. A counter it cannot read stays 0.
func SampleCPU(pid int) CPUSample {
	s := CPUSample{At: time.Now()}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); pid != 0 && err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
			if len(f) > 12 {
				utime, _ := strconv.ParseInt(f[11], 10, 64)
				stime, _ := strconv.ParseInt(f[12], 10, 64)
				s.Process = time.Duration(utime+stime) * clockTick
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.Self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			if i >= 8 { // guest times are already in user and nice
				break
			}
			n, _ := strconv.ParseFloat(v, 64)
			s.Total += n
			if i != 3 && i != 4 { // idle, iowait
				s.Busy += n
			}
		}
	}
	return s
}

// WaitIdle waits until process pid uses less than cores of CPU over a window
// (Badger flushing and compacting after a write-heavy scenario, say), checking
// each window for at most limit. It returns how long it waited and whether the
// process went idle.
func WaitIdle(pid int, cores float64, window, limit time.Duration) (time.Duration, bool) {
	return waitIdle(func() CPUSample { return SampleCPU(pid) }, time.Sleep, cores, window, limit)
}

// waitIdle is WaitIdle with the sampling and the sleeping passed in.
func waitIdle(sample func() CPUSample, sleep func(time.Duration), cores float64, window, limit time.Duration) (time.Duration, bool) {
	first := sample()
	prev := first
	for prev.At.Sub(first.At) < limit {
		sleep(window)
		next := sample()
		used := (next.Process - prev.Process).Seconds() / next.At.Sub(prev.At).Seconds()
		if used < cores {
			return next.At.Sub(first.At), true
		}
		prev = next
	}
	return prev.At.Sub(first.At), false
}

// busyCores is the number of cores the machine kept busy on average from s to
// the later sample, or 0 when /proc/stat did not advance.
func (s CPUSample) busyCores(later CPUSample) float64 {
	ticks := later.Total - s.Total
	if ticks <= 0 {
		return 0
	}
	return (later.Busy - s.Busy) / ticks * float64(runtime.NumCPU())
}

// FindPID returns the id of the caddy process running with config (`caddy run
// --config config`), or 0.
func FindPID(config string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == "run" && bytes.Contains(cmdline, []byte("\x00"+config+"\x00")) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

// FetchProfile saves to path a CPU profile of seconds of caddy, from its admin
// endpoint admin (host:port).
func FetchProfile(admin string, seconds int, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	c := &http.Client{Timeout: time.Duration(seconds+30) * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, seconds))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Machine describes the machine for a report: "2 CPUs (model), go1.x
// linux/amd64".
func Machine() string {
	model := "unknown"
	if ci, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(ci), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s %s/%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
