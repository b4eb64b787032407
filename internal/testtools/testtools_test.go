package testtools

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fakeTB records what Path, Need and Have do to a test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	logs            int
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Skipf(string, ...any)  { f.skipped = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
func (f *fakeTB) Logf(string, ...any)   { f.logs++ }

func TestAMissingToolSkipsOrFailsWhenRequired(t *testing.T) {
	const ghost = "cairn-no-such-tool"
	for _, required := range []bool{false, true} {
		if required {
			t.Setenv(RequireEnv, "1")
		} else {
			t.Setenv(RequireEnv, "")
		}
		f := &fakeTB{}
		Need(f, ghost)
		assert.Equal(t, !required, f.skipped, "required=%v", required)
		assert.Equal(t, required, f.failed, "required=%v", required)

		f = &fakeTB{}
		assert.False(t, Have(f, ghost))
		assert.Equal(t, required, f.failed, "required=%v", required)
		assert.False(t, f.skipped, "Have never skips")
	}
}

func TestAPresentToolIsFound(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	f := &fakeTB{}
	p := Path(f, "sh")
	assert.NotEmpty(t, p)
	assert.True(t, Have(f, "sh"))
	assert.False(t, f.skipped || f.failed)
}
