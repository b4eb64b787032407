package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The failure budgets are bounded without a global reset: an attacker failing from
// 10,001 other addresses does not give a limited address a fresh budget (the old map
// was cleared past 10,000 addresses); past FailureAddresses the least recently failing
// address is forgotten, one at a time.
func TestFailureBudgetsSurviveManyAddresses(t *testing.T) {
	a := &Authenticator{Log: zerolog.Nop(), FailureBurst: 3, FailureRate: 0.001}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	try := func(addr string) int {
		r := httptest.NewRequest("GET", "/cairn/v1/nodes", nil)
		r.RemoteAddr = addr + ":1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, try("192.0.2.1"))
	}
	require.Equal(t, http.StatusTooManyRequests, try("192.0.2.1"))
	for i := range 10_001 {
		try(fmt.Sprintf("2001:db8::%x", i))
	}
	assert.Equal(t, http.StatusTooManyRequests, try("192.0.2.1"), "the limited address got a fresh budget")

	small := &Authenticator{Log: zerolog.Nop(), FailureBurst: 1, FailureRate: 0.001, FailureAddresses: 2}
	small.limiter("a").Allow()
	small.limiter("b").Allow()
	small.limiter("a")         // a failed more recently than b
	small.limiter("c").Allow() // b is forgotten, a is not
	assert.Less(t, small.limiter("a").Tokens(), 1.0, "a, recently failing, was forgotten")
	assert.InDelta(t, 1.0, small.limiter("b").Tokens(), 0.01, "b, the least recent, is forgotten")
}
