// Package bench measures requests per second through the real palmgate build of
// Caddy (cmd/caddy, started by internal/testserver), on one Caddy instance and in
// one run: reverse_proxy alone, reverse_proxy with the identity headers set by
// Caddy's request_header (what the headers alone cost), palmgate_bearer in front of the same
// reverse_proxy (a reused token served from the verified-token cache, the same
// with strip_token, the cache turned off, a new token on every request) and
// /oauth2/check. Each round measures them all in turns of short slices
// (loadgen.Interleave), so that each ratio to reverse_proxy compares the same
// stretch of the machine's time.
//
// It holds no code of its own outside its tests; the load generator (raw
// HTTP/1.1 connections, the measured runs, the CPU accounting) is
// internal/loadgen, shared with bench/service:
//
//	go test -run '^TestLoad$' -v -count=1 ./bench -args -load        # the load script (make bench)
//	go test -run '^$' -bench . ./bench                               # the go test -bench suite
//
// A plain `go test ./bench` runs no benchmark and no load (TestLoad skips itself
// without -load). docs/PERFORMANCE.md has the figures, the goals and the method.
package bench
