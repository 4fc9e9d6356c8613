// Package builtin is the table of plugins that ship inside the vltavad
// binary. The daemon serves one when re-executed as
// `vltavad plugin <kind> <name>`, so built-ins run out of process through
// the same plugins/sdk/serve path as third-party plugins.
package builtin

import (
	"fmt"
	"slices"

	rangeassignor "github.com/vltava/vltava/plugins/assignor/range"
	"github.com/vltava/vltava/plugins/assignor/roundrobin"
	"github.com/vltava/vltava/plugins/authn/ip"
	"github.com/vltava/vltava/plugins/authn/kerberos"
	"github.com/vltava/vltava/plugins/authn/simple"
	"github.com/vltava/vltava/plugins/sdk/serve"
)

// Plugin is one built-in plugin.
type Plugin struct {
	Kind    string // serve.KindAssignor, ...
	Name    string // as written in the broker config
	Summary string
	serve   func()
}

// Serve serves the plugin; it blocks and exits the process.
func (p Plugin) Serve() { p.serve() }

// table lists the built-ins.
var table = []Plugin{
	{serve.KindAuthenticator, "kerberos", "SASL GSSAPI (Kerberos V5) with a service keytab (config: keytab, principal, sasl.kerberos.service.name, sasl.kerberos.principal.to.local.rules, max.clock.skew)",
		func() { serve.Authenticator(kerberos.New()) }},
	{serve.KindAuthenticator, "ip", "CIDR allow/deny rules on the client address, applied when a connection is accepted (config: rules, default, listeners)",
		func() { serve.Authenticator(&ip.Authenticator{}) }},
	{serve.KindAuthenticator, "simple", "SASL PLAIN and SCRAM-SHA-256/512 against SCRAM credentials in the metadata store (config: mechanisms)",
		func() {
			a, _ := simple.New(nil)
			serve.Authenticator(a)
		}},
	{serve.KindAssignor, "uniform", "spread partitions evenly (Kafka's default server-side assignor)",
		func() { serve.Assignor(roundrobin.Uniform{}) }},
	{serve.KindAssignor, "range", "Kafka's RangeAssignor: contiguous ranges per topic",
		func() { serve.Assignor(rangeassignor.Assignor{}) }},
	{serve.KindAssignor, "roundrobin", "Kafka's RoundRobinAssignor",
		func() { serve.Assignor(roundrobin.Assignor{}) }},
	{serve.KindMetadataStore, "local", "single-broker store in one bbolt file (config: path)",
		func() { serve.MetadataStore(&LocalStore{}) }},
	{serve.KindMetadataStore, "raft", "replicated store: a raft quorum among the brokers (config: node.id, data.dir, voters, quorum.listen, non.voter)",
		func() { serve.MetadataStore(&RaftStore{}) }},
	{serve.KindMetadataStore, "zookeeper", "store in a ZooKeeper ensemble (config: connect = zookeeper.connect h:p,h:p/chroot, session.timeout, auth.digest, tls.*)",
		func() { serve.MetadataStore(NewZooKeeperStore()) }},
	{serve.KindMetadataStore, "etcd", "store in an etcd cluster (config: endpoints h:p,h:p, prefix, username, password, tls.*)",
		func() { serve.MetadataStore(NewEtcdStore()) }},
}

// All lists the built-in plugins, sorted by kind and name.
func All() []Plugin {
	out := slices.Clone(table)
	slices.SortFunc(out, func(a, b Plugin) int {
		if a.Kind != b.Kind {
			if a.Kind < b.Kind {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// Lookup finds a built-in by kind and name.
func Lookup(kind, name string) (Plugin, error) {
	for _, p := range table {
		if p.Kind == kind && p.Name == name {
			return p, nil
		}
	}
	if !slices.Contains(serve.Kinds, kind) {
		return Plugin{}, fmt.Errorf("builtin: unknown plugin kind %q (want one of %v)", kind, serve.Kinds)
	}
	var names []string
	for _, p := range table {
		if p.Kind == kind {
			names = append(names, p.Name)
		}
	}
	return Plugin{}, fmt.Errorf("builtin: no built-in %s named %q (built-ins: %v)", kind, name, names)
}
