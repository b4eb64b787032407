package testtools

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestS3StartsOnOtherPortsWhenOneIsTaken takes the filer's port after it was picked and
// before weed binds it, as another process's connection can: weed exits naming the
// address, and the server comes up on other ports (the CI failure of stop 36).
func TestS3StartsOnOtherPortsWhenOneIsTaken(t *testing.T) {
	s := newS3(t)
	var filerPort string
	for _, a := range s.args {
		if v, ok := strings.CutPrefix(a, "-filer.port="); ok {
			filerPort = v
		}
	}
	require.NotEmpty(t, filerPort)
	l, err := net.Listen("tcp", "127.0.0.1:"+filerPort)
	require.NoError(t, err)
	defer l.Close()
	firstEndpoint := s.Endpoint

	s.startOnFreePorts()

	assert.NotEqual(t, firstEndpoint, s.Endpoint, "started again on other ports")
	assert.NotContains(t, s.args, "-filer.port="+filerPort)
	_, err = s.Client().ListBuckets(t.Context())
	require.NoError(t, err, "S3 answers on %s", s.Endpoint)
}

// TestS3PortsAreBelowTheEphemeralRange: outgoing connections take ephemeral ports
// (32768-60999), so weed's ports are picked below them.
func TestS3PortsAreBelowTheEphemeralRange(t *testing.T) {
	s := &S3Server{tb: t, dir: t.TempDir()}
	for range 20 {
		s.pickPorts()
		for _, a := range s.args {
			if i := strings.Index(a, ".port"); i > 0 && strings.Contains(a, "=") && !strings.HasSuffix(a, "=0") {
				v, err := strconv.Atoi(a[strings.Index(a, "=")+1:])
				require.NoError(t, err, a)
				assert.Less(t, v, 32768, a)
				assert.GreaterOrEqual(t, v, 20000, a)
			}
		}
	}
}
