// Package invariant turns the `// INVARIANT:` comments of core into checks
// that run when the module is built with the invariants build tag, as
// pebble does:
//
//	go test -tags invariants ./daemon/acceptance/... ./conformance/...
//
// Without the tag Enabled is a false constant, so a guarded check
//
//	if invariant.Enabled {
//		invariant.Check(hw <= leo, "partition %s: hw %d > leo %d", p, hw, leo)
//	}
//
// compiles to nothing and costs nothing on the produce and fetch paths.
// Write the condition inside the `if` so that its operands are not
// evaluated either. A failed check panics: a broken invariant means state
// that can no longer be trusted, and the tests that run with the tag must
// stop at the first one rather than acknowledge more writes on top of it.
package invariant

import "fmt"

// Check panics with the formatted message when cond is false and
// invariant checking is built in. Without the invariants tag it does
// nothing; guard calls with Enabled so their arguments are not computed.
func Check(cond bool, format string, args ...any) {
	if Enabled && !cond {
		panic(fmt.Sprintf("invariant violated: "+format, args...))
	}
}
