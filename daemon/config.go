package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/vltava/vltava/core/config"
	"go.yaml.in/yaml/v3"
)

// serveFlags are the flags of the default (serve) command. Flags that map to
// broker configs are applied only when given, so the precedence is
// defaults < config file < flags.
type serveFlags struct {
	fs         *flag.FlagSet
	configFile string
	listen     string
	advertised string
	dataDir    string
	nodeID     int
	logLevel   string
	// quorumListen and quorumVoters join a raft metadata quorum
	// (controller.quorum.listen, controller.quorum.voters).
	quorumListen string
	quorumVoters string
	processRoles string
	cpuProfile   string
	metrics      string
	// inProcessPlugins runs the built-ins inside the broker process
	// (measurement only: compare with the default out-of-process setup).
	inProcessPlugins bool
	// overrides are --override key=value, applied over the config file.
	overrides listFlag
	version   bool

	// Set by load: Kafka keys that have no effect here (warned about once)
	// and notes on how the advertised listener was chosen.
	ignored []string
	notes   []string
}

// listFlag collects a repeatable flag's values in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func newServeFlags(stderr io.Writer) *serveFlags {
	f := &serveFlags{fs: flag.NewFlagSet("vltavad", flag.ContinueOnError)}
	fs := f.fs
	fs.SetOutput(stderr)
	fs.StringVar(&f.configFile, "config", "", "config `FILE`: YAML with Kafka broker config keys, or a Kafka .properties file")
	fs.StringVar(&f.listen, "listen", "", "listen on `HOST:PORT` (listeners; default 127.0.0.1:9092)")
	fs.StringVar(&f.advertised, "advertised", "", "tell clients to connect to `HOST:PORT` (advertised.listeners)")
	fs.StringVar(&f.dataDir, "data-dir", "", "data `DIR` (log.dirs; default ./data)")
	fs.IntVar(&f.nodeID, "node-id", 0, "this broker's node `ID` (node.id; default 1)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.quorumListen, "quorum-listen", "", "bind the metadata quorum listener to `HOST:PORT` (controller.quorum.listen; default: this node's voter address)")
	fs.StringVar(&f.quorumVoters, "quorum-voters", "", "metadata quorum `VOTERS` as 1@host:port,2@host:port,... (controller.quorum.voters); selects metadata.store raft")
	fs.StringVar(&f.processRoles, "process-roles", "", "`ROLES` of this process (process.roles): broker,controller (default), broker (a non-voter of the quorum; needs --quorum-listen) or controller (only the raft metadata voter: no Kafka listener, no logs)")
	fs.BoolVar(&f.inProcessPlugins, "in-process-plugins", false, "run the built-in local store and assignors inside the broker process, not as plugin processes (for benchmarks; path plugins are refused)")
	fs.StringVar(&f.metrics, "metrics-listen", "", "serve /metrics, /healthz and /readyz on `HOST:PORT` (metrics.listen; default "+config.DefaultMetricsListen+"; empty turns it off)")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a pprof CPU profile from start to shutdown to `FILE` (for benchmarks)")
	fs.Var(&f.overrides, "override", "set config `key=value` over the config file, as kafka-server-start's --override (repeatable)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	return f
}

// parse parses the command line.
func (f *serveFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", f.fs.Arg(0))
	}
	return nil
}

// load builds the broker config from the parsed flags: defaults, then the
// config file, then --override, then the flags that were given. It also
// settles advertised.listeners (see advertise).
func (f *serveFlags) load() (config.Broker, error) {
	cfg := config.DefaultBroker()
	m := map[string]any{}
	where := "--override"
	if f.configFile != "" {
		var err error
		if m, err = readFile(f.configFile); err != nil {
			return config.Broker{}, err
		}
		where = "config file " + f.configFile
		if len(f.overrides) > 0 {
			where += " with --override"
		}
	}
	for _, o := range f.overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return config.Broker{}, fmt.Errorf("--override %q: want key=value", o)
		}
		m[strings.TrimSpace(k)] = v
	}
	if len(m) > 0 {
		var err error
		if f.ignored, err = decodeKafkaMap(m, &cfg); err != nil {
			return config.Broker{}, fmt.Errorf("%s: %w", where, err)
		}
	}
	fileListeners, fileAdvertised := cfg.Listeners, cfg.AdvertisedListeners
	listenGiven, advertisedGiven := false, false
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "listen":
			cfg.Listeners = f.listen
			listenGiven = true
		case "advertised":
			cfg.AdvertisedListeners = f.advertised
			advertisedGiven = true
		case "data-dir":
			cfg.LogDirs = f.dataDir
		case "node-id":
			cfg.NodeID = int32(f.nodeID)
		case "quorum-listen":
			cfg.ControllerQuorumListen = f.quorumListen
		case "quorum-voters":
			cfg.ControllerQuorumVoters = f.quorumVoters
		case "process-roles":
			cfg.ProcessRoles = f.processRoles
		case "metrics-listen":
			cfg.MetricsListen = f.metrics
		}
	})
	if f.nodeID < 0 || int64(f.nodeID) > 1<<31-1 {
		return config.Broker{}, fmt.Errorf("--node-id %d: out of range", f.nodeID)
	}
	// --listen first moves the file's advertised listener (and drops
	// those of listeners it replaced), then the result is validated.
	if listenGiven && !advertisedGiven && fileAdvertised != "" {
		adv, note, err := followListen(fileListeners, fileAdvertised, cfg.Listeners)
		if err != nil {
			return config.Broker{}, err
		}
		cfg.AdvertisedListeners = adv
		if note != "" {
			f.notes = append(f.notes, note)
		}
	}
	if err := cfg.Validate(); err != nil {
		return config.Broker{}, err
	}
	adv, note, err := advertise(cfg)
	if err != nil {
		return config.Broker{}, err
	}
	cfg.AdvertisedListeners = adv
	if note != "" {
		f.notes = append(f.notes, note)
	}
	return cfg, nil
}

// level parses --log-level.
func (f *serveFlags) level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.logLevel)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	return l, nil
}

// readFile reads a config file into flat keys. A name ending in
// .properties is read as Kafka's key=value format, anything else as YAML.
func readFile(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if strings.HasSuffix(path, ".properties") {
		m, err = parseProperties(data)
	} else {
		m, err = parseYAML(data)
	}
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// decodeKafkaMap decodes flat config keys into cfg: Kafka's keys with a
// meaning here are translated, Kafka's keys without one are returned (to
// warn about), anything else unknown is an error.
func decodeKafkaMap(m map[string]any, cfg *config.Broker) (ignored []string, err error) {
	if err := nestPluginConfigs(m); err != nil {
		return nil, err
	}
	if ignored, err = translateKafkaKeys(m); err != nil {
		return nil, err
	}
	return ignored, decodeMap(m, cfg)
}

// parseYAML reads a YAML mapping. Nested mappings are flattened with dots,
// so "log: {segment.bytes: 1024}" means "log.segment.bytes: 1024".
func parseYAML(data []byte) (map[string]any, error) {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var flatten func(prefix string, m map[string]any)
	flatten = func(prefix string, m map[string]any) {
		for k, v := range m {
			if isPluginConfigKey(prefix + k) {
				out[prefix+k] = v // a plugin's own map, kept whole
				continue
			}
			if sub, ok := v.(map[string]any); ok {
				flatten(prefix+k+".", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	flatten("", raw)
	return out, nil
}

// parseProperties reads Java .properties text: "key=value", "key: value" or
// "key value" lines, # and ! comments, and a trailing backslash continuing
// a line. Unicode escapes are not interpreted.
func parseProperties(data []byte) (map[string]any, error) {
	out := map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<20)
	var pending string
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := pending + strings.TrimLeft(sc.Text(), " \t\f")
		pending = ""
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		i := strings.IndexAny(line, "=: \t")
		if i <= 0 {
			if i < 0 {
				out[line] = ""
				continue
			}
			return nil, fmt.Errorf("line %d: no key before %q", lineNo, line[i])
		}
		key := line[:i]
		val := strings.TrimLeft(line[i:], " \t")
		if val != "" && (val[0] == '=' || val[0] == ':') {
			val = val[1:]
		}
		out[key] = strings.TrimSpace(val)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if pending != "" {
		return nil, errors.New("last line ends with a continuation backslash")
	}
	return out, nil
}

// decodeMap decodes flat Kafka config keys into cfg. Unknown keys are an
// error that lists them; numbers and booleans may be strings.
func decodeMap(m map[string]any, cfg *config.Broker) error {
	if unknown := unknownKeys(m); len(unknown) > 0 {
		return fmt.Errorf("unknown config key(s): %s", strings.Join(unknown, ", "))
	}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           cfg,
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "mapstructure",
		DecodeHook:       checkInteger,
	})
	if err != nil {
		return err
	}
	if err := dec.Decode(m); err != nil {
		return describeDecodeError(err, m)
	}
	return nil
}

// checkInteger is a decode hook that parses values headed for integer
// fields itself, so that an overflow (node.id: 4294967297) is an error
// rather than a silent truncation.
func checkInteger(from, to reflect.Value) (any, error) {
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	default:
		return from.Interface(), nil
	}
	var n int64
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = from.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if from.Uint() > math.MaxInt64 {
			return nil, errors.New("out of range")
		}
		n = int64(from.Uint())
	case reflect.Float32, reflect.Float64:
		f := from.Float()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return nil, errors.New("not an integer in range")
		}
		n = int64(f)
	case reflect.String:
		var err error
		if n, err = strconv.ParseInt(strings.TrimSpace(from.String()), 10, 64); err != nil {
			return nil, errors.New("not an integer")
		}
	default:
		return from.Interface(), nil
	}
	if to.OverflowInt(n) {
		return nil, fmt.Errorf("out of range for a %d-bit integer", to.Type().Bits())
	}
	return n, nil
}

// describeDecodeError rewrites mapstructure's errors to name each bad key
// with the value it was given.
func describeDecodeError(err error, m map[string]any) error {
	var msgs []string
	var walk func(error)
	walk = func(e error) {
		var de *mapstructure.DecodeError
		if errors.As(e, &de) && !isJoin(e) {
			inner := de.Unwrap()
			var pe *mapstructure.ParseError
			if errors.As(inner, &pe) {
				inner = fmt.Errorf("not a %s", pe.Expected.Type())
			}
			msgs = append(msgs, fmt.Sprintf("%s: bad value %v: %v", de.Name(), fmtValue(m[de.Name()]), inner))
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
			return
		}
		msgs = append(msgs, e.Error())
	}
	walk(err)
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "; "))
}

func isJoin(e error) bool {
	_, ok := e.(interface{ Unwrap() []error })
	return ok
}

func fmtValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// unknownKeys lists the keys of m that config.Broker does not have, sorted.
// (mapstructure's ErrorUnused reports them too, but only after a type error
// elsewhere and with less context.)
func unknownKeys(m map[string]any) []string {
	known := map[string]bool{}
	for _, v := range config.BrokerValues(config.Broker{}) {
		known[v.Name] = true
	}
	var unknown []string
	for k := range m {
		if !known[k] {
			u := fmt.Sprintf("%q", k)
			if s := suggest(k); s != "" {
				u += fmt.Sprintf(" (did you mean %q?)", s)
			}
			unknown = append(unknown, u)
		}
	}
	sort.Strings(unknown)
	return unknown
}
