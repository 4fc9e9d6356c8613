package writecheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/vltava/vltava/plugins/sdk"
)

var lim = Limits{MaxKeyBytes: 8, MaxValueBytes: 4}

func TestTxn(t *testing.T) {
	cases := []struct {
		name string
		req  sdk.TxnRequest
		ok   bool
	}{
		{"valid", sdk.TxnRequest{Conditions: []sdk.Condition{{Key: "a", Version: 0}},
			Ops: []sdk.Op{{Type: sdk.OpPut, Key: "a", Value: []byte("1234")}, {Type: sdk.OpDelete, Key: "b"}}}, true},
		{"empty condition key", sdk.TxnRequest{Conditions: []sdk.Condition{{Key: ""}}}, false},
		{"negative condition version", sdk.TxnRequest{Conditions: []sdk.Condition{{Key: "a", Version: -1}}}, false},
		{"long op key", sdk.TxnRequest{Ops: []sdk.Op{{Type: sdk.OpDelete, Key: strings.Repeat("k", 9)}}}, false},
		{"key twice", sdk.TxnRequest{Ops: []sdk.Op{{Type: sdk.OpDelete, Key: "a"}, {Type: sdk.OpPut, Key: "a"}}}, false},
		{"big value", sdk.TxnRequest{Ops: []sdk.Op{{Type: sdk.OpPut, Key: "a", Value: []byte("12345")}}}, false},
		{"unknown op", sdk.TxnRequest{Ops: []sdk.Op{{Type: 99, Key: "a"}}}, false},
	}
	for _, c := range cases {
		err := lim.Txn(&c.req)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, sdk.ErrInvalidArgument)) {
			t.Errorf("%s: err = %v, want ok=%v or ErrInvalidArgument", c.name, err, c.ok)
		}
	}
}

func TestExpect(t *testing.T) {
	if conds, err := lim.Expect("a", sdk.AnyVersion); err != nil || conds != nil {
		t.Fatalf("AnyVersion: %v, %v; want no conditions", conds, err)
	}
	if conds, err := lim.Expect("a", 7); err != nil || len(conds) != 1 || conds[0] != (sdk.Condition{Key: "a", Version: 7}) {
		t.Fatalf("version 7: %v, %v", conds, err)
	}
	if _, err := lim.Expect("a", -2); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("version -2: err = %v, want ErrInvalidArgument", err)
	}
}

func TestCheckConditions(t *testing.T) {
	versions := map[string]int64{"a": 3}
	get := func(k string) (int64, error) { return versions[k], nil }
	if err := CheckConditions([]sdk.Condition{{Key: "a", Version: 3}, {Key: "b", Version: 0}}, get); err != nil {
		t.Fatalf("matching conditions: %v", err)
	}
	if err := CheckConditions([]sdk.Condition{{Key: "a", Version: 2}}, get); !errors.Is(err, sdk.ErrVersionMismatch) {
		t.Fatalf("stale version: err = %v, want ErrVersionMismatch", err)
	}
	boom := errors.New("boom")
	if err := CheckConditions([]sdk.Condition{{Key: "a"}}, func(string) (int64, error) { return 0, boom }); err != boom {
		t.Fatalf("lookup failure: err = %v, want it returned as is", err)
	}
}

func TestPutDelete(t *testing.T) {
	if _, err := lim.Put(&sdk.PutRequest{Key: "a", Value: []byte("12345"), ExpectVersion: sdk.AnyVersion}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("Put of a big value: err = %v, want ErrInvalidArgument", err)
	}
	if conds, err := lim.Put(&sdk.PutRequest{Key: "a", ExpectVersion: sdk.MustNotExist}); err != nil || len(conds) != 1 || conds[0].Version != 0 {
		t.Fatalf("Put MustNotExist: %v, %v; want one condition at version 0", conds, err)
	}
	if _, err := lim.Delete(&sdk.DeleteRequest{Key: "a", ExpectVersion: sdk.MustNotExist}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("Delete MustNotExist: err = %v, want ErrInvalidArgument", err)
	}
	if _, err := lim.Delete(&sdk.DeleteRequest{Key: "", ExpectVersion: sdk.AnyVersion}); !errors.Is(err, sdk.ErrInvalidArgument) {
		t.Fatalf("Delete of an empty key: err = %v, want ErrInvalidArgument", err)
	}
}
