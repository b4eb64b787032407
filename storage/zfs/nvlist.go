package zfs

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Data types of an nvpair, as numbered by libnvpair (data_type_t).
const (
	nvBoolean      = 1
	nvByte         = 2
	nvInt16        = 3
	nvUint16       = 4
	nvInt32        = 5
	nvUint32       = 6
	nvInt64        = 7
	nvUint64       = 8
	nvString       = 9
	nvByteArray    = 10
	nvInt16Array   = 11
	nvUint16Array  = 12
	nvInt32Array   = 13
	nvUint32Array  = 14
	nvInt64Array   = 15
	nvUint64Array  = 16
	nvStringArray  = 17
	nvHrtime       = 18
	nvNVList       = 19
	nvNVListArray  = 20
	nvBooleanValue = 21
	nvInt8         = 22
	nvUint8        = 23
	nvBooleanArray = 24
	nvInt8Array    = 25
	nvUint8Array   = 26
	nvDouble       = 27
)

const (
	nvEncodeNative = 0
	nvEncodeXDR    = 1
	nvVersion      = 0
	// nvMaxDepth bounds the nesting of embedded nvlists (libnvpair allows 20).
	nvMaxDepth = 20
)

// NVPair is one decoded name-value pair. Value holds, by type: bool (boolean,
// boolean_value), int64 (int8/16/32/64, hrtime), uint64 (byte, uint8/16/32/64), string,
// float64, []byte (byte array), []int64, []uint64, []bool, []string, *NVList, []*NVList.
// A DATA_TYPE_BOOLEAN pair (presence only) has Value true.
type NVPair struct {
	Name  string
	Type  int
	Value any
}

// NVList is a decoded name-value list, pairs in stream order.
type NVList struct {
	Pairs []NVPair
}

// Lookup returns the value of the first pair called name.
func (l *NVList) Lookup(name string) (any, bool) {
	if l == nil {
		return nil, false
	}
	for _, p := range l.Pairs {
		if p.Name == name {
			return p.Value, true
		}
	}
	return nil, false
}

// Uint64 returns the named value as an unsigned integer: uint64-family pairs as they are,
// signed pairs when not negative, boolean_value as 0 or 1.
func (l *NVList) Uint64(name string) (uint64, bool) {
	v, ok := l.Lookup(name)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case uint64:
		return x, true
	case int64:
		if x >= 0 {
			return uint64(x), true
		}
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// String returns the named string value.
func (l *NVList) String(name string) (string, bool) {
	v, ok := l.Lookup(name)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// NVList returns the named embedded nvlist.
func (l *NVList) NVList(name string) (*NVList, bool) {
	v, ok := l.Lookup(name)
	if !ok {
		return nil, false
	}
	n, ok := v.(*NVList)
	return n, ok
}

// NVLists returns the named nvlist array.
func (l *NVList) NVLists(name string) ([]*NVList, bool) {
	v, ok := l.Lookup(name)
	if !ok {
		return nil, false
	}
	n, ok := v.([]*NVList)
	return n, ok
}

// Names returns the pair names, sorted (for messages and tests).
func (l *NVList) Names() []string {
	var s []string
	for _, p := range l.Pairs {
		s = append(s, p.Name)
	}
	sort.Strings(s)
	return s
}

// UnpackNVList decodes a packed nvlist as nvlist_pack(NV_ENCODE_XDR) writes it: a 4-byte
// header (encoding, endianness, two reserved bytes), then the XDR stream (big-endian,
// 4-byte units) of version, flags, pairs and a zero end marker. Bytes after the end marker
// are ignored (the label's nvlist area is padded). Only the XDR encoding is accepted: it is
// what ZFS writes to labels. Returns an error naming the offset and what is wrong when the
// stream is truncated, malformed or nested deeper than libnvpair allows; never panics.
func UnpackNVList(b []byte) (*NVList, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("nvlist: %d bytes, shorter than the 4-byte header", len(b))
	}
	switch b[0] {
	case nvEncodeXDR:
	case nvEncodeNative:
		return nil, fmt.Errorf("nvlist: native encoding, only XDR is supported")
	default:
		return nil, fmt.Errorf("nvlist: unknown encoding %d", b[0])
	}
	d := &xdrDecoder{b: b, off: 4}
	return d.nvlist(0)
}

type xdrDecoder struct {
	b   []byte
	off int
}

func (d *xdrDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("nvlist: at offset %d: %s", d.off, fmt.Sprintf(format, args...))
}

func (d *xdrDecoder) u32() (uint32, error) {
	if d.off < 0 || len(d.b)-d.off < 4 {
		return 0, d.errorf("truncated (need 4 bytes, %d left)", max(len(d.b)-d.off, 0))
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v, nil
}

func (d *xdrDecoder) u64() (uint64, error) {
	if d.off < 0 || len(d.b)-d.off < 8 {
		return 0, d.errorf("truncated (need 8 bytes, %d left)", max(len(d.b)-d.off, 0))
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v, nil
}

// opaque reads n bytes padded to a multiple of 4.
func (d *xdrDecoder) opaque(n uint32) ([]byte, error) {
	padded := (uint64(n) + 3) &^ 3
	if d.off < 0 || uint64(len(d.b)-d.off) < padded {
		return nil, d.errorf("truncated (need %d bytes, %d left)", padded, max(len(d.b)-d.off, 0))
	}
	v := d.b[d.off : d.off+int(n)]
	d.off += int(padded)
	return v, nil
}

func (d *xdrDecoder) str() (string, error) {
	n, err := d.u32()
	if err != nil {
		return "", err
	}
	b, err := d.opaque(n)
	if err != nil {
		return "", err
	}
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b), nil
}

// nvlist decodes version, flags and pairs up to the end marker.
func (d *xdrDecoder) nvlist(depth int) (*NVList, error) {
	if depth > nvMaxDepth {
		return nil, d.errorf("nvlists nested deeper than %d", nvMaxDepth)
	}
	version, err := d.u32()
	if err != nil {
		return nil, err
	}
	if version != nvVersion {
		return nil, d.errorf("nvlist version %d, want %d", version, nvVersion)
	}
	if _, err := d.u32(); err != nil { // nvflag
		return nil, err
	}
	l := &NVList{}
	for {
		start := d.off
		encLen, err := d.u32()
		if err != nil {
			return nil, err
		}
		decLen, err := d.u32()
		if err != nil {
			return nil, err
		}
		if encLen == 0 && decLen == 0 {
			return l, nil
		}
		if encLen < 24 || uint64(encLen) > uint64(len(d.b)-start) {
			d.off = start
			return nil, d.errorf("pair size %d out of range (%d bytes left)", encLen, len(d.b)-start)
		}
		end := start + int(encLen)
		p, err := d.pair(depth)
		if err != nil {
			return nil, err
		}
		if d.off > end {
			return nil, d.errorf("pair %q overruns its encoded size %d", p.Name, encLen)
		}
		d.off = end
		l.Pairs = append(l.Pairs, p)
	}
}

func (d *xdrDecoder) pair(depth int) (NVPair, error) {
	name, err := d.str()
	if err != nil {
		return NVPair{}, err
	}
	typ, err := d.u32()
	if err != nil {
		return NVPair{}, err
	}
	nelem, err := d.u32()
	if err != nil {
		return NVPair{}, err
	}
	p := NVPair{Name: name, Type: int(typ)}
	if typ == nvBoolean {
		p.Value = true
		return p, nil
	}
	if nelem == 0 {
		return p, nil
	}
	// Every element takes at least 4 bytes: refuse counts the stream cannot hold before
	// allocating for them.
	if uint64(nelem) > uint64(len(d.b)-d.off)/4+1 {
		return NVPair{}, d.errorf("pair %q: %d elements cannot fit in %d bytes", name, nelem, len(d.b)-d.off)
	}
	switch typ {
	case nvByte, nvUint8, nvUint16, nvUint32:
		v, err := d.u32()
		p.Value = uint64(v)
		if typ == nvByte || typ == nvUint8 {
			p.Value = uint64(uint8(v))
		} else if typ == nvUint16 {
			p.Value = uint64(uint16(v))
		}
		return p, err
	case nvInt8, nvInt16, nvInt32:
		v, err := d.u32()
		p.Value = int64(int32(v))
		return p, err
	case nvBooleanValue:
		v, err := d.u32()
		p.Value = v != 0
		return p, err
	case nvUint64:
		v, err := d.u64()
		p.Value = v
		return p, err
	case nvInt64, nvHrtime:
		v, err := d.u64()
		p.Value = int64(v)
		return p, err
	case nvDouble:
		v, err := d.u64()
		p.Value = math.Float64frombits(v)
		return p, err
	case nvString:
		v, err := d.str()
		p.Value = v
		return p, err
	case nvByteArray:
		v, err := d.opaque(nelem)
		p.Value = append([]byte(nil), v...)
		return p, err
	case nvInt8Array, nvUint8Array, nvInt16Array, nvUint16Array, nvInt32Array, nvUint32Array, nvBooleanArray,
		nvInt64Array, nvUint64Array:
		n, err := d.u32()
		if err != nil {
			return p, err
		}
		if n != nelem {
			return p, d.errorf("pair %q: array count %d, nelem %d", name, n, nelem)
		}
		wide := typ == nvInt64Array || typ == nvUint64Array
		var us []uint64
		for i := uint32(0); i < n; i++ {
			var v uint64
			if wide {
				v, err = d.u64()
			} else {
				var w uint32
				w, err = d.u32()
				v = uint64(w)
			}
			if err != nil {
				return p, err
			}
			us = append(us, v)
		}
		switch typ {
		case nvUint8Array, nvUint16Array, nvUint32Array, nvUint64Array:
			p.Value = us
		case nvBooleanArray:
			bs := make([]bool, len(us))
			for i, v := range us {
				bs[i] = v != 0
			}
			p.Value = bs
		default:
			is := make([]int64, len(us))
			for i, v := range us {
				if wide {
					is[i] = int64(v)
				} else {
					is[i] = int64(int32(uint32(v)))
				}
			}
			p.Value = is
		}
		return p, nil
	case nvStringArray:
		ss := make([]string, 0, nelem)
		for i := uint32(0); i < nelem; i++ {
			s, err := d.str()
			if err != nil {
				return p, err
			}
			ss = append(ss, s)
		}
		p.Value = ss
		return p, nil
	case nvNVList:
		l, err := d.nvlist(depth + 1)
		p.Value = l
		return p, err
	case nvNVListArray:
		ls := make([]*NVList, 0, nelem)
		for i := uint32(0); i < nelem; i++ {
			l, err := d.nvlist(depth + 1)
			if err != nil {
				return p, err
			}
			ls = append(ls, l)
		}
		p.Value = ls
		return p, nil
	default:
		// A type this reader does not know: the caller skips it by its encoded size.
		return p, nil
	}
}
