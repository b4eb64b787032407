package policy

import (
	"strings"
	"testing"

	"github.com/cairn-io/cairn/commands/admission"
	"github.com/stretchr/testify/assert"
)

// The ids the policies derive are valid command ids whatever the names (LINSTOR's are up
// to 48 characters each: linstor-csi's snapshot of a volume joins two of them, more than
// a command id's 100, and every rd.snapshot-progress for it was refused, leaving the
// snapshot under way for good), deterministic, and distinct for distinct decisions.
func TestCommandIDsAreValidWhateverTheNames(t *testing.T) {
	long := strings.Repeat("r", 48)
	for _, parts := range [][]string{
		{"snapshot", "r1", "s1", "7", "take"},
		{"snapshot", long, strings.Repeat("s", 48), "123456", "taken"},
		{"clone", long, "clone-" + strings.Repeat("t", 42), strings.Repeat("t", 48)},
		{"watchdog", "n1.rack2.example.com", "42", "offline"},
		{"evacuate", long, strings.Repeat("n", 60), "3", "replace"},
	} {
		id := commandID(parts...)
		assert.True(t, admission.ValidCommandID(id), "%q", id)
		assert.Equal(t, id, commandID(parts...), "not deterministic")
		if joined := strings.Join(parts, "-"); len(joined) <= 100 {
			assert.Equal(t, joined, id, "a short id stays readable (and the same as before)")
		}
	}
	a := commandID("snapshot", strings.Repeat("r", 48), strings.Repeat("s", 48), "1", "take")
	b := commandID("snapshot", strings.Repeat("r", 48), strings.Repeat("s", 48), "1", "taken")
	assert.NotEqual(t, a, b)
}
