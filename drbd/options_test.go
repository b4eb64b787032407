package drbd

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-io/cairn"
)

func TestResolve(t *testing.T) {
	tests := []struct {
		name   string
		levels []Options
		want   Options
	}{
		{
			name: "nothing set anywhere",
			want: Options{},
		},
		{
			name: "explicit false in the definition overrides true in the group",
			levels: []Options{
				{},                        // controller
				{AutoPromote: Ptr(true)},  // group
				{AutoPromote: Ptr(false)}, // definition
				{},                        // resource
			},
			want: Options{AutoPromote: Ptr(false)},
		},
		{
			name: "nil in a narrower level inherits",
			levels: []Options{
				{AutoPromote: Ptr(false), Protocol: Ptr("A")},
				{},
				{Protocol: nil},
			},
			want: Options{AutoPromote: Ptr(false), Protocol: Ptr("A")},
		},
		{
			name: "0 overrides a non-zero value",
			levels: []Options{
				{MaxBuffers: Ptr(8000), ALExtents: Ptr(6007)},
				{MaxBuffers: Ptr(0)},
			},
			want: Options{MaxBuffers: Ptr(0), ALExtents: Ptr(6007)},
		},
		{
			name: "explicit false overrides true for allow_two_primaries at the resource",
			levels: []Options{
				{AllowTwoPrimaries: Ptr(true)},
				{},
				{},
				{AllowTwoPrimaries: Ptr(false)},
			},
			want: Options{AllowTwoPrimaries: Ptr(false)},
		},
		{
			name: "narrowest wins for every field",
			levels: []Options{
				{Protocol: Ptr("A"), Quorum: Ptr("off"), OnNoQuorum: Ptr("suspend-io"), OnIOError: Ptr("pass_on")},
				{Protocol: Ptr("B"), Quorum: Ptr("majority")},
				{Protocol: Ptr("C"), OnIOError: Ptr("detach")},
			},
			want: Options{Protocol: Ptr("C"), Quorum: Ptr("majority"), OnNoQuorum: Ptr("suspend-io"), OnIOError: Ptr("detach")},
		},
		{
			name: "extra merged key-wise, narrower wins",
			levels: []Options{
				{Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10", "DrbdOptions/Disk/disk-flushes": "no"}},
				{Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "20"}},
				{},
				{Extra: map[string]string{"DrbdOptions/PeerDevice/c-max-rate": "4096M"}},
			},
			want: Options{Extra: map[string]string{
				"DrbdOptions/Net/ping-timeout":      "20",
				"DrbdOptions/Disk/disk-flushes":     "no",
				"DrbdOptions/PeerDevice/c-max-rate": "4096M",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(tt.levels...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Resolve = %s, want %s", jsonOf(t, got), jsonOf(t, tt.want))
			}
		})
	}
}

// The table above compares values; this pins that false and 0 survive the merge as
// set pointers (a merge written as `if *src.X { … }` would drop them).
func TestResolveKeepsExplicitFalseAndZeroAsSet(t *testing.T) {
	got := Resolve(Options{AutoPromote: Ptr(true), MaxBuffers: Ptr(100)}, Options{AutoPromote: Ptr(false), MaxBuffers: Ptr(0)})
	if got.AutoPromote == nil || *got.AutoPromote {
		t.Fatalf("auto_promote = %v, want explicit false", got.AutoPromote)
	}
	if got.MaxBuffers == nil || *got.MaxBuffers != 0 {
		t.Fatalf("max_buffers = %v, want explicit 0", got.MaxBuffers)
	}
	if b, _ := json.Marshal(got); !strings.Contains(string(b), `"auto_promote":false`) {
		t.Fatalf("JSON %s lost the explicit false", b)
	}
}

func TestResolveSharesNothingWithInputs(t *testing.T) {
	group := Options{Protocol: Ptr("C"), Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10"}}
	got := Resolve(group)
	*got.Protocol = "A"
	got.Extra["DrbdOptions/Net/ping-timeout"] = "99"
	if *group.Protocol != "C" || group.Extra["DrbdOptions/Net/ping-timeout"] != "10" {
		t.Fatalf("mutating the result changed the input: %s", jsonOf(t, group))
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		field string // "" = valid
		msg   string
	}{
		{name: "empty", opts: Options{}},
		{name: "all valid", opts: Options{
			Protocol: Ptr("C"), AllowTwoPrimaries: Ptr(false), MaxBuffers: Ptr(8000),
			AutoPromote: Ptr(true), Quorum: Ptr("majority"), OnNoQuorum: Ptr("io-error"),
			OnIOError: Ptr("detach"), ALExtents: Ptr(6007),
			Extra: map[string]string{
				"DrbdOptions/Net/ping-timeout":                   "10",
				"DrbdOptions/Resource/quorum-minimum-redundancy": "2",
				"DrbdOptions/PeerDevice/c-max-rate":              "4096M",
				"DrbdOptions/Disk/disk-flushes":                  "no",
				"DrbdOptions/Options/twopc-timeout":              "300",
			},
		}},
		{name: "protocol D", opts: Options{Protocol: Ptr("D")}, field: "options.protocol", msg: "protocol must be A, B or C"},
		{name: "protocol lower case", opts: Options{Protocol: Ptr("c")}, field: "options.protocol", msg: "protocol must be A, B or C"},
		{name: "quorum all", opts: Options{Quorum: Ptr("all")}},
		{name: "quorum off", opts: Options{Quorum: Ptr("off")}},
		{name: "quorum 2", opts: Options{Quorum: Ptr("2")}},
		{name: "quorum 0", opts: Options{Quorum: Ptr("0")}, field: "options.quorum", msg: "quorum must be off, majority, all or a number of votes 1..32"},
		{name: "quorum -1", opts: Options{Quorum: Ptr("-1")}, field: "options.quorum", msg: "number of votes"},
		{name: "quorum 33", opts: Options{Quorum: Ptr("33")}, field: "options.quorum", msg: "number of votes"},
		{name: "quorum word", opts: Options{Quorum: Ptr("most")}, field: "options.quorum", msg: `got "most"`},
		{name: "on_no_quorum suspend-io", opts: Options{OnNoQuorum: Ptr("suspend-io")}},
		{name: "on_no_quorum bad", opts: Options{OnNoQuorum: Ptr("panic")}, field: "options.on_no_quorum", msg: "on_no_quorum must be io-error or suspend-io"},
		{name: "on_io_error pass_on", opts: Options{OnIOError: Ptr("pass_on")}},
		{name: "on_io_error call-local-io-error", opts: Options{OnIOError: Ptr("call-local-io-error")}},
		{name: "on_io_error bad", opts: Options{OnIOError: Ptr("pass-on")}, field: "options.on_io_error", msg: "on_io_error must be pass_on, call-local-io-error or detach"},
		{name: "max_buffers 0", opts: Options{MaxBuffers: Ptr(0)}, field: "options.max_buffers", msg: "max_buffers must be 32..131072, got 0"},
		{name: "max_buffers too big", opts: Options{MaxBuffers: Ptr(131073)}, field: "options.max_buffers", msg: "131073"},
		{name: "al_extents too small", opts: Options{ALExtents: Ptr(66)}, field: "options.al_extents", msg: "al_extents must be 67..65534"},
		{name: "extra bad namespace", opts: Options{Extra: map[string]string{"DrbdOptions/Handlers/fence-peer": "x"}},
			field: "options.extra[DrbdOptions/Handlers/fence-peer]", msg: "must look like DrbdOptions/<Net|Disk|Options|Resource|PeerDevice>/<option>"},
		{name: "extra not DrbdOptions", opts: Options{Extra: map[string]string{"Aux/foo": "x"}},
			field: "options.extra[Aux/foo]", msg: "must look like"},
		{name: "extra upper-case option", opts: Options{Extra: map[string]string{"DrbdOptions/Net/PingTimeout": "x"}},
			field: "options.extra[DrbdOptions/Net/PingTimeout]", msg: "must look like"},
		{name: "extra names a typed option", opts: Options{Extra: map[string]string{"DrbdOptions/Net/protocol": "A"}},
			field: "options.extra[DrbdOptions/Net/protocol]", msg: "duplicates the typed option protocol"},
		{name: "extra set twice", opts: Options{Extra: map[string]string{"DrbdOptions/Options/twopc-timeout": "1", "DrbdOptions/Resource/twopc-timeout": "2"}},
			field: "options.extra[DrbdOptions/Options/twopc-timeout]", msg: "also set as DrbdOptions/Resource/twopc-timeout"},
		{name: "extra value would break the file", opts: Options{Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10; }"}},
			field: "options.extra[DrbdOptions/Net/ping-timeout]", msg: "one word"},
		{name: "extra empty value", opts: Options{Extra: map[string]string{"DrbdOptions/Net/ping-timeout": ""}},
			field: "options.extra[DrbdOptions/Net/ping-timeout]", msg: "one word"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error on %s", tt.field)
			}
			var ce *cairn.Error
			if !errors.As(err, &ce) || ce.Code != cairn.CodeInvalidArgument || ce.Field != tt.field {
				t.Fatalf("Validate = %v, want invalid_argument on field %s", err, tt.field)
			}
			if !strings.Contains(ce.Message, tt.msg) {
				t.Fatalf("message %q does not say %q", ce.Message, tt.msg)
			}
		})
	}
}

func TestValidateReportsEveryViolation(t *testing.T) {
	err := Options{Protocol: Ptr("D"), Quorum: Ptr("x"), ALExtents: Ptr(1)}.Validate()
	for _, f := range []string{"options.protocol", "options.quorum", "options.al_extents"} {
		if !strings.Contains(err.Error(), "field "+f+")") {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}

func TestOptionsJSONShape(t *testing.T) {
	// The contract with the dispatcher: field names and omitempty on every field.
	o := Options{Protocol: Ptr("C"), AllowTwoPrimaries: Ptr(false), MaxBuffers: Ptr(0), AutoPromote: Ptr(true),
		Quorum: Ptr("majority"), OnNoQuorum: Ptr("io-error"), OnIOError: Ptr("detach"), ALExtents: Ptr(67),
		Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10"}}
	want := `{"protocol":"C","allow_two_primaries":false,"max_buffers":0,"auto_promote":true,"quorum":"majority",` +
		`"on_no_quorum":"io-error","on_io_error":"detach","al_extents":67,"extra":{"DrbdOptions/Net/ping-timeout":"10"}}`
	if got := jsonOf(t, o); got != want {
		t.Fatalf("JSON\n got %s\nwant %s", got, want)
	}
	if got := jsonOf(t, Options{}); got != "{}" {
		t.Fatalf("empty options JSON = %s, want {}", got)
	}
}

func TestOptionsString(t *testing.T) {
	o := Options{Protocol: Ptr("C"), Quorum: Ptr("majority"), Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10"}}
	if got, want := o.String(), "quorum=majority protocol=C ping-timeout=10"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWithoutUnsetsSoTheFieldInheritsAgain(t *testing.T) {
	no := false
	c := "C"
	o := Options{AutoPromote: &no, Protocol: &c, Extra: map[string]string{"DrbdOptions/Net/ping-timeout": "10", "DrbdOptions/Disk/c-plan-ahead": "0"}}
	got, err := o.Without([]string{"auto_promote", "DrbdOptions/Net/ping-timeout", "quorum"})
	if err != nil {
		t.Fatal(err)
	}
	if got.AutoPromote != nil || got.Protocol == nil || *got.Protocol != "C" {
		t.Fatalf("typed fields: %+v", got)
	}
	if _, ok := got.Extra["DrbdOptions/Net/ping-timeout"]; ok || got.Extra["DrbdOptions/Disk/c-plan-ahead"] != "0" {
		t.Fatalf("extra: %v", got.Extra)
	}
	if o.AutoPromote == nil || len(o.Extra) != 2 {
		t.Fatal("Without changed its receiver")
	}
	yes := true
	if r := Resolve(Options{AutoPromote: &yes}, got); r.AutoPromote == nil || !*r.AutoPromote {
		t.Fatal("an unset field must inherit the broader level's value")
	}
	if _, err := o.Without([]string{"protocol", "bogus"}); err == nil || !strings.Contains(err.Error(), "unset[1]") {
		t.Fatalf("unknown name: %v", err)
	}
}
