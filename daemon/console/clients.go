package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/core/clients"
	"github.com/vltava/vltava/daemon/inspect"
)

// ParseAPIVersion parses "Produce:3" or "0:3" into an API key and version.
func ParseAPIVersion(s string) (key, version int16, err error) {
	name, ver, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want API:VERSION, as Produce:3 or 0:3", s)
	}
	v, err := strconv.ParseInt(ver, 10, 16)
	if err != nil || v < 0 {
		return 0, 0, fmt.Errorf("%q: bad version", s)
	}
	if k, err := strconv.ParseInt(name, 10, 16); err == nil {
		return int16(k), int16(v), nil
	}
	for _, k := range broker.APIKeys() {
		if strings.EqualFold(broker.APIName(k), name) {
			return k, int16(v), nil
		}
	}
	return 0, 0, fmt.Errorf("%q: unknown API %q", s, name)
}

func (c *Console) usage() []clients.Usage {
	if c.opts.Broker == nil {
		return nil
	}
	return c.opts.Broker.Clients()
}

func (c *Console) clients(w http.ResponseWriter, r *http.Request, _ *inspect.Inspector) {
	type view struct {
		Usage      []clients.Usage
		IfRemoved  string
		Verdict    string
		Only, Also []clients.Usage
	}
	v := view{Usage: c.usage(), IfRemoved: r.FormValue("if-removed")}
	var err error
	if v.IfRemoved != "" {
		var key, ver int16
		if key, ver, err = ParseAPIVersion(v.IfRemoved); err == nil {
			v.Only, v.Also = clients.Affected(v.Usage, key, ver)
			switch {
			case len(v.Only) == 0 && len(v.Also) == 0:
				v.Verdict = fmt.Sprintf("No client that connected used %s v%d.", broker.APIName(key), ver)
			default:
				v.Verdict = fmt.Sprintf("%d client version(s) used %s v%d.", len(v.Only)+len(v.Also), broker.APIName(key), ver)
			}
		}
	}
	c.render(w, "clients", "Clients", v, err)
}

// clientsJSON serves the usage for `vltava clients`, with API names.
func (c *Console) clientsJSON(w http.ResponseWriter, r *http.Request, _ *inspect.Inspector) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(c.usage()); err != nil {
		c.opts.Logger.Warn("console: /api/clients", "err", err)
	}
}

func renderAPIs(apis map[int16][]int16) template.HTML {
	keys := make([]int, 0, len(apis))
	for k := range apis {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		vs := make([]string, len(apis[int16(k)]))
		for j, v := range apis[int16(k)] {
			vs[j] = strconv.Itoa(int(v))
		}
		fmt.Fprintf(&b, "%s v%s", template.HTMLEscapeString(broker.APIName(int16(k))), strings.Join(vs, ","))
	}
	return template.HTML(b.String())
}
