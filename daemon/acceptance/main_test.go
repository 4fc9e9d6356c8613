package acceptance

import (
	"testing"

	"github.com/vltava/vltava/daemon/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
