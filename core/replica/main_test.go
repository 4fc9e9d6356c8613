package replica

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// goroutine has an owner that stops it and waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
