package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
)

var quotaCommands = []command{
	{path: "quota list", summary: "list client quotas (filter with --user/--client-id; defaults show as <default>)", run: quotaList},
	{path: "quota set", args: "KEY=VALUE...", summary: "set producer_byte_rate, consumer_byte_rate or request_percentage on a user, a client id, or both", run: quotaSet},
	{path: "quota remove", args: "KEY...", summary: "remove quotas from an entity", run: quotaRemove},
}

// entityFlags are the flags that name a quota entity, as
// kafka-configs.sh's --entity-type/--entity-name/--entity-default do.
type entityFlags struct {
	user, client               string
	userDefault, clientDefault bool
	userGiven, clientGiven     bool
}

func (ef *entityFlags) register(f *cmdFlags) {
	f.Func("user", "the user (principal name; ANONYMOUS on plaintext listeners)", func(s string) error {
		ef.user, ef.userGiven = s, true
		return nil
	})
	f.Func("client-id", "the client id", func(s string) error {
		ef.client, ef.clientGiven = s, true
		return nil
	})
	f.BoolVar(&ef.userDefault, "user-default", false, "the default for every user")
	f.BoolVar(&ef.clientDefault, "client-default", false, "the default for every client id")
}

// entity builds the entity; at least one part is required.
func (ef *entityFlags) entity() (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	switch {
	case ef.userGiven && ef.userDefault:
		return nil, fmt.Errorf("%w: --user and --user-default together", errUsage)
	case ef.userGiven:
		u := ef.user
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user", Name: &u})
	case ef.userDefault:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user"})
	}
	switch {
	case ef.clientGiven && ef.clientDefault:
		return nil, fmt.Errorf("%w: --client-id and --client-default together", errUsage)
	case ef.clientGiven:
		c := ef.client
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: &c})
	case ef.clientDefault:
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id"})
	}
	if len(e) == 0 {
		return nil, fmt.Errorf("%w: name the entity: --user U, --user-default, --client-id C or --client-default", errUsage)
	}
	return e, nil
}

func quotaList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var ef entityFlags
	ef.register(f)
	output := outputFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	var filter []kadm.DescribeClientQuotaComponent
	if ef.userGiven || ef.userDefault {
		comp := kadm.DescribeClientQuotaComponent{Type: "user", MatchType: 1}
		if ef.userGiven {
			u := ef.user
			comp.MatchName, comp.MatchType = &u, 0
		}
		filter = append(filter, comp)
	}
	if ef.clientGiven || ef.clientDefault {
		comp := kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: 1}
		if ef.clientGiven {
			cl := ef.client
			comp.MatchName, comp.MatchType = &cl, 0
		}
		filter = append(filter, comp)
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		qs, err := adm.DescribeClientQuotas(ctx, false, filter)
		if err != nil {
			return err
		}
		t := newTable("USER", "CLIENT-ID", "QUOTA", "VALUE")
		for _, q := range qs {
			user, client := "-", "-"
			for _, comp := range q.Entity {
				name := "<default>"
				if comp.Name != nil {
					name = *comp.Name
				}
				switch comp.Type {
				case "user":
					user = name
				case "client-id":
					client = name
				}
			}
			for _, v := range q.Values {
				t.add(user, client, v.Key, v.Value)
			}
		}
		return t.write(e.stdout, *output)
	})
}

func quotaSet(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var ef entityFlags
	ef.register(f)
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	ent, err := ef.entity()
	if err != nil {
		return err
	}
	kvs, err := keyValues(pos)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var ops []kadm.AlterClientQuotaOp
	for _, kv := range kvs {
		v, err := strconv.ParseFloat(kv[1], 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%s: not a number", errUsage, kv[0], kv[1])
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: kv[0], Value: v})
	}
	return alterQuota(ctx, e, ent, ops)
}

func quotaRemove(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var ef entityFlags
	ef.register(f)
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	ent, err := ef.entity()
	if err != nil {
		return err
	}
	var ops []kadm.AlterClientQuotaOp
	for _, k := range pos {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	return alterQuota(ctx, e, ent, ops)
}

func alterQuota(ctx context.Context, e *env, ent kadm.ClientQuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
		if err != nil {
			return err
		}
		var errs []error
		for _, r := range res {
			if r.Err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.Entity, r.Err))
			}
		}
		if len(errs) == 0 {
			fmt.Fprintf(e.stdout, "quotas of %s updated\n", ent)
		}
		return errors.Join(errs...)
	})
}
