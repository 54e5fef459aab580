package imapbackend_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// server, connection, poller and read-ahead must end when its test does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
