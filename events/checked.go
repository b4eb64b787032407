package events

// CommandChecked ends the append of a command that read more subjects than it writes
// (on <prefix>.ev.command.checked). Every message of an atomic batch carries one check
// of the command's read set; this event carries the checks the command's own events
// could not, and records the whole read set for auditors: the subjects the command was
// decided on and the last sequence it saw on each. The views fold nothing from it.
type CommandChecked struct {
	Verb   string      `json:"verb"`
	Checks []ReadCheck `json:"checks"`
}

// ReadCheck is one subject (or filter) a command read and the last sequence it saw there.
type ReadCheck struct {
	Subject string `json:"subject"`
	Seq     uint64 `json:"seq"`
}

func (*CommandChecked) EventType() string { return "command.checked" }

// CheckedSubject is the subject of command.checked events.
func (n Names) CheckedSubject() string { return n.Event("command", "checked") }

func init() {
	Register(Type{Name: "command.checked", Version: 1, New: func() Payload { return new(CommandChecked) }})
}
