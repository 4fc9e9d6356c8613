package conformance

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/twmb/franz-go/pkg/kadm"
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
	b := kadm.NewACLs()
	switch pos[0] {
	case "allow":
		b = b.Allow("User:" + pos[1]).AllowHosts()
	case "deny":
		b = b.Deny("User:" + pos[1]).DenyHosts()
	default:
		ts.Fatalf("usage: %s", aclUsage)
	}
	switch pos[3] {
	case "topic":
		b = b.Topics(s.topic(ts, pos[4]))
	case "group":
		b = b.Groups(s.suite.Prefix + pos[4])
	case "cluster":
		b = b.Clusters()
	case "transactional-id":
		b = b.TransactionalIDs(s.suite.Prefix + pos[4])
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
	finish(ts, neg, err)
	if err == nil {
		fmt.Fprintln(ts.Stdout(), "acl: ok")
	}
}
