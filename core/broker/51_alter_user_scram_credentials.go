package broker

// AlterUserScramCredentials (key 51), v0 (flexible). KIP-554.
//
// Upsertions carry the salted password (the client salts and iterates;
// the password never reaches the broker) and the broker stores only the
// derived StoredKey and ServerKey (plugins/authn/scram). There is one
// result per user: every change for a user is validated first and then
// written in one store transaction, so a user's changes all apply or
// none does. Errors, as Kafka answers them:
//   - UNSUPPORTED_SASL_MECHANISM: a mechanism number other than 1
//     (SCRAM-SHA-256) or 2 (SCRAM-SHA-512);
//   - UNACCEPTABLE_CREDENTIAL: an empty user name, iterations outside
//     4096..16384, an empty salt, or a salted password of the wrong size;
//   - DUPLICATE_RESOURCE: one user and mechanism changed twice;
//   - RESOURCE_NOT_FOUND: deleting a credential that does not exist;
//   - REQUEST_TIMED_OUT: the metadata store is unreachable (every user's
//     changes refused before any is written: beginStoreWrite) or did not
//     answer in time.
//
// The user name and mechanism are logged; nothing secret is.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/authn/scram"
	"github.com/vltava/vltava/plugins/sdk"
)

// scramChange is one validated change to a user's credential.
type scramChange struct {
	mech   string
	cred   *scram.Credential // nil: delete
	delete bool
}

func handleAlterUserSCRAMCredentials(b *Broker, ctx context.Context, req *wire.Request) (*wire.Response, error) {
	r := req.Body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	changes := map[string][]scramChange{}
	failed := map[string]error{}
	note := func(user string) {
		if _, ok := changes[user]; !ok {
			if _, ok := failed[user]; !ok {
				order = append(order, user)
			}
		}
	}
	fail := func(user string, code *kerr.Error, format string, args ...any) {
		if failed[user] == nil {
			failed[user] = fmt.Errorf("%w: "+format, append([]any{code}, args...)...)
		}
	}
	add := func(user string, c scramChange) {
		for _, o := range changes[user] {
			if o.mech == c.mech {
				fail(user, kerr.DuplicateResource, "%s for user %q changed more than once", c.mech, user)
			}
		}
		changes[user] = append(changes[user], c)
	}
	for _, d := range r.Deletions {
		note(d.Name)
		mech := scram.MechanismOf(d.Mechanism)
		switch {
		case d.Name == "":
			fail(d.Name, kerr.UnacceptableCredential, "empty user name")
		case mech == "":
			fail(d.Name, kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", d.Mechanism)
		default:
			add(d.Name, scramChange{mech: mech, delete: true})
		}
	}
	for _, u := range r.Upsertions {
		note(u.Name)
		mech := scram.MechanismOf(u.Mechanism)
		if u.Name == "" {
			fail(u.Name, kerr.UnacceptableCredential, "empty user name")
			continue
		}
		if mech == "" {
			fail(u.Name, kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", u.Mechanism)
			continue
		}
		cred, err := scram.FromSaltedPassword(mech, u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			fail(u.Name, kerr.UnacceptableCredential, "%v", err)
			continue
		}
		add(u.Name, scramChange{mech: mech, cred: &cred})
	}
	wctx, cancel, refused := b.beginStoreWrite(ctx)
	defer cancel()
	for _, user := range order {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = user
		err := failed[user]
		if err == nil {
			err = refused
		}
		if err == nil {
			err = b.applySCRAMChanges(wctx, user, changes[user])
		}
		if err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				res.ErrorCode = ke.Code
			} else {
				res.ErrorCode = storeErrorCode(err)
			}
			res.ErrorMessage = kmsg.StringPtr(err.Error())
			b.logger.Info("broker: SCRAM credential change refused", "user", user, "err", err)
		} else {
			for _, c := range changes[user] {
				b.logger.Info("broker: SCRAM credential changed", "user", user, "mechanism", c.mech, "deleted", c.delete)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return reply(resp)
}

// applySCRAMChanges writes one user's changes in one transaction; a
// deletion requires the credential to exist.
func (b *Broker) applySCRAMChanges(ctx context.Context, user string, cs []scramChange) error {
	txn := &sdk.TxnRequest{}
	for _, c := range cs {
		key := scram.Key(user, c.mech)
		if c.delete {
			got, err := b.store.Get(ctx, &sdk.GetRequest{Key: key})
			if errors.Is(err, sdk.ErrNotFound) {
				return fmt.Errorf("%w: attempt to delete a user credential that does not exist (%s for %q)", kerr.ResourceNotFound, c.mech, user)
			}
			if err != nil {
				return err
			}
			txn.Conditions = append(txn.Conditions, sdk.Condition{Key: key, Version: got.Version})
			txn.Ops = append(txn.Ops, sdk.Op{Type: sdk.OpDelete, Key: key})
			continue
		}
		txn.Ops = append(txn.Ops, sdk.Op{Type: sdk.OpPut, Key: key, Value: c.cred.Encode()})
	}
	_, err := b.store.Txn(ctx, txn)
	if errors.Is(err, sdk.ErrVersionMismatch) {
		return fmt.Errorf("a concurrent change to %q's credentials won; retry: %w", user, err)
	}
	return err
}
