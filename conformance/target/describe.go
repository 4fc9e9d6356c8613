package target

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Description is what the suite learned about a target before running
// it: the header of every report. The Kafka protocol does not carry a
// broker's software name or version (ApiVersions v3+ carries the
// client's), so Software is what the target itself knows, and the rest
// is what the brokers answer: ApiVersions, Metadata, DescribeCluster.
type Description struct {
	Target    string     `json:"target"`
	Software  string     `json:"software"`
	Bootstrap []string   `json:"bootstrap"`            // the probed cluster's seeds
	Probed    string     `json:"probed"`               // what was asked, e.g. "a fresh one-broker cluster"
	ClusterID string     `json:"cluster_id,omitempty"` // Metadata v2+
	Brokers   []Broker   `json:"brokers"`
	APIs      []APIRange `json:"apis"`
	Caps      Caps       `json:"capabilities"`
	// Hooks names the external target's broker fault hooks that are set.
	Hooks []string `json:"hooks,omitempty"`
}

// Broker is one broker as Metadata (or DescribeCluster) lists it.
type Broker struct {
	NodeID     int32  `json:"node_id"`
	Host       string `json:"host"`
	Port       int32  `json:"port"`
	Rack       string `json:"rack,omitempty"`
	Controller bool   `json:"controller,omitempty"`
}

// APIRange is one API key a broker advertises in ApiVersions.
type APIRange struct {
	Key  int16  `json:"key"`
	Name string `json:"name"`
	Min  int16  `json:"min"`
	Max  int16  `json:"max"`
}

// softwarer is a target that knows what it runs.
type softwarer interface{ Software() string }

// Describe starts a one-broker cluster of t (for external: connects to
// it), asks ApiVersions, Metadata and DescribeCluster, and returns the
// description with the target's facts plus the protocol capabilities.
// A probe cluster is closed before it returns.
func Describe(ctx context.Context, t Target) (*Description, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cl, err := t.Start(ctx, Options{Brokers: 1})
	if err != nil {
		return nil, fmt.Errorf("target: probe %s: %w", t.Name(), err)
	}
	defer cl.Close()
	d := &Description{Target: t.Name(), Software: "not reported by the Kafka protocol", Bootstrap: cl.Bootstrap(),
		Probed: "a fresh one-broker cluster, started for the probe"}
	if s, ok := t.(softwarer); ok {
		d.Software = s.Software()
	}
	if x, ok := t.(*External); ok {
		d.Probed = "the running cluster"
		d.Hooks = x.hooks()
	}
	if err := d.ask(ctx, cl.Bootstrap()); err != nil {
		return nil, fmt.Errorf("target: probe %s: %w", t.Name(), err)
	}
	keys := make([]int16, 0, len(d.APIs))
	for _, a := range d.APIs {
		keys = append(keys, a.Key)
	}
	d.Caps = CapsFromAPIs(keys)
	for k, v := range CapsFromVersions(d.APIs) {
		d.Caps[k] = v
	}
	for k, v := range t.Facts() {
		d.Caps[k] = v
	}
	return d, nil
}

// Probe returns only the capabilities of Describe.
func Probe(ctx context.Context, t Target) (Caps, error) {
	d, err := Describe(ctx, t)
	if err != nil {
		return nil, err
	}
	return d.Caps, nil
}

func (d *Description) ask(ctx context.Context, seeds []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if av.ErrorCode != 0 {
		return fmt.Errorf("ApiVersions: error code %d", av.ErrorCode)
	}
	for _, k := range av.ApiKeys {
		d.APIs = append(d.APIs, APIRange{Key: k.ApiKey, Name: kmsg.NameForKey(k.ApiKey), Min: k.MinVersion, Max: k.MaxVersion})
	}
	slices.SortFunc(d.APIs, func(a, b APIRange) int { return int(a.Key) - int(b.Key) })
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if md.ClusterID != nil {
		d.ClusterID = *md.ClusterID
	}
	for _, b := range md.Brokers {
		br := Broker{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.ControllerID}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		d.Brokers = append(d.Brokers, br)
	}
	slices.SortFunc(d.Brokers, func(a, b Broker) int { return int(a.NodeID) - int(b.NodeID) })
	// DescribeCluster (KIP-700) where served: the controller as the
	// brokers see it; a failure here is not a failed probe.
	if slices.ContainsFunc(d.APIs, func(a APIRange) bool { return a.Key == 60 }) {
		if dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl); err == nil && dc.ErrorCode == 0 {
			for i := range d.Brokers {
				d.Brokers[i].Controller = d.Brokers[i].NodeID == dc.ControllerID
			}
			if d.ClusterID == "" {
				d.ClusterID = dc.ClusterID
			}
		}
	}
	return nil
}

// Markdown renders the description as the header of a report.
func (d *Description) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- target: `%s`\n- software: %s\n- probed: %s at `%s`\n", d.Target, d.Software, d.Probed, strings.Join(d.Bootstrap, ","))
	if d.ClusterID != "" {
		fmt.Fprintf(&b, "- cluster id: `%s`\n", d.ClusterID)
	}
	var brokers []string
	for _, br := range d.Brokers {
		s := fmt.Sprintf("%d (%s:%d", br.NodeID, br.Host, br.Port)
		if br.Rack != "" {
			s += ", rack " + br.Rack
		}
		if br.Controller {
			s += ", controller"
		}
		brokers = append(brokers, s+")")
	}
	fmt.Fprintf(&b, "- brokers: %s\n", strings.Join(brokers, ", "))
	fmt.Fprintf(&b, "- capabilities: %s\n", d.Caps)
	if len(d.Hooks) > 0 {
		fmt.Fprintf(&b, "- fault hooks: %s\n", strings.Join(d.Hooks, ", "))
	}
	var apis []string
	for _, a := range d.APIs {
		apis = append(apis, fmt.Sprintf("%s(%d) v%d-%d", a.Name, a.Key, a.Min, a.Max))
	}
	fmt.Fprintf(&b, "- ApiVersions (%d keys): %s\n", len(d.APIs), strings.Join(apis, ", "))
	return b.String()
}

// moduleVersion returns the version of module path in this binary's
// build information ("" if unknown).
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == path {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
		return v
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
}
