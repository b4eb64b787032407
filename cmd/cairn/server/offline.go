package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Offline is a data directory opened by the offline tools with `cairn serve` stopped:
// the views store (its lock keeps serve out meanwhile) and the embedded JetStream store
// started without listeners.
type Offline struct {
	// CommandRetention is the projector's command retention for Rebuild (0: the default,
	// projections.DefaultCommandRetention; negative: for good). It must be serve's.
	CommandRetention time.Duration
	DataDir          string
	DB               *projections.DB
	JS               jetstream.JetStream
	Store            *events.Store
	close            func()
}

// OpenData opens a data directory offline. It fails if serve holds it.
func OpenData(dataDir, prefix string) (*Offline, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "jetstream")); err != nil {
		return nil, fmt.Errorf("%s holds no JetStream store: %w", dataDir, err)
	}
	// The JetStream store says this is a data directory; the views may be missing (an
	// operator removed them to rebuild) and are then created empty.
	db, err := projections.Open(filepath.Join(dataDir, "views"))
	if err != nil {
		return nil, fmt.Errorf("%w (is cairn serve running on %s?)", err, dataDir)
	}
	srv, nc, js, err := OpenOffline(dataDir)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Offline{DataDir: dataDir, DB: db, JS: js, Store: events.NewStore(js, events.NewNames(prefix)),
		close: func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown() }}, nil
}

// CommandRetention turns a configured retention into the projector's: 0 is the
// default, a negative value keeps command ids for good (0 for the projector).
func CommandRetention(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return projections.DefaultCommandRetention
	case d < 0:
		return 0
	}
	return d
}

// Close releases the data directory.
func (o *Offline) Close() error {
	o.close()
	if o.DB != nil {
		return o.DB.Close()
	}
	return nil
}

// ProjectInto applies the events stream up to stopAt (0 = the last stored event) into db,
// with progress in the log, and returns the digest of the result.
//
// replayMemoryLimit is the soft heap limit of an offline replay (cairn views rebuild, at).
const replayMemoryLimit = 384 << 20

// retention is the command retention (see Offline.CommandRetention); it must be the one
// serve runs with for the digest to match serve's views.
func ProjectInto(ctx context.Context, db *projections.DB, js jetstream.JetStream, names events.Names, stopAt uint64, retention time.Duration, log zerolog.Logger) (projections.Digest, error) {
	last, err := events.NewStore(js, names).LastSeq(ctx)
	if err != nil {
		return projections.Digest{}, err
	}
	if stopAt == 0 || stopAt > last {
		stopAt = last
	}
	// A replay allocates at a high rate and keeps little: trade memory headroom for
	// less collector work while it runs.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	if os.Getenv("GOMEMLIMIT") == "" {
		// ... but not without bound: at 100,000 definitions 800 % let the heap reach
		// 1.6 GB. Near this soft limit the collector runs as often as it must.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(replayMemoryLimit))
	}
	return project(ctx, db, js, names, stopAt, retention, log)
}

// ViewsAt builds the views as of stream sequence seq (inclusive) in memory, for a
// running serve (GET /cairn/v1/at/{seq}/…): ProjectInto without its collector settings,
// which would change the serve's own.
func ViewsAt(ctx context.Context, js jetstream.JetStream, names events.Names, seq uint64, retention time.Duration, log zerolog.Logger) (*projections.DB, error) {
	db, err := projections.OpenInMem()
	if err != nil {
		return nil, err
	}
	if _, err := project(ctx, db, js, names, seq, retention, log); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// project replays the stream into db up to stopAt.
func project(ctx context.Context, db *projections.DB, js jetstream.JetStream, names events.Names, stopAt uint64, retention time.Duration, log zerolog.Logger) (projections.Digest, error) {
	p, err := projections.NewProjector(db, js, names, log)
	if err != nil {
		return projections.Digest{}, err
	}
	p.SetCommandRetention(CommandRetention(retention), 0)
	if stopAt > 0 {
		if err := p.Run(ctx, stopAt); err != nil {
			return projections.Digest{}, err
		}
	}
	return db.Digest()
}

// Rebuild replays the whole stream from sequence 1 into a fresh views store and swaps it
// in for the old one. Serve must be stopped.
func (o *Offline) Rebuild(ctx context.Context, log zerolog.Logger) (projections.Digest, error) {
	tmp := filepath.Join(o.DataDir, "views.rebuild")
	if err := os.RemoveAll(tmp); err != nil {
		return projections.Digest{}, err
	}
	fresh, err := projections.OpenBulk(tmp)
	if err != nil {
		return projections.Digest{}, err
	}
	if _, _, err := fresh.Upgrade(); err != nil { // an empty store: records the format
		fresh.Close()
		return projections.Digest{}, err
	}
	d, err := ProjectInto(ctx, fresh, o.JS, o.Store.Names(), 0, o.CommandRetention, log)
	if cerr := fresh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d, err
	}
	live := filepath.Join(o.DataDir, "views")
	if err := o.DB.Close(); err != nil {
		return d, err
	}
	o.DB = nil
	old := filepath.Join(o.DataDir, "views.old")
	_ = os.RemoveAll(old)
	if err := os.Rename(live, old); err != nil {
		return d, err
	}
	if err := os.Rename(tmp, live); err != nil {
		return d, err
	}
	if err := os.RemoveAll(old); err != nil {
		return d, err
	}
	o.DB, err = projections.Open(live)
	return d, err
}
