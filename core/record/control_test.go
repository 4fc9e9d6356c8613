package record

import "testing"

func TestMarkerBatchRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := MarkerBatch(3, 4, commit, 17, 99)
		if err := CheckCRC(b); err != nil {
			t.Fatal(err)
		}
		typ, ce, err := ControlMarker(b)
		want := ControlAbort
		if commit {
			want = ControlCommit
		}
		if err != nil || typ != want || ce != 17 {
			t.Fatalf("ControlMarker = %d %d %v, want %d 17", typ, ce, err, want)
		}
	}
	if _, _, err := ControlMarker(MarkerBatch(1, 1, true, 1, 1)[:HeaderSize+2]); err == nil {
		t.Fatal("truncated marker accepted")
	}
}

// FuzzControlMarker: any bytes give a marker or an error, never a panic
// (recovery and followers read control records from disk and the wire).
func FuzzControlMarker(f *testing.F) {
	f.Add(MarkerBatch(3, 4, true, 17, 99))
	f.Add(MarkerBatch(3, 4, false, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		ControlMarker(b)
	})
}
