package policy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	"github.com/cairn-io/cairn/commands/policy"
	"github.com/cairn-io/cairn/projections"
)

// A shipped backup whose upload completed: the Shipper asks its target, asks again
// while the target cannot be reached, records the target's answer once, and never
// asks again after that. The target's side is the Restore function (the HTTP call in
// serve), answering unreachable twice and then yes.
func TestShipperAsksUntilTheTargetAnswers(t *testing.T) {
	s := servertest.Start(t)
	sha := strings.Repeat("ab", 32)
	for _, c := range [][2]string{
		{"cluster.create", `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1}`},
		{"node.add", `{"name":"n1","host":"h1","address":"10.0.0.1"}`},
		{"sp.create", `{"node":"n1","name":"thin","provider":"file_thin","pool":"/var/lib/cairn/thin","capacity_kib":1048576}`},
		{"rd.create", `{"name":"r1"}`},
		{"vd.create", `{"resource":"r1","volume":0,"size_kib":4096}`},
		{"replica.add", `{"resource":"r1","node":"n1","storage_pool":"thin"}`},
		{"rd.snapshot", `{"resource":"r1","name":"s1"}`},
		{"rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"take"}`},
		{"rd.snapshot-progress", `{"resource":"r1","name":"s1","phase":"taken"}`},
		{"remote.create", `{"name":"b","kind":"cairn","endpoint":"http://127.0.0.1:1"}`},
		{"backup.ship", `{"resource":"r1","remote":"b","snapshot":"s1","target":"r1copy","target_nodes":["m1"]}`},
	} {
		r := servertest.Submit(s, c[0], c[1])
		require.True(t, r.OK, "%s: %+v", c[0], r.Error)
	}
	var mu sync.Mutex
	var asked []policy.ShipRestore
	restore := func(_ context.Context, remote string, r policy.ShipRestore) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, "b", remote)
		asked = append(asked, r)
		if len(asked) <= 2 {
			return false, errors.New("connection refused")
		}
		return true, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go policy.Shipper{Adm: s.Admission, DB: s.DB, Restore: restore, Every: 20 * time.Millisecond}.Run(ctx)
	ship := func() projections.Ship {
		v, err := s.DB.Read()
		require.NoError(t, err)
		defer v.Close()
		rd, _, _ := v.ResourceDefinition("r1")
		b, ok := rd.Backup("b", "s1")
		require.True(t, ok)
		return *b.Ship
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	assert.Empty(t, asked, "the upload is not complete: nobody is asked")
	mu.Unlock()
	assert.Equal(t, projections.ShipWaiting, ship().Phase)

	r := servertest.Submit(s, "backup.finish", `{"resource":"r1","id":"s1","ok":true,"manifest_sha256":"`+sha+`"}`)
	require.True(t, r.OK, "%+v", r.Error)
	require.Eventually(t, func() bool { return ship().Phase == projections.ShipDone }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // ten more looks
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, asked, 3, "asked until it answered, then never again")
	assert.Equal(t, policy.ShipRestore{Resource: "r1", ID: "s1", StartedSeq: asked[0].StartedSeq, Target: "r1copy", Nodes: []string{"m1"}}, asked[2])
	assert.NotZero(t, asked[0].StartedSeq)
}
