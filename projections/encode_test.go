package projections

import (
	"testing"

	json "github.com/goccy/go-json"
	"github.com/stretchr/testify/assert"
)

func TestEncodeEventRefEqualsTheEncoder(t *testing.T) {
	for _, s := range []string{"", "cairn.ev.node.n1", `quo"te`, `back\slash`, "tab\tnew\nline", "<&>", "ünï", "\x7f", "\x00"} {
		e := EventRef{Seq: 12345678901234, Type: "node.added", Subject: s}
		want, err := json.Marshal(e)
		assert.NoError(t, err)
		assert.Equal(t, string(want), string(encodeEventRef(e)), "%q", s)
		var back EventRef
		assert.NoError(t, json.Unmarshal(encodeEventRef(e), &back))
		assert.Equal(t, e, back)
	}
	assert.Equal(t, "v/cmd/abc/00000000000000000042", commandEventKey("abc", 42))
}
