package zfsimage

import (
	"encoding/binary"
	"fmt"

	"github.com/cairn-io/cairn/storage/zfs"
)

// Pack encodes nv as nvlist_pack(NV_ENCODE_XDR) does on a little-endian host: the
// 4-byte header {1, 1, 0, 0}, then version 0, flags 1 (NV_UNIQUE_NAME), the pairs with
// their encoded and decoded sizes, and the zero end marker. Supported pair types:
// boolean (1), uint32 (6), int32 (5), int64 (7), uint64 (8), string (9), byte array (10),
// uint64 array (16), string array (17), nvlist (19), nvlist array (20), boolean_value
// (21). It panics on any other type or a Value of the wrong Go type (test input).
func Pack(nv *zfs.NVList) []byte {
	b := []byte{1, 1, 0, 0}
	return packList(b, nv)
}

func u32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func str(b []byte, s string) []byte {
	b = u32(b, uint32(len(s)))
	b = append(b, s...)
	for len(s)%4 != 0 {
		b = append(b, 0)
		s += "\x00"
	}
	return b
}

func packList(b []byte, nv *zfs.NVList) []byte {
	b = u32(b, 0) // version
	b = u32(b, 1) // NV_UNIQUE_NAME
	for _, p := range nv.Pairs {
		start := len(b)
		b = u32(b, 0)          // encoded size, patched below
		b = u32(b, uint32(64)) // decoded (native) size: any non-zero value reads back
		b = str(b, p.Name)
		b = u32(b, uint32(p.Type))
		switch p.Type {
		case 1:
			b = u32(b, 0)
		case 5, 6:
			b = u32(b, 1)
			switch v := p.Value.(type) {
			case uint64:
				b = u32(b, uint32(v))
			case int64:
				b = u32(b, uint32(int32(v)))
			default:
				panic(fmt.Sprintf("zfsimage: pair %s: %T", p.Name, p.Value))
			}
		case 7:
			b = u32(b, 1)
			b = u64(b, uint64(p.Value.(int64)))
		case 8:
			b = u32(b, 1)
			b = u64(b, p.Value.(uint64))
		case 9:
			b = u32(b, 1)
			b = str(b, p.Value.(string))
		case 10:
			v := p.Value.([]byte)
			b = u32(b, uint32(len(v)))
			b = append(b, v...)
			for i := len(v); i%4 != 0; i++ {
				b = append(b, 0)
			}
		case 16:
			v := p.Value.([]uint64)
			b = u32(b, uint32(len(v)))
			b = u32(b, uint32(len(v)))
			for _, x := range v {
				b = u64(b, x)
			}
		case 17:
			v := p.Value.([]string)
			b = u32(b, uint32(len(v)))
			for _, s := range v {
				b = str(b, s)
			}
		case 19:
			b = u32(b, 1)
			b = packList(b, p.Value.(*zfs.NVList))
		case 20:
			v := p.Value.([]*zfs.NVList)
			b = u32(b, uint32(len(v)))
			for _, l := range v {
				b = packList(b, l)
			}
		case 21:
			b = u32(b, 1)
			if p.Value.(bool) {
				b = u32(b, 1)
			} else {
				b = u32(b, 0)
			}
		default:
			panic(fmt.Sprintf("zfsimage: pair %s: unsupported type %d", p.Name, p.Type))
		}
		binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	}
	b = u32(b, 0)
	return u32(b, 0)
}
