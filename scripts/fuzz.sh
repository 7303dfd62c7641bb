#!/usr/bin/env bash
# Runs every native Go fuzz target of the module for FUZZTIME (default 3s).
# A target fails the run when it finds a failing input. Go's fuzzing engine
# sometimes reports "context deadline exceeded" when -fuzztime ends under
# load without any failing input; such a run is retried once.
set -euo pipefail
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-3s}
for pkg in $($GO list ./...); do
  for t in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $t"
    for attempt in 1 2; do
      if out=$($GO test -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1); then
        break
      fi
      if [ "$attempt" = 1 ] && grep -q "context deadline exceeded" <<<"$out" && ! grep -q "Failing input written" <<<"$out"; then
        echo "  (fuzzing engine timed out without a failing input; retrying)"
        continue
      fi
      echo "$out"
      exit 1
    done
  done
done
