package events

import "sync"

// validMemo remembers payloads that passed their schema, so that a replay validates
// byte-identical payloads once: validation is a pure function of (type, version,
// payload bytes). Operational histories repeat payloads a lot (a node flapping offline
// and online writes the same few payloads over and over). Keys are the exact bytes,
// never a hash, so a remembered verdict is never applied to other bytes; lookups do not
// allocate. The memo is bounded: when it holds memoLimit payloads or memoBytes bytes it
// starts afresh.
type validMemo struct {
	mu    sync.RWMutex
	seen  map[memoType]map[string]struct{}
	n     int
	bytes int
}

// memoType is an event type at one schema version.
type memoType struct {
	name    string
	version int
}

const (
	memoLimit = 1 << 16
	memoBytes = 16 << 20
	memoMax   = 4 << 10 // payloads larger than this are not remembered
)

var memo = validMemo{seen: map[memoType]map[string]struct{}{}}

// known reports whether payload of type name at version already passed validation.
func (m *validMemo) known(name string, version int, payload []byte) bool {
	if len(payload) > memoMax {
		return false
	}
	m.mu.RLock()
	_, ok := m.seen[memoType{name, version}][string(payload)]
	m.mu.RUnlock()
	return ok
}

// remember records that payload passed validation.
func (m *validMemo) remember(name string, version int, payload []byte) {
	if len(payload) > memoMax {
		return
	}
	k := memoType{name, version}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n >= memoLimit || m.bytes+len(payload) > memoBytes {
		clear(m.seen)
		m.n, m.bytes = 0, 0
	}
	inner := m.seen[k]
	if inner == nil {
		inner = map[string]struct{}{}
		m.seen[k] = inner
	}
	if _, dup := inner[string(payload)]; !dup {
		inner[string(payload)] = struct{}{}
		m.n++
		m.bytes += len(payload)
	}
}
