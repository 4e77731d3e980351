package classify

import (
	"bytes"
	"encoding/binary"
	"math"
)

func encodeModel(m *model) []byte {
	var b bytes.Buffer
	b.WriteString(modelMagic)
	b.Write(m.corpus[:])
	k := len(m.domains)
	binary.Write(&b, binary.LittleEndian, uint16(k))
	for _, d := range m.domains {
		b.WriteByte(byte(len(d)))
		b.WriteString(d)
	}
	binary.Write(&b, binary.LittleEndian, uint32(numBuckets))
	var maxAbs float32
	for _, v := range m.w {
		maxAbs = max(maxAbs, float32(math.Abs(float64(v))))
	}
	scale := maxAbs / 127
	if scale == 0 {
		scale = 1
	}
	binary.Write(&b, binary.LittleEndian, scale)
	binary.Write(&b, binary.LittleEndian, m.bias)
	q := make([]byte, len(m.w))
	for i, v := range m.w {
		q[i] = byte(int8(math.Round(float64(v / scale))))
	}
	b.Write(q)
	return b.Bytes()
}
