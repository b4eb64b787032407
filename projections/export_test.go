package projections

import (
	"context"

	"github.com/cairn-io/cairn/events"
)

// ReadStored returns what the projector's consumer hands over, from the projector's
// checkpoint up to stopAt.
func (p *Projector) ReadStored(ctx context.Context, stopAt uint64) ([]events.Raw, error) {
	var out []events.Raw
	err := p.read(ctx, stopAt, func(r events.Raw, _ bool) bool { out = append(out, r); return true })
	return out, err
}
