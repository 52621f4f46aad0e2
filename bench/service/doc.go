// Package service measures palmgate's own endpoints through the real palmgate
// build of Caddy (cmd/caddy, started by internal/testserver) against the cost
// of the work they cannot avoid, every figure a ratio of two measurements of the
// same run on the same machine:
//
//  1. POST /v1/agent/verify/signature (a registered and an unregistered device)
//     against a minimal net/http server of no palmgate code doing the same
//     JSON decoding and the one ed25519.Verify, with the raw ed25519.Verify rate
//     beside both; and against the same minimal handler as a Caddy module
//     (bench/minimalcaddy) in the bench's own build of Caddy, the same site
//     shape as palmgate's (scenario minimal-caddy: the binary is built into a
//     temporary directory, or taken from PALMGATE_BENCH_CADDY_MINIMAL); these
//     ratios are decided by measuring the four scenarios interleaved, in turns
//     of slices of one round (loadgen.Interleave), so that the machine's drift
//     between slots does not decide them;
//  2. device and public-key lookups and the leaderboard, on a store seeded with
//     100k humans and 1M agents, against Caddy's static `respond` (of a body as
//     long as the leaderboard's for the leaderboard);
//  3. the authorization-code exchange on /oauth2/token against its three
//     signatures (ES256 ID token, access and refresh tokens: the bench client's
//     id_token_signed_response_alg is ES256) by core/keys; with RS256 ID tokens
//     (the default) the ratio is decided by measuring the exchange and its
//     signatures interleaved too; -load.wrk measures it once more with wrk as
//     the exchange's client; beside them, interleaved as well, the same request
//     answered by a token endpoint in the bench's Caddy that only signs
//     (bench/minimalcaddy, scenarios token-caddy and token-caddy-rs): what HTTP,
//     Caddy and the load generator leave of the goal, and palmgate's share;
//  4. agent registrations (init, then completion by a palm attestor's signed
//     assertion) by 64 concurrent agents against Badger's own synced-commit rate.
//
// The store is seeded by Seed (this package's only non-test code) straight into
// the Badger directory before the server starts, and cached under
// bench/service/.data; every run works on a copy of the cache. The load
// generator (raw HTTP/1.1 connections, the measured runs, the CPU accounting)
// is internal/loadgen, shared with bench.
//
//	go test -run '^TestServiceLoad$' -v -count=1 -timeout 60m ./bench/service -args -load   # the load script
//	go test -run '^$' -bench . ./bench/service                                              # the go test -bench suite
//
// TestStorageLoad (make bench, after TestServiceLoad) runs the signature
// check, the lookups, the code exchange and registrations on Badger and on a
// PostgreSQL database of a private, durable cluster (internal/pgtest), side by
// side in one run, against issue 10's goals:
//
//	go test -run '^TestStorageLoad$' -v -count=1 -timeout 60m ./bench/service -args -load
//
// A plain `go test ./bench/service` runs only a quick check of the seeded record
// layout against core/agent itself. docs/PERFORMANCE.md has the figures and the method.
package service
