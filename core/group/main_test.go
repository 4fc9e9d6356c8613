package group

import (
	"testing"

	"go.uber.org/goleak"
)

// The coordinator starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
