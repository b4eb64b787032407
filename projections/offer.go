package projections

import (
	"github.com/cairn-io/cairn/events"
)

// Offer: the events admission has just appended, applied before the consumer delivers them.

// maxOffered bounds the offered events that wait for their predecessors.
const maxOffered = 4096

// Offer hands the projector messages the caller has just appended, exactly as the
// stream acknowledged them (sequence, subject, body; see events.Store.Append), so that
// the views can hold them without waiting for the consumer to deliver them: an
// admission answering "accepted" once its events are in the views then waits for one
// Pebble commit instead of a delivery through the consumer. It is only a shortcut with
// the same result: an offered event is applied only once every event before it is,
// through the same decoding and apply as a delivered one, and whichever of the two
// comes second is skipped. Offers that the consumer overtakes are dropped, as are all
// of them when no Run (without stopAt) is going. Concurrent offers are group-committed:
// the first to take the transaction applies and commits every offered event that
// follows the views, and the others find theirs committed. Offer returns once what it
// could apply is committed, except events that end in the middle of an atomic batch
// (the first commands of a group whose later ones are not offered yet): those stay
// applied but uncommitted until the batch's end is offered or delivered, so that the
// views never hold part of a batch.
func (p *Projector) Offer(raws []events.Raw) {
	if len(raws) == 0 {
		return
	}
	items := make([]Item, len(raws))
	for i, r := range raws {
		ev, err := events.DecodeStored(r)
		items[i] = Item{Event: ev, Raw: r, Err: err}
	}
	last := raws[len(raws)-1].Seq
	p.offerMu.Lock()
	for _, it := range items {
		if it.Raw.Seq > p.Applied() && len(p.offered) < maxOffered {
			p.offered[it.Raw.Seq] = it
		}
	}
	p.offerMu.Unlock()
	p.txMu.Lock()
	defer p.txMu.Unlock()
	if p.Applied() >= last {
		return // committed by another offer's commit, or delivered
	}
	t := p.live
	if t == nil || p.broken != nil {
		p.offerMu.Lock()
		clear(p.offered) // no Run to take them
		p.offerMu.Unlock()
		return
	}
	before := t.seq
	if err := p.applyOffered(t); err != nil {
		p.broken = err
		return
	}
	if t.seq == before {
		return // waiting for earlier events
	}
	if err := p.commitAtBatchEnd(t); err != nil {
		p.broken = err
	}
}

// applyOffered applies offered events that directly follow what t holds, and forgets
// those the consumer's deliveries have overtaken. Callers hold txMu. An apply error
// leaves t half-written: the projector must stop (Offer records it in broken).
func (p *Projector) applyOffered(t *tx) error {
	p.offerMu.Lock()
	defer p.offerMu.Unlock()
	if len(p.offered) == 0 {
		return nil
	}
	for {
		it, ok := p.offered[t.seq+1]
		if !ok {
			break
		}
		delete(p.offered, it.Raw.Seq)
		if err := p.applyItem(t, it); err != nil {
			return err
		}
	}
	for seq := range p.offered {
		if seq <= t.seq {
			delete(p.offered, seq)
		}
	}
	return nil
}
