package remotes

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
)

// TestScheduleModifyChangesWhatItNames: the fields given change and the rest stay; ""
// removes the incremental cron; going back to skip drops the retries; the same schedule
// is a no-op with a warning; a bad cron or retries without retry are refused naming the
// field.
func TestScheduleModifyChangesWhatItNames(t *testing.T) {
	cur := events.ScheduleCreated{Name: "s", FullCron: "0 2 * * *", IncCron: "0 * * * *", KeepLocal: 2, KeepRemote: 1, OnFailure: "retry", MaxRetries: 3}
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }

	ev, _, err := DecideScheduleModify(cur, ScheduleModify{Name: "s", KeepLocal: num(5), IncCron: str("")})
	require.NoError(t, err)
	assert.Equal(t, events.ScheduleModified{Name: "s", FullCron: "0 2 * * *", KeepLocal: 5, KeepRemote: 1, OnFailure: "retry", MaxRetries: 3}, *ev)

	ev, _, err = DecideScheduleModify(cur, ScheduleModify{Name: "s", OnFailure: str("skip")})
	require.NoError(t, err)
	assert.Equal(t, "skip", ev.OnFailure)
	assert.Zero(t, ev.MaxRetries)

	ev, warnings, err := DecideScheduleModify(cur, ScheduleModify{Name: "s", KeepLocal: num(2)})
	require.NoError(t, err)
	assert.Nil(t, ev)
	assert.NotEmpty(t, warnings)

	_, _, err = DecideScheduleModify(cur, ScheduleModify{Name: "s", FullCron: str("61 * * * *")})
	assert.Equal(t, "full_cron", cairn.AsError(err).Field)
	_, _, err = DecideScheduleModify(cur, ScheduleModify{Name: "s", OnFailure: str("skip"), MaxRetries: num(2)})
	assert.Equal(t, "max_retries", cairn.AsError(err).Field)
}
