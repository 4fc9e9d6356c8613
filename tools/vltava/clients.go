package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/clients"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/daemon/console"
)

var clientsCommands = []command{
	{path: "clients", summary: "list the client software and versions that connect, and the API versions each uses (--if-removed API:VERSION: who would break)", run: clientsList},
}

func clientsList(ctx context.Context, e *env, c *command, args []string) error {
	f := newFlags(e, c)
	metrics := f.String("metrics", config.DefaultMetricsListen, "the brokers' metrics listeners, `HOST:PORT,...` (each keeps its own connections' record)")
	ifRemoved := f.String("if-removed", "", "`API:VERSION` (Produce:3 or 0:3): which clients used it, and whether they used another version of that API")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	var key, ver int16
	if *ifRemoved != "" {
		var err error
		if key, ver, err = console.ParseAPIVersion(*ifRemoved); err != nil {
			return fmt.Errorf("%w: --if-removed %v", errUsage, err)
		}
	}
	var all [][]clients.Usage
	cl := &http.Client{Timeout: 10 * time.Second}
	for _, addr := range config.SplitList(*metrics) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/clients", nil)
		resp, err := cl.Do(req)
		if err != nil {
			return fmt.Errorf("clients: %s: %w (is metrics.listen set, and the console on?)", addr, err)
		}
		var us []clients.Usage
		err = json.NewDecoder(resp.Body).Decode(&us)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("clients: %s: %w", addr, err)
		}
		all = append(all, us)
	}
	us := mergeUsage(all)
	if *ifRemoved != "" {
		only, also := clients.Affected(us, key, ver)
		fmt.Fprintf(e.stdout, "%s v%d: %d client version(s) used it\n", broker.APIName(key), ver, len(only)+len(also))
		for _, u := range only {
			fmt.Fprintf(e.stdout, "  BREAKS  %s %s (used no other %s version; client ids %s)\n", u.Name, u.Version, broker.APIName(key), strings.Join(u.ClientIDs, ","))
		}
		for _, u := range also {
			fmt.Fprintf(e.stdout, "  likely fine  %s %s (also used %s v%s)\n", u.Name, u.Version, broker.APIName(key), versionsExcept(u.APIs[key], ver))
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SOFTWARE\tVERSION\tOPEN\tTOTAL\tCLIENT-IDS\tAPIS")
	for _, u := range us {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", u.Name, u.Version, u.Connections, u.Total, strings.Join(u.ClientIDs, ","), apiList(u.APIs))
	}
	return tw.Flush()
}

// mergeUsage adds up several brokers' records of the same software.
func mergeUsage(all [][]clients.Usage) []clients.Usage {
	by := map[clients.Software]*clients.Usage{}
	for _, us := range all {
		for _, u := range us {
			m := by[u.Software]
			if m == nil {
				c := u
				c.APIs = map[int16][]int16{}
				c.ClientIDs = nil
				c.Connections, c.Total = 0, 0
				m = &c
				by[u.Software] = m
			}
			m.Connections += u.Connections
			m.Total += u.Total
			for _, id := range u.ClientIDs {
				if !slices.Contains(m.ClientIDs, id) {
					m.ClientIDs = append(m.ClientIDs, id)
				}
			}
			for k, vs := range u.APIs {
				for _, v := range vs {
					if !slices.Contains(m.APIs[k], v) {
						m.APIs[k] = append(m.APIs[k], v)
					}
				}
				slices.Sort(m.APIs[k])
			}
		}
	}
	out := make([]clients.Usage, 0, len(by))
	for _, u := range by {
		sort.Strings(u.ClientIDs)
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Version < out[j].Version
	})
	return out
}

func apiList(apis map[int16][]int16) string {
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%s", broker.APIName(k), versionsExcept(apis[k], -1))
	}
	return strings.Join(parts, " ")
}

func versionsExcept(vs []int16, skip int16) string {
	var s []string
	for _, v := range vs {
		if v != skip {
			s = append(s, fmt.Sprint(v))
		}
	}
	return strings.Join(s, ",")
}
