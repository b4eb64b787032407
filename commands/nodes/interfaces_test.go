package nodes

import (
	"testing"

	"github.com/cairn-io/cairn"
	"github.com/cairn-io/cairn/events"
	"github.com/cairn-io/cairn/projections"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr(s string) *string { return &s }

func TestInterfacesFollowPiraeusUpgradeFromDefaultToDefaultIPv4(t *testing.T) {
	// Operator v1 named the interface "default"; v2 sets PrefNic=default-ipv4, creates
	// default-ipv4 and deletes default (piraeus-operator pkg/linstorhelper/client.go).
	spec := projections.NodeSpec{Name: "n1", Address: "10.0.0.1"}

	ev, addr, err := decideInterfaces(spec, interfacesPatch{Preferred: ptr("default-ipv4")})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", addr, "the preferred interface does not exist yet: the address stays")
	assert.Equal(t, &events.NodeInterfacesChanged{Name: "n1", Interfaces: map[string]string{"default": "10.0.0.1"}, Preferred: "default-ipv4"}, ev)
	spec.Interfaces, spec.PreferredInterface = ev.Interfaces, ev.Preferred

	ev, addr, err = decideInterfaces(spec, interfacesPatch{Set: map[string]string{"default-ipv4": "10.0.1.1"}})
	require.NoError(t, err)
	assert.Equal(t, "10.0.1.1", addr, "the preferred interface now exists: replication moves to it")
	spec.Interfaces, spec.Address = ev.Interfaces, addr

	ev, addr, err = decideInterfaces(spec, interfacesPatch{Unset: []string{"default"}})
	require.NoError(t, err)
	assert.Equal(t, "10.0.1.1", addr)
	assert.Equal(t, map[string]string{"default-ipv4": "10.0.1.1"}, ev.Interfaces)
}

func TestInterfaceCarryingTheAddressCannotBeRemovedAlone(t *testing.T) {
	spec := projections.NodeSpec{Name: "n1", Address: "10.0.0.1", Interfaces: map[string]string{"default": "10.0.0.1", "data": "10.9.0.1"}}
	_, _, err := decideInterfaces(spec, interfacesPatch{Unset: []string{"default"}})
	assert.Equal(t, cairn.CodePreconditionFailed, cairn.ErrorCode(err), "%v", err)

	_, _, err = decideInterfaces(spec, interfacesPatch{Unset: []string{"default", "data"}})
	assert.Equal(t, "unset_interfaces", cairn.AsError(err).Field, "no interface left: %v", err)

	_, _, err = decideInterfaces(spec, interfacesPatch{Unset: []string{"ghost"}})
	assert.Equal(t, cairn.CodeNotFound, cairn.ErrorCode(err))

	_, _, err = decideInterfaces(spec, interfacesPatch{Set: map[string]string{"data": "10.9.0.2"}, Unset: []string{"data"}})
	assert.Equal(t, "unset_interfaces", cairn.AsError(err).Field)

	// Preferring the other one first makes the removal possible.
	ev, addr, err := decideInterfaces(spec, interfacesPatch{Preferred: ptr("data"), Unset: []string{"default"}})
	require.NoError(t, err)
	assert.Equal(t, "10.9.0.1", addr)
	assert.Equal(t, map[string]string{"data": "10.9.0.1"}, ev.Interfaces)
}

func TestReaddressingTheCarrierMovesReplicationAndAnAddressMovesTheCarrier(t *testing.T) {
	spec := projections.NodeSpec{Name: "n1", Address: "10.0.0.1", Interfaces: map[string]string{"default": "10.0.0.1", "data": "10.9.0.1"}}
	ev, addr, err := decideInterfaces(spec, interfacesPatch{Set: map[string]string{"default": "10.0.0.7"}})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7", addr)
	assert.Equal(t, "10.0.0.7", ev.Interfaces["default"])

	ev, addr, err = decideInterfaces(spec, interfacesPatch{Address: "10.0.0.8"})
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.8", addr)
	assert.Equal(t, map[string]string{"default": "10.0.0.8", "data": "10.9.0.1"}, ev.Interfaces)

	spec.PreferredInterface = "data"
	_, _, err = decideInterfaces(spec, interfacesPatch{Address: "10.0.0.8"})
	assert.Equal(t, "address", cairn.AsError(err).Field, "an address other than the preferred interface's: %v", err)
}

func TestAnAddressChangeAloneNamesNoInterfaces(t *testing.T) {
	ev, addr, err := decideInterfaces(projections.NodeSpec{Name: "n1", Address: "10.0.0.1"}, interfacesPatch{Address: "10.0.0.2"})
	require.NoError(t, err)
	assert.Nil(t, ev)
	assert.Equal(t, "10.0.0.2", addr)

	ev, _, err = decideInterfaces(projections.NodeSpec{Name: "n1", Address: "10.0.0.1", Interfaces: map[string]string{"a": "10.0.0.1"}},
		interfacesPatch{Set: map[string]string{"a": "10.0.0.1"}})
	require.NoError(t, err)
	assert.Nil(t, ev, "nothing changed")
}

func TestNodeAddInterfacesMustHoldTheAddress(t *testing.T) {
	_, err := decideAddInterfaces(NodeAdd{Name: "n1", Address: "10.0.0.1", Interfaces: map[string]string{"default-ipv4": "10.0.0.2"}})
	assert.Equal(t, "address", cairn.AsError(err).Field)
	_, err = decideAddInterfaces(NodeAdd{Name: "n1", Address: "10.0.0.1", PreferredInterface: "b", Interfaces: map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}})
	assert.Equal(t, "address", cairn.AsError(err).Field)
	ev, err := decideAddInterfaces(NodeAdd{Name: "n1", Address: "10.0.0.2", PreferredInterface: "b", Interfaces: map[string]string{"a": "10.0.0.1", "b": "10.0.0.2"}})
	require.NoError(t, err)
	assert.Equal(t, "b", ev.Preferred)
	ev, err = decideAddInterfaces(NodeAdd{Name: "n1", Address: "10.0.0.2"})
	require.NoError(t, err)
	assert.Nil(t, ev)
}

func TestReplicationInterface(t *testing.T) {
	spec := projections.NodeSpec{Address: "10.0.0.1"}
	assert.Equal(t, DefaultInterface, ReplicationInterface(spec), "no named interfaces: default")
	spec.Interfaces = map[string]string{"b": "10.0.0.1", "a": "10.0.0.1", "c": "10.9.0.1"}
	assert.Equal(t, "a", ReplicationInterface(spec), "the first by name at the address")
	spec.PreferredInterface = "b"
	assert.Equal(t, "b", ReplicationInterface(spec), "the preferred one at the address")
	spec.PreferredInterface = "c"
	assert.Equal(t, "a", ReplicationInterface(spec), "a preferred one elsewhere does not carry it")
}
