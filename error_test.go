package cairn_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFieldErrorFindsTheFieldAmongJoinedErrors(t *testing.T) {
	port := cairn.InvalidField("port", "port must be 1..65535")
	name := cairn.InvalidField("resource", "resource name %q", "r 1")
	joined := errors.Join(port, fmt.Errorf("rendering: %w", name))
	require.Same(t, port, cairn.FieldError(joined, "port"))
	require.Same(t, name, cairn.FieldError(joined, "resource"), "a wrapped error inside the join")
	assert.Nil(t, cairn.FieldError(joined, "volumes"))
	assert.Nil(t, cairn.FieldError(cairn.Errorf(cairn.CodeNotFound, "no node"), ""), "another code")
	assert.Nil(t, cairn.FieldError(nil, "port"))
}
