package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

var groupCommands = []command{
	{path: "group list", summary: "list consumer groups with their state", run: groupList},
	{path: "group describe", args: "GROUP", summary: "show state, members and per-partition committed offset, log end and lag", run: groupDescribe},
	{path: "group delete", args: "GROUP...", summary: "delete groups that have no active members", run: groupDelete},
	{path: "group reset-offsets", args: "GROUP", summary: "plan (or --execute) new committed offsets for an inactive group", run: groupResetOffsets},
}

func groupList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	output := outputFlag(f)
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		gs, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		t := newTable("GROUP", "STATE", "PROTOCOL-TYPE")
		for _, g := range gs.Sorted() {
			t.add(g.Group, g.State, g.ProtocolType)
		}
		return t.write(e.stdout, *output)
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func groupDescribe(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	output := outputFlag(f)
	pos, err := f.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	group := pos[0]
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		lags, err := adm.Lag(ctx, group)
		if err != nil {
			return err
		}
		l, ok := lags[group]
		if !ok {
			return fmt.Errorf("describe %s: no answer for the group", group)
		}
		notFound := errors.Is(l.DescribeErr, kerr.GroupIDNotFound)
		if err := l.Error(); err != nil && !notFound {
			return fmt.Errorf("describe %s: %w", group, err)
		}
		if notFound && len(l.Lag) > 0 {
			l.State = "Empty" // offsets but no group metadata: committed by tools only
		}
		if (notFound || l.State == "Dead") && len(l.Lag) == 0 {
			return fmt.Errorf("group %s does not exist (no members and no committed offsets)", group)
		}
		if *output == "json" {
			return jsonOut(e.stdout, groupJSON(group, l))
		}
		fmt.Fprintf(e.stdout, "group %s  state %s  protocol-type %s  protocol %s  members %d  coordinator %d\n",
			group, orDash(l.State), orDash(l.ProtocolType), orDash(l.Protocol), len(l.Members), l.Coordinator.NodeID)
		if len(l.Members) == 0 {
			fmt.Fprintln(e.stdout, "no active members")
		} else {
			writeMembers(e, l.Members)
		}
		return writeLag(e, l.Lag)
	})
}

func writeMembers(e *env, ms []kadm.DescribedGroupMember) {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMEMBER\tCLIENT-ID\tHOST\tASSIGNED")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, orDash(m.ClientID), orDash(m.ClientHost), assignment(m))
	}
	tw.Flush()
}

// assignment renders a consumer member's partitions as "t:0,1 u:2".
func assignment(m kadm.DescribedGroupMember) string {
	ca, ok := m.Assigned.AsConsumer()
	if !ok || len(ca.Topics) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range ca.Topics {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		parts = append(parts, t.Topic+":"+ints(ps))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func writeLag(e *env, lag kadm.GroupLag) error {
	if len(lag) == 0 {
		fmt.Fprintln(e.stdout, "no committed offsets")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tMEMBER")
	for _, pl := range lag.Sorted() {
		committed, end, lagS := "-", "-", "-"
		if pl.Commit.At >= 0 {
			committed = strconv.FormatInt(pl.Commit.At, 10)
		}
		if pl.End.Err == nil {
			end = strconv.FormatInt(pl.End.Offset, 10)
		}
		if pl.Lag >= 0 {
			lagS = strconv.FormatInt(pl.Lag, 10)
		}
		member := "-"
		if pl.Member != nil {
			member = pl.Member.MemberID
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", pl.Topic, pl.Partition, committed, end, lagS, member)
	}
	return tw.Flush()
}

func groupDelete(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	pos, err := f.parse(args, 1, -1)
	if err != nil {
		return err
	}
	return e.admin(ctx, func(ctx context.Context, adm *kadm.Client) error {
		rs, err := adm.DeleteGroups(ctx, pos...)
		if err != nil {
			return err
		}
		var errs []error
		for _, g := range pos {
			r, ok := rs[g]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("delete %s: no answer for the group", g))
			case errors.Is(r.Err, kerr.NonEmptyGroup):
				errs = append(errs, fmt.Errorf("delete %s: the group has active members; stop its consumers (or wait session.timeout.ms after they stopped) and retry", g))
			case errors.Is(r.Err, kerr.GroupIDNotFound):
				errs = append(errs, fmt.Errorf("delete %s: no such group", g))
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("delete %s: %w", g, r.Err))
			default:
				fmt.Fprintf(e.stdout, "deleted group %s\n", g)
			}
		}
		return errors.Join(errs...)
	})
}

// groupJSON is group describe's --output json: the group, its members and
// its lag table as objects.
func groupJSON(group string, l kadm.DescribedGroupLag) map[string]any {
	members := newTable("MEMBER", "CLIENT-ID", "HOST", "ASSIGNED")
	for _, m := range l.Members {
		members.add(m.MemberID, m.ClientID, m.ClientHost, assignment(m))
	}
	lag := newTable("TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER")
	for _, pl := range l.Lag.Sorted() {
		var committed, end, lg, member any
		if pl.Commit.At >= 0 {
			committed = pl.Commit.At
		}
		if pl.End.Err == nil {
			end = pl.End.Offset
		}
		if pl.Lag >= 0 {
			lg = pl.Lag
		}
		if pl.Member != nil {
			member = pl.Member.MemberID
		}
		lag.add(pl.Topic, pl.Partition, committed, end, lg, member)
	}
	return map[string]any{
		"group": group, "state": l.State, "protocol_type": l.ProtocolType, "protocol": l.Protocol,
		"coordinator": l.Coordinator.NodeID, "members": members.objects(), "offsets": lag.objects(),
	}
}
