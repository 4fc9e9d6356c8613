package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vltava/vltava/plugins/metastore/etcd/etcdtest"
	"github.com/vltava/vltava/plugins/sdk"
)

// TestUserAuth: with etcd's auth enabled, the store works with a user's
// credentials and refuses to open without them.
func TestUserAuth(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[0].ClientURL}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "vltava"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "vltava", "/secure/", clientv3.GetPrefixRangeEnd("/secure/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "broker", "s3cret"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "broker", "vltava"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up etcd auth: %v", err)
		}
	}
	s, err := Open(ctx, Config{Endpoints: c.Endpoints(), Prefix: "/secure", Username: "broker", Password: "s3cret"}, nil)
	if err != nil {
		t.Fatalf("open with credentials: %v", err)
	}
	defer s.Close()
	if _, err := s.Put(ctx, &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion}); err != nil {
		t.Fatalf("Put with credentials: %v", err)
	}
	if _, err := Open(ctx, Config{Endpoints: c.Endpoints(), Prefix: "/secure", DialTimeout: 3 * time.Second}, nil); err == nil {
		t.Fatal("opened an auth-enabled etcd without credentials")
	}
	other, err := Open(ctx, Config{Endpoints: c.Endpoints(), Prefix: "/elsewhere", Username: "broker", Password: "s3cret"}, nil)
	if err == nil {
		defer other.Close()
		_, err = other.Put(ctx, &sdk.PutRequest{Key: "k", Value: []byte("v"), ExpectVersion: sdk.AnyVersion})
	}
	if err == nil || errors.Is(err, sdk.ErrVersionMismatch) {
		t.Fatalf("Put outside the user's permitted prefix: %v, want a refusal", err)
	}
}
