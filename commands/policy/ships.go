package policy

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/cairn-io/cairn/commands/resources"
	"github.com/cairn-io/cairn/projections"
)

// ShipRestore is what the target cluster of a shipped backup is asked to do: restore
// backup ID of Resource from its received store into Target.
type ShipRestore struct {
	Resource      string
	ID            string
	StartedSeq    uint64 // the backup's start: one ship of one id, recorded once
	Target        string
	Nodes         []string
	StoragePool   string
	ResourceGroup string
}

// ShipRestoreOf is the restore shipped backup b of rd asks its target for.
func ShipRestoreOf(rd string, b projections.RDBackup) ShipRestore {
	return ShipRestore{Resource: rd, ID: b.ID, StartedSeq: b.StartedSeq, Target: b.Ship.Target, Nodes: b.Ship.Nodes, StoragePool: b.Ship.StoragePool, ResourceGroup: b.Ship.ResourceGroup}
}

// Shipper finishes shipped backups (docs/backups.md "Shipping to another cluster")
// while this serve holds the lease: every Every it asks the target cluster of each
// shipped backup whose upload is complete to restore it, and records the answer
// (backup.ship-finish). A target that cannot be reached is asked again at the next
// look; one that answers with a refusal fails the ship with its reason.
type Shipper struct {
	Adm *admission.Admission
	DB  *projections.DB
	// Restore asks remote's cluster for r: answered false when the target could not
	// be reached (asked again later); answered true with err the target's refusal.
	Restore func(ctx context.Context, remote string, r ShipRestore) (answered bool, err error)
	Every   time.Duration
	Log     zerolog.Logger
}

// ShipEvery is how often the lease holder looks at the shipped backups to finish.
var ShipEvery = time.Second

// Run looks every Every until ctx ends (run while holding the lease).
func (s Shipper) Run(ctx context.Context) {
	every := s.Every
	if every <= 0 {
		every = ShipEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.look(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s Shipper) look(ctx context.Context) {
	v, err := s.DB.Read()
	if err != nil {
		return
	}
	due, err := v.ShipsDue()
	var asks []struct {
		remote string
		r      ShipRestore
	}
	for _, d := range due {
		rd, ok, rerr := v.ResourceDefinition(d.Resource)
		if rerr != nil || !ok {
			continue
		}
		if b, ok := rd.Backup(d.Remote, d.ID); ok && b.Ship != nil && b.Ship.Phase == projections.ShipRestoring {
			asks = append(asks, struct {
				remote string
				r      ShipRestore
			}{d.Remote, ShipRestoreOf(d.Resource, *b)})
		}
	}
	v.Close()
	if err != nil {
		s.Log.Warn().Err(err).Msg("shipped backups unreadable")
		return
	}
	for _, a := range asks {
		answered, err := s.Restore(ctx, a.remote, a.r)
		log := s.Log.With().Str("resource", a.r.Resource).Str("backup", a.r.ID).Str("remote", a.remote).Str("target", a.r.Target).Logger()
		if !answered {
			log.Warn().Err(err).Msg("the target cluster of a shipped backup did not answer; asking again")
			continue
		}
		c := resources.ShipFinish{Resource: a.r.Resource, ID: a.r.ID, OK: err == nil}
		if err != nil {
			c.Error = err.Error()
		}
		body, _ := json.Marshal(c)
		r := s.Adm.Submit(ctx, admission.Request{Verb: "backup.ship-finish", Body: body, Actor: "serve:ships", ForgetRefusals: true,
			CommandID: commandID("ship", a.r.Resource, a.r.ID, strconv.FormatUint(a.r.StartedSeq, 10))})
		log.Info().Bool("ok", c.OK).Str("error", c.Error).Bool("recorded", r.OK).Msg("shipped backup's restore answered")
	}
}
