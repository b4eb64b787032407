package drbdagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/cairn-io/cairn/agents/fsx"
	"github.com/cairn-io/cairn/agents/volume"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/storage/backing"
	"github.com/cairn-io/cairn/storage/backup"
)

var (
	metricBackupBytes = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_backup_bytes_total",
		Help: "Bytes of backups this agent moved: sent (chunks uploaded), restored (written from a backup)."}, []string{"kind"})
	metricBackupEnds = promauto.NewCounterVec(prometheus.CounterOpts{Name: "cairn_agent_backups_total",
		Help: "Uploads this agent ended, by outcome (uploaded, failed), and attempts it made again after an error a retry may cure (retried)."}, []string{"outcome"})
	metricBackupsRunning = promauto.NewGauge(prometheus.GaugeOpts{Name: "cairn_agent_backups_running",
		Help: "Uploads under way on this agent."})
)

// RemoteStore is a remote's object store as the agent uses it: the backup format's
// Store and a Check of the bucket and credentials before anything is sent.
type RemoteStore interface {
	backup.Store
	Check(ctx context.Context) error
}

// uploads are the backups this node uploads (docs/backups.md): one goroutine per
// BackupOrder, outside the resource's reconcile (an upload takes minutes; the resource
// goes on being reconciled meanwhile). Its end is recorded in a result file beside the
// state file, so a restarted agent reports it again instead of uploading again; its
// progress in a journal (backup.Upload.Journal), so an interrupted one resumes.
type uploads struct {
	mu   sync.Mutex
	jobs map[string]*uploadJob // by resource "/" id
}

type uploadJob struct {
	rd     string
	seq    uint64
	cancel context.CancelFunc
	mu     sync.Mutex
	status drbd.BackupStatus
}

func (j *uploadJob) get() drbd.BackupStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status
}

func (j *uploadJob) set(f func(*drbd.BackupStatus)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(&j.status)
}

// statuses are rd's uploads as its status reports them, by id.
func (u *uploads) statuses(rd string) []drbd.BackupStatus {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []drbd.BackupStatus
	for _, j := range u.jobs {
		if j.rd == rd {
			out = append(out, j.get())
		}
	}
	slices.SortFunc(out, func(a, b drbd.BackupStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// readsZeros reports whether a new backing volume of provider p reads zeros where
// nothing was written (a sparse or preallocated file, a thin volume, a zvol), so a
// restore need not write its chunks of zeros; a thick LV keeps what was there before.
func readsZeros(p backing.Provider) bool {
	return p.Thin() || p == backing.ProviderFile || p == backing.ProviderZFS
}

// resultFile is where the end of upload id of rd is recorded; journalFile its journal.
func (r *Reconciler) resultFile(rd, id string) string {
	return filepath.Join(r.cfg.Paths.StateDir, "backups", rd+"."+id+".result.json")
}

func (r *Reconciler) journalFile(rd, id string) string {
	return filepath.Join(r.cfg.Paths.StateDir, "backups", rd+"."+id+".journal")
}

// stopUploads cancels every upload of rd that d no longer orders (d nil: all of them)
// and removes their records.
func (r *Reconciler) stopUploads(rd string, d *drbd.Desired) {
	want := map[string]uint64{}
	if d != nil {
		for _, o := range d.Backups {
			want[o.ID] = o.Seq
		}
	}
	r.ups.mu.Lock()
	defer r.ups.mu.Unlock()
	for key, j := range r.ups.jobs {
		id := strings.TrimPrefix(key, rd+"/")
		if j.rd != rd || id == restoreJob {
			continue
		}
		if seq, ok := want[id]; ok && seq == j.seq {
			continue
		}
		j.cancel()
		delete(r.ups.jobs, key)
		_ = os.Remove(r.resultFile(rd, id))
		_ = os.Remove(r.journalFile(rd, id))
	}
}

// startUploads starts an upload for every order of d that has none (or reports the
// recorded end of one finished before a restart), and stops those no longer ordered.
func (r *Reconciler) startUploads(rd string, d *drbd.Desired, st *State, prov volume.Provider) {
	r.stopUploads(rd, d)
	for _, o := range d.Backups {
		key := rd + "/" + o.ID
		r.ups.mu.Lock()
		_, running := r.ups.jobs[key]
		r.ups.mu.Unlock()
		if running {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		j := &uploadJob{rd: rd, seq: o.Seq, cancel: cancel, status: drbd.BackupStatus{ID: o.ID, Seq: o.Seq, Phase: drbd.BackupUploading}}
		var rec drbd.BackupStatus
		if b, err := os.ReadFile(r.resultFile(rd, o.ID)); err == nil && json.Unmarshal(b, &rec) == nil && rec.Seq == o.Seq {
			j.status = rec // finished before a restart: report it again
			r.ups.mu.Lock()
			r.ups.jobs[key] = j
			r.ups.mu.Unlock()
			continue
		}
		r.ups.mu.Lock()
		r.ups.jobs[key] = j
		r.ups.mu.Unlock()
		vols := make([]backup.VolumeManifest, 0, len(d.Volumes))
		for _, v := range d.Volumes {
			vols = append(vols, backup.VolumeManifest{Number: v.Number, SizeKiB: v.SizeKiB})
		}
		ss := st.Snapshots[o.Snapshot]
		var why string
		reader, ok := prov.(volume.SnapshotReader)
		switch {
		case ss == nil || ss.Phase != drbd.SnapTaken:
			why = fmt.Sprintf("this node holds no taken copy of snapshot %s", o.Snapshot)
		case !ok:
			why = fmt.Sprintf("provider %s cannot read snapshots", d.Local.Provider)
		case r.cfg.Remotes == nil:
			why = "this agent cannot reach remotes"
		}
		if why != "" {
			r.endUpload(j, drbd.BackupStatus{Phase: drbd.BackupFailed, Error: why})
			continue
		}
		metricBackupsRunning.Inc()
		go func() {
			defer metricBackupsRunning.Dec()
			r.upload(ctx, j, o, vols, reader)
		}()
	}
}

// upload runs one order until it is complete, fails for good or is canceled: errors a
// retry may cure (the store or the serve away) are waited out, with the error in the
// status meanwhile.
func (r *Reconciler) upload(ctx context.Context, j *uploadJob, o drbd.BackupOrder, vols []backup.VolumeManifest, reader volume.SnapshotReader) {
	log := r.cfg.Log.With().Str("resource", j.rd).Str("backup", o.ID).Str("remote", o.Remote).Logger()
	wait := r.cfg.BackupRetry
	for attempt := 1; ; attempt++ {
		sum, p, err := r.uploadOnce(ctx, j, o, vols, reader)
		if ctx.Err() != nil {
			log.Info().Msg("upload stopped: no longer ordered")
			return
		}
		if err == nil {
			log.Info().Int64("bytes_sent", p.BytesSent).Int64("chunks_sent", p.ChunksSent).Int64("bytes_total", p.BytesTotal).Msg("backup uploaded")
			r.endUpload(j, drbd.BackupStatus{Phase: drbd.BackupUploaded, ManifestSHA256: sum, BytesDone: p.BytesDone, BytesTotal: p.BytesTotal,
				BytesSent: p.BytesSent, ChunksSent: p.ChunksSent})
			return
		}
		if errors.Is(err, backup.ErrPermanent) {
			log.Warn().Err(err).Msg("backup failed")
			r.endUpload(j, drbd.BackupStatus{Phase: drbd.BackupFailed, Error: err.Error(), BytesDone: p.BytesDone, BytesTotal: p.BytesTotal})
			return
		}
		metricBackupEnds.WithLabelValues("retried").Inc()
		log.Warn().Err(err).Int("attempt", attempt).Dur("retry_in_ms", wait).Msg("upload stopped; trying again")
		j.set(func(s *drbd.BackupStatus) { s.Error = fmt.Sprintf("attempt %d: %v (trying again)", attempt, err) })
		r.pub.soon(j.rd)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// uploadOnce is one attempt: credentials, the bucket's check, the base's manifest,
// then backup.Upload over the snapshot's images.
func (r *Reconciler) uploadOnce(ctx context.Context, j *uploadJob, o drbd.BackupOrder, vols []backup.VolumeManifest, reader volume.SnapshotReader) (string, backup.Progress, error) {
	store, err := r.cfg.Remotes(ctx, o.Remote)
	if err != nil {
		return "", backup.Progress{}, fmt.Errorf("remote %s: %w", o.Remote, err)
	}
	if err := store.Check(ctx); err != nil {
		return "", backup.Progress{}, fmt.Errorf("remote %s: %w", o.Remote, err)
	}
	var known map[string]bool
	base := o.Base
	if base != "" {
		m, _, err := backup.ReadManifest(ctx, store, j.rd, base, o.BaseManifestSHA256)
		switch {
		case errors.Is(err, backup.ErrNotFound):
			r.cfg.Log.Warn().Str("resource", j.rd).Str("base", base).Msg("the base backup is gone from the remote: a full backup instead")
			base = ""
		case err != nil:
			return "", backup.Progress{}, err
		default:
			known = m.StoredChunks()
		}
	}
	var files []*os.File
	var releases []func()
	defer func() {
		for _, f := range files {
			f.Close()
		}
		for _, rel := range releases {
			rel()
		}
	}()
	opened := map[int]io.ReaderAt{}
	for _, v := range vols {
		path, release, err := reader.OpenSnapshot(ctx, backing.VolumeName(j.rd, v.Number), o.Snapshot)
		if err != nil {
			return "", backup.Progress{}, fmt.Errorf("%w: %v", backup.ErrPermanent, err)
		}
		releases = append(releases, release)
		f, err := os.Open(path)
		if err != nil {
			return "", backup.Progress{}, fmt.Errorf("%w: %v", backup.ErrPermanent, err)
		}
		files = append(files, f)
		opened[v.Number] = f
	}
	if err := os.MkdirAll(filepath.Dir(r.journalFile(j.rd, o.ID)), 0o755); err != nil {
		return "", backup.Progress{}, err
	}
	var sentReported int64 // OnProgress is called from one goroutine at a time
	up := &backup.Upload{Store: store, Known: known, Journal: r.journalFile(j.rd, o.ID),
		Manifest: backup.Manifest{ID: o.ID, Resource: j.rd, Snapshot: o.Snapshot, Node: r.cfg.Node, Base: base,
			CreatedAt: time.Now().UTC(), Volumes: vols},
		Open: func(v int) (io.ReaderAt, error) { return opened[v], nil },
		Throttle: func(ctx context.Context, n int) error {
			if r.upLimit == nil {
				return nil
			}
			return r.upLimit.WaitN(ctx, n)
		},
		OnProgress: func(p backup.Progress) {
			// The metric counts what this attempt sent since its last report: the
			// status still holds the previous attempt's figures when a retry starts
			// (counting against them went negative, and a Prometheus counter panics).
			metricBackupBytes.WithLabelValues("sent").Add(float64(p.BytesSent - sentReported))
			sentReported = p.BytesSent
			j.set(func(s *drbd.BackupStatus) {
				s.BytesDone, s.BytesTotal, s.BytesSent, s.ChunksSent = p.BytesDone, p.BytesTotal, p.BytesSent, p.ChunksSent
			})
			r.pub.soon(j.rd)
		}}
	return up.Run(ctx)
}

// endUpload records an upload's end (in the result file first, then the status).
func (r *Reconciler) endUpload(j *uploadJob, end drbd.BackupStatus) {
	metricBackupEnds.WithLabelValues(end.Phase).Inc()
	j.set(func(s *drbd.BackupStatus) {
		end.ID, end.Seq = s.ID, s.Seq
		*s = end
	})
	b, _ := json.Marshal(j.get())
	path := r.resultFile(j.rd, end.ID)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := fsx.WriteAtomic(path, b, 0o644); err != nil {
			r.cfg.Log.Error().Err(err).Str("resource", j.rd).Msg("backup result not recorded")
		}
	}
	_ = os.Remove(r.journalFile(j.rd, end.ID))
	r.pub.now(context.Background(), j.rd)
}

// restoreJob is the id under which a restore from a backup shows in the status.
const restoreJob = "restore"

// fill writes volume v of backup ref into path (a new backing volume, before its
// metadata), every chunk checked; zeroed says the new volume reads zeros (a sparse
// file, a thin volume), so chunks of zeros are skipped. Its progress shows in the
// status as backup "restore".
func (r *Reconciler) fill(ctx context.Context, rd string, ref *drbd.BackupRef, v drbd.Volume, path string, zeroed bool) error {
	if r.cfg.Remotes == nil {
		return errors.New("restore from a backup: this agent cannot reach remotes")
	}
	store, err := r.cfg.Remotes(ctx, ref.Remote)
	if err != nil {
		return fmt.Errorf("restore from backup %s: remote %s: %w", ref.ID, ref.Remote, err)
	}
	m, _, err := backup.ReadManifest(ctx, store, ref.Resource, ref.ID, ref.ManifestSHA256)
	if err != nil {
		return fmt.Errorf("restore from backup: %w", err)
	}
	var vm *backup.VolumeManifest
	for i := range m.Volumes {
		if m.Volumes[i].Number == v.Number {
			vm = &m.Volumes[i]
		}
	}
	if vm == nil || vm.SizeKiB > v.SizeKiB {
		return fmt.Errorf("restore from backup %s of %s: it has no volume %d of at most %d KiB", ref.ID, ref.Resource, v.Number, v.SizeKiB)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	key := rd + "/" + restoreJob
	j := &uploadJob{rd: rd, cancel: func() {}, status: drbd.BackupStatus{ID: restoreJob, Phase: drbd.BackupRestoring, BytesTotal: vm.SizeBytes()}}
	r.ups.mu.Lock()
	r.ups.jobs[key] = j
	r.ups.mu.Unlock()
	defer func() {
		r.ups.mu.Lock()
		delete(r.ups.jobs, key)
		r.ups.mu.Unlock()
	}()
	err = backup.Restore(ctx, store, m, *vm, f, zeroed, 0, func(p backup.Progress) {
		j.set(func(s *drbd.BackupStatus) {
			metricBackupBytes.WithLabelValues("restored").Add(float64(p.BytesDone - s.BytesDone))
			s.BytesDone = p.BytesDone
		})
		r.pub.soon(rd)
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("restore from backup %s of %s: %w", ref.ID, ref.Resource, err)
	}
	r.cfg.Log.Info().Str("resource", rd).Int("volume", v.Number).Str("backup", ref.ID).Int64("bytes", vm.SizeBytes()).Msg("volume filled from a backup")
	return nil
}
