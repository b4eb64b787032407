package projections

import (
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Progress of a long catch-up or rebuild, logged with its rate and ETA.

// progress logs how far a long catch-up has come.
type progress struct {
	log     zerolog.Logger
	start   uint64
	target  uint64
	began   time.Time
	current atomic.Uint64
	quit    chan struct{}
}

func newProgress(log zerolog.Logger, start, target uint64) *progress {
	pr := &progress{log: log, start: start, target: target, began: time.Now(), quit: make(chan struct{})}
	pr.current.Store(start)
	go pr.loop()
	return pr
}

func (pr *progress) set(seq uint64) { pr.current.Store(seq) }
func (pr *progress) stop()          { close(pr.quit) }

func (pr *progress) loop() {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	last := pr.start
	for {
		select {
		case <-pr.quit:
			cur := pr.current.Load()
			if cur > pr.start && time.Since(pr.began) > time.Second {
				el := time.Since(pr.began)
				pr.log.Info().Uint64("applied", cur).Uint64("events", cur-pr.start).
					Dur("elapsed_ms", el).Float64("events_per_s", float64(cur-pr.start)/el.Seconds()).Msg("projector caught up")
			}
			return
		case <-tick.C:
			cur := pr.current.Load()
			if cur == last {
				continue
			}
			rate := float64(cur-last) / 2
			e := pr.log.Info().Uint64("applied", cur).Float64("events_per_s", rate)
			if pr.target > 0 {
				e = e.Uint64("target", pr.target).Float64("percent", 100*float64(cur)/float64(pr.target))
				if rate > 0 {
					e = e.Dur("eta_ms", time.Duration(float64(pr.target-cur)/rate*float64(time.Second)))
				}
			}
			e.Msg("projector progress")
			last = cur
		}
	}
}
