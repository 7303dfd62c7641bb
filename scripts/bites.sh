#!/usr/bin/env bash
# Every guard must bite: for each safety mechanism, a build with the
# causeway_guards tag turns that one guard off (CAUSEWAY_GUARDS_OFF) and
# runs the tests that must catch it through the real code path. The run
# fails if any of those tests passes with its guard off, or if a test
# named here does not exist.
#
# Usage: scripts/bites.sh [guard ...]   (default: every guard below)
set -uo pipefail
GO=${GO:-go}

# guard | package | tests that must fail with the guard off (a -run regexp)
BITES=(
  "read-barrier|./internal/clustertest|^TestDeposedLeaderServesNoStaleStrongRead\$"
  "floor-wait|./internal/clustertest|^TestReadYourWritesThroughFollowers\$"
  "floor-wait|./internal/clustertest|^TestMonotonicReadsAfterTrim\$"
  "floor-wait|./internal/clustertest|^TestInjectedRemoteWrites\$"
  "wal-sync|./internal/server|^TestCrashImages\$"
  "wal-sync|./internal/wal|^TestCrashImagesKeepAcknowledgedEntries\$"
  "snapshot-sync|./internal/server|^TestCrashImages\$"
  "causal-floor|./internal/clustertest|^TestCrossSessionCausality\$"
  "causal-floor|./internal/clustertest|^TestRandomizedCausal\$"
  "gc-frontier|./internal/fsm|^TestLateRemoteWriteDoesNotResurrect\$"
  "gc-frontier|./internal/clustertest|^TestLateRemoteWriteAfterGC\$"
  "gc-frontier|./internal/clustertest|^TestGeoLateRemoteWriteAfterGC\$"
  "dependency-wait|./internal/clustertest|^TestRemoteApplyWaitsForDependencies\$"
  "dependency-wait|./internal/clustertest|^TestGetTxnAlbumACL\$"
  "dependency-wait|./internal/clustertest|^TestGeoConvergence\$"
  "session-arrival|./internal/clustertest|^TestSessionMovesBetweenSites\$"
  "session-arrival|./internal/clustertest|^TestSiteRemovalPassesOnTheRemovedSitesWrites\$"
  "snapshot-cut|./internal/clustertest|^TestGetTxnCutsAtOneSnapshot\$"
  "txn-fresh|./internal/clustertest|^TestGetTxnWithoutSessionSeesAcknowledgedWrites\$"
  "raft-db-fail-stop|./internal/server|^TestFailedRaftDBWriteStopsTheNode\$"
  "join-gate|./internal/clustertest|^TestJoiningSiteServesNoVersionBeforeItsDependency\$"
  "request-dedupe|./internal/server|^TestRequestIDAppliesOnce\$"
  "commit-push|./internal/transport|^TestCommitPush\$"
  "leader-to-alive|./internal/catalog|^TestLeaderTargetsAreAlive\$"
  "late-batch|./internal/clustertest|^TestGeoLateBatchIsNotARebuiltReplica\$"
  "leader-caught-up|./internal/clustertest|^TestGeoLaggingLeaderWaitsToShip\$"
  "quiet-confirmed|./internal/transport|^TestQuietLeaderCutOff\$"
  "quiet-commit|./internal/transport|^TestQuietFollowersLearnCommits\$"
  "quiet-log-check|./internal/transport|^TestQuietFollowerThatLostItsLogCatchesUp\$"
  "leader-append|./internal/transport|^TestParallelLeaderAppendCountsOnlyStored\$"
  "state-open-reads|./internal/storage|^TestDeferredApplyIsReadBeforeItsCommit\$"
  "state-flush|./internal/storage|^TestDeferredSnapshotHoldsEveryApply\$"
  "state-fail-stop|./internal/storage|^TestDeferredFailedApplyStopsTheDatabase\$"
  "request-index-rollback|./internal/storage|^TestRequestIndexAfterFailedTransaction\$"
  "recovery-config-check|./internal/catalog|^TestRecoveryLost\$"
  "lease-expiry|./internal/clustertest|^TestDeposedLeaderServesNoStaleStrongRead\$"
  "lease-transfer|./internal/clustertest|^TestTransferVoidsReadLease\$"
  "stale-transfer|./internal/transport|^TestStaleTransferRefused\$"
  "vote-hold|./internal/clustertest|^TestRestartedReplicaHoldsItsVote\$"
  "vote-hold|./internal/transport|^TestRestartedReplicaRefusesVotes\$"
  "fresh-identity|./internal/clustertest|^TestWipedNodeRefusesItsOldID\$"
  "drop-confirm|./internal/clustertest|^TestLaggingMapKeepsReplicas\$"
  "bootstrap-confirm|./internal/clustertest|^TestLaggingMapCreatesNoGroupAlone\$"
  "site-incarnation|./internal/clustertest|^TestWipedFirstNodeBootstrapsApart\$"
  "node-remove-check|./internal/catalog|^TestRemoveRefusal\$"
  "node-remove-check|./internal/catalog|^TestRemoveNodeOp\$"
  "node-remove-check|./internal/cli|^TestIntegrationNodeRemove\$"
  "cas-turn|./internal/server|^TestCASTurnSpendsOneEntry\$"
  "state-checksum|./internal/storage|^TestChangedValueByteIsRefusedAtOpen\$"
  "state-checksum|./internal/server|^TestChangedStateValueIsRebuilt\$"
  "state-checksum|./internal/storage|^TestChangedOutboundEntryIsDamage\$"
  "state-checksum|./internal/storage|^TestChangedStateRecordIsRefusedAtOpen\$"
  "state-checksum|./internal/storage|^TestChangedRaftTermIsRefused\$"
  "remove-site-check|./internal/clustertest|^TestRemovingAnUnreachableSiteNeedsForce\$"
  "cluster-session|./internal/cli|^TestIntegrationSessionFileOfAnotherCluster\$"
  "leader-reach|./internal/clustertest|^TestCutOffNodeGivesUpLeadership\$"
  "log-kept|./internal/server|^TestTruncatedLogIsRefused\$"
  "restart-grace|./internal/clustertest|^TestWholeSiteRestartKeepsTheLateNode\$"
  "clock-ahead|./internal/clustertest|^TestForgedTimestampsCannotMoveTheClock\$"
  "wal-length|./internal/wal|^TestTruncatedSegmentIsRefused\$"
  "wal-last-write|./internal/wal|^TestZeroedSectorBeforeTheLastWriteIsRefused\$"
  "wal-write-marks|./internal/wal|^TestZeroedSectorOfAnEarlierWriteIsRefused\$"
  "wal-write-marks|./internal/wal|^TestZeroedEndOfAnEarlierSegmentIsRefused\$"
  "leader-hand-off|./internal/clustertest|^TestStoppedLeaderHandsOff\$"
  "stop-refuses-leader|./internal/clustertest|^TestStoppingNodeTakesNoLeadershipBack\$"
  "replication-backoff-cap|./internal/raftutil|^TestFollowerBackFromAnOutageGetsEntriesAtOnce\$"
  "remove-reachable|./internal/placement|^TestPlanKeepsAReachableQuorum\$"
  "site-gone|./internal/clustertest|^TestRemoveALostSite\$"
  "log-hold|./internal/clustertest|^TestReplicaThatLostEntriesHoldsItsVote\$"
  "peer-address-in-use|./internal/server|^TestPeerAddressOfALiveNodeIsRefused\$"
)

want=("$@")
failed=0
for bite in "${BITES[@]}"; do
  IFS='|' read -r guard pkg tests <<<"$bite"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " =~ " $guard " ]]; then
    continue
  fi
  echo "--- bite: $guard off, expecting $tests in $pkg to fail"
  out=$(CAUSEWAY_GUARDS_OFF=$guard $GO test -tags causeway_guards -count=1 -run "$tests" -v "$pkg" 2>&1)
  if ! grep -q -- "^=== RUN" <<<"$out"; then
    echo "$out" | tail -20
    echo "FAIL: $tests matched no test in $pkg"
    failed=1
  elif grep -q -- "^--- FAIL" <<<"$out"; then
    grep -E -- "^--- FAIL|^\s+\S+_test\.go:[0-9]+:" <<<"$out" | head -6
    echo "ok: $guard off is caught"
  else
    echo "$out" | tail -20
    echo "FAIL: with $guard off, $tests passed: the guard has no test that bites"
    failed=1
  fi
done
exit $failed
