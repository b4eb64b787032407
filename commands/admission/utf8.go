package admission

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/cairn-io/cairn"
)

// checkUTF8 refuses a body that is not valid UTF-8, naming the top-level field whose
// key or value holds the first invalid byte. JSON decoders replace such bytes with
// U+FFFD without a word, so the command would be stored with text the sender never
// wrote.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	bad := firstInvalidUTF8(body)
	field := topLevelFieldAt(body, bad)
	if field == "" {
		return cairn.Errorf(cairn.CodeInvalidArgument, "body is not valid UTF-8 (byte %d)", bad)
	}
	return cairn.InvalidField(field, "%s is not valid UTF-8 (byte %d of the body)", field, bad)
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// topLevelFieldAt returns the key of the top-level object member whose key or value
// spans offset off ("" when the body is not an object or off is outside its members).
func topLevelFieldAt(body []byte, off int) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		start := int(dec.InputOffset())
		kt, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := kt.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
		if off >= start && off < int(dec.InputOffset()) {
			return key
		}
	}
	return ""
}
