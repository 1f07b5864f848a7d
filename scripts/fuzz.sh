#!/usr/bin/env bash
# Runs every Fuzz* target for FUZZTIME (default 20s) each.
#
# Go 1.26's fuzz coordinator can report a bare "context deadline exceeded" when
# -fuzztime runs out while a worker is mid-call (golang/go#75804, fixed in Go
# 1.27). That is not a finding: a real one prints "Failing input written to" and
# leaves a file under testdata/fuzz/. Such a run is checked by replaying the
# target's corpus deterministically; it passes only if the replay passes.
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-20s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

flakes=0
while read -r pkg pkgdir; do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		dir=$pkgdir/testdata/fuzz/$target
		before=$(ls "$dir" 2>/dev/null | wc -l)
		if $GO test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
			continue
		fi
		after=$(ls "$dir" 2>/dev/null | wc -l)
		# The only reason given under "--- FAIL:" must be the deadline.
		reason=$(awk '/^--- FAIL:/ { getline; print; exit }' "$log")
		if [[ $reason =~ ^[[:space:]]+context\ deadline\ exceeded$ ]] &&
			! grep -q 'Failing input written' "$log" &&
			[ "$before" -eq "$after" ]; then
			echo "fuzz: $target stopped on Go's fuzztime deadline race (golang/go#75804) with no finding; replaying its corpus"
			if $GO test -count=1 -run "^$target\$" "$pkg"; then
				flakes=$((flakes + 1))
				continue
			fi
		fi
		echo "fuzz: $target FAILED" >&2
		exit 1
	done
done < <($GO list -f '{{.ImportPath}} {{.Dir}}' ./... | grep -v /tests/)
echo "fuzz: every target passed ($flakes stopped on the deadline race and passed a corpus replay)"
