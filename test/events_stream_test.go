package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID    uint64
	Event string
	Data  map[string]any
}

// openStream opens GET path on s as an event stream; events arrive on the channel until
// the returned cancel is called.
func openStream(t *testing.T, s *serve, path, lastEventID string) (<-chan sseEvent, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url(path), nil)
	require.NoError(t, err)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan sseEvent, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data)
			}
		}
	}()
	t.Cleanup(cancel)
	return out, cancel
}

// next reads n events from ch within 10 s.
func nextEvents(t *testing.T, ch <-chan sseEvent, n int) []sseEvent {
	t.Helper()
	var got []sseEvent
	for len(got) < n {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the stream ended after %d of %d events", len(got), n)
			got = append(got, ev)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d events came", len(got), n)
		}
	}
	return got
}

// GET /cairn/v1/events/stream (issue 30): the events as Server-Sent Events with the
// stream sequence as id, filtered by type and node; a client that reconnects with
// Last-Event-ID gets exactly what it missed while away, in order, nothing twice.
func TestEventStreamResumesWithoutGapOrDuplicate(t *testing.T) {
	s := startServe(t, t.TempDir())
	_, code := run(t, "cmd", "cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`, "--nats", s.natsURL())
	require.Equal(t, 0, code)
	add := func(i int) {
		out, code := run(t, "cmd", "node.add", fmt.Sprintf(`{"name":"n%d","host":"h%d","address":"10.0.0.%d"}`, i, i, i), "--nats", s.natsURL())
		require.Equal(t, 0, code, out)
	}
	stream, stop := openStream(t, s, "/cairn/v1/events/stream?type=node.added", "")
	add(1)
	add(2)
	got := nextEvents(t, stream, 2)
	assert.Equal(t, "node.added", got[0].Event)
	assert.Equal(t, "n1", got[0].Data["payload"].(map[string]any)["name"])
	assert.Equal(t, "n2", got[1].Data["payload"].(map[string]any)["name"])
	assert.Less(t, got[0].ID, got[1].ID)
	assert.EqualValues(t, got[1].ID, got[1].Data["seq"], "the id is the stream sequence")
	stop()

	for i := 3; i <= 6; i++ { // while the client is away
		add(i)
	}
	resumed, _ := openStream(t, s, "/cairn/v1/events/stream?type=node.added", strconv.FormatUint(got[1].ID, 10))
	add(7)
	rest := nextEvents(t, resumed, 5)
	var names []string
	for i, ev := range rest {
		names = append(names, ev.Data["payload"].(map[string]any)["name"].(string))
		if i > 0 {
			assert.Greater(t, ev.ID, rest[i-1].ID)
		}
	}
	assert.Equal(t, []string{"n3", "n4", "n5", "n6", "n7"}, names, "resumed with a gap or a duplicate")

	// One node's events only.
	byNode, _ := openStream(t, s, "/cairn/v1/events/stream?node=n2&from_seq=1", "")
	only := nextEvents(t, byNode, 1)
	assert.Equal(t, "cairn.ev.node.n2", only[0].Data["subject"])
	code, body := httpJSON(t, "GET", s.url("/cairn/v1/events/stream?node=n2&resource=r1"), "")
	assert.Equal(t, 400, code, body)
	assert.Contains(t, body, "one of subject, node and resource")
}

// GET /cairn/v1/status/stream: the agents' reports live, filtered by kind and id (here
// the DRBD reports of r1 from its replicas, with their disk states), resumable after
// Last-Event-ID like the event stream.
func TestStatusStreamShowsReplicaReports(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	c.waitUpToDate("r1", 2, 60*time.Second)
	stream, stop := openStream(t, c.s, "/cairn/v1/status/stream?kind=drbd&id=r1", "")
	seen := map[string]bool{}
	var last uint64
	for len(seen) < 3 {
		ev := nextEvents(t, stream, 1)[0]
		require.Equal(t, "drbd", ev.Event)
		assert.Equal(t, "r1", ev.Data["id"])
		seen[ev.Data["node"].(string)] = true
		last = ev.ID
	}
	stop()
	// A report after the resume point comes, none before it.
	resumed, _ := openStream(t, c.s, "/cairn/v1/status/stream?kind=drbd&id=r1", strconv.FormatUint(last, 10))
	c.cmd("vd.resize", `{"resource":"r1","volume":0,"size_kib":8192}`)
	ev := nextEvents(t, resumed, 1)[0]
	assert.Greater(t, ev.ID, last)
	report := ev.Data["report"].(map[string]any)
	assert.Equal(t, "r1", report["resource"])
}

// LINSTOR's GET /v1/events/drbd/promotion, requested as golinstor does it (client/sse.go
// DRBDPromotion; client/client.go doEvent: Accept: text/event-stream): every replica's
// may_promote first, then a change when one becomes Primary (the sim's promote: DRBD's
// may_promote is no on the Primary itself).
func TestLinstorPromotionEvents(t *testing.T) {
	c := startSimCluster(t, 3)
	c.cmd("rg.create", `{"name":"rg2","place_count":2,"storage_pool":"thin"}`)
	c.cmd("rg.spawn", `{"resource_group":"rg2","name":"r1","size_kib":4096}`)
	rv := c.waitUpToDate("r1", 2, 60*time.Second)
	disks := diskfulNodes(rv)
	stream, _ := openStream(t, c.s, "/v1/events/drbd/promotion", "")
	may := map[string]bool{}
	for len(may) < 3 {
		ev := nextEvents(t, stream, 1)[0]
		require.Equal(t, "may-promote-change", ev.Event)
		require.Equal(t, "r1", ev.Data["resource_name"])
		may[ev.Data["node_name"].(string)] = ev.Data["may_promote"] == true
	}
	assert.True(t, may[disks[1]], "an UpToDate replica may promote: %v", may)
	out, code := run(t, "sim", "promote", "--root", c.root(disks[0]), "r1")
	require.Equal(t, 0, code, out)
	for {
		ev := nextEvents(t, stream, 1)[0]
		if ev.Data["node_name"] == disks[0] {
			assert.NotEqual(t, true, ev.Data["may_promote"], "%s is Primary: it may not promote again", disks[0])
			break
		}
	}
}
