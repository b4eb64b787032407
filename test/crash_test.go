package test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type digest struct {
	Seq    uint64 `json:"seq"`
	Keys   int    `json:"keys"`
	SHA256 string `json:"sha256"`
}

// Kill -9 `cairn serve` while clients stream commands. After the restart every
// acknowledged command's events are in the stream exactly once, at the sequences its
// reply named, no command appears twice, and the live views equal a rebuild from the stream.
func TestKill9DuringCommandsLosesNothingAcknowledged(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data)
	nc, err := nats.Connect(s.natsURL(), nats.MaxReconnects(0))
	require.NoError(t, err)
	send := func(verb, id, body string) (reply, error) {
		m := nats.NewMsg("cairn.cmd." + verb)
		m.Data = []byte(body)
		m.Header.Set("Cairn-Command-Id", id)
		resp, err := nc.RequestMsg(m, 2*time.Second)
		if err != nil {
			return reply{}, err
		}
		var r reply
		return r, json.Unmarshal(resp.Data, &r)
	}
	_, err = send("cluster.create", "create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`)
	require.NoError(t, err)

	var (
		mu    sync.Mutex
		acked = map[string][]uint64{} // command id -> sequences its reply named
		wg    sync.WaitGroup
		count atomic.Int64
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("g%d-n%d", g, i)
				verb, body := "node.add", fmt.Sprintf(`{"name":%q,"host":"h-%s","address":"10.0.%d.%d"}`, name, name, g, i%250+1)
				if i%3 == 2 {
					verb, body = "node.set-state", fmt.Sprintf(`{"name":"g%d-n%d","state":"offline"}`, g, i-1)
				}
				id := fmt.Sprintf("cmd-%d-%d", g, i)
				r, err := send(verb, id, body)
				if err != nil {
					return // the server is gone
				}
				if r.OK {
					var seqs []uint64
					for _, e := range r.Events {
						seqs = append(seqs, e.Seq)
					}
					mu.Lock()
					acked[id] = seqs
					mu.Unlock()
					count.Add(1)
				}
			}
		}()
	}
	for count.Load() < 300 {
		time.Sleep(10 * time.Millisecond)
	}
	s.kill9()
	wg.Wait()
	nc.Close()
	require.GreaterOrEqual(t, len(acked), 300)

	s.start()
	stored := storedCommands(t, "--nats", s.natsURL())
	for id, seqs := range acked {
		assert.Equal(t, seqs, stored[id], "acknowledged command %s", id)
	}
	for id, seqs := range stored {
		assert.Len(t, seqs, 1, "command %s stored more than once", id)
	}
	t.Logf("acknowledged %d commands, stored %d, before kill -9", len(acked), len(stored)-1)

	status, body := httpJSON(t, "GET", s.url("/cairn/v1/views/digest"), "")
	require.Equal(t, 200, status)
	live := decode[digest](t, body)
	s.stop()

	out, code := run(t, "views", "digest", "--data", data)
	require.Equal(t, 0, code)
	assert.Equal(t, live, decode[digest](t, out), "stored views after shutdown")
	out, code = run(t, "views", "rebuild", "--data", data)
	require.Equal(t, 0, code)
	assert.Equal(t, live, decode[digest](t, out), "rebuild from sequence 1")
	out, code = run(t, "views", "digest", "--data", data)
	require.Equal(t, 0, code)
	assert.Equal(t, live, decode[digest](t, out), "rebuilt views in place")

	out, code = run(t, "views", "at", "--seq", "1", "--data", data, "--dump")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"v/cluster"`)
	assert.NotContains(t, out, `"v/node/`)
}

func TestOfflineToolsRefuseARunningServe(t *testing.T) {
	data := t.TempDir()
	startServe(t, data)
	_, code := run(t, "views", "digest", "--data", data)
	assert.Equal(t, 2, code)
	_, code = run(t, "views", "rebuild", "--data", data)
	assert.Equal(t, 2, code)
}

// TestOfflineToolsOnViewsOfEveryKind (issue 11): `views at --dump` prints every view,
// the binary integers of allocators (v/port-high) included, where it failed; `views
// digest` on a directory that is not a data directory refuses and creates nothing
// (it printed an empty digest and left a views store there).
func TestOfflineToolsOnViewsOfEveryKind(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"node.add", `{"name":"n2","host":"h2","address":"10.0.0.2"}`},
		{"rg.create", `{"name":"rg","place_count":2}`},
		{"rd.create", `{"name":"r1","resource_group":"rg"}`},
	} {
		out, code := run(t, "cmd", c[0], c[1], "--nats", s.natsURL())
		require.Equal(t, 0, code, "%s: %s", c[0], out)
	}
	s.stop()
	out, code := run(t, "views", "at", "--seq", "5", "--data", data, "--dump")
	require.Equal(t, 0, code, out)
	var dump struct {
		Views map[string]any `json:"views"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &dump))
	high, ok := dump.Views["v/port-high"].(float64)
	require.True(t, ok, "v/port-high: %v", dump.Views["v/port-high"])
	require.Equal(t, 7001.0, high, "the next port after r1's 7000")
	require.Equal(t, "r1", dump.Views["v/port/07000"])

	missing := filepath.Join(t.TempDir(), "dtaa")
	_, stderr, code := runAll(t, "views", "digest", "--data", missing)
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "holds no views store")
	_, err := os.Stat(missing)
	require.True(t, os.IsNotExist(err), "views digest created %s", missing)
}

// TestServeOnABusyNATSPort (issue 11): the embedded server's port taken refuses at once,
// naming the address (serve hung 30 s and then did not say which port).
func TestServeOnABusyNATSPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	start := time.Now()
	_, stderr, code := runAll(t, "serve", "--data", t.TempDir(), "--nats-listen", l.Addr().String(), "--http", "-")
	require.Equal(t, 2, code)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, stderr, "cannot listen on "+l.Addr().String())
}
