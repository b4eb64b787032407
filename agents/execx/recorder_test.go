package execx

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRecorderScript(t *testing.T) {
	var r Recorder
	r.On("lvs").Stdout("").Times(1)
	r.On("lvs").Stdout("vg0,r1_00000,1048576\n")
	r.On("lvcreate", "-L").Fail(5, "  Volume group \"vg9\" not found  \n")
	r.On("drbdsetup").Err(exec.ErrNotFound)
	r.On("zfs", "create").Err(ErrTimeout)

	ctx := context.Background()
	tests := []struct {
		argv     []string
		stdout   string
		exitCode int
		message  string
		cause    error
	}{
		{argv: []string{"lvs", "vg0"}, stdout: ""},
		{argv: []string{"lvs", "vg0"}, stdout: "vg0,r1_00000,1048576\n"},
		{argv: []string{"lvs", "vg0"}, stdout: "vg0,r1_00000,1048576\n"},
		{argv: []string{"lvcreate", "-L", "4k", "vg9"}, exitCode: 5, message: `lvcreate -L 4k vg9: exit 5: Volume group "vg9" not found`},
		{argv: []string{"lvcreate", "-V", "4k"}, stdout: ""}, // prefix is element-wise: no match, default success
		{argv: []string{"drbdsetup", "status"}, exitCode: -1, cause: exec.ErrNotFound},
		{argv: []string{"zfs", "create", "-V", "1K", "tank/x"}, exitCode: -1, cause: ErrTimeout},
	}
	for _, tt := range tests {
		out, err := r.Run(ctx, tt.argv, Options{Env: []string{"A=1"}})
		require.Equal(t, tt.stdout, string(out), Format(tt.argv))
		require.Equal(t, tt.exitCode, ExitCode(err), Format(tt.argv))
		if tt.message != "" {
			require.EqualError(t, err, tt.message)
		}
		if tt.cause != nil {
			require.ErrorIs(t, err, tt.cause)
		}
	}
	require.Equal(t, []string{"lvs vg0", "lvs vg0", "lvs vg0", "lvcreate -L 4k vg9", "lvcreate -V 4k",
		"drbdsetup status", "zfs create -V 1K tank/x"}, r.Commands())
	require.Equal(t, []string{"A=1"}, r.Calls()[0].Options.Env)
	r.Reset()
	require.Empty(t, r.Calls())
}

func TestRecorderStrict(t *testing.T) {
	r := Recorder{Strict: true}
	r.On("true")
	_, err := r.Run(context.Background(), []string{"true"}, Options{})
	require.NoError(t, err)
	_, err = r.Run(context.Background(), []string{"lvremove", "-f", "vg/x"}, Options{})
	require.EqualError(t, err, "lvremove -f vg/x: exit 127: execx.Recorder: no scripted response")
}

func TestRecorderCanceled(t *testing.T) {
	var r Recorder
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Run(ctx, []string{"true"}, Options{})
	require.True(t, errors.Is(err, context.Canceled))
	require.Len(t, r.Calls(), 1)
	_, err = r.Run(context.Background(), nil, Options{})
	require.Error(t, err)
}
