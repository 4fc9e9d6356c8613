package conformance

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const aclUsage = "acl allow|deny USER OPERATION topic|group|cluster|transactional-id NAME [-prefixed]"

// acl allow|deny USER OPERATION RESOURCE NAME [-prefixed]: CreateAcls
// (KIP-140) as the superuser, for principal User:USER from any host.
// OPERATION is a Kafka ACL operation (read, write, describe, create,
// alter, ...). Topic and group names get the suite's prefix; -prefixed
// makes a PREFIXED pattern (KIP-290). Prints "acl: ok".
func cmdACL(ts *testscript.TestScript, neg bool, args []string) {
	fs := flag.NewFlagSet("acl", flag.ContinueOnError)
	prefixed := fs.Bool("prefixed", false, "PREFIXED resource pattern")
	pos := parse(ts, fs, args, 5, aclUsage)
	s := st(ts)
	op, err := kmsg.ParseACLOperation(strings.ReplaceAll(pos[2], "-", "_"))
	if err != nil {
		ts.Fatalf("acl: %v", err)
	}
	// The same binding as a DescribeAcls filter, for the wait below.
	filter := kmsg.NewPtrDescribeACLsRequest()
	filter.Principal, filter.Operation = kmsg.StringPtr("User:"+pos[1]), op
	filter.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	if *prefixed {
		filter.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	}
	b := kadm.NewACLs()
	switch pos[0] {
	case "allow":
		b = b.Allow("User:" + pos[1]).AllowHosts()
		filter.PermissionType = kmsg.ACLPermissionTypeAllow
	case "deny":
		b = b.Deny("User:" + pos[1]).DenyHosts()
		filter.PermissionType = kmsg.ACLPermissionTypeDeny
	default:
		ts.Fatalf("usage: %s", aclUsage)
	}
	switch pos[3] {
	case "topic":
		b = b.Topics(s.topic(ts, pos[4]))
		filter.ResourceType, filter.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(s.topic(ts, pos[4]))
	case "group":
		b = b.Groups(s.suite.Prefix + pos[4])
		filter.ResourceType, filter.ResourceName = kmsg.ACLResourceTypeGroup, kmsg.StringPtr(s.suite.Prefix+pos[4])
	case "cluster":
		b = b.Clusters()
		filter.ResourceType, filter.ResourceName = kmsg.ACLResourceTypeCluster, kmsg.StringPtr("kafka-cluster")
	case "transactional-id":
		b = b.TransactionalIDs(s.suite.Prefix + pos[4])
		filter.ResourceType, filter.ResourceName = kmsg.ACLResourceTypeTransactionalId, kmsg.StringPtr(s.suite.Prefix+pos[4])
	default:
		ts.Fatalf("usage: %s", aclUsage)
	}
	b = b.Operations(op)
	if *prefixed {
		b = b.ResourcePatternType(kadm.ACLPatternPrefixed)
	}
	ctx, cancel := ctxFor(15 * time.Second)
	defer cancel()
	res, err := s.adm(ts).CreateACLs(ctx, b)
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err == nil {
		err = awaitACLEverywhere(ctx, s.client(ts), filter)
	}
	finish(ts, neg, err)
	if err == nil {
		fmt.Fprintln(ts.Stdout(), "acl: ok")
	}
}

// awaitACLEverywhere waits until every broker's DescribeAcls lists the
// binding filter names. A broker authorizes from its own copy of the
// ACLs, which follows the metadata asynchronously (in Kafka and in
// Vltava alike), so a script that checks an ACL's effect right after
// creating it would otherwise race the copy of whichever broker leads
// the partition it writes.
func awaitACLEverywhere(ctx context.Context, cl *kgo.Client, filter *kmsg.DescribeACLsRequest) error {
	return onEveryBroker(ctx, cl, "acl: created, but", "does not list it yet", func(b *kgo.Broker) (bool, error) {
		resp, err := filter.RequestWith(ctx, b)
		return err == nil && resp.ErrorCode == 0 && slices.ContainsFunc(resp.Resources, func(r kmsg.DescribeACLsResponseResource) bool { return len(r.ACLs) > 0 }), err
	})
}

// onEveryBroker waits until ok holds on every broker in the cluster's
// metadata, asking each every 50 ms; on ctx's end the error names the
// first broker that did not agree (what and lag frame the message).
func onEveryBroker(ctx context.Context, cl *kgo.Client, what, lag string, ok func(*kgo.Broker) (bool, error)) error {
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("%s metadata: %w", what, err)
	}
	for _, b := range meta.Brokers {
		for {
			done, err := ok(cl.Broker(int(b.NodeID)))
			if done {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s broker %d %s (last error: %v): %w", what, b.NodeID, lag, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}
