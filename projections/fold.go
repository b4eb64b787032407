package projections

import (
	"fmt"

	"github.com/cairn-io/cairn/events"
)

// Fold applies events to the views directly, in order, in one batch, as the projector
// does with the messages it reads from CAIRN_EVENTS: the fold of an event log that is
// not on JetStream (admission.Memory's in-memory log). Each event's Seq must follow the
// views' checkpoint and the one before it; a gap or a repeat is an error and applies
// nothing. Accepted command ids are kept for DefaultCommandRetention, as a serve keeps
// them by default. Do not mix it with a running Projector on the same DB.
func (db *DB) Fold(names events.Names, evs []events.Event) error {
	v, err := db.Read()
	if err != nil {
		return err
	}
	last := v.Seq()
	v.Close()
	t := newTx(db)
	t.retention, t.pruneEvery = DefaultCommandRetention, DefaultPruneEvery
	for _, ev := range evs {
		if ev.Seq != last+1 {
			return fmt.Errorf("fold: event %d after %d: the log must be applied in order without gaps", ev.Seq, last)
		}
		last = ev.Seq
		if err := applyRecovering(t, names, Item{Event: ev, Raw: events.Raw{Seq: ev.Seq, Subject: ev.Subject, Stored: ev.OccurredAt}}); err != nil {
			return fmt.Errorf("fold: event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return t.commit()
}
