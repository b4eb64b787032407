package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server/lease"
	"github.com/cairn-io/cairn/cmd/cairn/server/natsauth"
	"github.com/cairn-io/cairn/commands"
	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/gateway"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/cairn-io/cairn/projections/dispatch"
	"github.com/cairn-io/cairn/projections/statusfold"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/storage/backup/objstore"
	"github.com/cairn-io/cairn/storage/secret"
)

// Config configures `cairn serve`. Zero values take the defaults in parentheses.
type Config struct {
	DataDir    string // views and, when embedded, the JetStream store (./data)
	NATSURL    string // use this NATS server or cluster instead of the embedded one
	NATSCreds  string // credentials file for NATSURL
	NATSListen string // embedded server's client listener (127.0.0.1:4222)
	HTTPListen string // gateway listener (127.0.0.1:3370); "-" = no gateway
	// HTTPAuth requires a bearer token (cairn auth token create) on every HTTP request
	// but /healthz and /readyz. TLSCert and TLSKey serve HTTPS; TLSClientCA also
	// requires client certificates signed by that CA. A listener that is not on loopback
	// needs HTTPAuth and TLS.
	HTTPAuth    bool
	TLSCert     string
	TLSKey      string
	TLSClientCA string
	Prefix      string // subject prefix (cairn)
	Replicas    int    // stream replicas (1 embedded, 3 on a cluster)
	// NoSyncAlways turns off fsync on every JetStream write of the embedded server.
	// Only for benchmarks: an acknowledged command could then be lost on power loss.
	NoSyncAlways bool
	// Auth turns on NATS authorization of the embedded server (cairn serve --auth): a
	// control-plane user and per-node agent users, credentials under <data>/auth (see
	// package natsauth). Refused together with NATSURL.
	Auth             bool
	HeartbeatTimeout time.Duration // node offline after this long without a heartbeat (15 s)
	// MaxSyncingReplacements bounds the replicas the evacuation places that sync at once
	// across the cluster (policy.DefaultMaxSyncing).
	MaxSyncingReplacements int
	// MaxSyncingPerNode bounds the replacements syncing at once to one node (0: none).
	MaxSyncingPerNode int
	// KeepCountInterval is how often every definition is checked against its group's
	// place count (policy.DefaultKeepCountEvery); negative: never.
	KeepCountInterval time.Duration
	// ScheduleInterval is how often the backup schedules are looked at
	// (policy.ScheduleCheckEvery).
	ScheduleInterval time.Duration
	// AgentConsumerIdle is how long a node's desired-state consumer outlives its agent's
	// last pull (events.AgentConsumerIdle).
	AgentConsumerIdle time.Duration
	// Name identifies this serve in the side-effect lease (hostname-pid); give each serve
	// of one NATS cluster its own. LeaseTTL is the lease's time to live (5 s).
	Name     string
	LeaseTTL time.Duration
	// CommandRetention is how long accepted command ids stay in the views (0: 7 days;
	// negative: for good). Every serve of one stream must use the same.
	CommandRetention time.Duration
	// SecretsKey is the file of the key remotes' secrets are sealed with
	// (<data>/secrets.key, created when missing); every serve of one stream needs the
	// same file.
	SecretsKey string
	Admission  commands.Options
	Log        zerolog.Logger
}

// Server is a running control-plane process.
type Server struct {
	cfg       Config
	NATS      *natsserver.Server // nil with an external NATS
	NC        *nats.Conn
	JS        jetstream.JetStream
	Store     *events.Store
	DB        *projections.DB
	Projector *projections.Projector
	Admission *admission.Admission
	Watchdog  *policy.Watchdog
	Evacuator *policy.Evacuator
	Evictor   *policy.Evictor
	// Dispatcher publishes per-node desired state from the views.
	Dispatcher *dispatch.Dispatcher
	// Lease elects the one serve that runs the side effects (dispatcher, watchdog
	// commands, pool reaction) on a NATS cluster.
	Lease    *lease.Lease
	HTTPAddr string // actual gateway address
	NATSAddr string // client URL of the embedded server

	startTarget uint64
	cancel      context.CancelFunc
	done        chan error
	projDone    chan struct{} // closed when the projector's Run returned
	listener    *admission.Listener
	parts       sync.WaitGroup // dispatcher, status folding, watchdog
	httpSrv     *http.Server
	starting    *gateway.Starting // the HTTP handler, gated until the serve is up
	closeOnce   sync.Once
	runCtx      context.Context // the parts' context: canceled when Close begins

	// Auth issues and checks credentials when Config.Auth is set (nil otherwise);
	// ControlCreds is the path of the control user's credentials file.
	Auth         *natsauth.Authority
	ControlCreds string
	// Secrets seals and opens remotes' secret keys.
	Secrets *secret.Key
	// Received is this cluster's store of the backups other clusters shipped to it.
	Received *objstore.Store
}

// Start brings up every part of the control plane and returns once admission and the
// gateway accept requests. The views are caught up with the stream before admission
// starts answering. Stop it with Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.NATSListen == "" {
		cfg.NATSListen = "127.0.0.1:4222"
	}
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = "127.0.0.1:3370"
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = 15 * time.Second
	}
	names := events.NewNames(cfg.Prefix)
	if err := checkHTTPSecurity(cfg); err != nil {
		return nil, err
	}
	if cfg.Auth && cfg.NATSURL != "" {
		return nil, errors.New("--auth secures the embedded NATS server; with --nats use that NATS system's own users and --nats-creds")
	}
	s := &Server{cfg: cfg, done: make(chan error, 1), projDone: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, err
	}
	// Views first: Pebble's lock refuses a second process on the same data directory.
	db, err := projections.Open(filepath.Join(cfg.DataDir, "views"))
	if err != nil {
		return nil, err
	}
	s.DB = db
	// Views of an older format are dropped here and rebuilt by the catch-up below
	// (readyz says how far); a newer format refuses to start.
	if from, rebuilt, err := db.Upgrade(); err != nil {
		return nil, fmt.Errorf("views in %s: %w", filepath.Join(cfg.DataDir, "views"), err)
	} else if rebuilt {
		cfg.Log.Warn().Int("from_format", from).Int("format", projections.ViewsFormat).
			Msg("views of an older format: rebuilding them from the events stream before serving")
	}

	if cfg.NATSURL == "" {
		eo := EmbeddedOptions{StoreDir: filepath.Join(cfg.DataDir, "jetstream"),
			Listen: cfg.NATSListen, SyncAlways: !cfg.NoSyncAlways}
		var copts []nats.Option
		if cfg.Auth {
			if s.Auth, err = natsauth.Open(filepath.Join(cfg.DataDir, natsauth.DirName), true); err != nil {
				return nil, err
			}
			if s.ControlCreds, err = s.Auth.EnsureControlCreds(); err != nil {
				return nil, err
			}
			eo.Auth = s.Auth.Authenticator(names, cfg.Log.With().Str("part", "nats-auth").Logger())
			if copts, err = natsauth.ConnectOptions(s.ControlCreds); err != nil {
				return nil, err
			}
		}
		srv, err := StartEmbedded(eo)
		if err != nil {
			return nil, err
		}
		s.NATS = srv
		s.NATSAddr = srv.ClientURL()
		if s.NC, err = ConnectInProcess(srv, "cairn-serve", copts...); err != nil {
			return nil, err
		}
	} else {
		// A NATS cluster that is not up yet is waited for (and said so by the stream
		// setup below), not a reason to exit.
		opts := append([]nats.Option{nats.Name("cairn-serve"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true)}, Liveness()...)
		if cfg.NATSCreds != "" {
			opts = append(opts, nats.UserCredentials(cfg.NATSCreds))
		}
		if s.NC, err = nats.Connect(cfg.NATSURL, opts...); err != nil {
			return nil, fmt.Errorf("connect %s: %w", cfg.NATSURL, err)
		}
		s.NATSAddr = cfg.NATSURL
		log := cfg.Log
		s.NC.SetReconnectHandler(func(nc *nats.Conn) {
			if err := events.CheckServerVersion(nc); err != nil {
				log.Error().Err(err).Msg("reconnected to a nats-server that is too old")
			}
		})
	}
	if s.JS, err = jetstream.New(s.NC); err != nil {
		return nil, err
	}
	replicas := cfg.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	// A NATS cluster that is still electing its JetStream leader answers nothing yet:
	// keep trying (and say so) until it does or ctx ends.
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err = events.EnsureStreams(actx, s.JS, names, events.StreamOptions{Replicas: replicas})
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, err
		}
		cfg.Log.Warn().Err(err).Int("attempt", attempt).Msg("JetStream not ready; retrying")
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
	if cfg.NATSURL != "" { // connected now (the streams answered): refuse a server too old
		if err := events.CheckServerVersion(s.NC); err != nil {
			s.NC.Close()
			return nil, err
		}
	}
	s.Store = events.NewStore(s.JS, names)
	if s.Projector, err = projections.NewProjector(db, s.JS, names, cfg.Log.With().Str("part", "projector").Logger()); err != nil {
		return nil, err
	}
	s.Projector.SetCommandRetention(CommandRetention(cfg.CommandRetention), 0)
	if s.startTarget, err = s.Store.LastSeq(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.runCtx, s.cancel = runCtx, cancel
	go func() {
		err := s.Projector.Run(runCtx, 0)
		close(s.projDone)
		s.done <- err
	}()
	// The HTTP listener answers from here on: probes and metrics while the views catch
	// up (/readyz 503 with the progress), everything once the serve is up.
	if cfg.HTTPListen != "-" {
		ln, err := net.Listen("tcp", cfg.HTTPListen)
		if err != nil {
			return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPListen, err)
		}
		if cfg.TLSCert != "" {
			tc, err := httpTLS(cfg)
			if err != nil {
				_ = ln.Close()
				return nil, err
			}
			ln = tls.NewListener(ln, tc)
		}
		s.HTTPAddr = ln.Addr().String()
		s.starting = &gateway.Starting{Progress: s.ready}
		s.httpSrv = &http.Server{Handler: s.starting, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				cfg.Log.Error().Err(err).Msg("http gateway stopped")
			}
		}()
	}
	cfg.Log.Info().Uint64("checkpoint", s.Projector.Applied()).Uint64("stream_last_seq", s.startTarget).Msg("catching up views")
	if err := s.waitCaughtUp(ctx); err != nil {
		return nil, err
	}

	if cfg.SecretsKey == "" {
		cfg.SecretsKey = filepath.Join(cfg.DataDir, "secrets.key")
	}
	if s.Secrets, err = secret.LoadOrCreate(cfg.SecretsKey); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if cfg.Admission.Seal == nil {
		cfg.Admission.Seal = s.Secrets.Seal
	}
	if cfg.Admission.Replies == nil {
		// Refusals shared by every serve of the stream: a retry gets the same answer
		// from any of them.
		rkv, err := admission.NewReplyKV(ctx, s.JS, names.RepliesBucket(), admission.DefaultReplyTTL, replicas)
		if err != nil {
			return nil, err
		}
		cfg.Admission.Replies = rkv
	}
	s.Admission = commands.New(s.Store, db, s.Projector, cfg.Log.With().Str("part", "admission").Logger(), cfg.Admission)
	if s.listener, err = s.Admission.Listen(runCtx, s.NC, 0); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
		if cfg.NATSURL == "" {
			cfg.Name = host // embedded: one serve per store; its next run takes over its lease
		}
	}
	s.Lease = lease.New(s.JS, lease.Options{Bucket: names.LeaseBucket(), Holder: cfg.Name,
		TTL: cfg.LeaseTTL, Replicas: replicas, TakeOverOwn: cfg.NATSURL == "",
		Eligible: s.mayLead, Log: cfg.Log.With().Str("part", "lease").Logger()})
	if err := s.Lease.Prepare(ctx); err != nil {
		return nil, err
	}
	s.background(func() {
		if err := s.Lease.Run(runCtx); err != nil && runCtx.Err() == nil {
			cfg.Log.Error().Err(err).Msg("lease stopped")
		}
	})
	attachSub, err := attachAgents(runCtx, s.NC, s.JS, names, cfg.AgentConsumerIdle, func(node string) (bool, error) {
		v, err := db.Read()
		if err != nil {
			return false, err
		}
		defer v.Close()
		_, ok, err := v.Node(node)
		return ok, err
	}, cfg.Log.With().Str("part", "attach").Logger())
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", names.AgentAttachFilter(), err)
	}
	s.background(func() { <-runCtx.Done(); _ = attachSub.Unsubscribe() })
	remoteSub, err := answerRemotes(runCtx, s.NC, names, db, s.Secrets, cfg.Log.With().Str("part", "remotes").Logger())
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", names.AgentRemoteFilter(), err)
	}
	s.background(func() { <-runCtx.Done(); _ = remoteSub.Unsubscribe() })
	received, err := objstore.Open(ctx, s.JS, names.ReceivedBucket(), replicas)
	if err != nil {
		return nil, err
	}
	s.Received = received
	receivedSub, err := answerReceived(s.NC, names, db, received, cfg.Log.With().Str("part", "received").Logger())
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", names.AgentReceivedFilter(), err)
	}
	s.background(func() { <-runCtx.Done(); _ = receivedSub.Unsubscribe() })
	s.Dispatcher = &dispatch.Dispatcher{DB: db, Projector: s.Projector, JS: s.JS, Names: names, Fence: s.Lease.Leading,
		Log: cfg.Log.With().Str("part", "dispatcher").Logger()}
	s.background(func() {
		s.Lease.While(runCtx, "dispatcher", func(ctx context.Context) {
			if err := s.Dispatcher.Run(ctx); err != nil {
				cfg.Log.Error().Err(err).Msg("dispatcher stopped")
			}
		})
	})
	poolLog := cfg.Log.With().Str("part", "pools").Logger()
	onPool := policy.ContestPools(runCtx, s.Admission, s.Lease.Leading, poolLog)
	snaps := policy.SnapshotAdvancer{Adm: s.Admission, DB: db, Leading: s.Lease.Leading, Log: cfg.Log.With().Str("part", "snapshots").Logger()}
	s.Evacuator = &policy.Evacuator{Adm: s.Admission, DB: db, MaxSyncing: cfg.MaxSyncingReplacements, MaxSyncingPerNode: cfg.MaxSyncingPerNode, KeepCountEvery: cfg.KeepCountInterval,
		Log: cfg.Log.With().Str("part", "evacuation").Logger()}
	s.Evictor = &policy.Evictor{Adm: s.Admission, DB: db, Log: cfg.Log.With().Str("part", "auto-evict").Logger()}
	snapHook := snaps.Hook(runCtx)
	backups := policy.BackupRecorder{Adm: s.Admission, DB: db, Leading: s.Lease.Leading, Log: cfg.Log.With().Str("part", "backups").Logger()}
	backupHook := backups.Hook(runCtx)
	filesystemHook := policy.FilesystemRecorder{Adm: s.Admission, DB: db, Leading: s.Lease.Leading,
		Log: cfg.Log.With().Str("part", "filesystems").Logger()}.Hook(runCtx)
	hooks := statusfold.Hooks{Pool: onPool, DRBD: func(st drbd.Status) {
		snapHook(st)
		backupHook(st)
		filesystemHook(st)
		s.Evacuator.Observe(st)
		s.Evacuator.Wake()
	},
		Capacity: policy.RecordCapacity(runCtx, s.Admission, db, s.Lease.Leading, cfg.Log.With().Str("part", "capacity").Logger())}
	s.background(func() { s.Lease.While(runCtx, "snapshots", snaps.Sweep) })
	s.background(func() { s.Lease.While(runCtx, "backups", backups.Sweep) })
	scheduler := &policy.Scheduler{Adm: s.Admission, DB: db, Every: cfg.ScheduleInterval, Log: cfg.Log.With().Str("part", "schedules").Logger(),
		Remotes: s.RemoteStore}
	s.background(func() { s.Lease.While(runCtx, "schedules", scheduler.Run) })
	shipper := policy.Shipper{Adm: s.Admission, DB: db, Restore: s.shipRestore, Log: cfg.Log.With().Str("part", "ships").Logger()}
	s.background(func() { s.Lease.While(runCtx, "ships", shipper.Run) })
	s.background(func() { s.Lease.While(runCtx, "evacuation", s.Evacuator.Sweep) })
	s.background(func() { s.Lease.While(runCtx, "auto-evict", s.Evictor.Sweep) })
	s.background(func() {
		s.Lease.While(runCtx, "consumers", func(ctx context.Context) {
			reapConsumers(ctx, db, s.JS, names, cfg.Log.With().Str("part", "consumers").Logger())
		})
	})
	s.background(func() {
		// Agents' status folds into the views of every serve; a contested pool report
		// becomes pool.contest, a storage pool's capacity that moved sp.capacity-report,
		// sent by the lease holder.
		if err := statusfold.Run(runCtx, db, s.JS, names, cfg.Log.With().Str("part", "status").Logger(), hooks); err != nil {
			cfg.Log.Error().Err(err).Msg("status folding stopped")
		}
	})
	s.background(func() {
		// A new holder acts on the contested reports folded while it did not hold it.
		s.Lease.While(runCtx, "pools", func(ctx context.Context) { policy.RecontestPools(ctx, db, onPool, poolLog) })
	})
	s.Watchdog = policy.NewWatchdog(s.Admission, db, names, cfg.HeartbeatTimeout, cfg.Log.With().Str("part", "watchdog").Logger())
	s.Watchdog.Gate = func() bool { _, ok := s.Lease.Leading(); return ok }
	s.Watchdog.Recovering = func(what string, h nats.MsgHandler) nats.MsgHandler {
		return recovering(cfg.Log.With().Str("part", "watchdog").Logger(), what, h)
	}
	s.background(func() {
		if err := s.Watchdog.Run(runCtx, s.NC); err != nil {
			cfg.Log.Error().Err(err).Msg("watchdog stopped")
		}
	})
	s.Lease.Settle(ctx, 2*s.Lease.TTL())

	// The admission subscription is registered once the server has answered a PING
	// after it: only then does Start promise that commands find admission.
	if err := s.NC.Flush(); err != nil {
		return nil, fmt.Errorf("subscribe commands: %w", err)
	}
	if s.starting != nil {
		gw := &gateway.Gateway{NC: s.NC, Store: s.Store, DB: db, Liveness: s.Watchdog, Ready: s.ready,
			Leader: func() any { return s.Lease.Info() }, Refusals: s.Admission.RecentRefusals, Policies: s.policies,
			At: func(ctx context.Context, seq uint64) (*projections.DB, error) {
				return ViewsAt(ctx, s.JS, names, seq, cfg.CommandRetention, zerolog.Nop())
			},
			Remotes: s.RemoteStore, Received: s.Received}
		if cfg.HTTPAuth {
			gw.Auth = &gateway.Authenticator{DB: db, Log: cfg.Log.With().Str("part", "http-auth").Logger(), Ready: s.ready}
		}
		s.starting.Ready(gw.Handler())
	}
	ok = true
	ready := cfg.Log.Info().Str("nats", s.NATSAddr).Str("http", s.HTTPAddr).Bool("https", cfg.TLSCert != "").
		Bool("http_auth", cfg.HTTPAuth).Str("data", cfg.DataDir).
		Uint64("seq", s.Projector.Applied())
	if s.Auth != nil {
		ready = ready.Str("control_creds", s.ControlCreds)
	}
	ready.Msg("cairn serve ready")
	return s, nil
}

// checkHTTPSecurity refuses an HTTP listener that others can reach without tokens and
// TLS, and TLS settings that do not go together.
func checkHTTPSecurity(cfg Config) error {
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if cfg.TLSClientCA != "" && cfg.TLSCert == "" {
		return errors.New("--tls-client-ca needs --tls-cert and --tls-key")
	}
	if cfg.HTTPListen == "-" || isLoopback(cfg.HTTPListen) {
		return nil
	}
	if !cfg.HTTPAuth || cfg.TLSCert == "" {
		return fmt.Errorf("--http %s is not on loopback: it needs --http-auth (tokens: cairn auth token create) and --tls-cert/--tls-key", cfg.HTTPListen)
	}
	return nil
}

// isLoopback reports whether a listen address only accepts connections from this host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpTLS is the gateway's TLS configuration: the certificate, and with TLSClientCA
// client certificates required and verified.
func httpTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-client-ca %s: no PEM certificate in it", cfg.TLSClientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

func (s *Server) waitCaughtUp(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caughtUp := make(chan error, 1)
	go func() { caughtUp <- s.Projector.WaitFor(wctx, s.startTarget) }()
	select {
	case err := <-caughtUp:
		return err
	case err := <-s.done:
		s.done <- err
		if up := s.Projector.Stopped(); up != nil {
			// Start anyway, not ready: /readyz and every command say which event needs a
			// newer cairn, until one runs.
			s.cfg.Log.Error().Err(up).Msg("the views stopped at an event this binary cannot read: serving, not ready")
			return nil
		}
		return fmt.Errorf("projector stopped while catching up: %v", err)
	}
}

// ready reports whether the views have caught up with the stream as it was at start
// and the projector still runs.
// policies is what each policy is doing (GET /cairn/v1/policies).
func (s *Server) policies() any {
	_, leading := s.Lease.Leading()
	return map[string]any{
		"leading":    leading,
		"evacuation": s.Evacuator.Status(),
		"auto-evict": s.Evictor.Status(),
	}
}

// mayLead is the rolling-upgrade rule of the lease: a serve whose views stopped at an
// event of a newer cairn may not lead (it would dispatch, watch and heal from views that
// miss what the newer serves appended); a serve that reads every event may. So during an
// upgrade the lease passes to an upgraded serve as soon as the first event only it can
// read is stored, and older ones never take it back (docs/operations.md#upgrades).
func (s *Server) mayLead() error {
	if up := s.Projector.Stopped(); up != nil {
		return up
	}
	return nil
}

func (s *Server) ready() error {
	select {
	case err := <-s.done:
		s.done <- err
		return fmt.Errorf("projector stopped: %v", err)
	default:
	}
	if s.NC.Status() != nats.CONNECTED {
		return fmt.Errorf("not connected to NATS (%s)", s.NC.Status())
	}
	if up := s.Projector.Stopped(); up != nil {
		return up
	}
	if s.Projector.Applied() < s.startTarget {
		return fmt.Errorf("views at seq %d, catching up to %d", s.Projector.Applied(), s.startTarget)
	}
	return nil
}

// Done returns a channel that yields the projector's error if it stops on its own.
func (s *Server) Done() <-chan error { return s.done }

// Close stops everything in reverse order of start. Closing twice is harmless.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.close() })
	return err
}

func (s *Server) close() error {
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.httpSrv.Shutdown(ctx)
		cancel()
	}
	if s.cancel != nil {
		s.cancel()
		if s.listener != nil {
			s.listener.Close()
		}
		stopped := make(chan struct{})
		go func() { s.parts.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			s.cfg.Log.Warn().Msg("dispatcher, status folding or watchdog did not stop within 10s")
		}
		select {
		case <-s.projDone:
		case <-time.After(10 * time.Second):
			s.cfg.Log.Warn().Msg("projector did not stop within 10s")
		}
	}
	return s.closeResources()
}

// background runs one of serve's long-running parts; Close waits for it before it
// closes the views store under it. A part that panics is logged with the stack and run
// again a second later (until serve stops): a bug in one part must not take the process
// down with every command in flight, nor leave that part silently stopped.
func (s *Server) background(run func()) {
	s.parts.Add(1)
	go func() {
		defer s.parts.Done()
		for {
			if !s.runRecovering(run) {
				return
			}
			select {
			case <-s.runCtx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

var metricPartPanics = promauto.NewCounter(prometheus.CounterOpts{Name: "cairn_serve_part_panics_total",
	Help: "Panics of serve's long-running parts (dispatcher, status folding, watchdog, lease), recovered and run again."})

// recovering wraps a NATS message handler so that a panic in it is logged with the
// stack and counted, and the message dropped, instead of taking the process down.
func recovering(log zerolog.Logger, what string, h nats.MsgHandler) nats.MsgHandler {
	return func(m *nats.Msg) {
		defer func() {
			if p := recover(); p != nil {
				metricPartPanics.Inc()
				log.Error().Str("handler", what).Str("subject", m.Subject).Str("panic", fmt.Sprint(p)).
					Str("stack", string(debug.Stack())).Msg("a message handler panicked; message dropped")
			}
		}()
		h(m)
	}
}

// runRecovering runs part and reports whether it panicked (logged, counted).
func (s *Server) runRecovering(part func()) (panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			panicked = true
			metricPartPanics.Inc()
			s.cfg.Log.Error().Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).Msg("a serve part panicked; running it again in 1s")
		}
	}()
	part()
	return false
}

func (s *Server) closeResources() error {
	if s.NC != nil {
		s.NC.Close()
	}
	if s.NATS != nil {
		s.NATS.Shutdown()
		s.NATS.WaitForShutdown()
	}
	if s.DB != nil {
		return s.DB.Close()
	}
	return nil
}

// Liveness are the client options every long-lived Cairn connection to a NATS cluster
// uses: a ping every 2 s and 3 unanswered ones make the connection stale, so a process
// whose nats-server freezes (paused, swapping, a hung disk) moves to another server of
// the cluster within 6-8 s instead of nats.go's default of 2 minutes, during which its
// subscriptions would swallow requests (TestServeLeavesAFrozenNATSServer).
func Liveness() []nats.Option {
	return []nats.Option{nats.PingInterval(2 * time.Second), nats.MaxPingsOutstanding(3)}
}
