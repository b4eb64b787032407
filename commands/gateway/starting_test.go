package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// While a serve catches up, probes answer (readyz 503 with the progress), everything
// else is 503; once Ready, the real handler answers everything.
func TestStartingGatesUntilReady(t *testing.T) {
	s := &Starting{Progress: func() error { return errors.New("views at seq 10, catching up to 99") }}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	code, _ := get("/healthz")
	assert.Equal(t, 200, code)
	code, body := get("/readyz")
	assert.Equal(t, 503, code)
	assert.Contains(t, body, "catching up to 99")
	code, body = get("/cairn/v1/nodes")
	assert.Equal(t, 503, code)
	assert.Contains(t, body, `"unavailable"`)
	code, body = get("/v1/nodes")
	assert.Equal(t, 503, code)
	assert.Contains(t, body, "ret_code")
	code, _ = get("/metrics")
	assert.Equal(t, 200, code)

	s.Ready(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	code, _ = get("/readyz")
	assert.Equal(t, http.StatusTeapot, code)
}
