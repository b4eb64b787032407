package projections

import (
	"strconv"
	"time"

	json "github.com/segmentio/encoding/json"
)

// Hand-written JSON encoders of the hot views (no reflection on the fold's hot path).

// appendEventRef appends the JSON of an EventRef to b without reflection: it is written
// for every event, so the projection's hot path. The bytes equal json.Marshal's.
func appendEventRef(b []byte, e EventRef) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"subject":`...)
	b = appendJSONString(b, e.Subject)
	if e.Digest != "" {
		b = append(b, `,"digest":`...)
		b = appendJSONString(b, e.Digest)
	}
	return append(b, '}')
}

// jsonAppender is a view value that writes its own JSON, byte for byte what the encoder
// writes (encode_test.go checks), without reflection: the values every node state
// change rewrites. tx.put keeps such a value unencoded until the commit (tx.lazy), so
// pass it by value, never a pointer to something that changes after the put.
type jsonAppender interface {
	appendJSON(b []byte) []byte
}

func (h HostEntry) appendJSON(b []byte) []byte {
	b = append(b, `{"host":`...)
	b = appendJSONString(b, h.Host)
	b = append(b, `,"domain":`...)
	b = appendJSONString(b, h.Domain)
	if h.Physical != "" {
		b = append(b, `,"physical":`...)
		b = appendJSONString(b, h.Physical)
	}
	b = append(b, `,"storage_nodes":`...)
	b = strconv.AppendInt(b, int64(h.StorageNodes), 10)
	b = append(b, `,"online_storage_nodes":`...)
	b = strconv.AppendInt(b, int64(h.OnlineStorageNodes), 10)
	return append(b, '}')
}

func (s NodeStatus) appendJSON(b []byte) []byte {
	start := len(b)
	b = append(b, `{"state":`...)
	b = appendJSONString(b, s.State)
	b = append(b, `,"since":`...)
	if y := s.Since.Year(); y < 0 || y > 9999 { // outside RFC 3339: as the encoder does it
		raw, _ := json.Marshal(s)
		return append(b[:start], raw...)
	}
	b = append(b, '"')
	b = s.Since.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if s.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, s.Reason)
	}
	if s.DevicesFailed != 0 {
		b = append(b, `,"devices_failed":`...)
		b = strconv.AppendInt(b, int64(s.DevicesFailed), 10)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, s.Seq, 10)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: directly when it is printable ASCII that
// needs no escaping (every name and subject Cairn writes), through the encoder otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
