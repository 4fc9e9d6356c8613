package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vltava/vltava/plugins/builtin"
	"github.com/vltava/vltava/plugins/sdk"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

var metadataCommands = []command{
	{path: "metadata export", summary: "write every persistent key of a stopped cluster's metadata store to stdout (JSON lines)", run: runMetadataExport},
	{path: "metadata import", summary: "write the keys of a metadata export (stdin) into an empty metadata store", run: runMetadataImport},
}

// An export is JSON lines: a header line, then one line per key in key
// order. Values are bytes (base64 in JSON). Versions and sessions are not
// kept: the target store assigns its own revisions, and ephemeral keys
// (broker registrations) belong to sessions that ended with the cluster.
//
//	{"format":"vltava-metadata","version":1,"store":"raft","revision":42,"keys":17}
//	{"key":"/topics/orders","value":"eyJ..."}
type exportHeader struct {
	Format   string `json:"format"`
	Version  int    `json:"version"`
	Store    string `json:"store"`
	Revision int64  `json:"revision"`
	Keys     int    `json:"keys"`
}

type exportKey struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

const exportFormat = "vltava-metadata"

// storeFlags are the flags naming a store: the built-in plugin and its
// config, as in the broker's metadata.store and metadata.store.config.
type storeFlags struct {
	name *string
	set  listFlag
}

func addStoreFlags(f *cmdFlags) *storeFlags {
	s := &storeFlags{}
	s.name = f.String("store", "", "built-in metadata store `NAME`: local, raft, zookeeper, etcd")
	f.Var(&s.set, "set", "store config `key=value`, as in metadata.store.config (repeatable): local path=...; raft node.id=1 data.dir=... voters=1@h:p; zookeeper connect=h:p/chroot; etcd endpoints=h:p prefix=/vltava")
	return s
}

// open configures the built-in store in this process. The cluster must be
// stopped: the store is used as its brokers would. A raft store is opened
// as the one voter the flags name, so it must be a single-voter quorum
// (its data.dir and voters); a multi-voter quorum would need all of its
// voters running.
func (s *storeFlags) open(ctx context.Context) (sdk.MetadataStore, error) {
	if *s.name == "" {
		return nil, errors.New("--store is required (local, raft, zookeeper or etcd)")
	}
	kvs, err := keyValues(s.set)
	if err != nil {
		return nil, fmt.Errorf("--set: %v", err)
	}
	raw := map[string]any{}
	for _, kv := range kvs {
		raw[kv[0]] = kv[1]
	}
	var st sdk.MetadataStore
	switch *s.name {
	case "local":
		st = &builtin.LocalStore{}
	case "raft":
		st = &builtin.RaftStore{}
	case "zookeeper":
		st = builtin.NewZooKeeperStore()
	case "etcd":
		st = builtin.NewEtcdStore()
	default:
		return nil, fmt.Errorf("--store %q: want local, raft, zookeeper or etcd", *s.name)
	}
	if err := st.(serve.Configurer).Configure(ctx, raw); err != nil {
		return nil, fmt.Errorf("open %s store: %w", *s.name, err)
	}
	return st, nil
}

// listAll lists every key, retrying while the store is not ready (a raft
// node electing itself).
func listAll(ctx context.Context, st sdk.MetadataStore) (*sdk.ListResponse, error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := st.List(lctx, &sdk.ListRequest{})
		cancel()
		if err == nil || !errors.Is(err, sdk.ErrUnavailable) || time.Now().After(deadline) {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func runMetadataExport(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	sf := addStoreFlags(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	resp, err := listAll(ctx, st)
	if err != nil {
		return fmt.Errorf("list the %s store: %w", *sf.name, err)
	}
	var keys []exportKey
	ephemeral := 0
	for _, kv := range resp.KVs {
		if kv.Session != sdk.NoSession {
			ephemeral++
			continue
		}
		keys = append(keys, exportKey{Key: kv.Key, Value: kv.Value})
	}
	w := bufio.NewWriter(e.stdout)
	enc := json.NewEncoder(w)
	if err := enc.Encode(exportHeader{Format: exportFormat, Version: 1, Store: *sf.name, Revision: resp.Revision, Keys: len(keys)}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := enc.Encode(k); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "exported %d keys from the %s store at revision %d", len(keys), *sf.name, resp.Revision)
	if ephemeral > 0 {
		fmt.Fprintf(e.stderr, " (left out %d ephemeral keys of live sessions: is the cluster stopped?)", ephemeral)
	}
	fmt.Fprintln(e.stderr)
	return nil
}

// importBatch bounds one Txn: a few dozen keys and well under the
// smallest store's request limit (ZooKeeper's 1 MiB, counting the change
// log copy).
const (
	importBatchKeys  = 32
	importBatchBytes = 128 << 10
)

func runMetadataImport(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	sf := addStoreFlags(f)
	force := f.Bool("force", false, "import into a store that already has keys (imported keys overwrite; others stay)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(e.stdin))
	var h exportHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("read the export header: %w", err)
	}
	if h.Format != exportFormat || h.Version != 1 {
		return fmt.Errorf("not a vltava metadata export (format %q version %d)", h.Format, h.Version)
	}
	var keys []exportKey
	for {
		var k exportKey
		err := dec.Decode(&k)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read key %d of the export: %w", len(keys)+1, err)
		}
		if k.Key == "" {
			return fmt.Errorf("key %d of the export is empty", len(keys)+1)
		}
		keys = append(keys, k)
	}
	if len(keys) != h.Keys {
		return fmt.Errorf("the export is truncated: header says %d keys, found %d", h.Keys, len(keys))
	}
	st, err := sf.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	cur, err := listAll(ctx, st)
	if err != nil {
		return fmt.Errorf("list the %s store: %w", *sf.name, err)
	}
	if len(cur.KVs) > 0 && !*force {
		return fmt.Errorf("the %s store already holds %d keys; import into an empty store, or pass --force to overwrite", *sf.name, len(cur.KVs))
	}
	for i := 0; i < len(keys); {
		var ops []sdk.Op
		size := 0
		for ; i < len(keys) && len(ops) < importBatchKeys && (len(ops) == 0 || size+len(keys[i].Value) < importBatchBytes); i++ {
			ops = append(ops, sdk.Op{Type: sdk.OpPut, Key: keys[i].Key, Value: keys[i].Value})
			size += len(keys[i].Key) + len(keys[i].Value)
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := st.Txn(tctx, &sdk.TxnRequest{Ops: ops})
		cancel()
		if err != nil {
			return fmt.Errorf("write keys %q..%q: %w", ops[0].Key, ops[len(ops)-1].Key, err)
		}
	}
	fmt.Fprintf(e.stderr, "imported %d keys (exported from a %s store at revision %d) into the %s store\n", len(keys), h.Store, h.Revision, *sf.name)
	return nil
}
