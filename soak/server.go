package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type server struct {
	cmd       *exec.Cmd
	base      string // http://127.0.0.1:port
	admin     string // http://127.0.0.1:adminport
	storeDir  string
	logPath   string
	done      chan struct{}
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
	crashed   bool
	adminHTTP *http.Client
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startServer(bin, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{
		base:      "http://127.0.0.1:" + strconv.Itoa(port),
		admin:     "http://127.0.0.1:" + strconv.Itoa(adminPort),
		storeDir:  filepath.Join(dir, "palmgate"),
		logPath:   filepath.Join(dir, "caddy.log"),
		done:      make(chan struct{}),
		adminHTTP: &http.Client{Timeout: 60 * time.Second},
	}
	caddyfile := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	palmgate {
		issuer %s
		storage badger %s
		dev
		rate_limit off
		max_pending_logins off
		max_pending_registrations off
		registration_session_ttl 10s
		auth_code_ttl 5s
		access_token_ttl 30s
		refresh_token_ttl 2m
		challenge_max_age 1m
		client %s {
			secret %s
			redirect_uri %s
			name "Soak"
		}
	}
}

%s {
	palmgate
}
`, adminPort, s.base, s.storeDir, clientID, clientSecret, redirectURI, s.base)
	cfgPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(caddyfile), 0o600); err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	s.cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	// Should the soak die without stopping it (say, SIGPIPE from `| head`), the
	// server gets SIGTERM rather than running on as an orphan.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.base + "/v1/human/leaderboard")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		if s.exited() || time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the server did not start: %v\n%s", err, s.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop interrupts the server and waits for it (SIGKILL after 15 s).
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if s.exited() {
			s.crashed = true
			s.stopErr = fmt.Errorf("the server had exited: %v", s.waitErr)
			return
		}
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
			if s.waitErr != nil {
				s.stopErr = fmt.Errorf("the server exited with %v after SIGINT", s.waitErr)
			}
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("the server did not exit within 15 s of SIGINT; killed")
		}
	})
	return s.stopErr
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

func (s *server) sample(at time.Duration) sample {
	sm := sample{at: at, records: map[string]int{}}
	sm.rssKB, sm.hwmKB = procStatus(s.cmd.Process.Pid)
	_ = filepath.WalkDir(s.storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		sm.diskBytes += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			sm.allocBytes += st.Blocks * 512
		}
		switch filepath.Ext(path) {
		case ".sst":
			sm.sstBytes += info.Size()
		case ".vlog":
			sm.vlogBytes += info.Size()
		case ".mem":
			sm.memBytes += info.Size()
		}
		return nil
	})
	var st struct {
		Records map[string]int `json:"records"`
	}
	if err := s.adminJSON("/palmgate/stats", &st); err == nil {
		sm.records = st.Records
		for _, n := range st.Records {
			sm.total += n
		}
	} else {
		sm.total = -1
	}
	var vars struct {
		Memstats struct {
			HeapInuse uint64
		} `json:"memstats"`
	}
	if err := s.adminJSON("/debug/vars", &vars); err == nil {
		sm.heapMB = float64(vars.Memstats.HeapInuse) / (1 << 20)
	}
	return sm
}

func (s *server) adminJSON(path string, v any) error {
	resp, err := s.adminHTTP.Get(s.admin + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// procStatus reads VmRSS and VmHWM (kB) of a process.
func procStatus(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}
