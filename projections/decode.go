package projections

import (
	"context"
	"runtime"

	"github.com/cairn-io/cairn/events"
)

// The decode pipeline: messages decoded and validated in parallel chunks ahead of the fold.

// decodedChunk is a run of consecutive messages decoded by one worker; done closes when
// items are ready. Chunks leave the pipeline in stream order.
type decodedChunk struct {
	raws  []events.Raw
	items []Item
	done  chan struct{}
	tail  bool // no more messages were waiting when this chunk was cut
}

// decodePipeline decodes messages on every core while keeping stream order: the reader
// cuts runs of messages into chunks (a chunk ends when no more messages are waiting or it
// is full), chunks are decoded in parallel and handed on in the order they were cut.
type decodePipeline struct {
	ctx     context.Context
	work    chan *decodedChunk
	ordered chan *decodedChunk
	cur     *decodedChunk
}

const maxChunk = 1024

// Messages at or below applied() are in the views already (offered, see Offer) and are
// not decoded: the apply loop skips them.
func newDecodePipeline(ctx context.Context, applied func() uint64) *decodePipeline {
	workers := runtime.GOMAXPROCS(0)
	dp := &decodePipeline{ctx: ctx, work: make(chan *decodedChunk, workers*2), ordered: make(chan *decodedChunk, workers*8)}
	for range workers {
		go func() {
			for c := range dp.work {
				c.items = make([]Item, len(c.raws))
				for i, r := range c.raws {
					if r.Seq <= applied() {
						c.items[i] = Item{Raw: r, undecoded: true}
						continue
					}
					ev, err := events.DecodeStored(r)
					c.items[i] = Item{Event: ev, Raw: r, Err: err}
				}
				close(c.done)
			}
		}()
	}
	return dp
}

// add takes the next message; more says whether others are already waiting.
func (dp *decodePipeline) add(r events.Raw, more bool) bool {
	if dp.cur == nil {
		// Small at first: live, most chunks hold the one event just appended (a full
		// maxChunk here cost 64 KiB of garbage per event); append grows catch-up chunks.
		dp.cur = &decodedChunk{raws: make([]events.Raw, 0, 4), done: make(chan struct{})}
	}
	dp.cur.raws = append(dp.cur.raws, r)
	if more && len(dp.cur.raws) < maxChunk {
		return true
	}
	dp.cur.tail = !more
	return dp.flush()
}

func (dp *decodePipeline) flush() bool {
	c := dp.cur
	if c == nil {
		return true
	}
	dp.cur = nil
	select {
	case dp.work <- c:
	case <-dp.ctx.Done():
		return false
	}
	select {
	case dp.ordered <- c:
		return true
	case <-dp.ctx.Done():
		return false
	}
}

// close flushes what is left and ends the pipeline.
func (dp *decodePipeline) close() {
	dp.flush()
	close(dp.work)
	close(dp.ordered)
}
