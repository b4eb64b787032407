package policy

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/drbd"
	"github.com/cairn-io/cairn/projections"
)

// BackupFinishFrom returns the backup.finish commands the reports of rd's uploading
// nodes call for: an upload is recorded complete (or failed) once the node the backup
// was given to reports it so for the same start (Seq). The command id derives from
// definition, id and start, so two serves, or a report folded again, record it once.
func BackupFinishFrom(v *projections.View, name string) ([]admission.Request, error) {
	rd, ok, err := v.ResourceDefinition(name)
	if err != nil || !ok || len(rd.Backups) == 0 {
		return nil, err
	}
	statuses, err := v.ResourceStatus(name)
	if err != nil {
		return nil, err
	}
	var out []admission.Request
	for _, b := range rd.Backups {
		if b.Phase != projections.BackupUploading {
			continue
		}
		st, ok := statuses[b.Node]
		if !ok {
			continue
		}
		for _, r := range st.Backups {
			if r.ID != b.ID || r.Seq != b.StartedSeq || (r.Phase != drbd.BackupUploaded && r.Phase != drbd.BackupFailed) {
				continue
			}
			c := resources.BackupFinish{Resource: name, ID: b.ID, OK: r.Phase == drbd.BackupUploaded, Error: r.Error,
				ManifestSHA256: r.ManifestSHA256, BytesTotal: r.BytesTotal, BytesSent: r.BytesSent, ChunksSent: r.ChunksSent}
			body, _ := json.Marshal(c)
			out = append(out, admission.Request{Verb: "backup.finish", Body: body, Actor: "serve:backups", ForgetRefusals: true,
				CommandID: commandID("backup", name, b.ID, strconv.FormatUint(b.StartedSeq, 10))})
		}
	}
	return out, nil
}

// BackupRecorder records the end of uploads from their nodes' reports while this serve
// holds the lease: at once for every report folded (Hook), and by a sweep over the
// uploads under way every BackupSweepEvery (Sweep), which catches a report folded while
// the lease was elsewhere.
type BackupRecorder struct {
	Adm     *admission.Admission
	DB      *projections.DB
	Leading func() (uint64, bool)
	Log     zerolog.Logger
}

// BackupSweepEvery is how often the lease holder looks at the uploads under way.
var BackupSweepEvery = time.Second

// Hook returns the status folder's DRBD hook.
func (b BackupRecorder) Hook(ctx context.Context) func(drbd.Status) {
	return func(st drbd.Status) {
		if len(st.Backups) == 0 {
			return
		}
		if _, lead := b.Leading(); lead {
			b.record(ctx, st.Resource)
		}
	}
}

// Sweep records every upload whose end is reported, every BackupSweepEvery, until ctx
// ends (run while holding the lease).
func (b BackupRecorder) Sweep(ctx context.Context) {
	t := time.NewTicker(BackupSweepEvery)
	defer t.Stop()
	for {
		v, err := b.DB.Read()
		if err == nil {
			var busy []projections.BackupUnderWay
			busy, err = v.BackupsUnderWay()
			v.Close()
			seen := map[string]bool{}
			for _, u := range busy {
				if !seen[u.Resource] {
					seen[u.Resource] = true
					b.record(ctx, u.Resource)
				}
			}
		}
		if err != nil {
			b.Log.Warn().Err(err).Msg("uploads under way unreadable")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b BackupRecorder) record(ctx context.Context, rd string) {
	v, err := b.DB.Read()
	if err != nil {
		return
	}
	reqs, err := BackupFinishFrom(v, rd)
	v.Close()
	if err != nil {
		b.Log.Warn().Err(err).Str("resource", rd).Msg("backup reports not read")
		return
	}
	submitReports(ctx, b.Adm, b.Log, reqs, "finish", "backup finished")
}

// submitReports sends the commands agents' reports call for, each logged at info
// (debug when refused: another serve or an earlier fold recorded it) with its body under
// field and whether it recorded anything.
func submitReports(ctx context.Context, adm *admission.Admission, log zerolog.Logger, reqs []admission.Request, field, msg string) {
	for _, req := range reqs {
		r := adm.Submit(ctx, req)
		ev := log.Info()
		if !r.OK {
			ev = log.Debug().Str("error", r.Error.Message)
		}
		ev.RawJSON(field, req.Body).Bool("recorded", r.OK && len(r.Events) > 0).Msg(msg)
	}
}
