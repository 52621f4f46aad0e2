package service

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

// treeCPU is the CPU time of process pid and of its children, live (summed from
// their /proc/<pid>/stat) and exited (the cutime and cstime of pid): for a
// PostgreSQL postmaster, every backend and auxiliary process of the cluster.
func treeCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	self, _, ok := procStat(pid)
	if !ok {
		return 0
	}
	total := self
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, _ := strconv.Atoi(filepath.Base(d))
		if child == pid {
			continue
		}
		if cpu, ppid, ok := procStat(child); ok && ppid == pid {
			total += cpu
		}
	}
	return total
}

// procStat returns the CPU time of a process with that of its reaped children
// (utime+stime+cutime+cstime) and its parent's id.
func procStat(pid int) (cpu time.Duration, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	var ticks int64
	for _, v := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, ppid, true
}

// waitQuiet waits (at most quietMax) until both caddys and the PostgreSQL
// cluster together use less than storageQuietCores over quietWindow: Badger's
// compactions and PostgreSQL's autovacuum after writes would otherwise be
// charged to the next scenario.
func waitQuiet(backends []*storeBackend) (time.Duration, bool) {
	sample := func() time.Duration {
		var d time.Duration
		for _, b := range backends {
			d += loadgen.SampleCPU(b.pid).Process
			if b.pg != nil {
				d += treeCPU(b.pg.PID())
			}
		}
		return d
	}
	start := time.Now()
	prev, prevAt := sample(), time.Now()
	for time.Since(start) < quietMax {
		time.Sleep(quietWindow)
		next, at := sample(), time.Now()
		if (next-prev).Seconds()/at.Sub(prevAt).Seconds() < storageQuietCores {
			return time.Since(start), true
		}
		prev, prevAt = next, at
	}
	return time.Since(start), false
}

// readLoadavg returns the first three fields of /proc/loadavg.
func readLoadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
