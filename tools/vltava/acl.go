package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var aclCommands = []command{
	{path: "acl add", summary: "allow (or --deny) a principal operations on a topic, group, transactional id or the cluster (needs authorizer: acl)", run: aclAdd},
	{path: "acl list", summary: "list ACLs (filter with --principal, --topic, --group, --operation, ...)", run: aclList},
	{path: "acl remove", summary: "remove the ACLs the flags select", run: aclRemove},
}

// aclFlags name a binding (add) or a filter (list, remove), as
// kafka-acls.sh's flags do.
type aclFlags struct {
	principal, host, operation, permission, pattern string
	topic, group, txnID                             string
	cluster, deny                                   bool
	set                                             map[string]bool
}

func (af *aclFlags) register(f *cmdFlags, pattern string) {
	af.set = map[string]bool{}
	str := func(p *string, name, def, usage string) {
		*p = def
		f.Func(name, usage, func(s string) error { *p, af.set[name] = s, true; return nil })
	}
	str(&af.principal, "principal", "", "the principal, `Type:name` (User:alice; User:* is everyone)")
	str(&af.host, "host", "", "the client `IP` address, or * for every host (add's default)")
	str(&af.operation, "operation", "", "`OPS`, comma-separated: read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write, all")
	str(&af.permission, "permission", "", "allow or deny (a filter for list/remove)")
	str(&af.pattern, "pattern", pattern, "resource pattern: literal, prefixed (and match, any as filters)")
	str(&af.topic, "topic", "", "a topic `NAME` (* is every topic)")
	str(&af.group, "group", "", "a consumer group `NAME`")
	str(&af.txnID, "transactional-id", "", "a transactional `ID`")
	f.BoolVar(&af.cluster, "cluster", false, "the cluster")
	f.BoolVar(&af.deny, "deny", false, "add a DENY rather than an ALLOW")
}

// resource returns the one resource named, or ANY when none is and any is
// allowed.
func (af *aclFlags) resource(anyOK bool) (kmsg.ACLResourceType, *string, error) {
	var rt kmsg.ACLResourceType
	var name *string
	n := 0
	if af.set["topic"] {
		rt, name, n = kmsg.ACLResourceTypeTopic, &af.topic, n+1
	}
	if af.set["group"] {
		rt, name, n = kmsg.ACLResourceTypeGroup, &af.group, n+1
	}
	if af.set["transactional-id"] {
		rt, name, n = kmsg.ACLResourceTypeTransactionalId, &af.txnID, n+1
	}
	if af.cluster {
		rt, name, n = kmsg.ACLResourceTypeCluster, kmsg.StringPtr("kafka-cluster"), n+1
	}
	switch {
	case n > 1:
		return 0, nil, fmt.Errorf("%w: name one resource: --topic, --group, --transactional-id or --cluster", errUsage)
	case n == 0 && !anyOK:
		return 0, nil, fmt.Errorf("%w: name the resource: --topic, --group, --transactional-id or --cluster", errUsage)
	case n == 0:
		return kmsg.ACLResourceTypeAny, nil, nil
	}
	return rt, name, nil
}

func (af *aclFlags) patternType() (kmsg.ACLResourcePatternType, error) {
	pt, err := kmsg.ParseACLResourcePatternType(af.pattern)
	if err != nil || pt == kmsg.ACLResourcePatternTypeUnknown {
		return 0, fmt.Errorf("%w: --pattern %q: want literal, prefixed, match or any", errUsage, af.pattern)
	}
	if af.cluster && pt == kmsg.ACLResourcePatternTypePrefixed {
		return 0, fmt.Errorf("%w: the cluster is a literal resource", errUsage)
	}
	return pt, nil
}

func (af *aclFlags) operations() ([]kmsg.ACLOperation, error) {
	var ops []kmsg.ACLOperation
	for _, s := range strings.Split(af.operation, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		op, err := kmsg.ParseACLOperation(s)
		if err != nil || op == kmsg.ACLOperationUnknown {
			return nil, fmt.Errorf("%w: --operation %q: unknown operation", errUsage, s)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// filter is the DescribeAcls/DeleteAcls filter the flags select.
func (af *aclFlags) filter() (kmsg.DeleteACLsRequestFilter, error) {
	f := kmsg.NewDeleteACLsRequestFilter()
	var err error
	if f.ResourceType, f.ResourceName, err = af.resource(true); err != nil {
		return f, err
	}
	if f.ResourcePatternType, err = af.patternType(); err != nil {
		return f, err
	}
	if af.set["principal"] {
		f.Principal = &af.principal
	}
	if af.set["host"] {
		f.Host = &af.host
	}
	f.Operation = kmsg.ACLOperationAny
	if ops, err := af.operations(); err != nil {
		return f, err
	} else if len(ops) > 1 {
		return f, fmt.Errorf("%w: a filter takes one --operation", errUsage)
	} else if len(ops) == 1 {
		f.Operation = ops[0]
	}
	f.PermissionType = kmsg.ACLPermissionTypeAny
	if af.set["permission"] {
		if f.PermissionType, err = kmsg.ParseACLPermissionType(af.permission); err != nil || f.PermissionType == kmsg.ACLPermissionTypeUnknown {
			return f, fmt.Errorf("%w: --permission %q: want allow or deny", errUsage, af.permission)
		}
	}
	return f, nil
}

func aclAdd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var af aclFlags
	af.register(f, "literal")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	rt, name, err := af.resource(false)
	if err != nil {
		return err
	}
	pt, err := af.patternType()
	if err != nil {
		return err
	}
	ops, err := af.operations()
	if err != nil {
		return err
	}
	if len(ops) == 0 || af.principal == "" {
		return fmt.Errorf("%w: acl add needs --principal and --operation", errUsage)
	}
	host := af.host
	if host == "" {
		host = "*"
	}
	perm := kmsg.ACLPermissionTypeAllow
	if af.deny {
		perm = kmsg.ACLPermissionTypeDeny
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, op := range ops {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = rt, *name, pt
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = af.principal, host, op, perm
		req.Creations = append(req.Creations, cr)
	}
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		var errs []error
		for i, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				if r.ErrorMessage != nil {
					err = fmt.Errorf("%w: %s", err, *r.ErrorMessage)
				}
				errs = append(errs, fmt.Errorf("%s: %w", req.Creations[i].Operation, err))
			} else {
				fmt.Fprintf(e.stdout, "added %s %s on %s %s %s from %s\n", perm, req.Creations[i].Operation, pt, rt, *name, host)
			}
		}
		return errors.Join(errs...)
	})
}

func aclList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var af aclFlags
	af.register(f, "any")
	output := outputFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	flt, err := af.filter()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = flt.ResourceType, flt.ResourceName, flt.ResourcePatternType
	req.Principal, req.Host, req.Operation, req.PermissionType = flt.Principal, flt.Host, flt.Operation, flt.PermissionType
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		t := newTable("RESOURCE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")
		for _, r := range resp.Resources {
			for _, a := range r.ACLs {
				t.add(r.ResourceType, r.ResourcePatternType, r.ResourceName, a.Principal, a.Host, a.Operation, a.PermissionType)
			}
		}
		return t.write(e.stdout, *output)
	})
}

func aclRemove(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var af aclFlags
	af.register(f, "literal")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	flt, err := af.filter()
	if err != nil {
		return err
	}
	if flt.ResourceType == kmsg.ACLResourceTypeAny && flt.Principal == nil {
		return fmt.Errorf("%w: acl remove needs a resource or --principal (it would remove every ACL)", errUsage)
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Filters = append(req.Filters, flt)
	return e.adminClient(ctx, func(ctx context.Context, cl *kgo.Client, _ *kadm.Client) error {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				errs = append(errs, err)
				continue
			}
			for _, m := range r.MatchingACLs {
				if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(e.stdout, "removed %s %s on %s %s %s for %s from %s\n", m.PermissionType, m.Operation,
					m.ResourcePatternType, m.ResourceType, m.ResourceName, m.Principal, m.Host)
			}
		}
		return errors.Join(errs...)
	})
}
