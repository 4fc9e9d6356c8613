package invariant

import "testing"

func TestCheck(t *testing.T) {
	Check(true, "never fails")
	defer func() {
		r := recover()
		if Enabled && r == nil {
			t.Fatal("Check(false) did not panic with the invariants tag")
		}
		if !Enabled && r != nil {
			t.Fatalf("Check(false) panicked without the invariants tag: %v", r)
		}
	}()
	Check(false, "x=%d", 1)
}
