package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairn-io/cairn/cmd/cairn/server"
	"github.com/cairn-io/cairn/cmd/cairn/server/servertest"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// TestGatewayRefusesABodyOverTheNATSMaxPayload (issue 11): on a NATS system whose
// max_payload is smaller than the gateway's 1 MiB read limit, a bigger command body is
// payload_too_large (413), checked before the publish; it was unavailable (the publish
// failed).
func TestGatewayRefusesABodyOverTheNATSMaxPayload(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: 200_000, NoSigs: true})
	require.NoError(t, err)
	go ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	t.Cleanup(ns.Shutdown)
	s := servertest.StartConfig(t, server.Config{DataDir: t.TempDir(), NATSURL: ns.ClientURL(), HTTPListen: "127.0.0.1:0", Log: zerolog.Nop()})
	body := `{"name":"c1","failure_domains":false,"data_chunks":1,"parity_chunks":1,"pad":"` + strings.Repeat("x", 300_000) + `"}`
	resp, err := http.Post("http://"+s.HTTPAddr+"/cairn/v1/commands/cluster.create", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	b := string(raw)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, b)
	require.Contains(t, b, `"code":"payload_too_large"`)
	require.Contains(t, b, "over what the NATS server carries (200000 bytes")
}
