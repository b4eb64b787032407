package events

import "sync"

// validMemo remembers payloads that passed their schema, so that a replay validates
// byte-identical payloads once: validation is a pure function of (type, version,
// payload bytes). Operational histories repeat payloads a lot (a node flapping offline
// and online writes the same few payloads over and over). Keys are the exact bytes,
// never a hash, so a remembered verdict is never applied to other bytes. The memo is
// bounded: when it holds memoLimit payloads or memoBytes bytes it starts afresh.
type validMemo struct {
	mu    sync.RWMutex
	seen  map[string]struct{}
	bytes int
}

const (
	memoLimit = 1 << 16
	memoBytes = 16 << 20
	memoMax   = 4 << 10 // payloads larger than this are not remembered
)

var memo = validMemo{seen: map[string]struct{}{}}

// known reports whether payload of type name at version already passed validation.
func (m *validMemo) known(name string, version int, payload []byte) bool {
	if len(payload) > memoMax {
		return false
	}
	key := memoKey(name, version, payload)
	m.mu.RLock()
	_, ok := m.seen[string(key)]
	m.mu.RUnlock()
	return ok
}

// remember records that payload passed validation.
func (m *validMemo) remember(name string, version int, payload []byte) {
	if len(payload) > memoMax {
		return
	}
	key := string(memoKey(name, version, payload))
	m.mu.Lock()
	if len(m.seen) >= memoLimit || m.bytes+len(key) > memoBytes {
		clear(m.seen)
		m.bytes = 0
	}
	m.seen[key] = struct{}{}
	m.bytes += len(key)
	m.mu.Unlock()
}

func memoKey(name string, version int, payload []byte) []byte {
	k := make([]byte, 0, len(name)+2+len(payload))
	k = append(k, name...)
	k = append(k, 0, byte(version))
	return append(k, payload...)
}
