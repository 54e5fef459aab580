package smtpbackend_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// server, connection and watcher must end when its test does.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
