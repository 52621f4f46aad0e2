#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each, one after another, and stops at the first
# failure (whose input Go writes to <package>/testdata/fuzz/<FuzzName>/; commit it
# with the fix, it then runs as a regression test with every `go test`).
#
#   scripts/fuzz.sh                       every target, FUZZTIME each (default 30s)
#   FUZZTIME=5s scripts/fuzz.sh           CI
#   scripts/fuzz.sh FuzzAuthorize ...     only the named targets
#
# FUZZMINIMIZETIME (default 5s) bounds how long Go minimizes each new or failing
# input; Go's 60s default would eat short runs. FUZZPARALLEL sets the number of
# fuzzing workers (default: GOMAXPROCS).
set -euo pipefail
cd "$(dirname "$0")/.."

GO="${GO:-go}"
FUZZTIME="${FUZZTIME:-30s}"
FUZZMINIMIZETIME="${FUZZMINIMIZETIME:-5s}"

# Every fuzz target of the module, "package target", found in the sources so that
# a target added or moved is never left out (one listed by hand under the wrong
# package was silently not fuzzed: Go reports "no fuzz tests to fuzz" and passes).
mapfile -t TARGETS < <(grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=.data --exclude-dir=node_modules '^func Fuzz' . | sort |
	while read -r file; do
		grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed "s|^func |$(dirname "$file") |"
	done)
if [ "${#TARGETS[@]}" -eq 0 ]; then
	echo "fuzz: no fuzz target found" >&2
	exit 1
fi

wanted() {
	[ $# -eq 1 ] && return 0
	local name=$1 w
	shift
	for w in "$@"; do
		[ "$w" = "$name" ] && return 0
	done
	return 1
}

flags=(-run '^$' -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME")
if [ -n "${FUZZPARALLEL:-}" ]; then
	flags+=(-parallel "$FUZZPARALLEL")
fi

# fuzz_one runs one target and returns its status. Go's coordinator can fail a
# target with a bare "context deadline exceeded" when -fuzztime ends while a
# starved worker is mid-call (golang/go's fuzz coordinator race, on a loaded
# machine, and on a quiet one now and then), writing no failing input: that run
# is repeated, at most twice. A run that writes a failing input always fails.
fuzz_one() {
	local pkg=$1 name=$2 corpus before out status again
	corpus="${pkg#./}/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	out=$(mktemp)
	status=0
	"$GO" test "${flags[@]}" -fuzz "^${name}\$" "$pkg" 2>&1 | tee "$out" || status=$?
	for again in 1 2; do
		if [ "$status" -eq 0 ] || [ "$(ls "$corpus" 2>/dev/null | sort || true)" != "$before" ] ||
			! grep -q '^    context deadline exceeded$' "$out"; then
			break
		fi
		echo "fuzz: $name stopped with Go's fuzztime deadline race and no failing input; running it again ($again)" >&2
		status=0
		"$GO" test "${flags[@]}" -fuzz "^${name}\$" "$pkg" 2>&1 | tee "$out" || status=$?
	done
	if grep -q 'no fuzz tests to fuzz' "$out"; then
		echo "fuzz: $name is not a fuzz target of $pkg" >&2
		status=1
	fi
	rm -f "$out"
	return "$status"
}

ran=0
for entry in "${TARGETS[@]}"; do
	read -r pkg name <<<"$entry"
	wanted "$name" "$@" || continue
	echo "fuzz: $name ($pkg) for $FUZZTIME"
	if ! fuzz_one "$pkg" "$name"; then
		echo "fuzz: $name FAILED; the failing input is in ${pkg#./}/testdata/fuzz/$name/" >&2
		exit 1
	fi
	ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
	echo "fuzz: no target named $*" >&2
	exit 2
fi
echo "fuzz: $ran targets passed, $FUZZTIME each"
