package state_test

import (
	"testing"

	"github.com/directbridge/directbridge/internal/pgtest"
	"github.com/directbridge/directbridge/internal/state"
)

// sharedTest is one test of the shared suite.
type sharedTest struct {
	name string
	run  func(t *testing.T, open func() (state.StateStore, error))
}

// sharedTests check what the StateStore interface promises, on any
// implementation. Each gets open, which opens the same store again at
// every call (a restart of the bridge), a new store per test; the store
// is closed by the test.
var sharedTests = []sharedTest{
	{"SubmissionJournal", testSubmissionJournal},
	{"ClaimSubmission", testClaimSubmission},
	{"BeginSubmissionIsCompareAndSet", testBeginSubmissionIsCompareAndSet},
	{"ConcurrentClaimsOneWins", testConcurrentClaimsOneWins},
	{"SentRecordsPruned", testSentRecordsPruned},
	{"SubmissionAnswered", testSubmissionAnswered},
	{"CompleteTracks", testCompleteTracks},
	{"SubmissionDeferred", testSubmissionDeferred},
	{"TrackedMessages", testTrackedMessages},
	{"StoreSentRecords", testStoreSentRecords},
	{"StoreFolderState", testStoreFolderState},
	{"StoreNonASCIIFolderNames", testStoreNonASCIIFolderNames},
	{"Attempts", testAttempts},
	{"Reported", testReported},
	{"Settings", testSettings},
}

// runShared runs the shared tests on stores made by newStore, which
// returns the opener of a new, empty store.
func runShared(t *testing.T, newStore func(t *testing.T) func() (state.StateStore, error)) {
	for _, tc := range sharedTests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// TestSQLiteStore runs the shared tests on the SQLite store, each in a
// data directory of its own.
func TestSQLiteStore(t *testing.T) {
	runShared(t, func(t *testing.T) func() (state.StateStore, error) {
		dir := t.TempDir()
		return func() (state.StateStore, error) { return state.OpenStore(dir) }
	})
}

// TestPostgresStore runs the shared tests on the PostgreSQL store, each
// in a database of its own on the package's throwaway server.
func TestPostgresStore(t *testing.T) {
	runShared(t, func(t *testing.T) func() (state.StateStore, error) {
		url := pgtest.Database(t)
		return func() (state.StateStore, error) { return state.OpenPostgres(url) }
	})
}
