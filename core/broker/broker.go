package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vltava/vltava/core/acl"
	"github.com/vltava/vltava/core/clients"
	"github.com/vltava/vltava/core/config"
	"github.com/vltava/vltava/core/log"
	"github.com/vltava/vltava/core/quota"
	"github.com/vltava/vltava/core/wire"
	"github.com/vltava/vltava/plugins/metastore/local"
	"github.com/vltava/vltava/plugins/sdk"
)

// Options are the parts of a broker that its owner hands in.
type Options struct {
	// Logger receives the broker's log; nil means slog.Default().
	Logger *slog.Logger
	// Store is the metadata store. Nil opens the embedded local store
	// under log.dirs; a store handed in is not closed by Close.
	Store sdk.MetadataStore
	// Authenticators serve SASL on a SASL_PLAINTEXT listener; a mechanism
	// offered by several goes to the first. Required for such a listener,
	// ignored on PLAINTEXT. Close does not close them.
	Authenticators []sdk.Authenticator
	// Assignors serve KIP-848 consumer groups, preferred first. Nil means
	// the built-in ones (uniform, range) in group.consumer.assignors order.
	Assignors []sdk.Assignor
	// Cluster says that Store is shared with other brokers (ZooKeeper,
	// etcd, or one store in tests). A broker always runs core/cluster,
	// over Store or, without it, over its embedded local store; Cluster
	// (or controller.quorum.voters) only tells it that other brokers may
	// join, so that a SASL inter-broker listener needs its credentials.
	Cluster bool
	// ObserveRequest, when set, is told of every request the handler table
	// served: its API key and how long the handler took (a long poll's wait
	// included). It runs on the connection's goroutine and must not block.
	ObserveRequest func(key int16, took time.Duration)
	// ObserveQueue, when set, is told of every request the handler table
	// serves, as its handler starts: its API key and how long it waited
	// since it was read off the socket (wire.Request.Received; Kafka's
	// RequestQueueTimeMs). Same rules as ObserveRequest.
	ObserveQueue func(key int16, queued time.Duration)
}

// Broker is one Kafka-protocol broker. Create it with New, then Start it;
// Close stops it and waits for everything it started.
type Broker struct {
	cfg    config.Broker
	opts   Options
	logger *slog.Logger
	cl     *clusterState // cluster mode only (clustermode.go)

	store     sdk.MetadataStore
	ownsStore bool
	clusterID string

	server    *wire.Server
	ln        net.Listener // the first listener's
	listeners []boundListener

	authenticators []sdk.Authenticator
	// sasl maps a connection ID to its *saslConn (SASL listeners only);
	// entries go when the connection closes.
	sasl sync.Map

	// metaMu serializes changes to topics; readers use meta without it.
	metaMu sync.Mutex
	meta   atomic.Pointer[topicSnapshot]

	pids    producerIDs
	cleaner *cleaner // compaction of cleanup.policy=compact logs; set in start

	assignors []sdk.Assignor
	groups    *groupHost // the group coordinator; set in start
	txns      *txnHost   // the transaction coordinator (txns.go); set in start
	quotas    *quota.Manager
	authz     *acl.Authorizer // nil without authorizer: acl (authz.go)

	// isrShrinks and isrExpands count this broker's committed ISR
	// changes as leader (monitoring, stats.go).
	isrShrinks, isrExpands atomic.Int64

	clients     *clients.Registry
	clientConns sync.Map // connection ID → *clients.Conn

	dirs   logDirState // the log directory's I/O failure (logdir.go)
	syncer *log.Syncer // fsyncs flush.messages=1 appends of the log directory; set in start, closed after the logs

	ready   chan struct{}
	stopCh  chan struct{}
	wg      sync.WaitGroup
	started atomic.Bool
	closed  atomic.Bool
}

// New validates cfg and returns a broker that is not yet serving.
func New(cfg config.Broker, opts Options) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	b := &Broker{
		cfg:    cfg,
		opts:   opts,
		logger: logger,
		store:  opts.Store,
		ready:  make(chan struct{}),
		stopCh: make(chan struct{}),

		authenticators: opts.Authenticators,
		assignors:      opts.Assignors,
		quotas:         newQuotas(cfg.QuotaWindowNum, cfg.QuotaWindowSizeSeconds),
		clients:        clients.New(),
	}
	var err error
	if b.authz, err = newAuthorizer(cfg); err != nil {
		return nil, err
	}
	b.meta.Store(emptySnapshot())
	return b, nil
}

// Start opens the data directory and metadata store, opens every
// partition's log, binds the listener and starts serving in the background.
func (b *Broker) Start() error {
	if !b.started.CompareAndSwap(false, true) {
		return errors.New("broker: already started")
	}
	if err := b.start(); err != nil {
		b.shutdown()
		return err
	}
	close(b.ready)
	return nil
}

func (b *Broker) start() error {
	dir := b.cfg.LogDirs
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("broker: data dir: %w", err)
	}
	id, err := loadMetaProperties(dir, b.cfg)
	if err != nil {
		return err
	}
	b.clusterID = id
	b.syncer = log.NewSyncer()
	if b.store == nil {
		if err := os.MkdirAll(filepath.Join(dir, "meta"), 0o755); err != nil {
			return fmt.Errorf("broker: metadata dir: %w", err)
		}
		st, err := local.Open(filepath.Join(dir, "meta", "local.db"), local.Options{Logger: b.logger})
		if err != nil {
			return fmt.Errorf("broker: metadata store: %w", err)
		}
		b.store, b.ownsStore = st, true
	}
	if err := b.waitForStore(); err != nil {
		return err
	}
	if err := b.loadTopics(context.Background()); err != nil {
		return err
	}
	if err := b.checkSASLConfig(context.Background()); err != nil {
		return err
	}
	if err := b.startGroups(); err != nil {
		return err
	}
	b.startTxns()
	if err := b.bindListeners(); err != nil {
		return err
	}
	overrides, _ := b.cfg.ConnectionOverrides() // validated in New
	queued := b.cfg.QueuedMaxRequestBytes
	if queued <= 0 {
		queued = -1 // Kafka's "unlimited"; zero means the default to wire
	}
	b.server = wire.NewServer(wire.Config{
		MaxRequestBytes:              b.cfg.SocketRequestMaxBytes,
		QueuedMaxRequestBytes:        queued,
		MaxConnections:               int(b.cfg.MaxConnections), // 0: from the descriptor limit
		MaxConnectionsPerIP:          int(b.cfg.MaxConnectionsPerIP),
		MaxConnectionsPerIPOverrides: overrides,
		ZeroCopy:                     b.cfg.ZeroCopy,
		IdleTimeout:                  time.Duration(b.cfg.ConnectionsMaxIdleMs) * time.Millisecond,
		Logger:                       b.logger,
		ConnFilter:                   b.connFilter(),
	}, b)
	// Join the cluster (a cluster of one without controller.quorum.
	// voters) before serving: handlers rely on the cluster state. The
	// listeners are bound already: their addresses are registered, and
	// clients wait in their backlogs meanwhile.
	if err := b.startCluster(); err != nil {
		return err
	}
	// Partitions the cluster has no state for yet (a data directory of a
	// single node written before it ran as a cluster of one: topics
	// without a replica assignment) get one from the controller; serve
	// once they have it, as a single node always did.
	b.waitPartitionStates(context.Background(), b.meta.Load().allPartitions())
	b.serveListeners()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.maintain()
	}()
	b.startCleaner()
	b.startQuotas()
	b.startAuthorizer()
	b.logger.Info("broker: serving", "addr", b.ln.Addr().String(), "listeners", b.endpoints(), "data", dir, "node", b.cfg.NodeID, "cluster", b.clusterID)
	return nil
}

// Ready is closed once Start has succeeded.
func (b *Broker) Ready() <-chan struct{} { return b.ready }

// Addr is the address the first listener is bound to, once started.
func (b *Broker) Addr() string {
	if b.ln == nil {
		return ""
	}
	return b.ln.Addr().String()
}

// Stats reports the connection layer's counters.
func (b *Broker) Stats() wire.Stats {
	if b.server == nil {
		return wire.Stats{}
	}
	return b.server.Stats()
}

// Close stops serving, waits for every request in progress, and closes
// every log cleanly so the next start needs no recovery scan.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	return b.shutdown()
}

func (b *Broker) shutdown() error {
	b.closed.Store(true)
	var errs []error
	errs = append(errs, b.stopCluster()) // controlled shutdown while still serving
	close(b.stopCh)
	if b.server != nil {
		errs = append(errs, b.server.Close())
	} else {
		b.closeListeners()
	}
	b.wg.Wait()
	b.stopCleaner()
	errs = append(errs, b.closeTopics())
	if b.syncer != nil {
		b.syncer.Close()
	}
	if b.ownsStore && b.store != nil {
		errs = append(errs, b.store.Close())
	}
	return errors.Join(errs...)
}

// maintain runs each log's periodic work: flush.ms, segment.ms, retention
// and closing idle files.
func (b *Broker) maintain() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stopCh:
			return
		case now := <-t.C:
			for _, p := range b.meta.Load().allPartitions() {
				// Retention stays below the high watermark: followers may
				// still need what is above it, whatever its timestamps.
				if err := p.log.Maintain(now, p.HighWatermark()); err != nil {
					b.logger.Warn("broker: log maintenance", "partition", p.String(), "err", err)
				}
			}
		}
	}
}
