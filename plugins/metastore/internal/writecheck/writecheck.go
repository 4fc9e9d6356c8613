// Package writecheck provides the write rules the metadata stores share:
// validation of Put, Delete and Txn requests against the key and value
// limits, and the compare-and-set check of a write's version conditions.
//
// Threading contract: everything here is a pure function of its
// arguments (Limits is a value); CheckConditions calls version
// synchronously and runs under whatever lock or transaction the caller
// holds, so the versions it sees are the ones the write will replace.
package writecheck

import (
	"fmt"

	"github.com/vltava/vltava/plugins/sdk"
)

// Limits are a store's size bounds.
type Limits struct {
	MaxKeyBytes   int
	MaxValueBytes int
}

// Key checks a key is non-empty and within MaxKeyBytes.
func (l Limits) Key(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", sdk.ErrInvalidArgument)
	}
	if len(key) > l.MaxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", sdk.ErrInvalidArgument, len(key), l.MaxKeyBytes)
	}
	return nil
}

// Value checks a value is within MaxValueBytes.
func (l Limits) Value(v []byte) error {
	if len(v) > l.MaxValueBytes {
		return fmt.Errorf("%w: value of %d bytes exceeds %d", sdk.ErrInvalidArgument, len(v), l.MaxValueBytes)
	}
	return nil
}

// Put checks a Put request and returns its conditions (see Expect).
func (l Limits) Put(req *sdk.PutRequest) ([]sdk.Condition, error) {
	conds, err := l.Expect(req.Key, req.ExpectVersion)
	if err != nil {
		return nil, err
	}
	if err := l.Value(req.Value); err != nil {
		return nil, err
	}
	return conds, nil
}

// Delete checks a Delete request, which may not use sdk.MustNotExist,
// and returns its conditions (see Expect).
func (l Limits) Delete(req *sdk.DeleteRequest) ([]sdk.Condition, error) {
	if req.ExpectVersion == sdk.MustNotExist {
		return nil, fmt.Errorf("%w: delete with ExpectVersion MustNotExist", sdk.ErrInvalidArgument)
	}
	return l.Expect(req.Key, req.ExpectVersion)
}

// Expect checks key and turns a Put or Delete's ExpectVersion into the
// write's conditions: none for sdk.AnyVersion, else key at version v
// (0, sdk.MustNotExist, meaning absent).
func (l Limits) Expect(key string, v int64) ([]sdk.Condition, error) {
	if err := l.Key(key); err != nil {
		return nil, err
	}
	switch {
	case v == sdk.AnyVersion:
		return nil, nil
	case v < sdk.AnyVersion:
		return nil, fmt.Errorf("%w: ExpectVersion %d", sdk.ErrInvalidArgument, v)
	}
	return []sdk.Condition{{Key: key, Version: v}}, nil
}

// Txn checks a transaction: valid condition keys and versions, valid op
// keys each named once, put values within bounds, known op types. A
// request it accepts has only sdk.OpPut and sdk.OpDelete ops.
func (l Limits) Txn(req *sdk.TxnRequest) error {
	for _, c := range req.Conditions {
		if err := l.Key(c.Key); err != nil {
			return err
		}
		if c.Version < 0 {
			return fmt.Errorf("%w: condition on %q with version %d", sdk.ErrInvalidArgument, c.Key, c.Version)
		}
	}
	seen := make(map[string]bool, len(req.Ops))
	for _, op := range req.Ops {
		if err := l.Key(op.Key); err != nil {
			return err
		}
		if seen[op.Key] {
			return fmt.Errorf("%w: key %q named twice in a txn", sdk.ErrInvalidArgument, op.Key)
		}
		seen[op.Key] = true
		switch op.Type {
		case sdk.OpPut:
			if err := l.Value(op.Value); err != nil {
				return err
			}
		case sdk.OpDelete:
		default:
			return fmt.Errorf("%w: op type %d", sdk.ErrInvalidArgument, op.Type)
		}
	}
	return nil
}

// CheckConditions reports sdk.ErrVersionMismatch for the first condition
// whose key is not at the wanted version. version returns a key's current
// version, 0 if the key is absent; its error is returned as is.
func CheckConditions(conds []sdk.Condition, version func(key string) (int64, error)) error {
	for _, c := range conds {
		v, err := version(c.Key)
		if err != nil {
			return err
		}
		if v != c.Version {
			return fmt.Errorf("%w: key %q is at version %d, want %d", sdk.ErrVersionMismatch, c.Key, v, c.Version)
		}
	}
	return nil
}
