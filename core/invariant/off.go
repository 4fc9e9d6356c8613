//go:build !invariants

package invariant

// Enabled reports whether invariant checks are built in (the invariants
// build tag).
const Enabled = false
