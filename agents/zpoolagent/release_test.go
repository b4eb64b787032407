package zpoolagent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-io/cairn/agents/execx"
	"github.com/cairn-io/cairn/storage/zpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// releaseWorker returns a worker for pool tank at a fixed clock with RetryAfter 30 s,
// holding local, whose zpool calls go to the returned Recorder and whose statuses are
// appended to the returned slice. A non-empty stderr makes the calls starting with
// failArgv exit 1 with it.
func releaseWorker(t *testing.T, local Local, failArgv []string, stderr string) (*worker, *execx.Recorder, *[]zpool.Status) {
	t.Helper()
	rec := &execx.Recorder{}
	if stderr != "" {
		rec.On(failArgv...).Fail(1, stderr)
	}
	var mu sync.Mutex
	got := &[]zpool.Status{}
	now := time.Unix(1_800_000_000, 0)
	r, err := New(Options{Node: "n1", Zpool: Zpool{Exec: rec}, RetryAfter: 30 * time.Second,
		Now: func() time.Time { return now },
		Publisher: PublisherFunc(func(_ context.Context, _ string, data []byte) error {
			var st zpool.Status
			require.NoError(t, json.Unmarshal(data, &st))
			mu.Lock()
			*got = append(*got, st)
			mu.Unlock()
			return nil
		})})
	require.NoError(t, err)
	w := r.newWorker("tank")
	w.local = local
	return w, rec, got
}

// outcomeLabel is the outcome label of the fence and export counters.
func outcomeLabel(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}

// counter is the value of c.
func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// fence runs zpool export -F (no label rewrite): on success the pool is dropped (grant kept) and reported
// fenced; a pool already gone counts as fenced; on a failure the pool stays imported,
// the worker holds and the failure is reported as contested, not fenced.
func TestFence(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stderr string // zpool's stderr for a failure with exit 1; "" succeeds
		grant  uint64 // Local.Grant (Contested is 9)
		fenced bool
	}{
		{name: "ok", grant: 7, fenced: true},
		{name: "not imported any more", stderr: "cannot open 'tank': no such pool", grant: 7, fenced: true},
		{name: "contested grant when not adopted", grant: 0, fenced: true},
		{name: "failed", stderr: "cannot export 'tank': I/O error", grant: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rec, got := releaseWorker(t, Local{Imported: true, Grant: tc.grant, Contested: 9},
				[]string{"zpool", "export", "-F"}, tc.stderr)
			w.lastForgn = [2]string{"0x22222222", "host-b"}
			fences := metricFences.WithLabelValues(outcomeLabel(tc.fenced))
			before := counter(fences)

			w.fence(context.Background())

			assert.Equal(t, []string{"zpool export -F tank"}, rec.Commands())
			assert.Equal(t, before+1, counter(fences))
			require.Len(t, *got, 1)
			st := (*got)[0]
			want := tc.grant
			if want == 0 {
				want = 9
			}
			assert.Equal(t, want, st.GrantSeq)
			assert.Equal(t, zpool.PhaseContested, st.Phase)
			assert.Equal(t, tc.fenced, st.Fenced)
			assert.Equal(t, "0x22222222", st.ForeignHostID)
			assert.Equal(t, tc.grant, w.local.Grant, "a fence keeps the grant")
			assert.Equal(t, !tc.fenced, w.local.Imported)
			if tc.fenced {
				assert.True(t, w.local.HoldUntil.IsZero())
				return
			}
			assert.Equal(t, CodeFenceFailed, st.Code)
			assert.True(t, strings.HasPrefix(st.Error, "zpool export -F failed, retrying: zpool export -F tank: exit 1: "), st.Error)
			assert.Equal(t, w.now().Add(30*time.Second), w.local.HoldUntil)
		})
	}
}

// export runs zpool export without -f: on success the pool and its grant are dropped
// and reported exported; a pool already gone counts as exported; on a failure the pool
// stays imported under its grant, the worker holds and the failure is reported.
func TestExport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stderr string
		ok     bool
	}{
		{name: "ok", ok: true},
		{name: "not imported any more", stderr: "cannot open 'tank': no such pool", ok: true},
		{name: "busy", stderr: "cannot export 'tank': pool is busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, rec, got := releaseWorker(t, Local{Imported: true, Grant: 7}, []string{"zpool", "export"}, tc.stderr)
			exports := metricExports.WithLabelValues(outcomeLabel(tc.ok))
			before := counter(exports)

			w.export(context.Background())

			assert.Equal(t, []string{"zpool export tank"}, rec.Commands())
			assert.Equal(t, before+1, counter(exports))
			require.Len(t, *got, 1)
			st := (*got)[0]
			if tc.ok {
				assert.Equal(t, zpool.Status{Pool: "tank", Node: "n1", At: st.At, Phase: zpool.PhaseExported}, st)
				assert.Equal(t, Local{Reported: zpool.PhaseExported}, w.local)
				return
			}
			assert.Equal(t, zpool.PhaseFailed, st.Phase)
			assert.Equal(t, uint64(7), st.GrantSeq)
			assert.Equal(t, CodeExportFailed, st.Code)
			assert.Equal(t, "zpool export tank: exit 1: "+tc.stderr, st.Error)
			assert.True(t, w.local.Imported)
			assert.Equal(t, uint64(7), w.local.Grant)
			assert.Equal(t, w.now().Add(30*time.Second), w.local.HoldUntil)
		})
	}
}
