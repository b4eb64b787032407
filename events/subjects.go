package events

import "strings"

// DefaultPrefix is the subject prefix of a default deployment.
const DefaultPrefix = "cairn"

// RevisionHeader carries the revision of a per-node desired-state message: the views'
// sequence (the last event applied) its body was computed from. Every serve computes
// the same body at the same sequence, so a higher revision is never older state; an
// agent keeps the highest revision per subject and drops anything below it.
const RevisionHeader = "Cairn-Revision"

// EpochHeader names the event stream a revision counts in: the creation time of the
// events stream in Unix nanoseconds. A control plane set up anew (a new stream) starts
// its revisions from 1 again; an agent that sees another epoch forgets its marks.
const EpochHeader = "Cairn-Epoch"

// LeaseHeader carries the fencing token of the side-effect lease the publishing serve
// held (cmd/cairn/server/lease): the lease entry's revision when that serve took it.
const LeaseHeader = "Cairn-Lease"

// Names derives every subject and stream name of a deployment from its prefix, so that
// one NATS system can hold several deployments side by side.
type Names struct {
	Prefix string
}

// NewNames returns the names for prefix ("" means DefaultPrefix).
func NewNames(prefix string) Names {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Names{Prefix: prefix}
}

// EventsStream is the stream of events, the source of truth (CAIRN_EVENTS by default).
func (n Names) EventsStream() string { return strings.ToUpper(n.Prefix) + "_EVENTS" }

// NodesStream holds per-node desired state, one message per subject (CAIRN_NODES).
func (n Names) NodesStream() string { return strings.ToUpper(n.Prefix) + "_NODES" }

// StatusStream holds observed state reported by agents, a few per subject (CAIRN_STATUS).
func (n Names) StatusStream() string { return strings.ToUpper(n.Prefix) + "_STATUS" }

// ReceivedBucket is the object store of the backups other clusters shipped to this one
// (CAIRN_RECEIVED; storage/backup/objstore).
func (n Names) ReceivedBucket() string { return strings.ToUpper(n.Prefix) + "_RECEIVED" }

// AgentReceived is the subject node's agent reads pieces of received backups on (a
// serve answers from the ReceivedBucket).
func (n Names) AgentReceived(node string) string {
	return n.Prefix + ".agent." + Token(node) + ".received"
}

// AgentReceivedFilter covers every node's reads of received backups.
func (n Names) AgentReceivedFilter() string { return n.Prefix + ".agent.*.received" }

// ParseAgentReceived returns the node of a received-backup read subject (ok false for
// any other subject).
func (n Names) ParseAgentReceived(subject string) (node string, ok bool) {
	return n.parseAgent(subject, ".received")
}

// LeaseBucket is the key-value bucket of the side-effect lease (cmd/cairn/server/lease).
func (n Names) LeaseBucket() string { return strings.ToUpper(n.Prefix) + "_LEASE" }

// RepliesBucket is the key-value bucket of replies shared by every serve (admission.ReplyKV).
func (n Names) RepliesBucket() string { return strings.ToUpper(n.Prefix) + "_REPLIES" }

// Token is the subject token of a name: node names may be DNS names
// (node-5.rack2.example.com) and a dot separates subject tokens, so each dot becomes a
// tilde, which no name holds (node-5~rack2~example~com). Names without dots are their
// own token. Untoken reverses it.
func Token(name string) string { return strings.ReplaceAll(name, ".", "~") }

// Untoken is the name of a subject token (see Token).
func Untoken(token string) string { return strings.ReplaceAll(token, "~", ".") }

// Event is the subject of an aggregate's events: <prefix>.ev.<aggregate>.<id>, the id
// as its Token.
func (n Names) Event(aggregate, id string) string {
	return n.Prefix + ".ev." + aggregate + "." + Token(id)
}

// EventFilter covers every event of every aggregate (<prefix>.ev.>), or of one aggregate
// type when aggregate is not empty (<prefix>.ev.<aggregate>.>).
func (n Names) EventFilter(aggregate string) string {
	if aggregate == "" {
		return n.Prefix + ".ev.>"
	}
	return n.Prefix + ".ev." + aggregate + ".>"
}

// Aggregate returns the aggregate type of an event subject ("node" for cairn.ev.node.n1),
// or "" if subject is not an event subject of this prefix.
func (n Names) Aggregate(subject string) string {
	rest, ok := strings.CutPrefix(subject, n.Prefix+".ev.")
	if !ok {
		return ""
	}
	agg, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return agg
}

// Command is the request subject of a verb: <prefix>.cmd.<verb>.
func (n Names) Command(verb string) string { return n.Prefix + ".cmd." + verb }

// CommandFilter covers every command subject.
func (n Names) CommandFilter() string { return n.Prefix + ".cmd.>" }

// Verb returns the verb of a command subject, or "" if subject is not one.
func (n Names) Verb(subject string) string {
	v, _ := strings.CutPrefix(subject, n.Prefix+".cmd.")
	if v == subject {
		return ""
	}
	return v
}

// Node is a per-node desired-state subject: <prefix>.node.<node>.<kind>.<id> (node and
// id as their Token).
func (n Names) Node(node, kind, id string) string {
	return n.Prefix + ".node." + Token(node) + "." + kind + "." + Token(id)
}

// NodeFilter covers the desired state of one node (<prefix>.node.<node>.>), or of every
// node when node is "".
func (n Names) NodeFilter(node string) string {
	if node == "" {
		return n.Prefix + ".node.>"
	}
	return n.Prefix + ".node." + Token(node) + ".>"
}

// ParseNode splits a desired-state subject <prefix>.node.<node>.<kind>.<id> into names
// (Untoken); ok is false for any other subject (or an empty token).
func (n Names) ParseNode(subject string) (node, kind, id string, ok bool) {
	return n.parsePerNode(".node.", subject)
}

// ParseStatus splits an observed-state subject <prefix>.status.<node>.<kind>.<id>; ok
// is false for any other subject (or an empty token).
func (n Names) ParseStatus(subject string) (node, kind, id string, ok bool) {
	return n.parsePerNode(".status.", subject)
}

func (n Names) parsePerNode(space, subject string) (node, kind, id string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+space)
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return Untoken(parts[0]), parts[1], Untoken(parts[2]), true
}

// Status is a per-node observed-state subject: <prefix>.status.<node>.<kind>.<id>.
func (n Names) Status(node, kind, id string) string {
	return n.Prefix + ".status." + Token(node) + "." + kind + "." + Token(id)
}

// StatusFilter covers the status of one node, or of every node when node is "".
func (n Names) StatusFilter(node string) string {
	if node == "" {
		return n.Prefix + ".status.>"
	}
	return n.Prefix + ".status." + Token(node) + ".>"
}

// HeartbeatFilter covers every node's heartbeat: <prefix>.status.*.node.*.
func (n Names) HeartbeatFilter() string { return n.Prefix + ".status.*.node.*" }

// NodeInbox is the inbox prefix of a node's agent: _INBOX.<prefix>.node.<node>. The
// agent connects with it (nats.CustomInboxPrefix), so that with per-node NATS users
// (cairn serve --auth) it may subscribe to its own replies and nobody else's.
func (n Names) NodeInbox(node string) string { return "_INBOX." + n.Prefix + ".node." + Token(node) }

// AgentAttach is the subject a node's agent sends its attach request to:
// <prefix>.agent.<node>.attach. A serve answers it by (re)creating the node's consumer
// (AttachAgentConsumer), so that agents need no permission to create consumers.
func (n Names) AgentAttach(node string) string {
	return n.Prefix + ".agent." + Token(node) + ".attach"
}

// ParseAgentAttach returns the node of an attach request subject (ok false for any
// other subject).
func (n Names) ParseAgentAttach(subject string) (node string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+".agent.")
	tok, found2 := strings.CutSuffix(rest, ".attach")
	if !found || !found2 || tok == "" || strings.Contains(tok, ".") {
		return "", false
	}
	return Untoken(tok), true
}

// AgentRemote is the subject a node's agent asks a serve for a remote's credentials on
// (<prefix>.agent.<node>.remote): the serve opens the sealed secret and answers; the
// secret is never recorded in clear.
func (n Names) AgentRemote(node string) string {
	return n.Prefix + ".agent." + Token(node) + ".remote"
}

// AgentRemoteFilter covers every node's remote requests.
func (n Names) AgentRemoteFilter() string { return n.Prefix + ".agent.*.remote" }

// ParseAgentRemote returns the node of a remote request subject (ok false for any
// other subject).
func (n Names) ParseAgentRemote(subject string) (node string, ok bool) {
	return n.parseAgent(subject, ".remote")
}

// parseAgent returns the node of <prefix>.agent.<node><suffix>.
func (n Names) parseAgent(subject, suffix string) (node string, ok bool) {
	rest, found := strings.CutPrefix(subject, n.Prefix+".agent.")
	tok, found2 := strings.CutSuffix(rest, suffix)
	if !found || !found2 || tok == "" || strings.Contains(tok, ".") {
		return "", false
	}
	return Untoken(tok), true
}

// AgentAttachFilter covers every node's attach requests.
func (n Names) AgentAttachFilter() string { return n.Prefix + ".agent.*.attach" }

// AgentConsumer is the name of a node's desired-state consumer on <PREFIX>_NODES.
func (n Names) AgentConsumer(node string) string { return "agent-" + Token(node) }
