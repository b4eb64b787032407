package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/events"
	"github.com/rs/zerolog"
)

// BenchmarkEventStreamFanout (issue 30): 50 subscribers of GET /cairn/v1/events/stream
// while events are stored at 1,000 a second for 5 s. Reported: each event's delivery
// lag (from when JetStream stored it to when a subscriber has read it) p50 and p99 over
// every delivery, and that every subscriber got every event exactly once.
func BenchmarkEventStreamFanout(b *testing.B) {
	const subscribers, rate, seconds = 50, 1000, 5
	s := servertest.Start(b, func(c *server.Config) {
		c.HeartbeatTimeout = time.Hour
		c.Log = zerolog.Nop()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var lags []time.Duration
	got := make([]map[uint64]int, subscribers)
	var ready, done sync.WaitGroup
	for i := range subscribers {
		got[i] = map[uint64]int{}
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.HTTPAddr+"/cairn/v1/events/stream?type=node.added", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Error(err)
				ready.Done()
				return
			}
			defer resp.Body.Close()
			ready.Done()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				now := time.Now()
				var rec struct {
					Seq    uint64    `json:"seq"`
					Stored time.Time `json:"stored_at"`
				}
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				mu.Lock()
				lags = append(lags, now.Sub(rec.Stored))
				got[i][rec.Seq]++
				mu.Unlock()
			}
		}()
	}
	ready.Wait()
	time.Sleep(200 * time.Millisecond) // every stream's consumer is in place
	b.ResetTimer()
	total := rate * seconds
	tick := time.NewTicker(10 * time.Millisecond)
	var appends sync.WaitGroup
	sent := 0
	for sent < total {
		<-tick.C
		for range rate / 100 {
			i := sent
			sent++
			appends.Add(1)
			go func() {
				defer appends.Done()
				name := fmt.Sprintf("f%d", i)
				envs, err := events.Seal(events.Meta{CommandID: "bench-" + name, Actor: "bench", OccurredAt: time.Now()},
					[]events.Draft{{Subject: "cairn.ev.node." + name, Payload: &events.NodeAdded{Name: name, Host: "h" + name, Address: "10.9.0.1", Role: "storage"}}})
				if err == nil {
					_, err = s.Store.Append(ctx, events.Expect{Kind: events.ExpectSubject}, envs)
				}
				if err != nil {
					b.Error(err)
				}
			}()
		}
	}
	tick.Stop()
	appends.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(lags)
		mu.Unlock()
		if n >= subscribers*total {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	cancel()
	done.Wait()
	for i, g := range got {
		if len(g) != total {
			b.Errorf("subscriber %d got %d of %d events", i, len(g), total)
		}
		for seq, n := range g {
			if n != 1 {
				b.Errorf("subscriber %d got event %d %d times", i, seq, n)
			}
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	q := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))] }
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, "lag_p50_ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "lag_p99_ms")
	b.ReportMetric(float64(len(lags)), "deliveries")
	b.Logf("%d subscribers, %d events at %d/s: %d deliveries, lag p50 %s p99 %s max %s", subscribers, total, rate, len(lags), q(0.5), q(0.99), lags[len(lags)-1])
}
