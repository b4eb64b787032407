package testtools

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// rapidChecks stands in for the flag pgregory.net/rapid registers.
var rapidChecks = flag.Int("rapid.checks", 100, "rapid: number of checks")

func TestRapidChecksSetsTheCountForOneTest(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		RapidChecks(t, 1000)
		require.Equal(t, 1000, *rapidChecks)
	})
	require.Equal(t, 100, *rapidChecks, "restored after the test")
	require.NoError(t, flag.Set("rapid.checks", "7"))
	defer flag.Set("rapid.checks", "100") //nolint:errcheck
	t.Run("given on the command line", func(t *testing.T) {
		RapidChecks(t, 1000)
		require.Equal(t, 7, *rapidChecks, "an explicit -rapid.checks wins")
	})
}
