package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// `vltava user` manages the SCRAM credentials of the simple authenticator
// with DescribeUserScramCredentials / AlterUserScramCredentials (KIP-554),
// as kafka-configs.sh --entity-type users does. The password is read from
// the first line of stdin (never a flag, so it is not in ps or shell
// history) and salted and iterated here: the broker receives only the
// salted password and stores only the derived keys.
//
// On a SASL listener the command authenticates itself with
// --sasl-mechanism and --sasl-user, the password from $VLTAVA_SASL_PASSWORD.
var userCommands = []command{
	{path: "user add", args: "NAME", summary: "create or change a user's SCRAM credentials (password on stdin)", run: userAdd},
	{path: "user list", args: "[NAME...]", summary: "list users and their SCRAM mechanisms and iterations", run: userList},
	{path: "user remove", args: "NAME", summary: "remove a user's SCRAM credentials (all mechanisms unless --mechanism)", run: userRemove},
}

// userFlags are the flags every user command takes.
type userFlags struct {
	saslMechanism, saslUser string
}

func (uf *userFlags) register(f *cmdFlags) {
	f.StringVar(&uf.saslMechanism, "sasl-mechanism", "", "authenticate to the broker with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (password in $VLTAVA_SASL_PASSWORD)")
	f.StringVar(&uf.saslUser, "sasl-user", "", "the user to authenticate as")
}

func (uf *userFlags) opts() ([]kgo.Opt, error) {
	if uf.saslMechanism == "" {
		return nil, nil
	}
	pw := os.Getenv("VLTAVA_SASL_PASSWORD")
	switch strings.ToUpper(uf.saslMechanism) {
	case "PLAIN":
		return []kgo.Opt{kgo.SASL(plain.Auth{User: uf.saslUser, Pass: pw}.AsMechanism())}, nil
	case "SCRAM-SHA-256":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: uf.saslUser, Pass: pw}.AsSha256Mechanism())}, nil
	case "SCRAM-SHA-512":
		return []kgo.Opt{kgo.SASL(scram.Auth{User: uf.saslUser, Pass: pw}.AsSha512Mechanism())}, nil
	}
	return nil, fmt.Errorf("%w: --sasl-mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", errUsage, uf.saslMechanism)
}

func (uf *userFlags) admin(ctx context.Context, e *env, fn func(ctx context.Context, adm *kadm.Client) error) error {
	opts, err := uf.opts()
	if err != nil {
		return err
	}
	cl, err := e.client(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return fn(ctx, kadm.NewClient(cl))
}

// mechanisms parses a comma-separated mechanism list.
func mechanisms(s string) ([]kadm.ScramMechanism, error) {
	var out []kadm.ScramMechanism
	for _, m := range strings.Split(s, ",") {
		switch strings.ToUpper(strings.TrimSpace(m)) {
		case "SCRAM-SHA-256":
			out = append(out, kadm.ScramSha256)
		case "SCRAM-SHA-512":
			out = append(out, kadm.ScramSha512)
		case "":
		default:
			return nil, fmt.Errorf("%w: mechanism %q (want SCRAM-SHA-256, SCRAM-SHA-512)", errUsage, m)
		}
	}
	return out, nil
}

func userAdd(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var uf userFlags
	uf.register(f)
	mechs := f.String("mechanism", "SCRAM-SHA-256,SCRAM-SHA-512", "the SCRAM mechanisms to store credentials for")
	iters := f.Int("iterations", 8192, "PBKDF2 iterations (4096..16384)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ms, err := mechanisms(*mechs)
	if err != nil {
		return err
	}
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return errors.New("user add: no password on stdin")
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return errors.New("user add: empty password")
	}
	var up []kadm.UpsertSCRAM
	for _, m := range ms {
		up = append(up, kadm.UpsertSCRAM{User: pos[0], Mechanism: m, Iterations: int32(*iters), Password: pw})
	}
	return uf.admin(ctx, e, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.AlterUserSCRAMs(ctx, nil, up)
		if err == nil {
			err = alterErr(res)
		}
		if err != nil {
			return fmt.Errorf("user add %s: %w", pos[0], err)
		}
		fmt.Fprintf(e.stdout, "user %s: credentials stored for %s\n", pos[0], *mechs)
		return nil
	})
}

func alterErr(res kadm.AlteredUserSCRAMs) error {
	var errs []error
	res.EachError(func(a kadm.AlteredUserSCRAM) {
		errs = append(errs, fmt.Errorf("%s: %w (%s)", a.User, a.Err, a.ErrMessage))
	})
	return errors.Join(errs...)
}

func userList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var uf userFlags
	uf.register(f)
	pos, err := f.parse(args, 0, -1)
	if err != nil {
		return err
	}
	return uf.admin(ctx, e, func(ctx context.Context, adm *kadm.Client) error {
		res, err := adm.DescribeUserSCRAMs(ctx, pos...)
		if err != nil {
			return fmt.Errorf("user list: %w", err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
		var errs []error
		for _, u := range res.Sorted() {
			if u.Err != nil {
				errs = append(errs, fmt.Errorf("%s: %w (%s)", u.User, u.Err, u.ErrMessage))
				continue
			}
			for _, ci := range u.CredInfos {
				fmt.Fprintf(tw, "%s\t%s\t%d\n", u.User, ci.Mechanism, ci.Iterations)
			}
		}
		tw.Flush()
		return errors.Join(errs...)
	})
}

func userRemove(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	var uf userFlags
	uf.register(f)
	mechs := f.String("mechanism", "", "remove only these mechanisms (comma-separated)")
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ms, err := mechanisms(*mechs)
	if err != nil {
		return err
	}
	return uf.admin(ctx, e, func(ctx context.Context, adm *kadm.Client) error {
		if len(ms) == 0 {
			res, err := adm.DescribeUserSCRAMs(ctx, pos[0])
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				return fmt.Errorf("user remove %s: %w", pos[0], err)
			}
			for _, ci := range res[pos[0]].CredInfos {
				ms = append(ms, ci.Mechanism)
			}
		}
		var del []kadm.DeleteSCRAM
		for _, m := range ms {
			del = append(del, kadm.DeleteSCRAM{User: pos[0], Mechanism: m})
		}
		res, err := adm.AlterUserSCRAMs(ctx, del, nil)
		if err == nil {
			err = alterErr(res)
		}
		if err != nil {
			return fmt.Errorf("user remove %s: %w", pos[0], err)
		}
		fmt.Fprintf(e.stdout, "user %s: removed\n", pos[0])
		return nil
	})
}
