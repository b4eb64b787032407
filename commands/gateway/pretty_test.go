package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONIsCompactForProgramsAndIndentedForPeople: programs get compact JSON; curl,
// wget and ?pretty get it indented; ?pretty=false wins over curl; the writer still
// flushes (the event streams).
func TestJSONIsCompactForProgramsAndIndentedForPeople(t *testing.T) {
	flushed := false
	h := withPretty(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "n": 1})
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
			flushed = true
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(query, ua string) string {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+"/x"+query, nil)
		require.NoError(t, err)
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, `{"n":1,"ok":true}`+"\n", get("", ""), "Go's client")
	assert.Equal(t, `{"n":1,"ok":true}`+"\n", get("", "Mozilla/5.0"), "a browser's fetch")
	indented := "{\n  \"n\": 1,\n  \"ok\": true\n}\n"
	assert.Equal(t, indented, get("", "curl/8.5.0"))
	assert.Equal(t, indented, get("", "Wget/1.21"))
	assert.Equal(t, indented, get("?pretty", ""))
	assert.Equal(t, indented, get("?pretty=1", ""))
	assert.Equal(t, `{"n":1,"ok":true}`+"\n", get("?pretty=false", "curl/8.5.0"))
	assert.True(t, flushed, "the wrapped writer no longer flushes")
	assert.False(t, strings.Contains(get("?pretty=0", ""), "\n  "))
}
