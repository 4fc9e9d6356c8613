package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vltava/vltava/core/broker"
	"github.com/vltava/vltava/daemon/inspect"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Plugin is one plugin as the plugins page shows it.
type Plugin struct {
	Kind, Name, Version string
	Up                  bool
	PID                 int
	Restarts, Calls     int64
	P50, P99            string // call latency; "-" before any call
}

// Options are what the console reads.
type Options struct {
	Broker    *broker.Broker
	Inspector *inspect.Inspector
	// Store names the metadata store plugin; StoreUp reports its health.
	Store   string
	StoreUp func() bool
	// Login, when set, makes the console ask for credentials (HTTP Basic)
	// and read the cluster as that principal: it returns an inspector
	// that authenticates to the broker with them, or an error when the
	// broker refuses them. The broker's authorization then decides what
	// the pages show. Nil: no login, every page reads through Inspector.
	Login func(ctx context.Context, user, password string) (*inspect.Inspector, error)
	// Plugins lists the plugin processes (nil: none).
	Plugins func() []Plugin
	Logger  *slog.Logger
	// SampleEvery is how often group lag is sampled for the charts (15s).
	SampleEvery time.Duration
}

// Console serves the pages.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	hist  *inspect.LagHistory

	sessions sessions // logged-in principals' inspectors (auth.go)

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// requestTimeout bounds the Kafka calls behind one page.
const requestTimeout = 10 * time.Second

// New parses the templates and returns a console; Start begins sampling.
func New(opts Options) (*Console, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 15 * time.Second
	}
	c := &Console{opts: opts, pages: map[string]*template.Template{}, hist: inspect.NewLagHistory(120), stop: make(chan struct{})}
	funcs := template.FuncMap{"bytes": humanBytes, "ints": joinInts, "apis": renderAPIs}
	for _, page := range []string{"cluster", "topics", "topic", "records", "groups", "group", "plugins", "clients"} {
		t, err := template.New(page).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", page, err)
		}
		c.pages[page] = t
	}
	return c, nil
}

// Start runs the lag sampler until Close.
func (c *Console) Start() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(c.opts.SampleEvery)
		defer t.Stop()
		for {
			c.sample()
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (c *Console) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if gs, err := c.opts.Inspector.Groups(ctx); err == nil {
		c.hist.Sample(gs, time.Now())
	}
}

// Close stops the sampler, waits for it, and closes the logged-in
// principals' clients.
func (c *Console) Close() {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
	c.sessions.closeAll()
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/{$}", c.auth(c.cluster))
	mux.HandleFunc("GET /ui/topics", c.auth(c.topics))
	mux.HandleFunc("GET /ui/topics/{name}", c.auth(c.topic))
	mux.HandleFunc("GET /ui/topics/{name}/records", c.auth(c.records))
	mux.HandleFunc("GET /ui/groups", c.auth(c.groups))
	mux.HandleFunc("GET /ui/groups/{name}", c.auth(c.group))
	mux.HandleFunc("GET /ui/plugins", c.auth(c.plugins))
	mux.HandleFunc("GET /ui/clients", c.auth(c.clients))
	mux.HandleFunc("GET /api/clients", c.auth(c.clientsJSON))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
}

type navItem struct {
	Name, Href string
	On         bool
}

type pageData struct {
	Title  string
	Nav    []navItem
	NodeID int32
	Err    string
	Data   any
}

func (c *Console) render(w http.ResponseWriter, page, title string, data any, err error) {
	pd := pageData{Title: title, NodeID: c.opts.Inspector.NodeID(), Data: data}
	for _, n := range []navItem{{"Cluster", "/ui/", false}, {"Topics", "/ui/topics", false}, {"Groups", "/ui/groups", false},
		{"Plugins", "/ui/plugins", false}, {"Clients", "/ui/clients", false}} {
		n.On = strings.EqualFold(n.Name, title) || (page == "cluster" && n.Name == "Cluster") ||
			(strings.HasPrefix(page, "topic") || page == "records") && n.Name == "Topics" || page == "group" && n.Name == "Groups"
		pd.Nav = append(pd.Nav, n)
	}
	if err != nil {
		pd.Err = err.Error()
		c.opts.Logger.Debug("console: page error", "page", page, "err", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := c.pages[page].ExecuteTemplate(w, "layout", pd); err != nil {
		c.opts.Logger.Warn("console: rendering", "page", page, "err", err)
	}
}

func reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	cl, _, err := in.Overview(ctx)
	type view struct {
		C                 inspect.Cluster
		Up                int
		Store             string
		StoreUp           bool
		BytesIn, BytesOut int64
		Conns             int64
	}
	v := view{C: cl, Store: c.opts.Store, StoreUp: c.opts.StoreUp == nil || c.opts.StoreUp()}
	for _, b := range cl.Brokers {
		if b.Up {
			v.Up++
		}
	}
	if b := c.opts.Broker; b != nil {
		for _, p := range b.PartitionStats() {
			v.BytesIn += p.BytesIn
			v.BytesOut += p.BytesOut
		}
		v.Conns = b.Stats().Conns
	}
	c.render(w, "cluster", "Cluster", v, err)
}

func (c *Console) topics(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	_, ts, err := in.Overview(ctx)
	c.render(w, "topics", "Topics", ts, err)
}

func (c *Console) topic(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	name := r.PathValue("name")
	td, ok, err := in.Topic(ctx, name)
	if err == nil && !ok {
		w.WriteHeader(http.StatusNotFound)
		err = fmt.Errorf("topic %q does not exist", name)
	}
	c.render(w, "topic", "Topic "+name, td, err)
}

func (c *Console) records(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	name := r.PathValue("name")
	type view struct {
		Topic      string
		Partitions []int32
		Partition  int32
		Offset     int64
		Time       string
		N          int
		Records    []inspect.Record
		Empty      bool
		Next       int64
	}
	v := view{Topic: name, Offset: -1, N: 20, Time: r.FormValue("time")}
	td, ok, err := in.Topic(ctx, name)
	if err != nil || !ok {
		if err == nil {
			w.WriteHeader(http.StatusNotFound)
			err = fmt.Errorf("topic %q does not exist", name)
		}
		c.render(w, "records", "Records", v, err)
		return
	}
	for _, p := range td.Parts {
		v.Partitions = append(v.Partitions, p.ID)
	}
	if p, err := strconv.ParseInt(r.FormValue("partition"), 10, 32); err == nil {
		v.Partition = int32(p)
	}
	if n, err := strconv.Atoi(r.FormValue("n")); err == nil {
		v.N = min(max(n, 1), inspect.PageSize)
	}
	var start int64
	if s := r.FormValue("offset"); s != "" {
		if start, err = strconv.ParseInt(s, 10, 64); err != nil || start < 0 {
			c.render(w, "records", "Records", v, fmt.Errorf("offset %q: not a non-negative number", s))
			return
		}
		v.Offset = start
	} else if int(v.Partition) < len(td.Parts) && td.Parts[v.Partition].LogStart >= 0 {
		start = td.Parts[v.Partition].LogStart
	}
	ts := int64(-1)
	if v.Time != "" && r.FormValue("offset") == "" {
		if ts, err = parseTime(v.Time); err != nil {
			c.render(w, "records", "Records", v, err)
			return
		}
	}
	recs, err := in.Records(ctx, name, v.Partition, start, ts, v.N)
	if errors.Is(err, inspect.ErrNoRecords) {
		v.Empty, err = true, nil
	}
	v.Records = recs
	if len(recs) == v.N {
		v.Next = recs[len(recs)-1].Offset + 1
	}
	c.render(w, "records", "Records", v, err)
}

// parseTime accepts epoch milliseconds or RFC 3339.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("time %q: want milliseconds since the epoch or RFC 3339 (2026-12-01T10:00:00Z)", s)
	}
	return t.UnixMilli(), nil
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	gs, err := in.Groups(ctx)
	c.render(w, "groups", "Groups", gs, err)
}

func (c *Console) group(w http.ResponseWriter, r *http.Request, in *inspect.Inspector) {
	ctx, cancel := reqCtx(r)
	defer cancel()
	name := r.PathValue("name")
	g, ok, err := in.Group(ctx, name)
	if err == nil && !ok {
		w.WriteHeader(http.StatusNotFound)
		err = fmt.Errorf("group %q does not exist", name)
	}
	type view struct {
		G     inspect.GroupDetail
		Chart template.HTML
		Every time.Duration
	}
	c.render(w, "group", "Group "+name, view{G: g, Chart: lagChart(c.hist.Of(name)), Every: c.opts.SampleEvery}, err)
}

func (c *Console) plugins(w http.ResponseWriter, r *http.Request, _ *inspect.Inspector) {
	var ps []Plugin
	if c.opts.Plugins != nil {
		ps = c.opts.Plugins()
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Kind+ps[i].Name < ps[j].Kind+ps[j].Name })
	c.render(w, "plugins", "Plugins", ps, nil)
}
