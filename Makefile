# palmgate: build, run and test the custom Caddy binary with the palmgate plugin.
GO      ?= go
BIN     := bin/caddy
PKGS    := ./...

.PHONY: build run test vet clean fuzz soak test-crash bench bench-go

FUZZTIME ?= 60s
SOAK_DURATION ?= 10m
BENCH_DURATION ?= 10s
BENCHFLAGS ?=

build:
	$(GO) build -o $(BIN) ./cmd/caddy

# run's ports: the site (http://localhost:$(PORT)) and Caddy's admin API.
PORT       ?= 8080
ADMIN_PORT ?= 2019

## run: build and start the example (dev mode) on http://localhost:$(PORT), on loopback
## only (127.0.0.1), admin API on localhost:$(ADMIN_PORT), data in ./data;
## `make run PORT=9080 ADMIN_PORT=9019` for other ports
run: build
	mkdir -p data
	@echo "palmgate (dev mode, loopback only): log in at http://localhost:$(PORT)/demo, the portal at http://localhost:$(PORT)/portal, the admin API at localhost:$(ADMIN_PORT)"
	PALMGATE_PORT=$(PORT) PALMGATE_ADMIN_PORT=$(ADMIN_PORT) $(BIN) run --config Caddyfile.example --adapter caddyfile

## test: vet, then every test, the integration tests against the binary built here;
## PostgreSQL tests run on a private throwaway cluster (initdb on PATH or under
## /usr/lib/postgresql) or on PALMGATE_TEST_POSTGRES=<dsn>; a line says when they skip.
## The closing lines name each group skipped for a missing tool (Chromium, nginx, Node)
## and how to install it; PALMGATE_REQUIRE_TOOLS=1 (CI) makes those skips failures
test: build
	$(GO) vet $(PKGS)
	@$(GO) run ./internal/pgtest/pgcheck
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 20m $(PKGS); status=$$?; \
		$(GO) run ./internal/toolcheck; $(GO) run ./internal/pgtest/pgcheck; exit $$status

## fuzz: every fuzz target for FUZZTIME each (default 60s), stopping at the first failure
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## soak: mixed load against bin/caddy for SOAK_DURATION; RSS, disk and record counts to soak.csv
soak: build
	$(GO) run ./soak -duration $(SOAK_DURATION) -caddy $(BIN) -out soak.csv

## test-crash: only the crash (20 SIGKILLs under load) and reload (10 reloads under load) tests
test-crash: build
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -count=1 -v -run 'Crash|ReloadUnderLoad' ./integration/

## bench: req/s through Caddy for reverse_proxy alone, palmgate_bearer (reused token,
## cache off, a new token per request) and /oauth2/check, interleaved rounds, PASS/MISS
## per goal; then the service benchmarks (signature verification, lookups and the
## leaderboard on 1M agents, the code exchange, registrations); then PostgreSQL
## against Badger (signature checks, lookups, code exchanges, registrations on a
## private durable cluster); exits 0 unless something errs (docs/PERFORMANCE.md)
bench: build
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -run '^TestLoad$$' -v -count=1 -timeout 30m ./bench -args -load -load.duration=$(BENCH_DURATION) $(BENCHFLAGS)
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -run '^TestServiceLoad$$' -v -count=1 -timeout 60m ./bench/service -args -load -load.duration=$(BENCH_DURATION) $(BENCHFLAGS)
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -run '^TestStorageLoad$$' -v -count=1 -timeout 60m ./bench/service -args -load -load.duration=$(BENCH_DURATION) $(BENCHFLAGS)

## bench-go: the go test -bench suite (through Caddy, and bearer.Verifier alone), and
## pgstore's grouped commits on one and two stores of one database
bench-go: build
	PALMGATE_CADDY=$(CURDIR)/$(BIN) $(GO) test -run '^$$' -bench . -benchtime 3s ./bench
	$(GO) test -run '^$$' -bench GroupedUpdates -benchtime 3s ./storage/pgstore

clean:
	rm -rf bin data
