package broker

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// goroutine has an owner that stops it and waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's metrics (rcrowley/go-metrics) start one process-wide
		// meter ticker the first time a meter is created and never stop
		// it; it belongs to the library, not to a test.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}
