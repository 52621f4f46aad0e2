package service

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/palmgate/palmgate/internal/loadgen"
)

var loadWrk = flag.Bool("load.wrk", false, "after the rounds, measure goal 3 once more with wrk (a load generator in C, as issue 19 measured) as the exchange's client, in turns of 1 s with the signatures; wrk must be on PATH (apt-get install wrk)")

// wrkTurns is the number of measured turns of the wrk cross-check.
const wrkTurns = 5

// wrkScript sends each form body of the file named by its argument (one a
// line) once, as POST /oauth2/token. A run that outlasts its file repeats the
// last body, which is refused: wrk counts it among the non-2xx answers, and the
// cross-check reports the share ran out.
const wrkScript = `local bodies, i = {}, 0
function init(args)
  for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
end
function request()
  i = math.min(i + 1, #bodies)
  return wrk.format("POST", "/oauth2/token", {["Content-Type"] = "application/x-www-form-urlencoded"}, bodies[i])
end
`

// wrkExchange measures goal 3's ratio once more with wrk as the client of the
// RS256 exchange: after a warm-up of each, turns of one 1 s wrk run
// (-t1 -c<conns>, its own share of fresh codes) and one 1 s slice of signs in
// this process, alternating which goes first. It returns the report's lines.
// The figures are information: the interleaved row of the rounds decides.
func wrkExchange(s *site, pool *exchangePool, signs scenario) (string, error) {
	path, err := exec.LookPath("wrk")
	if err != nil {
		return "wrk cross-check of goal 3: wrk is not installed (apt-get install wrk)\n", nil
	}
	dir, err := os.MkdirTemp("", "palmgate-wrk-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "exchange.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o600); err != nil {
		return "", err
	}
	if err := pool.prepare(s, (wrkTurns+1)*time.Second); err != nil {
		return "", err
	}
	share := len(pool.reqs) / (wrkTurns + 1)
	files := make([]string, wrkTurns+1)
	for k := range files {
		var b bytes.Buffer
		for _, req := range pool.reqs[k*share : (k+1)*share] {
			_, body, _ := bytes.Cut(req, []byte("\r\n\r\n"))
			b.Write(body)
			b.WriteByte('\n')
		}
		files[k] = filepath.Join(dir, fmt.Sprintf("codes-%d", k))
		if err := os.WriteFile(files[k], b.Bytes(), 0o600); err != nil {
			return "", err
		}
	}

	ops := make([]loadgen.Op, signs.workers)
	for w := range ops {
		op, done, err := signs.setup(w)
		if err != nil {
			return "", err
		}
		defer done()
		ops[w] = func(bool) error { return op() }
	}
	var ex wrkRun
	var sg loadgen.Result
	var ranOut bool
	for k := range wrkTurns + 1 {
		runWrk := func() error {
			r, err := wrkOnce(path, script, files[k], s)
			if k > 0 { // the first turn warms up
				ex.add(r)
			}
			ranOut = ranOut || r.refused > 0
			return err
		}
		runSigns := func() error {
			r, err := loadgen.Run(ops, loadgen.Options{Duration: time.Second})
			if k > 0 {
				sg.Ops += r.Ops
				sg.Elapsed += r.Elapsed
				sg.SelfCPU += r.SelfCPU
			}
			return err
		}
		first, second := runWrk, runSigns
		if k%2 == 1 {
			first, second = runSigns, runWrk
		}
		if err := first(); err != nil {
			return "", err
		}
		if err := second(); err != nil {
			return "", err
		}
	}
	ok := ex.requests - ex.refused
	exRate, sgRate := float64(ok)/ex.seconds, sg.Rate()
	perEx := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(ok) }
	signCPU := float64(sg.SelfCPU.Microseconds()) / float64(sg.Ops)
	var b strings.Builder
	fmt.Fprintf(&b, "wrk cross-check of goal 3 (wrk -t1 -c%d as the RS256 exchange's client, %d turns of 1 s with signs-rs, after a warm-up): exchange-rs %.0f/s, signs-rs %.0f/s: %s (CPU ratio %.2f; an exchange %.0f µs of caddy and %.0f µs of wrk, its signatures %.0f µs)",
		*loadConns, wrkTurns, exRate, sgRate, loadgen.RatioText(exRate/sgRate, goalExchange),
		signCPU/(perEx(ex.caddyCPU)+perEx(ex.wrkCPU)), perEx(ex.caddyCPU), perEx(ex.wrkCPU), signCPU)
	if ranOut {
		b.WriteString("; a share of codes ran out (refused answers): the rate is low")
	}
	b.WriteString("\n")
	return b.String(), nil
}

// wrkRun is one wrk run, or the sum of several.
type wrkRun struct {
	requests, refused int
	seconds           float64
	caddyCPU, wrkCPU  time.Duration
}

func (w *wrkRun) add(r wrkRun) {
	w.requests += r.requests
	w.refused += r.refused
	w.seconds += r.seconds
	w.caddyCPU += r.caddyCPU
	w.wrkCPU += r.wrkCPU
}

// wrkOnce runs wrk for one second with the codes of file and reads its
// summary: "N requests in 1.00s, ..." and "Non-2xx or 3xx responses: M".
func wrkOnce(path, script, file string, s *site) (wrkRun, error) {
	before := loadgen.SampleCPU(s.pid)
	cmd := exec.Command(path, "-t1", "-c"+strconv.Itoa(*loadConns), "-d1s", "-s", script, "http://"+s.host+"/oauth2/token", "--", file)
	out, err := cmd.CombinedOutput()
	after := loadgen.SampleCPU(s.pid)
	if err != nil {
		return wrkRun{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	r := wrkRun{caddyCPU: after.Process - before.Process, wrkCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && f[1] == "requests" && f[2] == "in":
			r.requests, _ = strconv.Atoi(f[0])
			d, perr := time.ParseDuration(strings.TrimSuffix(f[3], ","))
			if perr != nil {
				return wrkRun{}, fmt.Errorf("wrk: %q: %v", line, perr)
			}
			r.seconds = d.Seconds()
		case strings.HasPrefix(strings.TrimSpace(line), "Non-2xx or 3xx responses:"):
			r.refused, _ = strconv.Atoi(f[len(f)-1])
		}
	}
	if r.requests == 0 || r.seconds == 0 {
		return wrkRun{}, fmt.Errorf("wrk: no summary in\n%s", out)
	}
	return r, nil
}
