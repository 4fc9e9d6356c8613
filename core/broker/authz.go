package broker

// Authorization (core/acl). With authorizer: acl every request passes
// authorize, in Handle, before its handler. authzTable says, per API key,
// what Kafka's authorization table checks: the resource type, the
// operation and where the resource names come from in the request. A
// check refuses the whole request (a response carrying the API's
// *_AUTHORIZATION_FAILED, built here; the handler does not run) or, for
// the APIs Kafka answers per resource, takes the refused resources out of
// the request, lets the handler serve the rest, and merges the refused
// ones back into the response with their error (mergeDenied). Metadata,
// ListGroups and OffsetFetch (all topics) drop from their responses what
// the principal may not DESCRIBE.
//
// The fast path — every resource allowed — costs one Authorize per
// resource: no allocation, no lock, no plugin call.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/sdk"
)

// AuthorizerACL is the authorizer config value that turns authorization on.
const AuthorizerACL = "acl"

// newAuthorizer returns the configured authorizer, nil without one.
func newAuthorizer(cfg config.Broker) (*acl.Authorizer, error) {
	switch strings.TrimSpace(cfg.Authorizer) {
	case "":
		return nil, nil
	case AuthorizerACL:
	default:
		return nil, fmt.Errorf("broker: authorizer %q: want %q or nothing", cfg.Authorizer, AuthorizerACL)
	}
	supers, err := acl.ParsePrincipals(cfg.SuperUsers)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return acl.New(acl.Config{SuperUsers: supers, AllowIfNoACLFound: cfg.AllowEveryoneIfNoACLFound}), nil
}

// startAuthorizer follows the ACLs in the metadata store until the broker
// stops.
func (b *Broker) startAuthorizer() {
	if b.authz == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		b.authz.Follow(ctx, b.store, b.logger)
	}()
	go func() {
		defer b.wg.Done()
		<-b.stopCh
		cancel()
	}()
}

// who is the principal a request acts as and the address it comes from.
type who struct {
	p    sdk.Principal
	host netip.Addr
}

func whoOf(req *wire.Request) who {
	w := who{p: sdk.Anonymous}
	if req.Conn == nil {
		return w
	}
	if req.Conn.Principal.Name != "" {
		w.p = req.Conn.Principal
	}
	if ta, ok := req.Conn.Remote.(*net.TCPAddr); ok {
		if a, ok := netip.AddrFromSlice(ta.IP); ok {
			w.host = a.Unmap()
		}
	}
	return w
}

// allowed asks the authorizer.
func (b *Broker) allowed(w who, rt acl.ResourceType, name string, op acl.Operation) bool {
	return b.authz.Authorize(w.p, w.host, rt, name, op)
}

func (b *Broker) clusterAllowed(w who, op acl.Operation) bool {
	return b.authz.Authorize(w.p, w.host, kmsg.ACLResourceTypeCluster, acl.ClusterName, op)
}

// authzCheck checks one request. It returns a whole response to send
// instead of running the handler, or a merge to apply to the handler's
// response (the request was trimmed of the refused resources), or
// neither: go ahead.
type authzCheck func(b *Broker, req *wire.Request, w who) (deny kmsg.Response, merge func(kmsg.Response))

// authzRule is one row of authzTable. rt and op name the main check (what
// the matrix test grants); check applies it and any other (a
// transactional ID, the topics of an offset commit). A nil check serves
// the API to anyone.
type authzRule struct {
	rt    acl.ResourceType
	op    acl.Operation
	check authzCheck
}

// mergeKey carries a merge to a handler that applies it itself (Fetch
// encodes its response before returning it).
type mergeKey struct{}

// authzMerge is the merge a handler applies itself.
type authzMerge struct {
	fn      func(kmsg.Response)
	applied bool
}

// applyDenied lets a handler that builds a frame (Fetch) add the refused
// resources to its response before encoding it.
func applyDenied(ctx context.Context, resp kmsg.Response) {
	if m, ok := ctx.Value(mergeKey{}).(*authzMerge); ok && !m.applied {
		m.applied = true
		m.fn(resp)
	}
}

// authorize runs the request's check and then its handler.
func (b *Broker) authorize(ctx context.Context, req *wire.Request, a *api) (*wire.Response, error) {
	rule, ok := authzTable[req.Key]
	if !ok {
		// An API served without a row: refused, never silently open (the
		// matrix test fails first).
		return nil, fmt.Errorf("broker: api key %d has no authorization rule", req.Key)
	}
	if rule.check == nil {
		return a.handle(b, ctx, req)
	}
	w := whoOf(req)
	deny, merge := rule.check(b, req, w)
	if deny != nil || merge != nil {
		// Refusals, or a merge (which may only add authorized
		// operations): Kafka's authorizer log, at debug.
		b.logger.Debug("broker: authorization", "principal", w.p.String(), "host", w.host, "api", a.name, "refused_whole", deny != nil)
	}
	if deny != nil {
		deny.SetVersion(req.Version)
		return reply(deny)
	}
	if merge == nil {
		return a.handle(b, ctx, req)
	}
	m := &authzMerge{fn: merge}
	resp, err := a.handle(b, context.WithValue(ctx, mergeKey{}, m), req)
	if err == nil && resp != nil && resp.Msg != nil && !m.applied {
		m.applied = true
		merge(resp.Msg)
	}
	return resp, err
}

// Error codes of refusals.
var (
	errTopicAuthz   = kerr.TopicAuthorizationFailed.Code
	errGroupAuthz   = kerr.GroupAuthorizationFailed.Code
	errClusterAuthz = kerr.ClusterAuthorizationFailed.Code
	errTxnAuthz     = kerr.TransactionalIDAuthorizationFailed.Code
)
